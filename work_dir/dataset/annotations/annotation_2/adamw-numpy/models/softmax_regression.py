"""Multinomial logistic regression with its cross-entropy gradient."""
from __future__ import annotations

import numpy as np


def init_params(rng: np.random.Generator, n_features: int, n_classes: int) -> dict[str, np.ndarray]:
    return {"W": 0.1 * rng.standard_normal((n_features, n_classes)), "b": np.zeros(n_classes)}


def loss_and_grads(params: dict[str, np.ndarray], features: np.ndarray, labels: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    """Mean cross-entropy of softmax(X W + b) and its gradient for every parameter."""
    logits = features @ params["W"] + params["b"]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = float(-np.log(probs[rows, labels]).mean())
    delta = probs
    delta[rows, labels] -= 1.0
    delta /= len(labels)
    return loss, {"W": features.T @ delta, "b": delta.sum(axis=0)}
