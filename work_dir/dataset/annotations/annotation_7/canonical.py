"""Entropy-regularised optimal transport solved by Sinkhorn-Knopp matrix scaling
(Cuturi, 2013, "Sinkhorn Distances: Lightspeed Computation of Optimal Transport").

The regularised problem  min_P <P, C> - epsilon * H(P)  over couplings P of the
weights a and b has the solution P = diag(u) K diag(v) with the Gibbs kernel
K = exp(-C / epsilon) (Sec. 4; epsilon = 1 / lambda in the paper), and
u, v are found by alternately matching the row and column sums (Algorithm 1).
For small epsilon K underflows to 0 in float64, so every quantity is kept in
the log domain: the dual potentials f = epsilon * log u and g = epsilon * log v
are updated with a stabilised log-sum-exp.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SinkhornResult:
    """Outcome of one solve; ``plan`` has the shape of the cost matrix."""

    plan: np.ndarray
    f: np.ndarray
    g: np.ndarray
    cost: float
    objective: float
    n_iter: int
    converged: bool
    marginal_error: float


def logsumexp(x, axis: int | None = None) -> np.ndarray:
    """log(sum(exp(x))) along ``axis`` without overflow; an all -inf slice gives -inf, not NaN."""
    x = np.asarray(x, dtype=np.float64)
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return np.squeeze(out, axis=axis)


def _log_weights(weights: np.ndarray) -> np.ndarray:
    """log of non-negative weights with log(0) = -inf, so empty bins carry no mass."""
    with np.errstate(divide="ignore"):
        return np.log(weights)


def _validate(a, b, C, epsilon: float, max_iter: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or a.size == 0 or b.size == 0:
        raise ValueError(f"a and b must be non-empty 1-D weight vectors, got shapes {a.shape} and {b.shape}")
    if C.shape != (a.size, b.size):
        raise ValueError(f"C must have shape {(a.size, b.size)}, got {C.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and np.all(np.isfinite(C))):
        raise ValueError("a, b and C must be finite")
    if a.min() < 0 or b.min() < 0 or a.sum() <= 0:
        raise ValueError("a and b must be non-negative with positive total mass")
    if abs(a.sum() - b.sum()) > 1e-8 * max(a.sum(), b.sum()):
        raise ValueError(f"a and b must have the same total mass, got {a.sum()} and {b.sum()}")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    if int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter}")
    return a, b, C


def sinkhorn_log(a, b, C, epsilon: float, max_iter: int = 1000, tol: float = 1e-9) -> SinkhornResult:
    """Log-domain Sinkhorn-Knopp for the coupling of ``a`` (n,) and ``b`` (m,) under cost ``C`` (n, m).

    One iteration is the row update then the column update of Algorithm 1,
    written for the potentials:
        f_i = eps * log a_i - eps * logsumexp_j((g_j - C_ij) / eps)     (u = a / K v)
        g_j = eps * log b_j - eps * logsumexp_i((f_i - C_ij) / eps)     (v = b / K^T u)
    starting from f = g = 0 (u = v = 1). After the column update the column
    sums are exact, so convergence is judged on the rows:
    ||P 1 - a||_1 <= tol stops the loop.
    """
    a, b, C = _validate(a, b, C, epsilon, max_iter)
    log_a, log_b = _log_weights(a), _log_weights(b)
    f = np.zeros(a.size)
    g = np.zeros(b.size)
    error = np.inf
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        f = epsilon * log_a - epsilon * logsumexp((g[None, :] - C) / epsilon, axis=1)
        g = epsilon * log_b - epsilon * logsumexp((f[:, None] - C) / epsilon, axis=0)
        log_plan = (f[:, None] + g[None, :] - C) / epsilon  # log P = log u + log K + log v
        error = float(np.abs(np.exp(logsumexp(log_plan, axis=1)) - a).sum())
        if error <= tol:
            break
    plan = np.exp(log_plan)
    support = plan > 0
    # <P, C> at the regularised optimum is the paper's dual-Sinkhorn divergence d_M^lambda(a, b)
    cost = float(np.sum(plan * C))
    # the regularised objective <P, C> - eps * H(P), with H(P) = -sum P (log P - 1) and 0 log 0 = 0
    objective = cost + epsilon * float(np.sum(plan[support] * (log_plan[support] - 1.0)))
    return SinkhornResult(
        plan=plan,
        f=f,
        g=g,
        cost=cost,
        objective=objective,
        n_iter=n_iter,
        converged=error <= tol,
        marginal_error=error,
    )
