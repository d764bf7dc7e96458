"""What a run does with a provider's failures (docs/failures.md), with the real main command run in this process
and a model double that raises the model layer's RunFatal / RequestFatal or returns its truncated answers:
a run-fatal error stops the whole run (no further calls, resumable, the last line names it), a request refused
as sent is never resent under the same settings, answers that ended short of complete are recorded and, in
protocol improved, never applied; ``on-tampered: stop`` ends a job at its tampered turn."""
from __future__ import annotations

import json
import re
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pytest

import agent.job.parts
from agent.task.dataset import DatasetManager
from agent.models.types import Completion, ModelSpec, RequestFatal, RunFatal, Stop
from agent.research_code_generation import EXIT_RUN_FATAL, main
from tests.run_support import (
    DATASET, SOLVE_AT, STANDARD_RUN, reference_results, results, run_record, write_config, write_scripts,
)

QUOTA_LINE = "OpenAI says the quota is exhausted (insufficient_quota): add credits, then run the same command again"
Rule = Callable[[ModelSpec, list[dict], int], "Exception | Stop | None"]


class Faults:
    """Every model call of a run, counted; ``rule(spec, messages, n)`` may raise an error or stamp a stop."""

    def __init__(self, rule: Rule | None = None) -> None:
        self.rule = rule
        self.calls: list[tuple[str, str]] = []  # (model, last user message)
        self.first_error: int | None = None
        self.lock = threading.Lock()

    def wrap(self, build: Callable) -> Callable:
        def built(spec: ModelSpec, **kwargs):
            return FaultyModel(build(spec, **kwargs), spec, self)
        return built

    def after_first_error(self) -> int:
        return 0 if self.first_error is None else len(self.calls) - self.first_error - 1


class FaultyModel:
    def __init__(self, model, spec: ModelSpec, faults: Faults) -> None:
        self.model, self.spec, self.faults = model, spec, faults

    def complete(self, messages: list[dict], *, response_schema: dict | None = None) -> Completion:
        faults = self.faults
        with faults.lock:
            number = len(faults.calls)
            faults.calls.append((self.spec.model, messages[-1]["content"]))
        action = faults.rule(self.spec, messages, number) if faults.rule else None
        if isinstance(action, Exception):
            with faults.lock:
                faults.first_error = number if faults.first_error is None else faults.first_error
            raise action
        completion = self.model.complete(messages, response_schema=response_schema)
        return replace(completion, stop=action) if isinstance(action, Stop) else completion


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Faults:
    monkeypatch.setenv("RECODE_ENV_BACKEND", "current")
    found = Faults()
    monkeypatch.setattr(agent.job.parts, "build_model", found.wrap(agent.job.parts.build_model))
    return found


@pytest.fixture
def reference(tmp_path_factory) -> dict:
    return reference_results(tmp_path_factory.getbasetemp())


def run(config: Path, capsys: pytest.CaptureFixture, *flags: str) -> tuple[int, str, str]:
    code = main(["--yaml-location", str(config), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def quota_from(call: int) -> Rule:
    """The quota runs out at call ``call``: that call and every later one is refused (a real quota stays gone)."""
    def rule(spec: ModelSpec, messages: list[dict], number: int):
        return RunFatal("OpenAI", "insufficient_quota", "the quota is exhausted",
                        "add credits, then run the same command again") if number >= call else None
    return rule


@pytest.mark.parametrize("mode", [pytest.param("none", marks=pytest.mark.slow), "threads",
                                  pytest.param("processes", marks=pytest.mark.slow)])
def test_a_run_fatal_error_stops_the_run_and_the_rerun_completes_it(
        tmp_path: Path, faults: Faults, capsys: pytest.CaptureFixture, reference: dict, mode: str) -> None:
    scripts = write_scripts(tmp_path / "scripts", SOLVE_AT)
    out = tmp_path / "out dir"
    config = write_config(tmp_path / "run.yaml", scripts, out, **{**STANDARD_RUN, "parallel-mode": mode})
    faults.rule = quota_from(5)
    code, stdout, stderr = run(config, capsys)
    assert code == EXIT_RUN_FATAL, stderr
    last = stderr.strip().splitlines()[-1]
    assert re.fullmatch(re.escape(QUOTA_LINE) + r"; (\d+) jobs remain", last), last
    remain = int(last.rsplit("; ", 1)[1].split()[0])
    assert 1 <= remain <= 4
    assert faults.after_first_error() <= STANDARD_RUN["max-workers"] - 1  # at most the calls in flight
    assert "Traceback" not in stderr
    saved = results(out)
    assert all(turns == reference[name][:len(turns)] for name, turns in saved.items())  # finished turns kept
    states = [json.loads(p.read_text()) for p in out.glob("*/task_*_state.json")]
    assert not any(s.get("error") for s in states)  # nothing is marked failed
    record = run_record(out)
    assert record["status"] == "stopped" and record["stopped_by"] == QUOTA_LINE and record["jobs_remaining"] == remain

    faults.rule = None  # credits added
    code, stdout, stderr = run(config, capsys)
    assert code == 0, stderr
    assert results(out) == reference


def _threaded_run(tmp_path: Path) -> tuple[tuple[Path, Path], Path, Path]:
    """The scripts, output folder and config of a standard run whose jobs run as threads (one faults server)."""
    scripts = write_scripts(tmp_path / "scripts", SOLVE_AT)
    out = tmp_path / "out"
    return scripts, out, write_config(tmp_path / "run.yaml", scripts, out,
                                      **{**STANDARD_RUN, "parallel-mode": "threads"})


def _task_2_prompt(turn: int) -> Callable[[str], bool]:
    """Whether a prompt is task 2's first step of ``turn``."""
    target = f"`{DatasetManager(DATASET).get(2).target_file_path}`"
    return lambda prompt: target in prompt and f"## Turn {turn}, step 1" in prompt


def test_a_request_refused_as_sent_stops_its_job_apart_and_is_not_resent(
        tmp_path: Path, faults: Faults, capsys: pytest.CaptureFixture) -> None:
    scripts, out, config = _threaded_run(tmp_path)
    too_long = _task_2_prompt(turn=1)

    faults.rule = lambda spec, messages, n: (RequestFatal("context_length", "OpenAI says the prompt is too long for "
                                                          "gpt-x (context_length_exceeded)")
                                             if spec.model == "coder" and too_long(messages[-1]["content"]) else None)
    code, stdout, stderr = run(config, capsys)
    assert code == 1, stderr
    refused_calls = [c for c in faults.calls if too_long(c[1])]
    assert len(refused_calls) == 2  # one per level (0 and 2), each sent once
    for level in (0, 2):
        state = json.loads(next(out.glob(f"*guidance_{level}/task_2_state.json")).read_text())
        assert state["stop_reason"] == "context_length" and state["refused"]["max_turn"] == 3
        assert "context_length" in state["error"]
    assert "2 job(s) stopped because the provider refuses their request as sent" in stdout
    assert "stopped: context/refused/tampered" in stdout
    assert "refuses" in stderr.strip().splitlines()[-1]

    faults.calls.clear()
    code, stdout, stderr = run(config, capsys)
    assert code == 1 and not any(too_long(c[1]) for c in faults.calls)  # never resent unchanged
    assert "its request was refused as sent (context_length)" in stdout

    faults.rule = None  # a model with a longer context behind the same name, more turns
    config = write_config(tmp_path / "run.yaml", scripts, out, **{**STANDARD_RUN, "parallel-mode": "threads",
                                                                  "max-turn": 4})
    code, stdout, stderr = run(config, capsys)
    assert code == 0, stderr
    assert sum(too_long(c[1]) for c in faults.calls) == 2  # resent once the settings changed
    saved = results(out)
    assert all(len(turns) == 4 for name, turns in saved.items() if "task_2" in name)


def test_a_truncated_code_answer_is_recorded_and_not_applied_in_protocol_improved(
        tmp_path: Path, faults: Faults, capsys: pytest.CaptureFixture) -> None:
    scripts = write_scripts(tmp_path / "scripts", {1: 1})
    out = tmp_path / "out"
    config = write_config(tmp_path / "run.yaml", scripts, out, **{**STANDARD_RUN, "task-ids": [1],
                                                                  "guidance-level": [0], "parallel-mode": "none"})
    faults.rule = lambda spec, messages, n: (Stop("length", "length") if spec.model == "coder"
                                             and "## Turn 1, step 1" in messages[-1]["content"] else None)
    code, stdout, stderr = run(config, capsys)
    assert code == 0, stderr
    turns = next(iter(results(out).values()))
    turn = turns[1]
    step_two = turn["code_calls"][1]["messages"][-1]["content"]
    assert "def not_the_answer" in step_two and "truncated at the output limit" in step_two  # not written
    stops = turn["answer_stops"]
    assert [(s["role"], s["reason"], s["applied"]) for s in stops] == [("code", "length", False)]
    assert "REPLACE" in stops[0]["text"]  # the raw answer is kept
    assert turn["actions"][0]["action"] == "INVALID" and "truncated" in turn["actions"][0]["argument"]
    assert turn["code_calls"][0]["stop"] == {"reason": "length", "provider_words": "length"}
    assert turn["actions"][1]["action"] == "REPLACE" and turn["status"] == "passed"  # step 2 came whole
    assert "answers cut/refused/filtered (all)" in stdout and "1/0/0" in stdout


def test_truncated_feedback_says_so(tmp_path: Path, faults: Faults, capsys: pytest.CaptureFixture) -> None:
    scripts = write_scripts(tmp_path / "scripts", {2: None})
    out = tmp_path / "out"
    config = write_config(tmp_path / "run.yaml", scripts, out, **{**STANDARD_RUN, "task-ids": [2],
                                                                  "guidance-level": [2], "parallel-mode": "none"})
    faults.rule = lambda spec, messages, n: (Stop("length", "max_output_tokens") if spec.model == "researcher"
                                             else None)
    code, stdout, stderr = run(config, capsys)
    assert code == 1
    turns = next(iter(results(out).values()))
    assert "truncated at the output limit (length: max_output_tokens)" in turns[-1]["feedback_error"]
    assert "not valid JSON" not in turns[-1]["feedback_error"]
    assert {s["role"] for s in turns[-1]["answer_stops"]} == {"feedback"}


def test_on_tampered_stop_ends_the_job_at_its_tampered_turn(
        tmp_path: Path, faults: Faults, capsys: pytest.CaptureFixture) -> None:
    scripts = write_scripts(tmp_path / "scripts", {2: None}, wrong_code="import os\nos._exit(0)\n")
    out = tmp_path / "out"
    keys = {**STANDARD_RUN, "task-ids": [2], "guidance-level": [0, 2], "parallel-mode": "none"}
    config = write_config(tmp_path / "run.yaml", scripts, out, **keys)
    code, stdout, stderr = run(config, capsys)
    assert code == 0, stderr
    saved = results(out)
    assert len(saved) == 2
    for turns in saved.values():
        assert [t["status"] for t in turns] == ["tampered"] and turns[0]["stop_reason"] == "tampered"
        assert turns[0]["feedback_source"] == "none"  # the level-2 job does not take the turn's feedback
    assert sum(model == "researcher" for model, _ in faults.calls) == 1  # the shared seed's, asked once
    assert "2 job(s) stopped at a turn graded tampered" in stdout
    rows = [line.split() for line in stdout.splitlines() if line.startswith("coder")]
    assert len(rows) == 2 and all(row[-2:] == ["0/0/0", "0/0/1"] for row in rows)  # counted apart per level
    state = json.loads(next(out.glob("*guidance_0/task_2_state.json")).read_text())
    assert state["stop_reason"] == "tampered" and "tampering" in state["error"]
    calls = len(faults.calls)
    run(config, capsys)
    assert len(faults.calls) == calls  # the rerun leaves it as it is: no later turn is paid for
    run(write_config(tmp_path / "run.yaml", scripts, out, **keys, **{"on-tampered": "continue"}), capsys)
    saved = results(out)
    assert all(len(turns) == STANDARD_RUN["max-turn"] for turns in saved.values())
    level_2 = next(turns for name, turns in saved.items() if "guidance_2" in name)
    assert level_2[0]["feedback_items"]  # continued: turn 0 now takes the seed's feedback


def test_a_shared_seed_refused_as_sent_stops_every_level_and_is_not_resent(
        tmp_path: Path, faults: Faults, capsys: pytest.CaptureFixture) -> None:
    _, out, config = _threaded_run(tmp_path)
    seed_prompt = _task_2_prompt(turn=0)

    faults.rule = lambda spec, messages, n: (RequestFatal("context_length", "the prompt is too long")
                                             if seed_prompt(messages[-1]["content"]) else None)
    code, stdout, stderr = run(config, capsys)
    assert code == 1 and sum(seed_prompt(c[1]) for c in faults.calls) == 1  # the seed, asked once for both levels
    for level in (0, 2):
        state = json.loads(next(out.glob(f"*guidance_{level}/task_2_state.json")).read_text())
        assert state["stop_reason"] == "context_length" and state["turns"] == 0
    faults.calls.clear()
    code, stdout, stderr = run(config, capsys)
    assert code == 1 and not any(seed_prompt(c[1]) for c in faults.calls)
