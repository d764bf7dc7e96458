"""The final layer of the classification subnet: per-anchor, per-class logits."""
from __future__ import annotations

import numpy as np

from retina.losses.focal import prior_bias


class ClassificationHead:
    """Linear map from anchor features to K class logits.

    Weights start from N(0, 0.01^2); the bias starts at the prior-probability value
    so that every anchor is initially predicted foreground with probability ``prior``.
    """

    def __init__(self, in_features: int, num_classes: int, rng: np.random.Generator, prior: float = 0.01) -> None:
        self.weight = 0.01 * rng.standard_normal((in_features, num_classes))
        self.bias = np.full(num_classes, prior_bias(prior))

    def __call__(self, features: np.ndarray) -> np.ndarray:
        return features @ self.weight + self.bias
