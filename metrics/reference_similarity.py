"""Scoring a turn's file against the task's canonical.py with a text-similarity function.

Shared by CodeBLEU and CodeBERTScore. An empty candidate scores 0: CodeBLEU's
data-flow component would otherwise give an empty file 0.25.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from metric_aggregate import TaskScore, Unscored
from metric_cli import Context, level_table
from metric_tables import Table
from task_meta import canonical_text

Similarity = Callable[[str, str], float]


def reference_scorer(dataset_dir: Path | str, turn_index: int, similarity: Similarity) -> TaskScore:
    """Task score: ``similarity(candidate, canonical)`` for the turn at ``turn_index`` (-1 = last turn)."""

    def score(task_id: int, turns: list[dict]) -> float:
        turn = turns[turn_index]
        if "final_code" not in turn:
            raise Unscored("turn record has no final_code")
        reference = canonical_text(dataset_dir, task_id)
        if reference is None:
            raise Unscored(f"canonical.py not found under {dataset_dir}")
        candidate = turn["final_code"] or ""
        if not isinstance(candidate, str):
            raise Unscored("final_code is not text")
        return similarity(candidate, reference) if candidate.strip() else 0.0

    return score


def reference_tables(ctx: Context, name: str, similarity: Similarity) -> list[Table]:
    """The two tables of a similarity metric: last turn and turn 0 against canonical.py."""
    return [
        level_table(ctx, f"{name} of {label} vs canonical.py", reference_scorer(ctx.dataset_dir, index, similarity),
                    scale=1.0, digits=3)
        for label, index in (("the last turn", -1), ("turn 0", 0))
    ]
