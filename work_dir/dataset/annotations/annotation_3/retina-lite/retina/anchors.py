"""Anchor-to-ground-truth assignment by IoU, producing the labels the criterion expects."""
from __future__ import annotations

import numpy as np

IGNORE = -1
BACKGROUND = 0


def box_iou(boxes_a: np.ndarray, boxes_b: np.ndarray) -> np.ndarray:
    """(A, 4) x (G, 4) boxes as (x1, y1, x2, y2) -> (A, G) intersection over union."""
    top_left = np.maximum(boxes_a[:, None, :2], boxes_b[None, :, :2])
    bottom_right = np.minimum(boxes_a[:, None, 2:], boxes_b[None, :, 2:])
    inter = np.clip(bottom_right - top_left, 0.0, None).prod(axis=-1)
    area_a = (boxes_a[:, 2:] - boxes_a[:, :2]).prod(axis=-1)
    area_b = (boxes_b[:, 2:] - boxes_b[:, :2]).prod(axis=-1)
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def assign_anchors(anchors: np.ndarray, gt_boxes: np.ndarray, gt_classes: np.ndarray, fg_iou: float = 0.5, bg_iou: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    """Label each anchor: its matched class (1..K) if IoU >= fg_iou, 0 below bg_iou, -1 in between.

    Returns the labels (A,) and the index of the best-matching box (A,) (0 when there is none).
    """
    labels = np.full(len(anchors), BACKGROUND, dtype=np.int64)
    if len(gt_boxes) == 0:
        return labels, np.zeros(len(anchors), dtype=np.int64)
    ious = box_iou(anchors, gt_boxes)
    matched = ious.argmax(axis=1)
    best = ious.max(axis=1)
    labels[best >= fg_iou] = gt_classes[matched[best >= fg_iou]]
    labels[(best >= bg_iou) & (best < fg_iou)] = IGNORE
    return labels, matched
