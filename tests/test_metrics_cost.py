"""Cost and effort: tokens by kind and role, dollars, turns, wall time, infra errors, shared turn 0."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.metrics_helpers import MODEL, run_dir, turn, write_dataset, write_result
import metric_cost


def usage(inp: int, out: int, cached: int, cost: float | None) -> dict:
    return {"provider": "openai", "model": "m", "input_tokens": inp, "output_tokens": out, "cached_tokens": cached,
            "reasoning_tokens": 0, "latency_sec": 1.0, "cost_usd": cost, "from_cache": False}


def ours(number: int, code: list, feedback: list, wall: float, **extra: object) -> dict:
    """A turn as our run writes it: usage lists, per-role cost (None when any call is unpriced)."""
    def cost(calls: list) -> float | None:
        prices = [call["cost_usd"] for call in calls]
        return None if None in prices else float(sum(prices))
    return turn(number, code_usage=code, feedback_usage=feedback, code_cost_usd=cost(code),
                feedback_cost_usd=cost(feedback), wall_time_sec=wall, **extra)


TURN0_CODE = [usage(100, 10, 20, 0.10)]
TURN0_FEEDBACK = [usage(50, 5, 0, 0.05)]


@pytest.fixture()
def result_dir(tmp_path: Path) -> Path:
    """L0: task 1 (ours, 2 turns), task 2 (release keys only). L1: task 1 (turn 0 + feedback), task 3 infra error."""
    result_dir = tmp_path / "res"
    write_result(result_dir, 0, 1, [ours(0, TURN0_CODE, [], 10.0, status="failed"),
                                    ours(1, [usage(200, 20, 0, 0.20)], [], 20.0, status="passed")])
    write_result(result_dir, 0, 2, [turn(0)])  # release: 100 in / 10 out code, 50 / 5 feedback, no price
    write_result(result_dir, 1, 1, [ours(0, TURN0_CODE, TURN0_FEEDBACK, 10.0, status="failed"),
                                    ours(1, [usage(300, 30, 5, None)], [], 30.0, status="passed")])
    (run_dir(result_dir, 1) / "task_3_state.json").write_text(
        json.dumps({"finished": False, "error": "InfraError: task 3 turn 0: the tests could not run"}))
    return result_dir


def test_per_level_totals(result_dir: Path) -> None:
    level0, level1 = metric_cost.get_model_costs(MODEL, [1, 2, 3], result_dir, levels=[0, 1])
    assert level0["tasks"] == 2 and level0["turns"] == 3
    assert (level0["code_input"], level0["code_output"], level0["code_cached"]) == (400, 40, 20)
    assert (level0["feedback_input"], level0["feedback_output"]) == (50, 5)
    assert level0["cost_usd"] == pytest.approx(0.30)
    assert level0["unpriced"] == 2  # the release turn: code and feedback without a price
    assert level0["wall_time_sec"] == 30.0 and level0["timed_turns"] == 2
    assert level0["infra_error_tasks"] == 0
    assert (level1["code_input"], level1["code_cached"], level1["feedback_input"]) == (400, 25, 50)
    assert level1["cost_usd"] == pytest.approx(0.15) and level1["unpriced"] == 1
    assert level1["infra_error_tasks"] == 1


def test_model_total_counts_the_shared_turn_zero_once(result_dir: Path) -> None:
    total = metric_cost.get_model_total_cost(MODEL, [1, 2, 3], result_dir, levels=[0, 1])
    # turn 0 of task 1 once (L1's record, which also holds the feedback), its later turns from both levels
    assert total["turns"] == 4 and total["tasks"] == 2
    assert total["code_input"] == 100 + 200 + 300 + 100
    assert total["feedback_input"] == 50 + 50
    assert total["cost_usd"] == pytest.approx(0.15 + 0.20)
    assert total["wall_time_sec"] == 60.0
    assert total["infra_error_tasks"] == 1


def test_cost_table(result_dir: Path, tmp_path: Path, capsys) -> None:
    dataset = write_dataset(tmp_path / "ds", {1: 1, 2: 1, 3: 1})
    args = ["--output-dir", str(result_dir), "--dataset-dir", str(dataset), "--guidance-level", "0,1", "--format", "json"]
    assert metric_cost.main(args) == 0
    (table,) = json.loads(capsys.readouterr().out)
    rows = {row[1]: dict(zip(table["columns"], row)) for row in table["rows"]}
    assert rows["L0"]["cost $"] == pytest.approx(0.30) and rows["L0"]["wall h"] == pytest.approx(30 / 3600)
    assert rows["L1"]["infra-error tasks"] == 1 and rows["all"]["turns"] == 4
    assert any("lower bound: 3 model calls or turns" in note for note in table["notes"])
    assert any("incomplete 1 (infra_error 1;" in note for note in table["notes"])


def test_release_only_results_have_no_price_and_no_time(tmp_path: Path) -> None:
    write_result(tmp_path / "res", 0, 1, [turn(0), turn(1)])
    (cost,) = metric_cost.get_model_costs(MODEL, [1], tmp_path / "res", levels=[0])
    row = metric_cost.cost_row("m", "L0", cost)
    assert row[metric_cost.COLUMNS.index("cost $")] is None
    assert row[metric_cost.COLUMNS.index("wall h")] is None
    assert row[metric_cost.COLUMNS.index("code in")] == 200
