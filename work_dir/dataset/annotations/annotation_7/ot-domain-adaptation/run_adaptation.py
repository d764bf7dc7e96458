"""Align a shifted and rotated Gaussian source domain with its target domain.

Usage: python run_adaptation.py [--n 200] [--epsilon 0.01] [--seed 0]
"""
from __future__ import annotations

import argparse

import numpy as np

from mapping import adapt


def two_domains(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    target = rng.normal(size=(n, 2)) * np.array([2.0, 0.5])
    angle = np.pi / 6
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    source = rng.normal(size=(n, 2)) * np.array([2.0, 0.5]) @ rotation.T + np.array([4.0, -1.0])
    return source, target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--epsilon", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    source, target = two_domains(args.n, np.random.default_rng(args.seed))
    moved, result = adapt(source, target, args.epsilon)
    print(f"sinkhorn: {result.n_iter} iterations, converged={result.converged}, transport cost {result.cost:.4f}")
    print(f"mean gap before {np.linalg.norm(source.mean(0) - target.mean(0)):.3f}, "
          f"after {np.linalg.norm(moved.mean(0) - target.mean(0)):.3f}")
    print(f"covariance gap after {np.linalg.norm(np.cov(moved.T) - np.cov(target.T)):.3f} "
          f"(before {np.linalg.norm(np.cov(source.T) - np.cov(target.T)):.3f})")


if __name__ == "__main__":
    main()
