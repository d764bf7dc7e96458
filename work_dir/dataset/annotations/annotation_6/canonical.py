"""Post-hoc calibration of classifier logits (Guo et al., 2017, "On Calibration of
Modern Neural Networks").

Temperature scaling divides every logit vector by one scalar T > 0 fitted by
minimising the negative log-likelihood on held-out data; the argmax, and hence
accuracy, is unchanged. Calibration is measured with the Expected Calibration
Error over equal-width confidence bins.
"""
from __future__ import annotations

import numpy as np

DEFAULT_N_BINS = 15
TEMPERATURE_BOUNDS = (0.05, 20.0)

_INV_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def _check_scores(scores, labels=None) -> tuple[np.ndarray, np.ndarray | None]:
    """Scores (logits or probabilities) as float64 (n, k), k >= 2; labels as int64 (n,) in [0, k)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError(f"scores must have shape (n, k) with k >= 2, got {scores.shape}")
    if labels is None:
        return scores, None
    labels = np.asarray(labels)
    if labels.shape != (scores.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be integers of shape ({scores.shape[0]},), got {labels.dtype} {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= scores.shape[1]):
        raise ValueError(f"labels must lie in [0, {scores.shape[1]})")
    return scores, labels.astype(np.int64)


def _check_temperature(temperature: float) -> float:
    temperature = float(temperature)
    if not temperature > 0.0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    return temperature


def log_softmax(logits, temperature: float = 1.0) -> np.ndarray:
    """log softmax(z / T) along the class axis, shifted by the row max so large logits cannot overflow."""
    logits, _ = _check_scores(logits)
    scaled = logits / _check_temperature(temperature)  # Sec. 4.2: q = max_k softmax(z / T)^(k)
    shifted = scaled - scaled.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def softmax(logits, temperature: float = 1.0) -> np.ndarray:
    """Class probabilities softmax(z / T), shape (n, k)."""
    return np.exp(log_softmax(logits, temperature))


def negative_log_likelihood(logits, labels, temperature: float = 1.0) -> float:
    """Mean NLL of the labels under softmax(z / T) (Sec. 2, the proper scoring rule T is fitted on)."""
    logits, labels = _check_scores(logits, labels)
    if logits.shape[0] == 0:
        raise ValueError("negative_log_likelihood needs at least one sample")
    log_probs = log_softmax(logits, temperature)
    return float(-log_probs[np.arange(labels.size), labels].mean())


def fit_temperature(logits, labels, bounds: tuple[float, float] = TEMPERATURE_BOUNDS, tol: float = 1e-7) -> float:
    """The T in ``bounds`` minimising the validation NLL (Sec. 4.2).

    NLL is convex in 1/T, hence unimodal in log T, so a golden-section search
    over log T brackets the unique minimiser; a minimiser on a bound (e.g. a
    perfectly separated validation set drives T -> 0) returns that bound.
    """
    low, high = (float(b) for b in bounds)
    if not 0.0 < low < high:
        raise ValueError(f"bounds must satisfy 0 < low < high, got {bounds}")
    logits, labels = _check_scores(logits, labels)

    def objective(log_t: float) -> float:
        return negative_log_likelihood(logits, labels, float(np.exp(log_t)))

    lo, hi = np.log(low), np.log(high)
    left, right = hi - _INV_GOLDEN * (hi - lo), lo + _INV_GOLDEN * (hi - lo)
    f_left, f_right = objective(left), objective(right)
    while hi - lo > tol:
        if f_left < f_right:
            hi, right, f_right = right, left, f_left
            left = hi - _INV_GOLDEN * (hi - lo)
            f_left = objective(left)
        else:
            lo, left, f_left = left, right, f_right
            right = lo + _INV_GOLDEN * (hi - lo)
            f_right = objective(right)
    return float(np.clip(np.exp(0.5 * (lo + hi)), low, high))


def bin_statistics(confidences, correct, n_bins: int = DEFAULT_N_BINS) -> dict[str, np.ndarray]:
    """Per-bin sample counts, mean confidence and accuracy over M equal-width bins (Sec. 2).

    Bin m (0-based) is the interval I_m = (m/M, (m+1)/M]; a confidence of exactly 0
    belongs to the first bin. Empty bins report confidence and accuracy 0.
    """
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins}")
    n_bins = int(n_bins)
    confidences = np.asarray(confidences, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if confidences.ndim != 1 or correct.shape != confidences.shape:
        raise ValueError(f"confidences and correct must be 1-D of equal length, got {confidences.shape}, {correct.shape}")
    if confidences.size and (confidences.min() < 0.0 or confidences.max() > 1.0):
        raise ValueError("confidences must lie in [0, 1]")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # number of inner edges strictly below c -> index of the right-closed bin holding c
    bin_ids = np.searchsorted(edges[1:-1], confidences, side="left")
    counts = np.bincount(bin_ids, minlength=n_bins)
    conf_sum = np.bincount(bin_ids, weights=confidences, minlength=n_bins)
    acc_sum = np.bincount(bin_ids, weights=correct, minlength=n_bins)
    nonempty = counts > 0
    mean_conf = np.zeros(n_bins)
    accuracy = np.zeros(n_bins)
    mean_conf[nonempty] = conf_sum[nonempty] / counts[nonempty]  # conf(B_m)
    accuracy[nonempty] = acc_sum[nonempty] / counts[nonempty]  # acc(B_m)
    return {"edges": edges, "counts": counts.astype(np.int64), "confidence": mean_conf, "accuracy": accuracy}


def _binned_gaps(probs, labels, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """|acc(B_m) - conf(B_m)| and the bin weights |B_m| / n, from predicted probabilities."""
    probs, labels = _check_scores(probs, labels)
    if probs.shape[0] == 0:
        raise ValueError("calibration errors need at least one sample")
    confidences = probs.max(axis=1)  # \hat p_i: the probability of the predicted class
    correct = probs.argmax(axis=1) == labels  # 1(\hat y_i = y_i)
    stats = bin_statistics(confidences, correct, n_bins)
    gaps = np.abs(stats["accuracy"] - stats["confidence"])
    return gaps, stats["counts"] / probs.shape[0]


def expected_calibration_error(probs, labels, n_bins: int = DEFAULT_N_BINS) -> float:
    """ECE = sum_m |B_m| / n * |acc(B_m) - conf(B_m)| (Sec. 2, Eq. 3)."""
    gaps, weights = _binned_gaps(probs, labels, n_bins)
    return float(np.sum(weights * gaps))


def maximum_calibration_error(probs, labels, n_bins: int = DEFAULT_N_BINS) -> float:
    """MCE = max over non-empty bins of |acc(B_m) - conf(B_m)| (Sec. 2, Eq. 5)."""
    gaps, weights = _binned_gaps(probs, labels, n_bins)
    return float(gaps[weights > 0].max())


class TemperatureScaler:
    """Fit T on a validation split, then rescale any logits with it."""

    def __init__(self, bounds: tuple[float, float] = TEMPERATURE_BOUNDS) -> None:
        self.bounds = bounds
        self.temperature_: float | None = None

    def fit(self, logits, labels) -> "TemperatureScaler":
        self.temperature_ = fit_temperature(logits, labels, self.bounds)
        return self

    def predict_proba(self, logits) -> np.ndarray:
        if self.temperature_ is None:
            raise RuntimeError("TemperatureScaler is not fitted; call fit(logits, labels) first")
        return softmax(logits, self.temperature_)
