"""Schedule multipliers eta_t for the optimiser (cosine annealing, as used with AdamW)."""
from __future__ import annotations

import math


def cosine_multiplier(step: int, total_steps: int, eta_min: float = 0.0, eta_max: float = 1.0) -> float:
    """eta_t = eta_min + (eta_max - eta_min) * (1 + cos(pi * t / T)) / 2, for 0 <= t <= T."""
    progress = min(max(step, 0), total_steps) / total_steps
    return eta_min + 0.5 * (eta_max - eta_min) * (1.0 + math.cos(math.pi * progress))
