"""Feedback that cannot be produced is an infrastructure failure: the job stops at that turn as an error
with the turn kept, the summary says why, the exit code is non-zero, and the next run asks again and continues."""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest

from agent.feedback.guidance import FeedbackPolicy
from agent.job.layout import Job, result_folder
from agent.job.results import ResultStore
from agent.job.workflow import run_task
from metrics.result_format import STOP_KEY
from metrics.run_status import FEEDBACK_MISSING
from tests.fake_providers import Reply, no_provider_env, openai_completion  # noqa: F401
from tests.fake_providers import FakeProvider
from tests.loop_config import make_config
from tests.run_support import REPO, run_cli, scripted_responder, write_config, write_scripts

pytestmark = pytest.mark.timeout(180)
RECORD = {"interface": "module", "category": "T2", "description": "Functions are missing.",
          "analysis": "Only a stub is defined.", "actionable_feedback": "Implement the described API.",
          "direct_code_feedback": "def f(x):\n    return x"}


def release_eval_success():
    """The release's notebook function, as a notebook imports it."""
    sys.path.insert(0, str(REPO / "metrics"))
    from metric_passrate_unitest import eval_success
    return eval_success


def not_json(request) -> Reply:
    return Reply(body=openai_completion("I think the code is fine."))


@pytest.mark.slow
def test_a_feedback_model_that_never_answers_in_the_schema_stops_the_job_and_a_rerun_continues(
        tmp_path: Path, no_provider_env) -> None:  # noqa: F811
    scripts = write_scripts(tmp_path / "scripts", {1: 1})
    out = tmp_path / "out"
    with FakeProvider("openai", scripted_responder(scripts[0])) as coder, FakeProvider("openai", not_json) as bad:
        keys = {"guidance-level": 2, "max-turn": 3, "task-ids": [1], "api-provider": "openai", "model": "gpt-5-mini",
                "base-url": coder.base_url, "human-api-provider": "openai", "human-agent-model": "gpt-5-mini",
                "human-base-url": bad.base_url}
        done = run_cli(write_config(tmp_path / "run.yaml", scripts, out, **keys))
        code_calls = len(coder.requests)
    assert done.returncode == 1, done.stderr
    assert "1 job(s) stopped because their feedback could not be produced" in done.stdout
    assert "feedback missing at turn 0: the feedback model gave no valid records in 3 attempts" in done.stdout
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith("gpt-5-mini"))
    assert row[2:6] == ["0/0", "1", "-", "-"]  # incomplete, not "unsolved at level 2"
    folder = out / "memory_agent_gpt-5-mini_feedback_fixed_guidance_2"
    turns = pickle.loads((folder / "task_1_result.pkl").read_bytes())
    assert len(turns) == 1 and turns[0][STOP_KEY] == FEEDBACK_MISSING and turns[0]["status"] == "failed"
    assert turns[0]["feedback_error"].startswith("the feedback model gave no valid records")
    assert len(turns[0]["feedback_usage"]) == 3  # the failed attempts are counted
    assert not release_eval_success()(turns[0]["execution_result"])
    state = json.loads((folder / "task_1_state.json").read_text())
    assert state["finished"] is False and state[STOP_KEY] == FEEDBACK_MISSING

    with FakeProvider("openai", scripted_responder(scripts[0])) as coder, \
            FakeProvider("openai", scripted_responder(scripts[1])) as good:
        keys.update({"base-url": coder.base_url, "human-base-url": good.base_url})
        again = run_cli(write_config(tmp_path / "run2.yaml", scripts, out, **{**keys, "resume": False}))
        assert again.returncode == 0, again.stderr
        assert len(good.requests) == 1  # turn 0's feedback asked again; turn 1 solves, so nothing more
        assert len(coder.requests) == 2  # turn 1 only (REPLACE, SUBMIT): turn 0 came from the seed
    assert code_calls == 2  # turn 0 (REPLACE, SUBMIT), made once
    turns = pickle.loads((folder / "task_1_result.pkl").read_bytes())
    assert [t["status"] for t in turns] == ["failed", "passed"]
    assert turns[0]["feedback_items"] == [RECORD] and turns[0][STOP_KEY] is None and turns[0]["feedback_text"]
    assert json.loads((folder / "task_1_state.json").read_text())[STOP_KEY] is None


@pytest.mark.slow
def test_a_file_source_without_the_turn_stops_there_and_continues_once_the_entry_exists(tmp_path: Path) -> None:
    feedback = tmp_path / "feedback.jsonl"
    feedback.write_text(json.dumps({"task_index": 3, "turn_number": 0, "feedback": [RECORD]}) + "\n")
    cfg = make_config(tmp_path, guidance_level=1, max_turn=4, feedback_source="file", feedback_file=str(feedback))
    job = Job(cfg.models[0], 1, 3)
    outcome = run_task(cfg, job)
    assert (outcome["state"], outcome[STOP_KEY], outcome["turns"]) == ("error", FEEDBACK_MISSING, 2)
    assert outcome["error"].startswith(f"feedback missing at turn 1: {feedback} has no entry for task 3 turn 1")
    store = ResultStore(result_folder(cfg, cfg.models[0], 1), 3)
    first = store.load()
    assert [t[STOP_KEY] for t in first] == [None, FEEDBACK_MISSING] and first[1]["feedback_items"] == []

    with feedback.open("a") as handle:
        handle.write(json.dumps({"task_index": 3, "turn_number": 1, "feedback": [RECORD]}) + "\n")
        handle.write(json.dumps({"task_index": 3, "turn_number": 2, "feedback": [RECORD]}) + "\n")
    cfg = make_config(tmp_path, guidance_level=1, max_turn=4, feedback_source="file", feedback_file=str(feedback))
    again = run_task(cfg, job)
    assert again["state"] == "finished" and again[STOP_KEY] is None and again["turns"] == 4
    turns = store.load()
    assert [t["final_code"] for t in turns[:2]] == [t["final_code"] for t in first]  # nothing recomputed
    assert turns[1]["feedback_items"] == [RECORD] and turns[1][STOP_KEY] is None and turns[1]["feedback_text"]


@pytest.mark.parametrize("levels, kind, ceiling, turns, needs", [
    ((0,), "fixed", 4, 10, False), ((0,), "dynamic", 4, 10, True), ((0,), "dynamic", 0, 10, False),
    ((2,), "fixed", 4, 1, False), ((0, 3), "fixed", 4, 2, True),
])
def test_one_policy_decides_who_needs_a_feedback_model(levels, kind, ceiling, turns, needs) -> None:
    policy = FeedbackPolicy(levels, kind, ceiling, turns, "llm")
    assert policy.needs_feedback_model() is needs
    assert policy.seed_needs_feedback() is (turns > 1 and any(levels))  # turn 0 is at the start level
    assert not FeedbackPolicy(levels, kind, ceiling, turns, "file").needs_feedback_model()
    assert not FeedbackPolicy(levels, kind, ceiling, turns, "llm", replays_a_run=True).seed_needs_feedback()
    assert not policy.gives_feedback(3, True, 0) and not policy.gives_feedback(3, False, turns - 1)
