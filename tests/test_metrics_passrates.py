"""Recall@n, test-case pass rate and MRR on hand-built results whose values are computed by hand.

Level 0 holds (test cases per task in the meta file in brackets):
- task 1 [4]: turn 0 fails 2 of 4, turn 1 passes              -> solved at 1, rates 0.5, 1.0
- task 2 [4]: an error (zeroes the turn), 1 failure, 1 skipped -> never solved, rates 0, 0.75, 0.75
- task 3 [2]: passes at turn 0 and stops                       -> solved at 0, rate 1.0
- task 6 [3]: 5 parametrized tests, 1 failure                  -> unsolved, 4/3 clamped to 1.0
- task 4 has no result file, task 5 a corrupt one.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.metrics_helpers import MODEL, passed, turn, write_dataset, write_result
import metric_MRR
import metric_passrate_testcase as testcase
import metric_passrate_unitest as unitest

TASKS = [1, 2, 3, 4, 5, 6]


@pytest.fixture()
def results(tmp_path: Path) -> dict:
    dataset = write_dataset(tmp_path / "ds", {1: 4, 2: 4, 3: 2, 4: 1, 5: 5, 6: 3, 7: 1}, not_runnable=(7,))
    result_dir = tmp_path / "res"
    write_result(result_dir, 0, 1, [turn(0, failures=2, status="failed"), passed(1)])
    write_result(result_dir, 0, 2, [turn(0, errors=1), turn(1, failures=1), turn(2, skipped=1, status="failed")])
    write_result(result_dir, 0, 3, [passed(0, tests=2)])
    write_result(result_dir, 0, 6, [turn(0, tests=5, failures=1, status="failed")])
    (result_dir / "memory_agent_org_model-a_feedback_fixed_guidance_0" / "task_5_result.pkl").write_bytes(b"\x80junk")
    return {"result_dir": result_dir, "dataset_dir": dataset, "levels": [0, 1]}


@pytest.mark.parametrize("execution_result, success", [
    ({"tests": 3, "errors": 0, "failures": 0, "skipped": 0}, True),
    ({"tests": 3, "errors": 0, "failures": 0, "skipped": 0, "status": "passed"}, True),
    ({"tests": 3, "errors": 0, "failures": 0, "skipped": 0, "status": "timeout"}, True),  # counts only
    ({"tests": 3, "errors": 0, "failures": 0, "skipped": 1}, False),
    ({"tests": 3, "errors": 1, "failures": 0, "skipped": 0}, False),
    ({"tests": 3, "errors": 0, "failures": 2, "skipped": 0}, False),
    ({"tests": 0, "errors": 0, "failures": 0, "skipped": 0}, False),
    ({}, False),
    (None, False),
])
def test_eval_success(execution_result: dict, success: bool) -> None:
    assert unitest.eval_success(execution_result) is success


def test_turn_status_other_than_passed_is_not_a_success() -> None:
    assert unitest.turn_success(turn(0)) is True
    assert unitest.turn_success(turn(0, status="infra_error")) is False
    assert unitest.turn_success(turn(0, execution_result={"tests": 3, "status": "timeout"})) is False


def test_runnable_ids_come_from_if_test(results: dict) -> None:
    assert unitest.load_task_ids_from_jsonl(results["dataset_dir"] / "annotation_meta.jsonl") == TASKS


def test_recall_counts_any_turn_and_skips_missing_and_corrupt(results: dict, capsys) -> None:
    assert unitest.get_model_passrates(MODEL, TASKS, **results) == [pytest.approx(0.5), None]
    assert "task_5_result.pkl" in capsys.readouterr().err


def test_recall_at_n_and_turn_zero(results: dict) -> None:
    assert unitest.get_model_passrates(MODEL, TASKS, **results, n=1) == [pytest.approx(0.25), None]
    assert unitest.get_init_model_passrates(MODEL, TASKS, **results) == [pytest.approx(0.25), None]


def test_cumulative_recall_keeps_early_stoppers_solved(results: dict) -> None:
    curves = unitest.get_model_passrates_turns(MODEL, TASKS, **results, max_turns=3)
    assert curves[0] == pytest.approx([0.25, 0.5, 0.5])
    assert curves[1] is None


def test_testcase_rate_best_turn_with_errors_zeroing_and_clamping(results: dict) -> None:
    assert testcase.get_model_passrates(MODEL, TASKS, **results) == [pytest.approx(3.75 / 4), None]
    assert testcase.get_init_model_passrates(MODEL, TASKS, **results) == [pytest.approx(2.5 / 4), None]


def test_testcase_curve_is_best_so_far_and_carried_forward(results: dict) -> None:
    curves = testcase.get_model_passrates_turn(MODEL, TASKS, **results, max_turns=4)
    assert curves[0] == pytest.approx([2.5 / 4, 3.75 / 4, 3.75 / 4, 3.75 / 4])


def test_testcase_turn_rate_formula() -> None:
    assert testcase.turn_rate(turn(0, tests=4, errors=1), 4) == 0.0
    assert testcase.turn_rate(turn(0, tests=4, failures=1, skipped=1), 4) == 0.5
    assert testcase.turn_rate(turn(0, tests=2), 4) == 0.5
    assert testcase.turn_rate(turn(0, tests=9), 4) == 1.0


def test_testcase_rate_needs_the_meta_file(results: dict) -> None:
    from task_meta import MetaError
    with pytest.raises(MetaError, match="meta file not found"):
        testcase.get_model_passrates(MODEL, TASKS, results["result_dir"], meta_path=results["result_dir"] / "x.jsonl")


def test_mrr(results: dict) -> None:
    assert metric_MRR.get_model_mmr(MODEL, TASKS, **results) == [pytest.approx((0.5 + 0 + 1 + 0) / 4), None]
    assert metric_MRR.get_init_model_mmr(MODEL, TASKS, **results) == [pytest.approx(0.25), None]


def test_other_settings_and_guidance_types_are_separate_runs(results: dict) -> None:
    assert unitest.get_model_passrates(MODEL, TASKS, results["result_dir"], setting="agent") == [None] * 5
    assert unitest.get_model_passrates(MODEL, TASKS, results["result_dir"], guidance_type="adaptive") == [None] * 5
