"""Test-case pass rate, the primary metric (docs/ARCHITECTURE.md, "Metrics").

Per turn ``0 if errors else tests - skipped - failures`` over len(test_cases)
of the meta file, clamped to [0, 1]; per task the best turn; macro-averaged.

Usage: python metrics/metric_passrate_testcase.py --output-dir DIR --model m1,m2 [--per-turn]
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import interval_tables
from interval_tables import interval_table, paired_table
from metric_aggregate import TaskScore, Unscored, level_values
from metric_cli import Context, level_table, run_cli, turn_table
from metric_tables import Table
from junit_outcome import case_pass_rate, passed_cases
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_SETTING, LEVELS, RunSelection, execution
from task_meta import DEFAULT_DATASET_DIR, count_test_cases, load_task_ids_from_jsonl, meta_path_for
from uncertainty import RESAMPLES, SEED, Interval, level_intervals

__all__ = [
    "get_init_model_passrates",
    "get_model_passrates",
    "get_model_passrates_ci",
    "get_model_passrates_turn",
    "get_pass_num",
    "get_task_passrates",
    "get_test_case_num",
    "load_task_ids_from_jsonl",
]


def get_test_case_num(task_id: int, mate_data_path: Path | str | None = None) -> int:
    """len(test_cases) of a task in the meta file (default ``work_dir/dataset/annotation_meta.jsonl``).

    A task the file does not list raises KeyError naming it.
    """
    cases = count_test_cases(meta_path_for(meta_path=mate_data_path))
    if task_id not in cases:
        raise KeyError(f"task {task_id} is not in {meta_path_for(meta_path=mate_data_path)}")
    return cases[task_id]


def get_pass_num(exec_result: dict) -> int:
    """Test cases one execution_result passed: 0 if anything errored, else tests - skipped - failures."""
    return passed_cases(exec_result)


def turn_rate(turn: dict, n_cases: int) -> float:
    """Share of the task's test cases this turn passed; a turn with errors passes none."""
    return case_pass_rate(execution(turn), n_cases)


def _rates(task_id: int, turns: list[dict], cases: dict[int, int], limit: int | None) -> list[float]:
    n_cases = cases.get(task_id)
    if n_cases is None:
        raise Unscored("task not in the meta file")
    if n_cases == 0:
        raise Unscored("no test_cases in the meta file")
    return [turn_rate(turn, n_cases) for turn in turns[:limit]]


def best_rate(cases: dict[int, int], limit: int | None = None) -> TaskScore:
    """Task score: the best turn's rate among the first ``limit`` turns (all when None)."""
    return lambda task_id, turns: max(_rates(task_id, turns, cases, limit))


def best_so_far(cases: dict[int, int], n_turns: int) -> TaskScore:
    """Task score: best rate up to each turn; a run that stopped early keeps its last best value."""

    def score(task_id: int, turns: list[dict]) -> list[float]:
        curve: list[float] = []
        for rate in _rates(task_id, turns, cases, n_turns):
            curve.append(max(rate, curve[-1]) if curve else rate)
        return curve + [curve[-1]] * (n_turns - len(curve))

    return score


def get_model_passrates(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[float | None]:
    """Macro-averaged best test-case pass rate per guidance level."""
    cases = count_test_cases(meta_path_for(dataset_dir, meta_path))
    return level_values(model, task_ids, best_rate(cases), RunSelection(result_dir, setting, guidance_type, levels))


def get_init_model_passrates(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[float | None]:
    """Macro-averaged test-case pass rate of turn 0 per guidance level."""
    cases = count_test_cases(meta_path_for(dataset_dir, meta_path))
    return level_values(model, task_ids, best_rate(cases, 1), RunSelection(result_dir, setting, guidance_type, levels))


def get_model_passrates_turn(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS, max_turns: int = 10,
) -> list[list[float] | None]:
    """Per level, the macro-averaged best-so-far test-case pass rate at each turn 0..max_turns-1."""
    cases = count_test_cases(meta_path_for(dataset_dir, meta_path))
    selection = RunSelection(result_dir, setting, guidance_type, levels)
    return level_values(model, task_ids, best_so_far(cases, max_turns), selection)


def get_task_passrates(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[dict[int, float]]:
    """Per level, each scored task's best test-case pass rate: the values get_model_passrates averages."""
    cases = count_test_cases(meta_path_for(dataset_dir, meta_path))
    selection = RunSelection(result_dir, setting, guidance_type, levels)
    return level_values(model, task_ids, best_rate(cases), selection, per_task=True)


def get_model_passrates_ci(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS, seed: int = SEED,
    resamples: int = RESAMPLES,
) -> list[Interval | None]:
    """Per level, the test-case pass rate (``.value``, equal to get_model_passrates') with its 95 % bootstrap
    interval over tasks."""
    per_level = get_task_passrates(model, task_ids, result_dir, meta_path=meta_path, setting=setting,
                                   guidance_type=guidance_type, dataset_dir=dataset_dir, levels=levels)
    return level_intervals(per_level, seed=seed, resamples=resamples)


def tables(ctx: Context) -> list[Table]:
    cases = count_test_cases(ctx.meta_path)
    best = best_rate(cases, ctx.args.max_turns)
    result = [
        level_table(ctx, "Test-case pass rate, best turn (% of test cases)", best),
        level_table(ctx, "Test-case pass rate at turn 0 (% of test cases)", best_rate(cases, 1)),
        interval_table(ctx, "Test-case pass rate, best turn, with 95 % interval (% of test cases)", best),
        paired_table(ctx, "Test-case pass rate, best turn, paired differences (points of % of test cases)", best,
                     binary=False),
    ]
    if ctx.args.per_turn:
        curve = best_so_far(cases, ctx.args.max_turns)
        result.append(turn_table(ctx, "Test-case pass rate, best so far by turn (% of test cases)", curve))
    return result


def main(argv: Iterable[str] | None = None) -> int:
    return run_cli(__doc__, tables, interval_tables.add_arguments, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
