"""Ground costs between two point clouds."""
from __future__ import annotations

import numpy as np


def squared_euclidean(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C_ij = ||x_i - y_j||^2 for x (n, d) and y (m, d)."""
    sq = np.sum(x**2, axis=1)[:, None] + np.sum(y**2, axis=1)[None, :] - 2.0 * x @ y.T
    return np.maximum(sq, 0.0)


def normalize_cost(cost: np.ndarray) -> np.ndarray:
    """Divide by the largest entry so that epsilon has the same meaning across datasets."""
    peak = cost.max()
    return cost / peak if peak > 0 else cost
