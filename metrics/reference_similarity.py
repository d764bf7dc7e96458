"""Scoring a turn's file against the task's canonical.py with a text-similarity function.

Shared by CodeBLEU and CodeBERTScore. An empty candidate scores 0: CodeBLEU's
data-flow component would otherwise give an empty file 0.25.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from metric_aggregate import TaskScore, Unscored
from task_meta import read_canonical

Similarity = Callable[[str, str], float]


def reference_scorer(dataset_dir: Path | str, turn_index: int, similarity: Similarity) -> TaskScore:
    """Task score: ``similarity(candidate, canonical)`` for the turn at ``turn_index`` (-1 = last turn)."""

    def score(task_id: int, turns: list[dict]) -> float:
        turn = turns[turn_index]
        if "final_code" not in turn:
            raise Unscored("turn record has no final_code")
        reference = read_canonical(dataset_dir, task_id)
        if reference is None:
            raise Unscored(f"canonical.py not found under {dataset_dir}")
        candidate = turn["final_code"] or ""
        if not isinstance(candidate, str):
            raise Unscored("final_code is not text")
        return similarity(candidate, reference) if candidate.strip() else 0.0

    return score
