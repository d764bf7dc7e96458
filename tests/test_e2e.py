"""Whole runs through the CLI on the sample tasks: every parallel mode writes the same results, a local
OpenAI-compatible server works, a rerun costs nothing, and a sweep seeds each (model, task) once."""
from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import pytest
import yaml

from tests.fake_providers import FakeProvider
from tests.run_support import (
    SOLVE_AT, STANDARD_RUN, reference_results, results, run_cli, run_record, scripted_responder, write_config,
    write_scripts,
)

RUN = STANDARD_RUN
HAS_RAY = importlib.util.find_spec("ray") is not None


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> tuple[Path, Path]:
    return write_scripts(tmp_path_factory.mktemp("scripts"), SOLVE_AT)


@pytest.fixture
def reference(tmp_path_factory) -> dict:
    return reference_results(tmp_path_factory.getbasetemp())


@pytest.mark.slow
def test_reference_run_outcomes(reference: dict) -> None:
    assert len(reference) == 4
    task1 = reference["memory_agent_coder_feedback_fixed_guidance_2/task_1_result.pkl"]
    task2 = reference["memory_agent_coder_feedback_fixed_guidance_2/task_2_result.pkl"]
    assert [t["status"] for t in task1] == ["failed", "passed"]
    assert [t["status"] for t in task2] == ["failed", "failed", "failed"]
    assert task2[0]["feedback_text"] and not task2[-1]["feedback_text"]  # no feedback after the last turn
    level0 = reference["memory_agent_coder_feedback_fixed_guidance_0/task_2_result.pkl"]
    assert level0[0]["final_code"] == task2[0]["final_code"] and not level0[0]["feedback_text"]


@pytest.mark.parametrize("mode", ["threads", "processes", pytest.param(
    "ray", marks=pytest.mark.skipif(not HAS_RAY, reason="ray not installed (optional extra)"))])
@pytest.mark.slow
def test_every_mode_writes_the_same_results(tmp_path: Path, scripts, reference: dict, mode: str) -> None:
    done = run_cli(write_config(tmp_path / "run.yaml", scripts, tmp_path / "out", **RUN), "--parallel-mode", mode)
    assert done.returncode == 0, done.stderr
    assert results(tmp_path / "out") == reference
    assert run_record(tmp_path / "out")["seeds_computed"] == 2


def test_local_openai_server_run_then_rerun_makes_no_call(tmp_path: Path, scripts) -> None:
    with FakeProvider("openai", scripted_responder(scripts[0])) as coder, \
            FakeProvider("openai", scripted_responder(scripts[1])) as researcher:
        config = write_config(tmp_path / "run.yaml", scripts, tmp_path / "out", **{
            **RUN, "api-provider": "openai", "model": "gpt-5-mini", "base-url": coder.base_url,
            "human-api-provider": "openai", "human-agent-model": "gpt-5-mini", "human-base-url": researcher.base_url,
        })
        first = run_cli(config)
        assert first.returncode == 0, first.stderr
        calls = len(coder.requests) + len(researcher.requests)
        record = run_record(tmp_path / "out")
        assert calls > 0 and record["api_calls"] == calls and record["seeds_computed"] == 2
        assert sum(row["cost_usd"] for row in record["summary"]) > 0
        assert {(row["level"], row["solved"]) for row in record["summary"]} == {(0, 1), (2, 1)}

        again = run_cli(config)
        assert again.returncode == 0, again.stderr
        assert len(coder.requests) + len(researcher.requests) == calls
        rerun = run_record(tmp_path / "out")
        assert rerun["api_calls"] == 0 and rerun["seeds_computed"] == 0
        assert rerun["summary"] == [{**row, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
                                    for row in record["summary"]]


def test_sweep_of_two_models_and_five_levels(tmp_path: Path) -> None:
    scripts = write_scripts(tmp_path / "scripts", {1: 0})  # solved at turn 0: every level is its seed
    config = write_config(tmp_path / "run.yaml", scripts, tmp_path / "out", **{
        "model": ["coder-a", "coder-b"], "guidance-level": [0, 1, 2, 3, 4], "max-turn": 2, "task-ids": [1],
        "max-workers": 2})
    done = run_cli(config)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    folders = sorted(p.parent.name for p in out.glob("*/task_1_result.pkl"))
    assert folders == sorted(f"memory_agent_coder-{m}_feedback_fixed_guidance_{level}"
                             for m in "ab" for level in range(5))
    assert run_record(out)["seeds_computed"] == 2
    assert len(list((out / "init_seed").glob("*_task1_init.pkl"))) == 2
    for model in "ab":  # every level starts from the one seed: the same turn-0 attempt
        turn0 = {pickle.loads(p.read_bytes())[0]["code_interaction_history"][-1]["content"]
                 for p in out.glob(f"*coder-{model}_*/task_1_result.pkl")}
        assert len(turn0) == 1
    table = [line.split() for line in done.stdout.splitlines()]
    rows = [line for line in table if line and line[0] in ("coder-a", "coder-b")]
    assert [(r[0], r[1], r[2]) for r in rows] == [(f"coder-{m}", f"L{level}", "1/1") for m in "ab" for level in range(5)]
    assert table[0][:7] == ["model", "level", "solved", "(all)", "incomplete", "Recall@2", "(all)"]


def test_failing_jobs_are_reported_and_the_others_finish(tmp_path: Path) -> None:
    fine, _ = write_scripts(tmp_path / "fine", {2: 0})
    rules = yaml.safe_load(fine.read_text())
    rules["rules"].insert(2, {"when": r"`dpo/losses.py`[\s\S]*## Turn 0, step",  # task 1: no answer after turn 0
                              "responses": ["reflect: stub\naction: REPLACE\n```python\nx = 1\n```"]})
    rules["rules"].append({"when": "`optim/", "responses": ["unused"]})
    fine.write_text(yaml.safe_dump(rules))
    config = write_config(tmp_path / "run.yaml", (fine, tmp_path / "fine" / "feedback.yaml"), tmp_path / "out",
                          **{"guidance-level": 0, "max-turn": 2, "task-ids": [1, 2]})
    done = run_cli(config)
    assert done.returncode == 1
    assert "1 job(s) failed" in done.stderr and "Traceback" not in done.stderr
    assert "task 1 (L0, coder) failed: InferenceError: scripted model: no rule" in done.stderr
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith("coder"))
    assert row[2:4] == ["1/1", "1"]  # the failed job is incomplete, not unsolved
    record = run_record(tmp_path / "out")
    assert [(e["task_index"], e["error"].split(":")[0]) for e in record["errors"]] == [(1, "InferenceError")]
    assert len(results(tmp_path / "out")) == 2  # task 1 keeps its turn 0, task 2 finished
