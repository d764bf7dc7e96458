"""Pretrain a small MLP on one synthetic task, then adapt it to a rotated task with LoRA only.

Usage: python finetune.py [--rank 4] [--alpha 8] [--steps 200] [--seed 0]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from lora.inject import inject_lora, lora_parameters, merge_lora, unmerge_lora
from models.mlp import MLPClassifier


def make_task(n: int, rotation: float, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Points in the plane labelled by the quadrant of their rotated coordinates."""
    x = torch.randn(n, 2, generator=generator)
    c, s = torch.cos(torch.tensor(rotation)), torch.sin(torch.tensor(rotation))
    rotated = x @ torch.stack([torch.stack([c, -s]), torch.stack([s, c])])
    labels = (rotated[:, 0] > 0).long() * 2 + (rotated[:, 1] > 0).long()
    return x, labels


def train(model: torch.nn.Module, params: list, x: torch.Tensor, y: torch.Tensor, steps: int) -> None:
    optimizer = torch.optim.Adam(params, lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=8.0)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    model = MLPClassifier(2, 64, 4)
    x_a, y_a = make_task(1024, 0.0, generator)
    train(model, list(model.parameters()), x_a, y_a, args.steps)
    x_b, y_b = make_task(1024, 0.6, generator)
    print(f"pretrained: task A acc {accuracy(model, x_a, y_a):.3f}, task B acc {accuracy(model, x_b, y_b):.3f}")

    replaced = inject_lora(model, ["fc1", "fc2"], r=args.rank, alpha=args.alpha)
    trainable = sum(p.numel() for p in lora_parameters(model))
    total = sum(p.numel() for p in model.parameters())
    print(f"LoRA on {replaced}: {trainable} trainable of {total} parameters")
    train(model, lora_parameters(model), x_b, y_b, args.steps)
    model.eval()
    adapted = accuracy(model, x_b, y_b)
    with torch.no_grad():
        before_merge = model(x_b)
    merge_lora(model)
    with torch.no_grad():
        gap = (model(x_b) - before_merge).abs().max().item()
    print(f"adapted: task B acc {adapted:.3f}; max output change after merging {gap:.2e}")
    unmerge_lora(model)
    print(f"unmerged: task B acc {accuracy(model, x_b, y_b):.3f} (adapters applied in the forward pass again)")


if __name__ == "__main__":
    main()
