"""How sure a macro-averaged metric is: bootstrap intervals over tasks and paired comparisons (docs/metrics.md).

Tasks are the unit of sampling: a run's value is the mean of one score per task, so its uncertainty is that
of a mean over the tasks that happened to be in the benchmark. Intervals are percentile bootstraps; every
call draws from its own generator seeded with ``seed``, so one cell's interval does not depend on which other
cells were computed before it, and a rerun prints the same numbers.

Two configurations run on the same tasks are compared *paired*, task by task: the difference of their means
is resampled over the common tasks for its interval. Binary scores (solved within n turns) are tested with
McNemar's exact test on the tasks only one side solved; other scores with a paired sign-flip randomization test
(the same test, for scores that are not 0/1). Inputs
are plain ``{task_id: score}`` dicts, those the ``get_*``/``per_task`` functions return, so tasks missing or
set aside (incomplete, untrusted) on either side are simply absent and counted.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 0
MCNEMAR = "McNemar exact"
SIGN_FLIP = "paired sign-flip"
EXACT_SIGN_FLIPS = 16


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` tasks, its bootstrap interval and bootstrap standard error (fractions, like the value)."""

    value: float
    low: float
    high: float
    se: float
    n: int

    def formatted(self, scale: float, digits: int) -> str:
        return f"{self.value * scale:.{digits}f} [{self.low * scale:.{digits}f}, {self.high * scale:.{digits}f}]"


@dataclass(frozen=True)
class PairedTest:
    """A paired test's two-sided p-value; ``discordant`` is (only A, only B) for McNemar, else None."""

    p_value: float
    test: str
    discordant: tuple[int, int] | None = None

    def formatted(self, scale: float, digits: int) -> str:
        counts = f"; A only {self.discordant[0]}, B only {self.discordant[1]}" if self.discordant else ""
        return f"{self.p_value:.3g} ({self.test}{counts})"


@dataclass(frozen=True)
class TaskCounts:
    """Which tasks a paired comparison rests on: those scored on both sides, and those scored on one only."""

    common: int
    only_a: int
    only_b: int

    def formatted(self, scale: float, digits: int) -> str:
        extra = f" (only A {self.only_a}, only B {self.only_b})" if self.only_a or self.only_b else ""
        return f"{self.common}{extra}"


@dataclass(frozen=True)
class Comparison:
    """A and B on their common tasks, the paired interval of A - B, and the paired test."""

    a: Interval
    b: Interval
    difference: Interval
    tasks: TaskCounts
    test: PairedTest
    confidence: float = CONFIDENCE

    @property
    def distinguishable(self) -> bool:
        return self.test.p_value < 1 - self.confidence

    @property
    def verdict(self) -> str:
        return f"{'can' if self.distinguishable else 'cannot'} be told apart at {100 * self.confidence:.0f} %"


def _resample_means(values: np.ndarray, seed: int, resamples: int) -> np.ndarray:
    """Means of ``resamples`` draws of len(values) tasks with replacement."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    return values[picks].mean(axis=1)


def _interval(point: float, means: np.ndarray, n: int, confidence: float) -> Interval:
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(point, float(low), float(high), float(means.std(ddof=1)) if len(means) > 1 else 0.0, n)


def bootstrap_interval(values: Sequence[float], *, seed: int = SEED, resamples: int = RESAMPLES,
                       confidence: float = CONFIDENCE) -> Interval | None:
    """Percentile bootstrap interval of the mean of per-task ``values``; None when there is no task.

    The point value is ``sum(values) / len(values)``, the very float the release functions return.
    """
    if not values:
        return None
    point = sum(values) / len(values)
    return _interval(point, _resample_means(np.asarray(values, dtype=float), seed, resamples), len(values),
                     confidence)


def level_intervals(per_level: Sequence[Mapping[int, float]], *, seed: int = SEED,
                    resamples: int = RESAMPLES) -> list[Interval | None]:
    """One interval per guidance level from the per-task dicts the ``get_*`` per-task functions return."""
    return [bootstrap_interval(list(scores.values()), seed=seed, resamples=resamples) for scores in per_level]


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: the binomial(only_a + only_b, 1/2) tail of the smaller count, doubled."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(comb(n, k) for k in range(min(only_a, only_b) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def sign_flip_p_value(differences: Sequence[float], *, seed: int = SEED, resamples: int = RESAMPLES) -> float:
    """Two-sided paired randomization test of "no difference": under it each task's A - B is as likely to have
    the opposite sign, so p is the share of sign assignments whose |sum| reaches the observed one.

    Exact over all 2^m assignments of the m non-zero differences up to ``EXACT_SIGN_FLIPS``, else ``resamples``
    seeded random ones (+1 smoothing, never 0). On 0/1 outcomes it is McNemar's exact test. Preferred to a
    bootstrap p-value, which on few tasks calls differences significant that a sign test does not (docs/metrics.md).
    """
    nonzero = np.asarray([d for d in differences if d != 0], dtype=float)
    if not len(nonzero):
        return 1.0
    observed = abs(nonzero.sum()) * (1 - 1e-9) - 1e-12  # float sums of the same values may differ in the last bit
    if len(nonzero) <= EXACT_SIGN_FLIPS:
        signs = ((np.arange(2 ** len(nonzero))[:, None] >> np.arange(len(nonzero))) & 1) * 2 - 1
        return float((np.abs(signs @ nonzero) >= observed).mean())
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(resamples, len(nonzero)))
    return (int((np.abs(signs @ nonzero) >= observed).sum()) + 1) / (resamples + 1)


def paired_comparison(a: Mapping[int, float], b: Mapping[int, float], *, binary: bool, seed: int = SEED,
                      resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> Comparison | None:
    """Compare two configurations on the tasks both scored; None when they share no task.

    ``binary``: scores are 0/1 (solved or not), tested with McNemar; otherwise with the paired sign-flip test.
    """
    common = sorted(set(a) & set(b))
    if not common:
        return None
    left = np.asarray([a[task] for task in common], dtype=float)
    right = np.asarray([b[task] for task in common], dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(common), size=(resamples, len(common)))
    means_a, means_b = left[picks].mean(axis=1), right[picks].mean(axis=1)
    point_a, point_b = sum(left.tolist()) / len(common), sum(right.tolist()) / len(common)
    difference = _interval(point_a - point_b, means_a - means_b, len(common), confidence)
    if binary:
        only_a, only_b = int(((left == 1) & (right == 0)).sum()), int(((left == 0) & (right == 1)).sum())
        test = PairedTest(mcnemar_exact(only_a, only_b), MCNEMAR, (only_a, only_b))
    else:
        test = PairedTest(sign_flip_p_value((left - right).tolist(), seed=seed, resamples=resamples), SIGN_FLIP)
    counts = TaskCounts(len(common), len(set(a) - set(b)), len(set(b) - set(a)))
    return Comparison(_interval(point_a, means_a, len(common), confidence),
                      _interval(point_b, means_b, len(common), confidence), difference, counts, test, confidence)
