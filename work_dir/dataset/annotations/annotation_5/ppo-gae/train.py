"""Collect rollouts on a toy chain environment and report the PPO losses of a fixed policy.

Usage: python train.py [--steps 64] [--envs 4] [--seed 0]
"""
from __future__ import annotations

import argparse

import numpy as np

from rl.buffer import RolloutBuffer
from rl.ppo_loss import clipped_surrogate, value_loss


class ChainEnv:
    """N independent random walks on 0..length; reaching `length` pays 1 and ends the episode."""

    def __init__(self, num_envs: int, length: int) -> None:
        self.length = length
        self.position = np.zeros(num_envs, dtype=int)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.position = np.clip(self.position + np.where(actions == 1, 1, -1), 0, self.length)
        terminal = self.position == self.length
        reward = terminal.astype(float)
        self.position[terminal] = 0
        return reward, terminal


def linear_critic(position: np.ndarray, length: int) -> np.ndarray:
    """A fixed critic: the fraction of the chain already walked."""
    return position / length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    env = ChainEnv(args.envs, length=5)
    buffer = RolloutBuffer(args.steps, args.envs)
    p_right = 0.6
    for _ in range(args.steps):
        values = linear_critic(env.position, env.length)
        actions = (rng.random(args.envs) < p_right).astype(int)
        log_probs = np.log(np.where(actions == 1, p_right, 1.0 - p_right))
        reward, terminal = env.step(actions)
        buffer.add(reward, values, terminal, log_probs)
    batch = buffer.finish(last_values=linear_critic(env.position, env.length))
    print(f"policy loss {clipped_surrogate(batch['log_probs'], batch['log_probs'], batch['advantages']):+.4f}")
    print(f"value loss  {value_loss(batch['values'], batch['returns']):.4f}")


if __name__ == "__main__":
    main()
