"""Unit-test pass rate (Recall@n): the share of tasks solved by a turn among the first n (docs/ARCHITECTURE.md, "Metrics").

Usage: python metrics/metric_passrate_unitest.py --output-dir DIR --model m1,m2 [--per-turn]
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import interval_tables
from interval_tables import interval_table, paired_table
from metric_aggregate import TaskScore, level_values
from metric_cli import Context, level_table, run_cli, turn_table
from metric_tables import Table, format_passrates
from junit_outcome import published_success, runner_solved
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_SETTING, LEVELS, RunSelection, execution, turn_status
from task_meta import DEFAULT_DATASET_DIR, load_task_ids_from_jsonl
from uncertainty import RESAMPLES, SEED, Interval, level_intervals

__all__ = [
    "eval_success",
    "first_success",
    "format_passrates",
    "get_init_model_passrates",
    "get_model_passrates",
    "get_model_passrates_ci",
    "get_model_passrates_turns",
    "get_pass_rates",
    "load_task_ids_from_jsonl",
    "turn_success",
]


def eval_success(execution_result: dict) -> bool:
    """The published success test: tests ran and none errored, failed or was skipped (counts only)."""
    return isinstance(execution_result, dict) and published_success(execution_result)


def turn_success(turn: dict) -> bool:
    """Published success whose runner status (when our harness recorded one) is "passed": the harness's stop rule."""
    return runner_solved({**execution(turn), "status": turn_status(turn)})


def first_success(turns: list[dict], limit: int | None = None) -> int | None:
    """0-based index of the first successful turn among the first ``limit`` turns (all when None)."""
    return next((i for i, turn in enumerate(turns[:limit]) if turn_success(turn)), None)


def solved_within(limit: int | None) -> TaskScore:
    return lambda task_id, turns: 1.0 if first_success(turns, limit) is not None else 0.0


def cumulative_solved(n_turns: int) -> TaskScore:
    """Per-turn 0/1 curve; once solved (the run then stops) the task stays solved for later turns."""

    def score(task_id: int, turns: list[dict]) -> list[float]:
        first = first_success(turns, n_turns)
        return [1.0 if first is not None and t >= first else 0.0 for t in range(n_turns)]

    return score


def get_model_passrates(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS, n: int | None = None,
) -> list[float | None]:
    """Recall@n per guidance level: share of tasks solved in any of the first n turns (all turns if None)."""
    return level_values(model, task_ids, solved_within(n), RunSelection(result_dir, setting, guidance_type, levels))


def get_init_model_passrates(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[float | None]:
    """Share of tasks solved at turn 0, per guidance level (levels share turn 0, so values should agree)."""
    return level_values(model, task_ids, solved_within(1), RunSelection(result_dir, setting, guidance_type, levels))


def get_model_passrates_turns(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS, max_turns: int = 10,
) -> list[list[float] | None]:
    """Per level, the cumulative Recall@(t+1) for t = 0..max_turns-1."""
    selection = RunSelection(result_dir, setting, guidance_type, levels)
    return level_values(model, task_ids, cumulative_solved(max_turns), selection)


def get_pass_rates(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE, levels: Iterable[int] = LEVELS,
    n: int | None = None,
) -> list[dict[int, float]]:
    """Per level, each scored task's 1.0 (solved within n turns) or 0.0: the values behind get_model_passrates."""
    selection = RunSelection(result_dir, setting, guidance_type, levels)
    return level_values(model, task_ids, solved_within(n), selection, per_task=True)


def get_model_passrates_ci(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE, levels: Iterable[int] = LEVELS,
    n: int | None = None, seed: int = SEED, resamples: int = RESAMPLES,
) -> list[Interval | None]:
    """Per level, Recall@n (``.value``, equal to get_model_passrates') with its 95 % bootstrap interval over tasks."""
    per_level = get_pass_rates(model, task_ids, result_dir, setting=setting, guidance_type=guidance_type,
                               levels=levels, n=n)
    return level_intervals(per_level, seed=seed, resamples=resamples)


def tables(ctx: Context) -> list[Table]:
    n = ctx.args.max_turns
    recall = solved_within(n)
    result = [
        level_table(ctx, f"Unit-test pass rate, Recall@{n} (% of tasks)", recall),
        level_table(ctx, "Unit-test pass rate at turn 0 (% of tasks)", solved_within(1)),
        interval_table(ctx, f"Recall@{n} with 95 % interval (% of tasks)", recall),
        paired_table(ctx, f"Recall@{n}, paired differences (points of % of tasks)", recall, binary=True),
    ]
    if ctx.args.per_turn:
        result.append(turn_table(ctx, "Cumulative unit-test pass rate by turn (% of tasks)", cumulative_solved(n)))
    return result


def main(argv: Iterable[str] | None = None) -> int:
    return run_cli(__doc__, tables, interval_tables.add_arguments, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
