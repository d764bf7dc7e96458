"""Train the toy bigram policy with DPO and print the reward statistics."""
from __future__ import annotations

import argparse

import numpy as np

from dpo.data import make_preference_batch
from dpo.policy import BigramPolicy
from dpo.trainer import DPOConfig, DPOTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--beta", type=float, default=0.1)
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    policy = BigramPolicy(vocab_size=16, rng=rng)
    trainer = DPOTrainer(policy, policy.copy(), DPOConfig(beta=args.beta, label_smoothing=args.label_smoothing))
    for step in range(args.steps):
        metrics = trainer.step(make_preference_batch(rng, batch_size=32, prompt_len=4, response_len=6, vocab_size=16))
        if step % 10 == 0 or step == args.steps - 1:
            print(step, " ".join(f"{k}={v:.4f}" for k, v in metrics.items()))


if __name__ == "__main__":
    main()
