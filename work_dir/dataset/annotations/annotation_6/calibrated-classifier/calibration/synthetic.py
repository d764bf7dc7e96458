"""Synthetic logits with a known amount of over- or under-confidence."""
from __future__ import annotations

import numpy as np


def sample_logits(n: int, n_classes: int, sharpness: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels drawn from softmax(z); the returned logits are sharpness * z.

    sharpness > 1 mimics an over-confident network (the optimal temperature is
    about `sharpness`), sharpness < 1 an under-confident one.
    """
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(n, n_classes))
    labels = np.argmax(z + rng.gumbel(size=z.shape), axis=1)  # Gumbel-max draws y ~ softmax(z)
    return sharpness * z, labels
