"""Complexity of the canonical files, and statistics of the feedback the simulated researcher gave.

The release's file of this name computes the complexity statistics (lines,
functions, classes, a cyclomatic count from the AST). The feedback part reads
the ``feedback_items`` (raw records, docs/ARCHITECTURE.md, "Feedback records") and ``feedback_text`` (what the
agent was shown) of each turn; release results lack both and show "-".

Usage: python metrics/metric_huamfeedback.py --output-dir DIR --model m1,m2 [--dataset-dir D]
"""
from __future__ import annotations

import ast
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from metric_aggregate import LevelSummary, coverage_notes
from metric_cli import Context, run_cli
from metric_tables import Table
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_SETTING, LEVELS, RunSelection, load_runs
from task_meta import DEFAULT_DATASET_DIR, canonical_text

COMPLEXITY_STATS = ("lines", "code_lines", "functions", "classes", "cyclomatic")
CATEGORIES = ("T0", "T1", "T2", "T3", "T4")
FIELDS = ("interface", "description", "analysis", "actionable_feedback", "direct_code_feedback")
_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.Assert, ast.match_case)


def code_complexity(source: str) -> dict[str, int]:
    """Size and McCabe-style complexity (1 + decision points) of one Python file; SyntaxError if unparsable."""
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    decisions = sum(isinstance(node, _BRANCHES) for node in nodes)
    decisions += sum(len(node.values) - 1 for node in nodes if isinstance(node, ast.BoolOp))
    decisions += sum(1 + len(node.ifs) for node in nodes if isinstance(node, ast.comprehension))
    lines = source.splitlines()
    return {
        "lines": len(lines),
        "code_lines": sum(1 for line in lines if line.strip() and not line.strip().startswith("#")),
        "functions": sum(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for node in nodes),
        "classes": sum(isinstance(node, ast.ClassDef) for node in nodes),
        "cyclomatic": 1 + decisions,
    }


@dataclass
class ComplexityReport:
    per_task: dict[int, dict[str, int]] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)


def get_canonical_complexity(task_ids: Iterable[int], dataset_dir: Path | str = DEFAULT_DATASET_DIR) -> ComplexityReport:
    """Complexity of each task's canonical.py; tasks without a parsable file are skipped with a reason."""
    report = ComplexityReport()
    for task_id in task_ids:
        source = canonical_text(dataset_dir, task_id)
        if source is None:
            report.skipped[task_id] = "canonical.py not found"
            continue
        try:
            report.per_task[task_id] = code_complexity(source)
        except (SyntaxError, ValueError) as exc:
            report.skipped[task_id] = f"canonical.py does not parse ({exc})"
    return report


def describe(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, "min": None, "max": None, "total": None}
    return {"mean": statistics.fmean(values), "median": float(statistics.median(values)),
            "min": float(min(values)), "max": float(max(values)), "total": float(sum(values))}


def feedback_stats(trajectories: Iterable[list[dict]]) -> dict:
    """Feedback statistics over all turns that carry a non-empty ``feedback_items`` list.

    Returns ``feedback_turns``, ``items``, ``items_per_turn``, ``field_length``
    (mean characters per record field), ``shown_length`` (mean characters of
    ``feedback_text``) and ``categories`` (share of items per T0..T4, plus "other").
    """
    items: list[dict] = []
    shown: list[int] = []
    turns_with_feedback = 0
    for turns in trajectories:
        for turn in turns:
            records = turn.get("feedback_items")
            if not isinstance(records, list) or not records:
                continue
            turns_with_feedback += 1
            items += [record for record in records if isinstance(record, dict)]
            if isinstance(turn.get("feedback_text"), str):
                shown.append(len(turn["feedback_text"]))
    lengths = {name: [len(item[name]) for item in items if isinstance(item.get(name), str)] for name in FIELDS}
    counts = {name: sum(item.get("category") == name for item in items) for name in CATEGORIES}
    counts["other"] = len(items) - sum(counts.values())
    return {
        "feedback_turns": turns_with_feedback,
        "items": len(items),
        "items_per_turn": len(items) / turns_with_feedback if turns_with_feedback else None,
        "field_length": {name: statistics.fmean(v) if v else None for name, v in lengths.items()},
        "shown_length": statistics.fmean(shown) if shown else None,
        "categories": {name: count / len(items) if items else None for name, count in counts.items()},
    }


def get_model_feedback_stats(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[dict]:
    """:func:`feedback_stats` per guidance level."""
    runs = load_runs(model, task_ids, RunSelection(result_dir, setting, guidance_type, levels))
    return [feedback_stats(run.trajectories.values()) for run in runs]


def complexity_table(ctx: Context) -> Table:
    report = get_canonical_complexity(ctx.task_ids, ctx.dataset_dir)
    rows = []
    for stat in COMPLEXITY_STATS:
        summary = describe([task[stat] for task in report.per_task.values()])
        rows.append([stat] + list(summary.values()))
    notes = [f"{len(report.per_task)} of {len(ctx.task_ids)} canonical files measured"]
    notes += [f"task {task}: {reason}" for task, reason in sorted(report.skipped.items())]
    return Table("Complexity of the canonical files", ["statistic", "mean", "median", "min", "max", "total"],
                 rows, notes, digits=1)


def feedback_tables(ctx: Context) -> list[Table]:
    stats = {(model, run.level): feedback_stats(run.trajectories.values())
             for model in ctx.models for run in ctx.runs(model)}
    keys = [(model, level) for model in ctx.models for level in ctx.levels]
    items = Table("Feedback items per turn with feedback", ["model", "level", "feedback turns", "items", "items/turn"],
                  [[m, f"L{lv}", stats[m, lv]["feedback_turns"], stats[m, lv]["items"], stats[m, lv]["items_per_turn"]]
                   for m, lv in keys], digits=2)
    items.notes = coverage_notes([LevelSummary(run.model, run.level, None, len(run.trajectories), run)
                                  for model in ctx.models for run in ctx.runs(model)])
    if not any(s["items"] for s in stats.values()):
        items.notes.append("no feedback_items in these results (release pickles do not record them)")
    mix = Table("Feedback category mix (% of items)", ["model", "level", *CATEGORIES, "other"],
                [[m, f"L{lv}", *stats[m, lv]["categories"].values()] for m, lv in keys], scale=100.0, digits=1)
    length = Table("Feedback text length (mean characters)", ["model", "level", *FIELDS, "shown text"],
                   [[m, f"L{lv}", *stats[m, lv]["field_length"].values(), stats[m, lv]["shown_length"]]
                    for m, lv in keys], digits=0)
    return [items, mix, length]


def tables(ctx: Context) -> list[Table]:
    return [complexity_table(ctx), *feedback_tables(ctx)]


def main(argv: Iterable[str] | None = None) -> int:
    return run_cli(__doc__, tables, argv=argv, turn_options=())


if __name__ == "__main__":
    sys.exit(main())
