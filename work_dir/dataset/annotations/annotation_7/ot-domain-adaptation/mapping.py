"""Optimal-transport domain adaptation: move labelled source samples onto the target domain."""
from __future__ import annotations

import numpy as np

from costs import normalize_cost, squared_euclidean
from sinkhorn import SinkhornResult, sinkhorn_log


def uniform_weights(n: int) -> np.ndarray:
    return np.full(n, 1.0 / n)


def barycentric_map(plan: np.ndarray, target_points: np.ndarray) -> np.ndarray:
    """Each source sample goes to the plan-weighted mean of the target samples it sends mass to."""
    mass = plan.sum(axis=1, keepdims=True)
    return (plan @ target_points) / np.where(mass > 0, mass, 1.0)


def adapt(source: np.ndarray, target: np.ndarray, epsilon: float = 0.01) -> tuple[np.ndarray, SinkhornResult]:
    """Transport `source` (n, d) onto `target` (m, d) with uniform weights and a normalised squared cost."""
    cost = normalize_cost(squared_euclidean(source, target))
    result = sinkhorn_log(uniform_weights(len(source)), uniform_weights(len(target)), cost, epsilon)
    return barycentric_map(result.plan, target), result
