"""Evaluate the detector loss on random anchors and boxes at initialisation."""
from __future__ import annotations

import numpy as np

from retina.anchors import assign_anchors
from retina.criterion import RetinaCriterion
from retina.head import ClassificationHead


def random_boxes(rng: np.random.Generator, n: int, size: float = 64.0) -> np.ndarray:
    corner = rng.uniform(0.0, size, size=(n, 2))
    extent = rng.uniform(4.0, 24.0, size=(n, 2))
    return np.concatenate([corner, corner + extent], axis=1)


def initial_loss(seed: int = 0, num_anchors: int = 2000, num_classes: int = 5, in_features: int = 16) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    anchors = random_boxes(rng, num_anchors)
    gt_boxes = random_boxes(rng, 6)
    labels, _ = assign_anchors(anchors, gt_boxes, rng.integers(1, num_classes + 1, size=6))
    head = ClassificationHead(in_features, num_classes, rng)
    logits = head(rng.standard_normal((num_anchors, in_features)))
    deltas = 0.1 * rng.standard_normal((num_anchors, 4))
    return RetinaCriterion()(logits, deltas, labels, np.zeros((num_anchors, 4)))


if __name__ == "__main__":
    print(initial_loss())
