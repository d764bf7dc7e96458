"""Clipped-surrogate policy loss and value loss of PPO (Schulman et al., 2017)."""
from __future__ import annotations

import numpy as np


def clipped_surrogate(new_log_probs: np.ndarray, old_log_probs: np.ndarray, advantages: np.ndarray,
                      clip: float = 0.2) -> float:
    """Negative clipped surrogate objective (to be minimised)."""
    ratio = np.exp(new_log_probs - old_log_probs)
    unclipped = ratio * advantages
    clipped = np.clip(ratio, 1.0 - clip, 1.0 + clip) * advantages
    return float(-np.mean(np.minimum(unclipped, clipped)))


def value_loss(predicted: np.ndarray, returns: np.ndarray) -> float:
    """Mean squared error between the critic and its GAE lambda-return targets."""
    return float(0.5 * np.mean((predicted - returns) ** 2))
