"""How well the metrics' intervals and paired tests do what they claim, on simulated sweeps (docs/metrics.md).

Coverage: the share of simulated sweeps (n tasks, each solved with probability p) whose 95 % bootstrap interval
holds p; 0.95 is the claim. False "told apart": the share of simulated pairs of configurations that differ
in nothing (each task has its own difficulty, both sides draw from it) that the paired test calls different;
at most 0.05 is the claim. Seeded: the same command prints the same table.

Usage: python scripts/bench_intervals.py [--sims 1000] [--resamples 2000]
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metrics"))

from cli_flags import Parser  # noqa: E402
from metric_cli import positive_int  # noqa: E402
from uncertainty import bootstrap_interval, paired_comparison  # noqa: E402

COVERAGE_CASES = ((102, 0.3), (102, 0.5), (102, 0.7), (30, 0.6), (8, 0.6))
NULL_SIZES = (102, 30, 8)


def coverage(n: int, p: float, sims: int, resamples: int, rng: np.random.Generator) -> float:
    hits = 0
    for sim in range(sims):
        interval = bootstrap_interval((rng.random(n) < p).astype(float).tolist(), seed=sim, resamples=resamples)
        hits += interval.low <= p <= interval.high
    return hits / sims


def false_positives(n: int, sims: int, resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """(McNemar on solved / not, sign-flip test on rates) rejection shares when nothing differs."""
    binary = rates = 0
    for sim in range(sims):
        difficulty = rng.random(n)
        solved = [{t: float(rng.random() < difficulty[t]) for t in range(n)} for _ in "ab"]
        scored = [{t: float(np.clip(difficulty[t] + rng.normal(0, 0.2), 0, 1)) for t in range(n)} for _ in "ab"]
        binary += paired_comparison(*solved, binary=True, seed=sim, resamples=resamples).distinguishable
        rates += paired_comparison(*scored, binary=False, seed=sim, resamples=resamples).distinguishable
    return binary / sims, rates / sims


def main(argv: Iterable[str] | None = None) -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=positive_int, default=1000, help="simulated sweeps per row (default 1000)")
    parser.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples per interval (default 2000)")
    args = parser.parse_args(None if argv is None else list(argv))
    rng = np.random.default_rng(2026)
    print("| tasks | p | coverage of the 95 % interval |\n|---|---|---|")
    for n, p in COVERAGE_CASES:
        print(f"| {n} | {p} | {coverage(n, p, args.sims, args.resamples, rng):.3f} |")
    print("\n| tasks | false 'told apart', McNemar | false 'told apart', sign-flip |\n|---|---|---|")
    for n in NULL_SIZES:
        binary, rates = false_positives(n, args.sims, args.resamples, rng)
        print(f"| {n} | {binary:.3f} | {rates:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
