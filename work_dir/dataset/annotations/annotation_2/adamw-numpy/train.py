"""Fit softmax regression on synthetic clusters with AdamW and a cosine schedule."""
from __future__ import annotations

import argparse

import numpy as np

from models.softmax_regression import init_params, loss_and_grads
from optim.adamw import AdamW, normalized_weight_decay
from optim.schedules import cosine_multiplier


def make_data(rng: np.random.Generator, n: int, n_features: int, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    centers = 2.0 * rng.standard_normal((n_classes, n_features))
    labels = rng.integers(0, n_classes, size=n)
    return centers[labels] + rng.standard_normal((n, n_features)), labels


def fit(seed: int = 0, epochs: int = 5, batch_size: int = 16, lr: float = 0.05, lambda_norm: float = 0.05) -> tuple[dict[str, np.ndarray], list[float]]:
    """Train for ``epochs`` and return the final parameters and the loss of every step."""
    rng = np.random.default_rng(seed)
    features, labels = make_data(rng, n=128, n_features=5, n_classes=3)
    params = init_params(rng, n_features=5, n_classes=3)
    weight_decay = normalized_weight_decay(lambda_norm, batch_size, len(labels), epochs)
    optimizer = AdamW(params, lr=lr, weight_decay=weight_decay, no_decay=("b",))
    steps_per_epoch = len(labels) // batch_size
    total = epochs * steps_per_epoch
    losses = []
    for step in range(total):
        batch = rng.choice(len(labels), size=batch_size, replace=False)
        loss, grads = loss_and_grads(params, features[batch], labels[batch])
        optimizer.step(grads, schedule_multiplier=cosine_multiplier(step, total))
        losses.append(loss)
    return params, losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    _, losses = fit(seed=args.seed, epochs=args.epochs, lr=args.lr)
    print(f"first loss {losses[0]:.4f}  last loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
