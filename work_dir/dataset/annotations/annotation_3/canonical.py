"""Focal loss for dense detection: binary (sigmoid) and multi-class (softmax) forms.

Lin, Goyal, Girshick, He, Dollar, "Focal Loss for Dense Object Detection", ICCV 2017.
Section numbers and equations below refer to that paper.
"""
from __future__ import annotations

import numpy as np

REDUCTIONS = ("none", "sum", "mean")


def prior_bias(prior: float = 0.01) -> float:
    """Bias b = -log((1 - pi) / pi) of the last classification layer (Section 3.3, Section 4).

    With it every anchor starts with foreground probability ~pi, so the many easy
    negatives do not produce a huge, destabilising loss in the first iterations.
    """
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must be in (0, 1), got {prior}")
    return float(-np.log((1.0 - prior) / prior))


def _check(gamma: float, reduction: str) -> None:
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _binary_terms(logits: np.ndarray, targets: np.ndarray, alpha: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (log p_t, p_t, alpha_t) for binary targets, computed without overflow.

    p_t = p if y = 1 else 1 - p (Eq. 2); log p_t = -softplus(-x_t) with x_t = x for
    y = 1 and -x for y = 0, which stays finite for logits of any size.
    """
    x = np.asarray(logits, dtype=np.float64)
    y = np.asarray(targets, dtype=np.float64)
    signed = np.where(y > 0.5, x, -x)
    log_pt = -np.logaddexp(0.0, -signed)
    alpha_t = np.ones_like(x) if alpha is None else np.where(y > 0.5, alpha, 1.0 - alpha)
    return log_pt, np.exp(log_pt), alpha_t


def _reduce(losses: np.ndarray, reduction: str, count: int | None = None) -> np.ndarray | float:
    if reduction == "none":
        return losses
    total = float(losses.sum())
    if reduction == "sum":
        return total
    denominator = losses.size if count is None else count
    return total / denominator if denominator else 0.0


def sigmoid_focal_loss(
    logits: np.ndarray,
    targets: np.ndarray,
    alpha: float | None = 0.25,
    gamma: float = 2.0,
    reduction: str = "none",
) -> np.ndarray | float:
    """FL(p_t) = -alpha_t (1 - p_t)^gamma log(p_t) (Eq. 5), element-wise on independent sigmoids.

    alpha weights the positive class and 1 - alpha the negative one (alpha_t, Eq. 3);
    alpha=None disables the weighting. gamma = 0 with alpha=None is binary cross-entropy.
    """
    _check(gamma, reduction)
    log_pt, pt, alpha_t = _binary_terms(logits, targets, alpha)
    # (1 - p_t)^gamma down-weights well-classified examples (p_t -> 1): Section 3.2.
    losses = -alpha_t * (1.0 - pt) ** gamma * log_pt
    return _reduce(losses, reduction)


def sigmoid_focal_loss_grad(
    logits: np.ndarray, targets: np.ndarray, alpha: float | None = 0.25, gamma: float = 2.0
) -> np.ndarray:
    """Element-wise d FL / d x (Appendix B): alpha_t * y' (1 - p_t)^gamma (gamma p_t log p_t + p_t - 1).

    y' is +1 for positive targets and -1 for negatives.
    """
    _check(gamma, "none")
    log_pt, pt, alpha_t = _binary_terms(logits, targets, alpha)
    sign = np.where(np.asarray(targets, dtype=np.float64) > 0.5, 1.0, -1.0)
    return alpha_t * sign * (1.0 - pt) ** gamma * (gamma * pt * log_pt + pt - 1.0)


def softmax_focal_loss(
    logits: np.ndarray,
    targets: np.ndarray,
    alpha: np.ndarray | None = None,
    gamma: float = 2.0,
    ignore_index: int = -1,
    reduction: str = "mean",
) -> np.ndarray | float:
    """Multi-class focal loss on a softmax: -alpha_y (1 - p_y)^gamma log p_y per example.

    The paper notes the focal loss extends directly to the multi-class case (footnote
    of Section 3); here alpha is an optional per-class weight vector. Examples whose
    target equals ``ignore_index`` contribute 0 and are not counted by the 'mean'
    reduction; with no counted example the mean is 0.0.
    """
    _check(gamma, reduction)
    z = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(targets).astype(np.int64)
    valid = labels != ignore_index
    safe = np.where(valid, labels, 0)
    shifted = z - z.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    log_py = np.take_along_axis(log_probs, safe[:, None], axis=1)[:, 0]
    weights = np.ones(len(labels)) if alpha is None else np.asarray(alpha, dtype=np.float64)[safe]
    losses = np.where(valid, -weights * (1.0 - np.exp(log_py)) ** gamma * log_py, 0.0)
    return _reduce(losses, reduction, count=int(valid.sum()))


def retinanet_classification_loss(
    logits: np.ndarray, anchor_labels: np.ndarray, alpha: float = 0.25, gamma: float = 2.0
) -> float:
    """Classification loss of one image (Section 4, "Focal Loss" under Training).

    logits (A, K) are K independent per-class sigmoids per anchor; anchor_labels (A,)
    hold -1 (ignored, IoU in [0.4, 0.5)), 0 (background: all K targets 0) or k in 1..K
    (target 1 for class k only). The focal loss is summed over all non-ignored anchors
    and classes and divided by the number of anchors assigned to a ground-truth box
    (at least 1), not by the total number of anchors, which easy negatives dominate.
    """
    labels = np.asarray(anchor_labels).astype(np.int64)
    z = np.asarray(logits, dtype=np.float64)
    num_classes = z.shape[1]
    keep = labels >= 0
    targets = (labels[keep, None] == np.arange(1, num_classes + 1)[None, :]).astype(np.float64)
    total = sigmoid_focal_loss(z[keep], targets, alpha=alpha, gamma=gamma, reduction="sum")
    return total / max(1, int((labels > 0).sum()))
