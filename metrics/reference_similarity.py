"""Scoring a turn's file against the task's canonical.py with a text-similarity function.

Shared by CodeBLEU and CodeBERTScore. An empty candidate scores 0: CodeBLEU's
data-flow component would otherwise give an empty file 0.25.
"""
from __future__ import annotations

import io
import tokenize
from collections.abc import Callable, Iterable
from pathlib import Path

from metric_aggregate import TaskScore, Unscored, level_values
from metric_cli import Context, level_table
from metric_tables import Table
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_SETTING, LEVELS, RunSelection
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


def remove_codecomments(code: str) -> str:
    """The code without its ``#`` comments; lines that held only a comment are dropped.

    Code that does not tokenize (generated code may be broken) loses only its whole-line comments.
    """
    lines = code.splitlines()
    try:
        comments = [token.start for token in tokenize.generate_tokens(io.StringIO(code).readline)
                    if token.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        comments = [(row, line.index("#")) for row, line in enumerate(lines, start=1) if line.lstrip().startswith("#")]
    cut = dict(comments)
    kept = []
    for row, line in enumerate(lines, start=1):
        if row not in cut:
            kept.append(line)
        elif line[:cut[row]].strip():
            kept.append(line[:cut[row]].rstrip())
    return "\n".join(kept) + ("\n" if code.endswith("\n") and kept else "")


def _final_code_is_empty(task_id: int, turns: list[dict]) -> float:
    return 0.0 if (turns[-1].get("final_code") or "").strip() else 1.0


def get_empty_filal_code(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE, levels: Iterable[int] = LEVELS,
) -> list[list[int]]:
    """Per guidance level, the tasks whose last turn left an empty file (they score 0 against canonical.py)."""
    selection = RunSelection(result_dir, setting, guidance_type, levels)
    per_level = level_values(model, task_ids, _final_code_is_empty, selection, per_task=True)
    return [[task_id for task_id, empty in scores.items() if empty] for scores in per_level]
