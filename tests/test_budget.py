"""Spending caps against fake paid servers: jobs stop at a turn boundary as ``budget``, the run says so and
exits non-zero, a higher cap continues them, and an unknown cost is never taken as zero."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from agent.job.budget import Spend, job_spend, usage_spend
from metrics.result_format import STOP_KEY
from metrics.run_status import BUDGET
from tests.fake_providers import FakeProvider, FakeUsage, Reply, no_provider_env, openai_completion  # noqa: F401
from tests.run_support import run_cli, scripted_responder, write_config, write_scripts

pytestmark = pytest.mark.timeout(180)
# gpt-5-mini costs $0.25 / $2 per million tokens: 100k in + 10k out = $0.045 per call.
BIG = FakeUsage(100_000, 10_000)


def priced(script: Path):
    """The scripted answers, each billed as a big call."""
    inner = scripted_responder(script)

    def respond(request) -> Reply:
        body = inner(request).body
        return Reply(body=openai_completion(body["choices"][0]["message"]["content"], BIG))
    return respond


def run(tmp_path: Path, scripts, out: Path, name: str, **keys) -> tuple:
    with FakeProvider("openai", priced(scripts[0])) as coder:
        config = write_config(tmp_path / f"{name}.yaml", scripts, out, **{
            "guidance-level": 0, "max-turn": 4, "task-ids": [1, 2], "api-provider": "openai", "model": "gpt-5-mini",
            "base-url": coder.base_url, "parallel-mode": "none", **keys})
        done = run_cli(config)
    return done, sum("Summarise the history" not in r.last_user_text for r in coder.requests)


def turns_of(out: Path, task: int) -> list[dict]:
    return pickle.loads((out / "memory_agent_gpt-5-mini_feedback_fixed_guidance_0" /
                         f"task_{task}_result.pkl").read_bytes())


@pytest.mark.slow
def test_task_cap_stops_each_job_at_a_turn_boundary_and_a_higher_cap_continues(
        tmp_path: Path, no_provider_env) -> None:  # noqa: F811
    scripts = write_scripts(tmp_path / "scripts", {1: 3, 2: None})
    out = tmp_path / "out"
    done, calls = run(tmp_path, scripts, out, "low", **{"max-task-cost-usd": 0.1})
    assert done.returncode == 3, done.stderr
    assert "2 job(s) stopped at the budget (a higher cap continues them):" in done.stdout
    assert "max-task-cost-usd $0.1 reached: this task spent $0.1800" in done.stdout
    assert "raise max-cost-usd / max-task-cost-usd" in done.stderr
    for task in (1, 2):
        turns = turns_of(out, task)
        assert len(turns) == 2 and turns[-1][STOP_KEY] == BUDGET  # 2 turns x 2 calls x $0.045 passes $0.1
        state = json.loads((out / "memory_agent_gpt-5-mini_feedback_fixed_guidance_0" /
                            f"task_{task}_state.json").read_text())
        assert state["finished"] is False and state[STOP_KEY] == BUDGET
    assert calls == 8

    same, calls = run(tmp_path, scripts, out, "same", **{"max-task-cost-usd": 0.1})
    assert same.returncode == 3 and calls == 0  # still over the cap: nothing more is spent

    higher, calls = run(tmp_path, scripts, out, "higher", **{"max-task-cost-usd": 10})
    assert higher.returncode == 0, higher.stderr
    assert [t["status"] for t in turns_of(out, 1)] == ["failed", "failed", "failed", "passed"]
    assert len(turns_of(out, 2)) == 4 and all(t[STOP_KEY] is None for t in turns_of(out, 2))
    assert calls == 8  # the steps of turns 2 and 3 of both tasks (memory summaries aside): nothing recomputed


@pytest.mark.slow
def test_run_cap_covers_all_jobs_and_earlier_invocations(tmp_path: Path, no_provider_env) -> None:  # noqa: F811
    scripts = write_scripts(tmp_path / "scripts", {1: None, 2: None})
    out = tmp_path / "out"
    done, calls = run(tmp_path, scripts, out, "run", **{"max-cost-usd": 0.2})
    assert done.returncode == 3, done.stderr
    assert "stopped at the budget" in done.stdout and "max-cost-usd $0.2 reached: the run spent $0.2" in done.stdout
    assert calls == 6  # task 1: turns 0 and 1 ($0.18); task 2: turn 0 reaches $0.27, then both stop
    ledger = json.loads((out / "cost_ledger.json").read_text())
    assert round(sum(e["usd"] for e in ledger.values()), 4) == 0.27 and all(e["unknown"] == 0 for e in ledger.values())
    again, calls = run(tmp_path, scripts, out, "again", **{"max-cost-usd": 0.2})
    assert again.returncode == 3 and calls == 0


def test_a_cap_with_a_model_of_unknown_price_is_refused_before_any_call(tmp_path: Path, no_provider_env) -> None:  # noqa: F811
    scripts = write_scripts(tmp_path / "scripts", {1: 0})
    done, calls = run(tmp_path, scripts, tmp_path / "out", "unpriced", model="house-model-7",
                      **{"max-cost-usd": 5, "task-ids": [1]})
    assert done.returncode == 2 and calls == 0
    assert done.stderr.strip().splitlines() == [
        "error: max-cost-usd/max-task-cost-usd need the price of model 'house-model-7', which the price table lacks; "
        "add it to config/prices.yaml (or the file 'prices' names)"]


def test_an_unknown_cost_is_never_zero() -> None:
    usage = [{"cost_usd": 0.5}, {"cost_usd": None}, {"cost_usd": 0.0, "from_cache": True}]
    assert usage_spend(usage) == Spend(0.5, 1)
    assert Spend(0.0, 1).reaches(100.0) and not Spend(0.5, 0).reaches(1.0) and Spend(1.0, 0).reaches(1.0)
    assert Spend(0.5, 2).text() == "$0.5000 + 2 call(s) of unknown cost"
    turn0 = {"turn_number": 0, "code_usage": [{"cost_usd": 1.0}], "feedback_usage": [{"cost_usd": 2.0}],
             "feedback_source": "seed"}
    turn1 = {"turn_number": 1, "code_usage": [{"cost_usd": 4.0}], "feedback_usage": [], "feedback_source": "llm"}
    assert job_spend([turn0, turn1]) == Spend(7.0, 0)
    assert job_spend([turn0, turn1], without_seed=True) == Spend(4.0, 0)  # the seed is counted under its own entry
