"""Two result folders compared task by task (``scripts/analyze_results.py --compare A B``).

Each folder is resolved as the analysis resolves one (run records give max-turn and tasks, run folders give
levels); the runs are then paired by setting, guidance type, model and level. A model present in both
folders is compared with itself; when the folders share no model and each holds exactly one, those two are
compared. Every pair uses the tasks scored on both sides, and says how many that is.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from analysis import build_contexts
from interval_tables import PAIR_COLUMNS, bootstrap_options, comparison_row, pair_notes
from metric_aggregate import LevelSummary, TaskScore, coverage_notes
from metric_cli import Context, UsageError
from metric_passrate_testcase import best_rate
from metric_passrate_unitest import solved_within
from metric_tables import Table
from task_meta import count_test_cases
from uncertainty import paired_comparison


@dataclass(frozen=True)
class Metric:
    title: str
    score: TaskScore
    binary: bool


def metrics_of(ctx: Context) -> list[Metric]:
    n = ctx.args.max_turns
    return [Metric(f"Recall@{n} (% of tasks)", solved_within(n), True),
            Metric("Test-case pass rate, best turn (% of test cases)", best_rate(count_test_cases(ctx.meta_path), n),
                   False)]


def contexts_of(args: argparse.Namespace, folder: str) -> dict[tuple[str, str], Context]:
    """(setting, guidance type) -> Context of one folder."""
    if not Path(folder).is_dir():
        raise UsageError(f"--compare: result folder {folder} not found")
    contexts = build_contexts(argparse.Namespace(**{**vars(args), "result_dir": folder}))
    return {(ctx.selection.setting, ctx.selection.guidance_type): ctx for ctx in contexts}


def model_pairs(ctx_a: Context, ctx_b: Context) -> list[tuple[str, str]]:
    """Which model of A is compared with which of B; raises UsageError when that is ambiguous."""
    common = [model for model in ctx_a.models if model in ctx_b.models]
    if common:
        return [(model, model) for model in common]
    if len(ctx_a.models) == 1 and len(ctx_b.models) == 1:
        return [(ctx_a.models[0], ctx_b.models[0])]
    raise UsageError(f"A and B share no model (A: {', '.join(ctx_a.models)}; B: {', '.join(ctx_b.models)}); "
                     "pass --models with one model present in both")


def _same_turns(ctx_a: Context, ctx_b: Context) -> None:
    if ctx_a.args.max_turns != ctx_b.args.max_turns:
        raise UsageError(f"A was run with max-turn {ctx_a.args.max_turns} and B with {ctx_b.args.max_turns}; pass "
                         "--max-turn N to compare Recall@N of both")


def _rows(pairs: list[tuple[str, str]], runs_a: dict[str, list[LevelSummary]],
          runs_b: dict[str, list[LevelSummary]], metric: Metric, options: dict[str, int]) -> list[list]:
    rows = []
    for model_a, model_b in pairs:
        by_level_b = {s.level: s for s in runs_b[model_b]}
        label = model_a if model_a == model_b else f"{model_a} vs {model_b}"
        for summary in runs_a[model_a]:
            if summary.level in by_level_b:
                comparison = paired_comparison(summary.per_task, by_level_b[summary.level].per_task,
                                               binary=metric.binary, **options)
                rows.append(comparison_row([label, f"L{summary.level}"], comparison))
    return rows


def section_tables(name: str, ctx_a: Context, ctx_b: Context) -> list[Table]:
    """One table per metric: every (model, level) present in both folders, A against B."""
    _same_turns(ctx_a, ctx_b)
    pairs = model_pairs(ctx_a, ctx_b)
    tables = []
    for metric, metric_b in zip(metrics_of(ctx_a), metrics_of(ctx_b)):
        all_a, all_b = ctx_a.summaries(metric.score), ctx_b.summaries(metric_b.score)
        runs_a, runs_b = {a: all_a[a] for a, _ in pairs}, {b: all_b[b] for _, b in pairs}
        rows = _rows(pairs, runs_a, runs_b, metric, bootstrap_options(ctx_a.args))
        notes = pair_notes(rows, metric.binary, ctx_a.args) if rows else ["no level has results in both folders"]
        notes += [f"A: {note}" for note in coverage_notes([s for runs in runs_a.values() for s in runs])]
        notes += [f"B: {note}" for note in coverage_notes([s for runs in runs_b.values() for s in runs])]
        tables.append(Table(f"{name}A vs B: {metric.title}", ["model", "level"] + PAIR_COLUMNS, rows, notes,
                            100.0, 1))
    return tables


def compare_folders(args: argparse.Namespace, folder_a: str, folder_b: str) -> list[Table]:
    """The paired comparison tables of two result folders; raises UsageError when nothing can be paired."""
    sections_a, sections_b = contexts_of(args, folder_a), contexts_of(args, folder_b)
    shared = [key for key in sections_a if key in sections_b]
    if not shared:
        raise UsageError(f"A ({folder_a}) and B ({folder_b}) have no (setting, guidance type) in common: A has "
                         f"{_names(sections_a)}, B has {_names(sections_b)}")
    prefix = len(shared) > 1
    return [table for key in shared
            for table in section_tables(f"[{' · '.join(key)}] " if prefix else "", sections_a[key], sections_b[key])]


def _names(sections: dict[tuple[str, str], Context]) -> str:
    return ", ".join(" · ".join(key) for key in sections) or "none"
