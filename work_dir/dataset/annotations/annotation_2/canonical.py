"""Adam with decoupled weight decay (AdamW) for parameters stored as numpy arrays.

Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019
(Algorithm 2), built on Adam (Kingma & Ba, ICLR 2015).
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

DEFAULT_BETAS = (0.9, 0.999)
DEFAULT_EPS = 1e-8


def _check_hyperparameters(lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    if lr < 0:
        raise ValueError(f"lr must be >= 0, got {lr}")
    if not all(0.0 <= beta < 1.0 for beta in betas):
        raise ValueError(f"betas must lie in [0, 1), got {betas}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")


def adamw_update(
    param: np.ndarray,
    grad: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    step: int,
    *,
    lr: float = 1e-3,
    betas: tuple[float, float] = DEFAULT_BETAS,
    eps: float = DEFAULT_EPS,
    weight_decay: float = 0.0,
    schedule_multiplier: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One AdamW update (Algorithm 2, lines 6-12) returning new arrays; the inputs are not modified.

    ``step`` is t, the 1-based number of this update for this parameter.
    """
    if step < 1:
        raise ValueError(f"step counts updates from 1, got {step}")
    _check_hyperparameters(lr, betas, eps, weight_decay)
    beta1, beta2 = betas
    param = np.asarray(param, dtype=np.float64)
    grad = np.asarray(grad, dtype=np.float64)
    # Line 6: the gradient of the loss only; AdamW does NOT add lambda * theta here
    # (adding it is L2 regularisation, which Adam rescales per coordinate: Section 2).
    # Lines 7-8: exponential moving averages of the gradient and its square.
    exp_avg = beta1 * np.asarray(exp_avg, dtype=np.float64) + (1.0 - beta1) * grad
    exp_avg_sq = beta2 * np.asarray(exp_avg_sq, dtype=np.float64) + (1.0 - beta2) * grad * grad
    # Lines 9-10: bias correction of the zero-initialised moments.
    m_hat = exp_avg / (1.0 - beta1**step)
    v_hat = exp_avg_sq / (1.0 - beta2**step)
    # Line 12: theta_t = theta_{t-1} - eta_t * (alpha * m_hat / (sqrt(v_hat) + eps) + lambda * theta_{t-1}).
    # The decay is decoupled from the adaptive step and scaled by the schedule
    # multiplier eta_t only, not by the learning rate alpha.
    adaptive_step = lr * m_hat / (np.sqrt(v_hat) + eps)
    new_param = param - schedule_multiplier * (adaptive_step + weight_decay * param)
    return new_param, exp_avg, exp_avg_sq


def normalized_weight_decay(lambda_norm: float, batch_size: int, dataset_size: int, epochs: int) -> float:
    """lambda = lambda_norm * sqrt(b / (B * T)), the paper's normalized weight decay.

    Normalising by the number of updates B*T/b makes the best lambda_norm transfer
    across batch sizes and training lengths.
    """
    if batch_size <= 0 or dataset_size <= 0 or epochs <= 0:
        raise ValueError("batch_size, dataset_size and epochs must be positive")
    return lambda_norm * float(np.sqrt(batch_size / (dataset_size * epochs)))


class AdamW:
    """AdamW over a dict of named numpy arrays, updated in place so models see new values.

    Each parameter keeps its own step count and moments, so a parameter that gets no
    gradient in some step is neither updated nor advanced (its bias correction
    stays consistent with the number of gradients it has seen).
    """

    def __init__(
        self,
        params: Mapping[str, np.ndarray],
        lr: float = 1e-3,
        betas: tuple[float, float] = DEFAULT_BETAS,
        eps: float = DEFAULT_EPS,
        weight_decay: float = 1e-2,
        no_decay: Iterable[str] = (),
    ) -> None:
        _check_hyperparameters(lr, betas, eps, weight_decay)
        self.params = params
        self.lr = lr
        self.betas = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self.no_decay = frozenset(no_decay)
        unknown = self.no_decay - set(params)
        if unknown:
            raise ValueError(f"no_decay names unknown parameters: {sorted(unknown)}")
        self.state: dict[str, dict] = {
            name: {"step": 0, "exp_avg": np.zeros_like(value, dtype=np.float64), "exp_avg_sq": np.zeros_like(value, dtype=np.float64)}
            for name, value in params.items()
        }

    def step(self, grads: Mapping[str, np.ndarray], schedule_multiplier: float = 1.0) -> None:
        """Apply one update to every parameter that has an entry in ``grads``."""
        unknown = set(grads) - set(self.params)
        if unknown:
            raise KeyError(f"gradients for unknown parameters: {sorted(unknown)}")
        for name, grad in grads.items():
            state = self.state[name]
            state["step"] += 1
            new_param, state["exp_avg"], state["exp_avg_sq"] = adamw_update(
                self.params[name], grad, state["exp_avg"], state["exp_avg_sq"], state["step"],
                lr=self.lr, betas=self.betas, eps=self.eps,
                weight_decay=0.0 if name in self.no_decay else self.weight_decay,
                schedule_multiplier=schedule_multiplier,
            )
            self.params[name][...] = new_param
