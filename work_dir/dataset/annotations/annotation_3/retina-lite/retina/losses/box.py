"""Smooth L1 loss for box-regression deltas."""
from __future__ import annotations

import numpy as np


def smooth_l1(pred: np.ndarray, target: np.ndarray, beta: float = 0.1) -> np.ndarray:
    """Element-wise Huber-style loss: quadratic below ``beta``, linear above."""
    diff = np.abs(pred - target)
    return np.where(diff < beta, 0.5 * diff * diff / beta, diff - 0.5 * beta)
