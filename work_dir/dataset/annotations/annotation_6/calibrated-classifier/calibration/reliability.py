"""Reliability diagrams as plain-text tables (no plotting dependency)."""
from __future__ import annotations

import numpy as np

from calibration.temperature_scaling import DEFAULT_N_BINS, bin_statistics


def reliability_table(probs: np.ndarray, labels: np.ndarray, n_bins: int = DEFAULT_N_BINS) -> str:
    """One line per non-empty bin: interval, count, mean confidence, accuracy, gap."""
    stats = bin_statistics(probs.max(axis=1), probs.argmax(axis=1) == labels, n_bins)
    lines = [f"{'bin':>13} {'count':>6} {'conf':>6} {'acc':>6} {'gap':>6}"]
    edges = stats["edges"]
    for m, count in enumerate(stats["counts"]):
        if count == 0:
            continue
        conf, acc = stats["confidence"][m], stats["accuracy"][m]
        lines.append(f"({edges[m]:.2f}, {edges[m + 1]:.2f}] {count:6d} {conf:6.3f} {acc:6.3f} {acc - conf:+6.3f}")
    return "\n".join(lines)
