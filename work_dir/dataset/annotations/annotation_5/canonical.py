"""Generalized Advantage Estimation (Schulman et al., 2016, "High-Dimensional
Continuous Control Using Generalized Advantage Estimation").

Rollouts are stored time-major: arrays of shape (T,) for one environment or
(T, N) for N environments stepped in lockstep. ``terminals[t]`` is 1 when the
transition taken at step t ended its episode, so the state after it has value
zero and nothing may be bootstrapped or accumulated across that boundary.
``last_values`` is V(s_T), the critic's estimate for the state that follows the
final step of the rollout; it bootstraps the truncated tail of every episode
that is still running when the rollout stops.
"""
from __future__ import annotations

import numpy as np


def _as_rollout(rewards, values, terminals, last_values) -> tuple[np.ndarray, ...]:
    """Validate shapes and convert everything to float64 arrays of one layout."""
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    terminals = np.asarray(terminals, dtype=np.float64)
    if rewards.ndim not in (1, 2):
        raise ValueError(f"rewards must have shape (T,) or (T, N), got {rewards.shape}")
    if values.shape != rewards.shape or terminals.shape != rewards.shape:
        raise ValueError(
            f"rewards, values and terminals must share a shape, got {rewards.shape}, {values.shape}, {terminals.shape}"
        )
    last_values = np.asarray(last_values, dtype=np.float64)
    if last_values.shape != rewards.shape[1:]:
        raise ValueError(f"last_values must have shape {rewards.shape[1:]}, got {last_values.shape}")
    return rewards, values, terminals, last_values


def compute_gae(rewards, values, terminals, last_values, gamma: float = 0.99, lam: float = 0.95):
    """Return (advantages, returns), both float64 with the shape of ``rewards``.

    Paper Sec. 3: the TD residual of the critic
        delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)
    and the exponentially weighted sum of residuals (Eq. 16)
        A_t^{GAE(gamma, lambda)} = sum_l (gamma * lambda)^l delta_{t+l}
    evaluated backwards with the recursion A_t = delta_t + gamma*lambda*A_{t+1}.
    A terminal transition zeroes V(s_{t+1}) in delta_t and cuts the recursion,
    so advantages never leak across an episode boundary.
    """
    rewards, values, terminals, last_values = _as_rollout(rewards, values, terminals, last_values)
    not_terminal = 1.0 - terminals
    advantages = np.zeros_like(rewards)
    next_advantage = np.zeros_like(last_values)
    next_value = last_values  # bootstrap V(s_T) for the unfinished tail
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_value * not_terminal[t] - values[t]  # Sec. 3, TD residual
        next_advantage = delta + gamma * lam * not_terminal[t] * next_advantage  # Eq. 16, recursive form
        advantages[t] = next_advantage
        next_value = values[t]
    # lambda-return targets for the critic: A_t + V(s_t) = sum_l (gamma*lambda)^l-weighted n-step returns
    returns = advantages + values
    return advantages, returns


def discounted_returns(rewards, terminals, last_values, gamma: float = 0.99) -> np.ndarray:
    """Bootstrapped discounted return R_t = r_t + gamma * (1 - d_t) * R_{t+1}, R_T = V(s_T).

    GAE(gamma, 1) (Eq. 18) is exactly this return minus the baseline V(s_t), so
    ``compute_gae(..., lam=1)`` returns these values as its ``returns``.
    """
    rewards, _, terminals, last_values = _as_rollout(rewards, rewards, terminals, last_values)
    returns = np.zeros_like(rewards)
    running = last_values
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * (1.0 - terminals[t]) * running
        returns[t] = running
    return returns


def normalize_advantages(advantages, eps: float = 1e-8) -> np.ndarray:
    """Standardise advantages over the whole batch (population std), as PPO-style trainers do.

    Normalisation is a variance-reduction convention of policy-gradient
    training, not part of the estimator itself; it leaves the argmax of the
    surrogate unchanged up to scale.
    """
    advantages = np.asarray(advantages, dtype=np.float64)
    if advantages.size == 0:
        return advantages.copy()
    return (advantages - advantages.mean()) / (advantages.std() + eps)
