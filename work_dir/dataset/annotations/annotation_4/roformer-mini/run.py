"""Run the tiny RoFormer on random tokens and report the next-token loss at initialisation."""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from roformer.model import TinyRoFormer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = TinyRoFormer()
    tokens = torch.randint(0, 64, (2, args.seq_len + 1))
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    print(f"loss at initialisation: {loss.item():.4f}")


if __name__ == "__main__":
    main()
