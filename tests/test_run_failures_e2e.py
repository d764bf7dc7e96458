"""A provider's bad day, end to end: the real main command (a subprocess) on the sample tasks, its models asked
through the real SDKs at loopback servers answering with each provider's real statuses and bodies
(tests/fake_providers.py). Quota, revoked keys and credit stop the whole run at once and a rerun after the fix
completes it to an uninterrupted run's records; a prompt too long is never resent unchanged; truncated and
refused answers are named in the records, the summary and the last lines (docs/failures.md)."""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.task.dataset import DatasetManager
from agent.models.scripted import ScriptedModel
from agent.models.types import ModelSpec
from tests.fake_providers import (
    DEFAULT_MODELS, FakeProvider, FakeUsage, ReceivedRequest, Reply, anthropic_error, anthropic_message,
    anthropic_text, openai_completion, openai_error, openai_response, openai_response_incomplete, success_body,
)
from tests.run_support import DATASET, SOLVE_AT, STANDARD_RUN, results, run_cli, run_record, write_scripts

Fault = Callable[[ReceivedRequest, int], "Reply | None"]
RUN = {**STANDARD_RUN, "resume": True, "protocol": "improved", "sandbox": "off"}
TARGET_2 = f"`{DatasetManager(DATASET).get(2).target_file_path}`"


class Answering:
    """A responder answering as the scripted model would, in ``protocol``'s wire shape, unless ``fault`` says
    otherwise for a request; counts what it was asked."""

    def __init__(self, protocol: str, script: Path, fault: Fault | None = None) -> None:
        self.protocol, self.fault = protocol, fault
        self.model = ScriptedModel(ModelSpec("scripted", "responder", script=str(script)))
        self.lock = threading.Lock()
        self.seen = 0

    def __call__(self, request: ReceivedRequest) -> Reply:
        with self.lock:
            number, self.seen = self.seen, self.seen + 1
        reply = self.fault(request, number) if self.fault else None
        if reply is not None:
            return reply
        completion = self.model.complete(request.messages)
        tokens = {"input_tokens": completion.usage.input_tokens, "output_tokens": completion.usage.output_tokens}
        if request.route.endswith("/responses"):
            return Reply(body=openai_response(completion.text, FakeUsage(**tokens)))
        return Reply(body=success_body(self.protocol, completion.text, **tokens))


def config(path: Path, server: FakeProvider, scripts: tuple[Path, Path], out: Path, **keys) -> Path:
    """The standard run with its code model served by ``server`` (feedback: the scripted model)."""
    import yaml
    values = {"api-provider": server.protocol, "model": DEFAULT_MODELS[server.protocol], "api-key": "test-key",
              "base-url": server.base_url, "human-api-provider": "scripted", "human-agent-model": "researcher",
              "human-script": str(scripts[1]), "work-dir": str(DATASET), "output-dir": str(out), **RUN, **keys}
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> tuple[Path, Path]:
    return write_scripts(tmp_path_factory.mktemp("scripts with space"), SOLVE_AT)


_baselines: dict[str, dict] = {}


def baseline(protocol: str, scripts: tuple[Path, Path], root: Path) -> dict:
    """The records of the standard run through ``protocol``'s SDK, uninterrupted (once per protocol)."""
    if protocol not in _baselines:
        with FakeProvider(protocol, Answering(protocol, scripts[0])) as server:
            done = run_cli(config(root / f"{protocol}.yaml", server, scripts, root / f"{protocol} out"))
        assert done.returncode == 0, done.stderr
        _baselines[protocol] = results(root / f"{protocol} out")
    return _baselines[protocol]


FIRST_FATAL = 6  # the index of the first request answered with the fault


def fatal_from(server: FakeProvider, call: int, case: str) -> Fault:
    """From request ``call`` (an index) on, every request meets the provider's real ``case`` answer (a quota
    stays gone)."""
    def fault(request: ReceivedRequest, number: int) -> Reply | None:
        if number == call - 1:
            server.storm(3600, case)  # the queue is served before this responder: every later request gets it
        return None
    return fault


CASES = {  # case: (provider protocol, fault, parallel mode, the line before "; N jobs remain")
    "openai quota": ("openai", "quota", "processes",
                     "OpenAI says the quota is exhausted (insufficient_quota): add credits, then run the same "
                     "command again"),
    "openai revoked key": ("openai", "revoked_key", "threads", None),
    "anthropic credit": ("anthropic", "quota", "none", None),
}


@pytest.mark.parametrize("case", [case if case == "openai quota" else pytest.param(case, marks=pytest.mark.slow)
                                  for case in CASES])
def test_a_run_fatal_answer_stops_the_run_and_the_rerun_after_the_fix_completes_it(
        case: str, scripts: tuple[Path, Path], tmp_path_factory) -> None:
    protocol, fault, mode, expected = CASES[case]
    root = tmp_path_factory.mktemp("fatal")
    reference = baseline(protocol, scripts, tmp_path_factory.getbasetemp())
    out = root / "out"
    answering = Answering(protocol, scripts[0])
    with FakeProvider(protocol, answering) as server:
        answering.fault = fatal_from(server, FIRST_FATAL, fault)
        run_yaml = config(root / "run.yaml", server, scripts, out, **{"parallel-mode": mode})
        done = run_cli(run_yaml)
        after_first = len(server.requests) - FIRST_FATAL - 1  # requests after the first fatal answer
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr
    line = last_line(done.stderr)
    found = re.fullmatch(r"(.+); (\d+) jobs remain", line)
    assert found, line
    if expected is not None:
        assert found[1] == expected
    assert found[1].startswith({"openai": "OpenAI says ", "anthropic": "Anthropic says "}[protocol])
    assert after_first <= RUN["max-workers"] - 1, after_first  # at most the calls in flight
    saved = results(out)
    assert all(turns == reference[name][:len(turns)] for name, turns in saved.items())
    assert not any(json.loads(p.read_text()).get("error") for p in out.glob("*/task_*_state.json"))
    assert run_record(out)["jobs_remaining"] == int(found[2])
    print(f"{case}: last line {line!r}; requests after the first fatal answer: {after_first}")

    with FakeProvider(protocol, Answering(protocol, scripts[0])) as fixed:
        again = run_cli(config(root / "run.yaml", fixed, scripts, out, **{"parallel-mode": mode}))
    assert again.returncode == 0, again.stderr
    assert results(out) == reference


def context_length(protocol: str) -> Reply:
    if protocol == "openai":
        return Reply(400, openai_error("This model's maximum context length is 128000 tokens. However, your "
                                       "messages resulted in 130512 tokens. Please reduce the length of the "
                                       "messages.", "invalid_request_error", "context_length_exceeded", "messages"))
    return Reply(400, anthropic_error("invalid_request_error", "prompt is too long: 208656 tokens > 200000 maximum"))


def too_long(request: ReceivedRequest) -> bool:
    return TARGET_2 in request.last_user_text and "## Turn 1, step 1" in request.last_user_text


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_prompt_too_long_stops_its_job_apart_and_is_never_resent_unchanged(
        protocol: str, scripts: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    answering = Answering(protocol, scripts[0], lambda request, n: context_length(protocol) if too_long(request)
                          else None)
    with FakeProvider(protocol, answering) as server:
        run_yaml = config(tmp_path / "run.yaml", server, scripts, out, **{"parallel-mode": "threads"})
        first = run_cli(run_yaml)
        sent_first = sum(too_long(r) for r in server.requests)
        second = run_cli(run_yaml)
        sent_second = sum(too_long(r) for r in server.requests) - sent_first
    assert first.returncode == 1 and second.returncode == 1, first.stderr
    assert sent_first == 2 and sent_second == 0  # once per level (0, 2), never again under the same settings
    for level in (0, 2):
        state = json.loads(next(out.glob(f"*guidance_{level}/task_2_state.json")).read_text())
        assert state["stop_reason"] == "context_length" and "context window" in state["error"]
    assert "2 job(s) stopped because the provider refuses their request as sent" in first.stdout
    assert "its request was refused as sent (context_length)" in second.stdout
    print(f"{protocol} context length: last line {last_line(first.stderr)!r}; rerun: {last_line(second.stderr)!r}")


CUT = "reflect: write it\naction: REPLACE\n```python\ndef partial(x):\n    return"  # cut mid code block
CUT_TOKENS = FakeUsage(50, 4096)


@pytest.mark.slow
def test_a_truncated_code_answer_is_recorded_and_never_applied_in_protocol_improved(
        scripts: tuple[Path, Path], tmp_path: Path) -> None:
    def fault(request: ReceivedRequest, number: int) -> Reply | None:
        return Reply(body=openai_completion(CUT, CUT_TOKENS, "length")) if too_long(request) else None

    out = tmp_path / "out"
    with FakeProvider("openai", Answering("openai", scripts[0], fault)) as server:
        done = run_cli(config(tmp_path / "run.yaml", server, scripts, out, **{
            "parallel-mode": "none", "task-ids": [2], "guidance-level": [0], "max-steps": 1}))
    assert done.returncode == 0, done.stderr
    turns = next(iter(results(out).values()))
    stops = turns[1]["answer_stops"]
    assert [(s["role"], s["reason"], s["provider_words"], s["applied"]) for s in stops] == [
        ("code", "length", "finish_reason=length", False)]
    assert stops[0]["text"] == CUT  # the raw answer is kept
    assert turns[1]["final_code"] == turns[0]["final_code"]  # the cut-off file was not written
    assert "truncated at the output limit" in turns[1]["actions"][0]["argument"]
    assert "answers cut/refused/filtered (all)" in done.stdout and "1/0/0" in done.stdout


@pytest.mark.slow
def test_a_truncated_code_answer_is_applied_as_the_release_does_and_recorded_so(
        scripts: tuple[Path, Path], tmp_path: Path) -> None:
    def fault(request: ReceivedRequest, number: int) -> Reply:
        return Reply(body=anthropic_message([anthropic_text(CUT)], CUT_TOKENS, stop_reason="max_tokens"))

    out = tmp_path / "out"
    with FakeProvider("anthropic", Answering("anthropic", scripts[0], fault)) as server:
        done = run_cli(config(tmp_path / "run.yaml", server, scripts, out, **{
            "parallel-mode": "none", "task-ids": [2], "guidance-level": [0], "max-steps": 1, "max-turn": 1,
            "protocol": "release"}))
    assert done.returncode == 0, done.stderr
    turn = next(iter(results(out).values()))[0]
    assert [(s["reason"], s["provider_words"], s["applied"]) for s in turn["answer_stops"]] == [
        ("length", "stop_reason=max_tokens", True)]
    assert "def partial(x):" in turn["final_code"]  # the release writes what came
    assert "1/0/0" in done.stdout


@pytest.mark.slow
def test_truncated_and_refused_feedback_through_the_responses_api_say_so(
        scripts: tuple[Path, Path], tmp_path: Path) -> None:
    feedback_answers = iter([openai_response_incomplete('{"feedback": [{"interface": "f", "categ', "max_output_tokens")])

    def fault(request: ReceivedRequest, number: int) -> Reply | None:
        if not request.route.endswith("/responses"):
            return None
        body = next(feedback_answers, None)
        if body is None:
            refusal = openai_response("")
            refusal["output"][0]["content"] = [{"type": "refusal", "refusal": "I can't help with that."}]
            body = refusal
        return Reply(body=body)

    out = tmp_path / "out"
    with FakeProvider("openai", Answering("openai", scripts[0], fault)) as server:
        run_yaml = config(tmp_path / "run.yaml", server, scripts, out, **{
            "parallel-mode": "none", "task-ids": [2], "guidance-level": [2], "human-api-provider": "openai",
            "human-agent-model": "gpt-5-mini", "human-base-url": server.base_url, "human-api-key": "test-key",
            "human-openai-api": "responses"})
        done = run_cli(run_yaml)
    assert done.returncode == 1
    turn = next(iter(results(out).values()))[-1]
    error = turn["feedback_error"]
    assert "refusal" in error and "not valid JSON" not in error and "empty response" not in error
    reasons = [s["reason"] for s in turn["answer_stops"] if s["role"] == "feedback"]
    assert reasons[0] == "length" and set(reasons[1:]) == {"refusal"}
    print(f"feedback: {error}")


@pytest.mark.slow
def test_a_feedback_server_without_the_responses_api_stops_the_run_and_the_named_setting_completes_it(
        scripts: tuple[Path, Path], tmp_path: Path) -> None:
    def feedback_config(server: FakeProvider, out: Path, api: str) -> Path:
        return config(tmp_path / f"{api}.yaml", server, scripts, out, **{
            "parallel-mode": "threads", "human-api-provider": "openai", "human-agent-model": "gpt-5-mini",
            "human-base-url": server.base_url, "human-api-key": "test-key", "human-openai-api": api,
            "human-script": None})

    feedback_script = Answering("openai", scripts[1])
    code_script = Answering("openai", scripts[0])

    def respond(request: ReceivedRequest) -> Reply:
        return (feedback_script if request.body.get("response_format") else code_script)(request)

    with FakeProvider("openai", respond).without_responses_api() as server:
        assert run_cli(feedback_config(server, tmp_path / "reference", "chat")).returncode == 0
        out = tmp_path / "out"
        first = run_cli(feedback_config(server, out, "responses"))
        fixed = run_cli(feedback_config(server, out, "chat"))
    assert first.returncode == 4, first.stderr
    line = last_line(first.stderr)
    assert "has no Responses API" in line and "(responses_unsupported)" in line and line.endswith("jobs remain")
    assert fixed.returncode == 0, fixed.stderr
    assert results(out) == results(tmp_path / "reference")
    print(f"responses unsupported: last line {line!r}")


def storm_from(server: FakeProvider, call: int, seconds: float, retry_after: str | None) -> Fault:
    """From request ``call`` (an index) on, the provider is overloaded for ``seconds`` (503 / Anthropic 529)."""
    def fault(request: ReceivedRequest, number: int) -> Reply | None:
        if number == call - 1:
            server.storm(seconds, "overloaded", retry_after=retry_after)
        return None
    return fault


@pytest.mark.parametrize(("protocol", "seconds", "retry_after"), [
    ("openai", 4.0, "1"),
    pytest.param("anthropic", 4.0, None, marks=pytest.mark.slow),
    pytest.param("openai", 60.0, None, marks=pytest.mark.slow),
])
def test_an_outage_shorter_than_the_retry_window_leaves_every_trajectory_as_an_uninterrupted_run_s(
        protocol: str, seconds: float, retry_after: str | None, scripts: tuple[Path, Path], tmp_path_factory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Transient faults are retried at the transport, with real waits, before any agent-level error path runs:
    the model is shown exactly what it is shown without the storm (issue 30, item 5)."""
    monkeypatch.setenv("RECODE_RETRY_WAIT_SCALE", "1")
    reference = baseline(protocol, scripts, tmp_path_factory.getbasetemp())
    root = tmp_path_factory.mktemp("storm")
    answering = Answering(protocol, scripts[0])
    with FakeProvider(protocol, answering) as server:
        answering.fault = storm_from(server, FIRST_FATAL, seconds, retry_after)
        done = run_cli(config(root / "run.yaml", server, scripts, root / "out", **{"parallel-mode": "threads"}))
        refused = len(server.requests) - answering.seen  # answered by the storm, before the responder
    assert done.returncode == 0, done.stderr
    assert refused >= 2, "the storm met the run"
    assert results(root / "out") == reference
    print(f"{protocol} {seconds:.0f} s storm: {refused} answers 5xx, records equal an uninterrupted run's")
