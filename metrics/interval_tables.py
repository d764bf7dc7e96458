"""Metric tables with their uncertainty: a models x levels table of bootstrap intervals, and a table of paired
comparisons between levels (per model) and between models (per level) on the tasks both scored.

The numbers come from ``uncertainty.py``; the tasks behind them are those :func:`metric_aggregate.summarize`
scores, so incomplete and untrusted jobs (missing feedback, budget stop, infra failure, reference access,
tampering, a stopping error) are left out here exactly as in the point-value tables, and the same coverage
notes say how many.
"""
from __future__ import annotations

import argparse
from itertools import combinations

from metric_aggregate import LevelSummary, TaskScore, coverage_notes
from metric_cli import Context, level_columns, positive_int
from metric_tables import Table
from uncertainty import CONFIDENCE, RESAMPLES, SEED, Comparison, Interval, bootstrap_interval, paired_comparison

SMALL_N = 30
PAIR_COLUMNS = ["A", "B", "A - B", "tasks", "p-value (paired test)", "verdict"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--seed`` and ``--resamples`` of the bootstrap (the defaults make every printed interval reproducible)."""
    parser.add_argument("--seed", type=int, default=SEED, help=f"seed of the bootstrap over tasks (default {SEED})")
    parser.add_argument("--resamples", type=positive_int, default=RESAMPLES,
                        help=f"bootstrap resamples per interval (default {RESAMPLES})")


def bootstrap_options(args: argparse.Namespace) -> dict[str, int]:
    return {"seed": getattr(args, "seed", SEED), "resamples": getattr(args, "resamples", RESAMPLES)}


def method_note(args: argparse.Namespace) -> str:
    options = bootstrap_options(args)
    return (f"[low, high]: {100 * CONFIDENCE:.0f} % percentile bootstrap over tasks, {options['resamples']} "
            f"resamples, seed {options['seed']}")


def caveats(intervals: list[Interval | None]) -> list[str]:
    """What the bootstrap cannot say for these intervals: too few tasks, or every task scored alike."""
    shown = [interval for interval in intervals if interval is not None]
    notes = []
    fewest = min((interval.n for interval in shown), default=SMALL_N)
    if fewest < SMALL_N:
        notes.append(f"only {fewest} tasks in some cells: a bootstrap interval over fewer than {SMALL_N} tasks is too "
                     "narrow (it never reaches past the scores seen); the paired test does not rest on the bootstrap")
    flat = [interval for interval in shown if interval.low == interval.high]
    if flat:
        notes.append(f"a zero-width interval means every task scored alike, not certainty: over n tasks the true "
                     f"rate may still be about 3/n of the scale away (rule of three; {3 / flat[0].n:.2f} for "
                     f"n = {flat[0].n})")
    return notes


def interval_table(ctx: Context, title: str, task_score: TaskScore, *, scale: float = 100.0,
                   digits: int = 1) -> Table:
    """Models x levels: each cell the metric's value and its bootstrap interval over the scored tasks."""
    summaries = ctx.summaries(task_score)
    options = bootstrap_options(ctx.args)
    rows = [[model] + [bootstrap_interval(list(s.per_task.values()), **options) for s in summaries[model]]
            for model in ctx.models]
    notes = [method_note(ctx.args), *caveats([cell for row in rows for cell in row[1:]])]
    notes += coverage_notes([s for model in ctx.models for s in summaries[model]])
    return Table(title, level_columns(ctx), rows, notes, scale, digits)


def level_pairs(levels: list[int]) -> list[tuple[int, int]]:
    """(higher, lower) pairs: each level against the lowest, and each against the one below it."""
    ordered = sorted(levels)
    pairs = [(level, ordered[0]) for level in ordered[1:]]
    pairs += [(high, low) for low, high in zip(ordered, ordered[1:]) if (high, low) not in pairs]
    return pairs


def comparison_row(label: list[str], comparison: Comparison | None) -> list:
    """A row of PAIR_COLUMNS after ``label``; a pair with no common task says so."""
    if comparison is None:
        return label + [None] * (len(PAIR_COLUMNS) - 1) + ["no common scored task"]
    return label + [comparison.a, comparison.b, comparison.difference, comparison.tasks, comparison.test,
                    comparison.verdict]


def paired_rows(summaries: dict[str, list[LevelSummary]], binary: bool, options: dict[str, int]) -> list[list]:
    """Rows comparing levels within each model, then models within each level."""
    rows = []
    for model, runs in summaries.items():
        by_level = {s.level: s.per_task for s in runs}
        for high, low in level_pairs(list(by_level)):
            comparison = paired_comparison(by_level[high], by_level[low], binary=binary, **options)
            rows.append(comparison_row([f"{model}: L{high} vs L{low}"], comparison))
    levels = [s.level for s in next(iter(summaries.values()), [])]
    for index, level in enumerate(levels):
        for first, second in combinations(summaries, 2):
            comparison = paired_comparison(summaries[first][index].per_task, summaries[second][index].per_task,
                                           binary=binary, **options)
            rows.append(comparison_row([f"L{level}: {first} vs {second}"], comparison))
    return rows


def paired_table(ctx: Context, title: str, task_score: TaskScore, *, binary: bool, scale: float = 100.0,
                 digits: int = 1) -> Table:
    """Paired differences between levels and between models, each on the tasks both sides scored."""
    summaries = ctx.summaries(task_score)
    rows = paired_rows({model: summaries[model] for model in ctx.models}, binary, bootstrap_options(ctx.args))
    return Table(title, ["comparison"] + PAIR_COLUMNS, rows, pair_notes(rows, binary, ctx.args), scale, digits)


def pair_notes(rows: list[list], binary: bool, args: argparse.Namespace) -> list[str]:
    """How a table of comparison rows was computed, and the caveats of its intervals."""
    intervals = [cell for row in rows for cell in row if isinstance(cell, Interval)]
    return [method_note(args) + "; A, B and A - B on the tasks scored on both sides", paired_test_note(binary),
            *caveats(intervals)]


def paired_test_note(binary: bool) -> str:
    if binary:
        return ("test: McNemar exact on the tasks only one side solved (A only vs B only); "
                f"told apart when p < {1 - CONFIDENCE:.2f}")
    return ("test: two-sided paired sign-flip (randomization) test of the per-task differences; "
            f"told apart when p < {1 - CONFIDENCE:.2f}")
