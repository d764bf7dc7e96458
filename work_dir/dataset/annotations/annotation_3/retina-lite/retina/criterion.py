"""Training loss of the detector: focal classification loss plus smooth L1 on positive anchors."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retina.losses.box import smooth_l1
from retina.losses.focal import retinanet_classification_loss


@dataclass
class RetinaCriterion:
    alpha: float = 0.25
    gamma: float = 2.0
    smooth_l1_beta: float = 0.1

    def __call__(self, cls_logits: np.ndarray, box_deltas: np.ndarray, anchor_labels: np.ndarray, box_targets: np.ndarray) -> dict[str, float]:
        """Both terms are normalised by the number of anchors assigned to a ground-truth box."""
        cls_loss = retinanet_classification_loss(cls_logits, anchor_labels, alpha=self.alpha, gamma=self.gamma)
        positive = anchor_labels > 0
        box_sum = smooth_l1(box_deltas[positive], box_targets[positive], self.smooth_l1_beta).sum()
        box_loss = float(box_sum / max(1, int(positive.sum())))
        return {"cls_loss": float(cls_loss), "box_loss": box_loss, "loss": float(cls_loss) + box_loss}
