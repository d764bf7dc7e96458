"""Macro-averaging a per-task score over the tasks of a run, keeping count of what was skipped.

A metric is a *task score*: ``(task_id, turns) -> float | list[float]``. It
raises :class:`Unscored` when a loaded task cannot be scored (no reference
file, no test cases...). Every metric table and every ``get_*`` function of
the release API goes through :func:`summarize`, so the accounting is uniform.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Union

from result_files import LevelRun, RunSelection, load_runs

Score = Union[float, list]
TaskScore = Callable[[int, list], Score]


class Unscored(Exception):
    """A loaded task the metric cannot score; the message is the reason shown under the table."""


@dataclass
class LevelSummary:
    """A metric's macro average over one (model, level) run and the tasks behind it."""

    model: str
    level: int
    value: Score | None
    scored: int
    run: LevelRun
    unscored: dict[int, str] = field(default_factory=dict)
    per_task: dict[int, Score] = field(default_factory=dict)


def mean(values: list[Score]) -> Score | None:
    """Mean of scalars, or element-wise mean of equally long lists (per-turn curves); None if empty."""
    if not values:
        return None
    if isinstance(values[0], list):
        return [sum(column) / len(values) for column in zip(*values)]
    return sum(values) / len(values)


def summarize(run: LevelRun, task_score: TaskScore) -> LevelSummary:
    """Score every complete task of ``run`` and macro-average; unscorable tasks are set aside with a reason.

    Incomplete tasks (``LevelRun.incomplete``) count neither as solved nor as unsolved.
    """
    scores: dict[int, Score] = {}
    unscored: dict[int, str] = {}
    for task_id, turns in sorted(run.trajectories.items()):
        if task_id in run.incomplete:
            continue
        try:
            scores[task_id] = task_score(task_id, turns)
        except Unscored as exc:
            unscored[task_id] = str(exc)
    return LevelSummary(run.model, run.level, mean(list(scores.values())), len(scores), run, unscored, scores)


def evaluate(model: str, task_ids: Iterable[int], task_score: TaskScore, selection: RunSelection) -> list[LevelSummary]:
    """Load one model's runs for every level of ``selection`` and summarize each."""
    return [summarize(run, task_score) for run in load_runs(model, task_ids, selection)]


def level_values(model: str, task_ids: Iterable[int], task_score: TaskScore, selection: RunSelection, *,
                 per_task: bool = False) -> list:
    """The release API's return shape: one value per guidance level, the macro average (None = no task)
    or, with ``per_task``, the dict of task id -> score it averages."""
    summaries = evaluate(model, task_ids, task_score, selection)
    return [summary.per_task if per_task else summary.value for summary in summaries]


def incomplete_detail(incomplete: dict[int, str]) -> str:
    """``budget 1, feedback_missing 2``: how many incomplete tasks stopped for each reason."""
    counts: dict[str, int] = {}
    for reason in incomplete.values():
        counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(f"{reason} {count}" for reason, count in sorted(counts.items()))


def _issues(summary: LevelSummary) -> list[str]:
    """What keeps a run's value from resting on every requested task, one phrase each."""
    run = summary.run
    if not run.folder.is_dir():
        return [f"no results folder {run.folder}"]
    reasons = "; ".join(sorted(set(summary.unscored.values())))
    counted = [
        ("missing", len(run.missing), ""),
        ("corrupt", len(run.corrupt), " (named on stderr)"),
        ("unscored", len(summary.unscored), f" ({reasons})"),
        ("unfinished", len(run.unfinished), " (partial trajectories)"),
        ("incomplete", len(run.incomplete), f" ({incomplete_detail(run.incomplete)}; neither solved nor unsolved, "
                                            "rerun to complete)"),
    ]
    return [f"{label} {count}{detail}" for label, count, detail in counted if count]


def coverage_notes(summaries: list[LevelSummary]) -> list[str]:
    """One line per run whose value does not rest on every requested task, else one line saying all did."""
    notes = [f"{s.model} L{s.level}: {s.scored}/{s.run.requested} tasks used, " + ", ".join(issues)
             for s in summaries if (issues := _issues(s))]
    if not notes and summaries:
        notes.append(f"every cell uses all {summaries[0].run.requested} requested tasks")
    return notes
