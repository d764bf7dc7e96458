"""Fixed-length rollout storage for N environments stepped in lockstep."""
from __future__ import annotations

import numpy as np

from rl.gae import compute_gae, normalize_advantages


class RolloutBuffer:
    """Collects T steps of experience and turns them into PPO training targets."""

    def __init__(self, num_steps: int, num_envs: int, gamma: float = 0.99, lam: float = 0.95) -> None:
        self.num_steps = num_steps
        self.num_envs = num_envs
        self.gamma = gamma
        self.lam = lam
        self.rewards = np.zeros((num_steps, num_envs))
        self.values = np.zeros((num_steps, num_envs))
        self.terminals = np.zeros((num_steps, num_envs))
        self.log_probs = np.zeros((num_steps, num_envs))
        self.step = 0

    def add(self, reward: np.ndarray, value: np.ndarray, terminal: np.ndarray, log_prob: np.ndarray) -> None:
        if self.step >= self.num_steps:
            raise RuntimeError("rollout buffer is full; call finish() and reset()")
        self.rewards[self.step] = reward
        self.values[self.step] = value
        self.terminals[self.step] = terminal
        self.log_probs[self.step] = log_prob
        self.step += 1

    def finish(self, last_values: np.ndarray, normalize: bool = True) -> dict[str, np.ndarray]:
        """Compute advantages and value targets; flatten everything to (T * N,)."""
        if self.step != self.num_steps:
            raise RuntimeError(f"rollout incomplete: {self.step}/{self.num_steps} steps stored")
        advantages, returns = compute_gae(
            self.rewards, self.values, self.terminals, last_values, gamma=self.gamma, lam=self.lam
        )
        policy_advantages = normalize_advantages(advantages) if normalize else advantages
        return {
            "advantages": policy_advantages.reshape(-1),
            "returns": returns.reshape(-1),
            "values": self.values.reshape(-1),
            "log_probs": self.log_probs.reshape(-1),
        }

    def reset(self) -> None:
        self.step = 0
