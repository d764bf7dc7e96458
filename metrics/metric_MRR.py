"""Mean reciprocal rank of the first successful turn: 1/(i+1) for 0-based turn i, else 0 (docs/ARCHITECTURE.md, "Metrics").

Usage: python metrics/metric_MRR.py --output-dir DIR --model m1,m2
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import interval_tables
from interval_tables import interval_table
from metric_aggregate import TaskScore, level_values
from metric_cli import Context, level_table, run_cli
from metric_passrate_unitest import eval_success, first_success
from metric_tables import Table, format_passrates
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_SETTING, LEVELS, RunSelection
from task_meta import DEFAULT_DATASET_DIR, load_task_ids_from_jsonl
from uncertainty import RESAMPLES, SEED, Interval, level_intervals

__all__ = ["eval_success", "format_passrates", "get_init_model_mmr", "get_model_mmr", "get_model_mmr_ci",
           "load_task_ids_from_jsonl"]


def reciprocal_rank(limit: int | None = None) -> TaskScore:
    """Task score: 1/(i+1) for the first successful turn i among the first ``limit`` turns, else 0."""

    def score(task_id: int, turns: list[dict]) -> float:
        first = first_success(turns, limit)
        return 0.0 if first is None else 1.0 / (first + 1)

    return score


def get_model_mmr(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[float | None]:
    """MRR over all turns, per guidance level."""
    return level_values(model, task_ids, reciprocal_rank(), RunSelection(result_dir, setting, guidance_type, levels))


def get_init_model_mmr(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[float | None]:
    """MRR counting turn 0 only (equals the turn-0 pass rate), per guidance level."""
    return level_values(model, task_ids, reciprocal_rank(1), RunSelection(result_dir, setting, guidance_type, levels))


def get_model_mmr_ci(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE, levels: Iterable[int] = LEVELS,
    seed: int = SEED, resamples: int = RESAMPLES,
) -> list[Interval | None]:
    """Per level, MRR over all turns (``.value``, equal to get_model_mmr's) with its 95 % bootstrap interval."""
    selection = RunSelection(result_dir, setting, guidance_type, levels)
    per_level = level_values(model, task_ids, reciprocal_rank(), selection, per_task=True)
    return level_intervals(per_level, seed=seed, resamples=resamples)


def tables(ctx: Context) -> list[Table]:
    title = f"MRR of the first passing turn (first {ctx.args.max_turns} turns)"
    score = reciprocal_rank(ctx.args.max_turns)
    return [level_table(ctx, title, score, scale=1.0, digits=3),
            interval_table(ctx, f"{title}, with 95 % interval", score, scale=1.0, digits=3)]


def main(argv: Iterable[str] | None = None) -> int:
    return run_cli(__doc__, tables, interval_tables.add_arguments, argv=argv, turn_options=("--max-turn",))


if __name__ == "__main__":
    sys.exit(main())
