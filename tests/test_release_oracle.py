"""The release oracle (tests/release_oracle.py) runs the authors' release on our sample tasks.

Each scenario runs the release's main command as a subprocess against one
logging fake server with scripted answers, and checks the calls it logged and
the pickles it wrote. Observed (release e5b99e8; "code" = a code-agent chat
call, "fb" = a /v1/responses feedback call, "sum" = a memory-summary call):

a. memory_agent L4, task 1, max-turn 3, max-steps 2, no seed yet:
   code code fb | code code fb | code code  (6 code, 2 fb, 3 test runs);
   3 records + a 1-record seed.
b. L2 from a's seed (same output dir): no turn-0 call; code code (success):
   2 code, 0 fb, 1 test run; 2 records (the seed's turn 0 + turn 1).
c. memory-threshold 3, task 1, max-turn 2, max-steps 3: code x3, fb, then
   sum code sum code sum code (6 code, 3 sum, 1 fb, 2 test runs).
d. agent setting, task 2, max-turn 3, max-steps 2: code code fb | code code
   (success): 4 code, 1 fb, 2 test runs; no seed.
e. replay at L1 of a's L4 run (resume: true): one SUBMIT per replayed turn:
   code | code (2 code, 0 fb, 2 test runs); 2 replay records.
Other clients (one turn, one step, L0): gemini and azure send one code call
each; anthropic (SDK 2.x) sends nothing. The shipped relative work-dir: one
code call, one test run whose report the release cannot find.
"""
from __future__ import annotations

import inspect
from pathlib import Path

import anthropic
import pytest

from agent.task.retrieval import FunctionIndex, collect_functions
from tests.fake_providers import FakeProvider, ReceivedRequest
from tests.release_oracle import (
    CODE_USAGE,
    FEEDBACK_USAGE,
    SAMPLE_DATASET,
    ReleaseRun,
    ReleaseScript,
    TaskScript,
    browse,
    feedback_records,
    read,
    release_unavailable,
    replace,
    retrieve,
    run_release,
    submit,
)

UNAVAILABLE = release_unavailable()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")

RECORD_KEYS = {
    "task_index", "turn_number", "code_input_tokens", "code_output_tokens", "final_code", "agent_memory",
    "code_interaction_history", "execution_result", "feedback_input_token", "feedback_output_token",
    "feedback_interaction_history",
}
WRONG_CODE = "def placeholder():\n    return None\n"
BASE = {"max-turn": 3, "max-steps": 2, "guidance-level": 4}
ANTHROPIC_TAKES_TEMPERATURE = "temperature" in inspect.signature(anthropic.resources.Messages.create).parameters


def canonical(task: int) -> str:
    return (SAMPLE_DATASET / "annotations" / f"annotation_{task}" / "canonical.py").read_text(encoding="utf-8")


def users(run: ReleaseRun, script: ReleaseScript) -> list[str]:
    """The user message of each code-agent call, in order."""
    return [r.messages[-1]["content"] for r in run.requests if script.kind(r)[0] == "code"]


def assert_code_call(request: ReceivedRequest, model: str = "gpt-4o") -> None:
    assert request.route == "/v1/chat/completions"
    assert set(request.body) == {"model", "messages", "top_p"}  # no temperature, no max_tokens
    assert request.body["model"] == model and request.body["top_p"] == 1
    assert [m["role"] for m in request.messages] == ["system", "user"]


def assert_feedback_call(request: ReceivedRequest) -> None:
    assert request.route == "/v1/responses"
    assert set(request.body) == {"model", "input", "text", "top_p"}
    assert request.body["model"] == "o4-mini" and request.body["top_p"] == 1
    assert [m["role"] for m in request.messages] == ["system", "user"]
    fmt = request.body["text"]["format"]
    assert (fmt["type"], fmt["name"], fmt["strict"]) == ("json_schema", "Feedbacks", True)
    assert fmt["schema"]["required"] == ["feedbacks"] and fmt["schema"]["properties"]["feedbacks"]["type"] == "array"


def assert_failed(record: dict, tests: int) -> None:
    result = record["execution_result"]
    assert result["tests"] == tests and result["errors"] + result["failures"] > 0


def assert_passed(record: dict, tests: int) -> None:
    result = record["execution_result"]
    assert (result["tests"], result["errors"], result["failures"], result["skipped"]) == (tests, 0, 0, 0)
    assert all(result["test_summary"].values())


# ---------------------------------------------------------------- a: the level-4 run that creates the seed

LEVEL4_SCRIPT = TaskScript(
    code=[replace(WRONG_CODE), submit(),  # turn 0
          read("dpo/trainer.py"), browse(),  # turn 1: no SUBMIT, the file is submitted after max-steps
          retrieve("dpo loss of the policy"), submit()],  # turn 2 (the last: no feedback)
    feedback=[feedback_records("t0"), feedback_records("t1")],
)


@pytest.fixture(scope="module")
def level4(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReleaseRun, ReleaseScript]:
    """Scenario a, shared by b and e, which run in the same folder (a path with a space)."""
    root = tmp_path_factory.mktemp("release oracle") / "run dir"
    script = ReleaseScript(SAMPLE_DATASET, {1: LEVEL4_SCRIPT})
    with FakeProvider("openai", responder=script) as server:
        run = run_release({**BASE, "task-ids": [1]}, server, root)
    assert run.ok, run.describe()
    return run, script


def test_a_memory_agent_level4_creates_the_seed(level4: tuple[ReleaseRun, ReleaseScript]) -> None:
    run, script = level4
    assert script.kinds(run.requests) == ["code", "code", "feedback", "code", "code", "feedback", "code", "code"]
    assert not script.exhausted
    code = [r for r in run.requests if script.kind(r)[0] == "code"]
    for request in code:
        assert_code_call(request)
    assert len({r.messages[0]["content"] for r in code}) == 1  # one system prompt for every step and turn
    for request in run.requests:
        if script.kind(request)[0] == "feedback":
            assert_feedback_call(request)
    assert [t["env"] for t in run.test_runs] == ["recode_sample_numpy"] * 3
    assert all(t["args"][:2] == ["-m", "pytest"] for t in run.test_runs)

    records = run.results(1)
    assert [r["turn_number"] for r in records] == [0, 1, 2]
    assert all(set(r) == RECORD_KEYS for r in records)
    assert [r["code_input_tokens"] for r in records] == [[CODE_USAGE.input_tokens] * 2] * 3
    assert [r["feedback_input_token"] for r in records] == [[FEEDBACK_USAGE.input_tokens]] * 2 + [[]]
    assert records[0]["feedback_interaction_history"][1]["content"] == feedback_records("t0")
    assert records[1]["feedback_interaction_history"][-1]["content"] == feedback_records("t1")
    assert records[2]["feedback_interaction_history"] == []
    assert [len(r["agent_memory"]) for r in records] == [4, 8, 12]  # verbatim, carried across turns
    assert records[0]["final_code"] == WRONG_CODE.strip()
    for record in records:
        assert_failed(record, tests=10)

    seed = run.seed(1)
    assert len(seed) == 1 and seed[0]["turn_number"] == 0 and seed[0]["final_code"] == records[0]["final_code"]
    assert seed[0]["feedback_interaction_history"] == records[0]["feedback_interaction_history"]


def test_a_prompts_show_feedback_of_their_turn_and_action_results(level4: tuple[ReleaseRun, ReleaseScript]) -> None:
    run, script = level4
    prompts = users(run, script)
    assert "t0-0-direct_code_feedback" in prompts[2] and "t0-1-analysis" in prompts[2]  # level 4: every field
    assert not any("-0-category" in p for p in prompts)  # the category is never shown
    assert WRONG_CODE.splitlines()[0] in prompts[2]  # turn 0's REPLACE answer is in turn 1's history
    assert "t1-0-interface" in prompts[4] and "t0-0-interface" not in prompts[4]  # past feedback is dropped
    trainer = (SAMPLE_DATASET / "annotations/annotation_1/dpo-numpy/dpo/trainer.py").read_text(encoding="utf-8")
    assert trainer.strip().splitlines()[-1] in prompts[3]  # READ's result reaches the next step
    repo = run.root / "work_dir/dataset/annotations/annotation_1/dpo-numpy"
    hits = FunctionIndex(collect_functions(repo)).search("dpo loss of the policy")
    assert len(hits) == 5
    where = [prompts[5].find(f"{doc.path}\n{doc.source}\n") for _, doc in hits]
    assert -1 not in where and where == sorted(where)  # RETRIEVE (the BM25 stub): the 5 best, best first


# ---------------------------------------------------------------- b: another level from the same seed


def test_b_level2_starts_from_the_seed(level4: tuple[ReleaseRun, ReleaseScript]) -> None:
    seeded, _ = level4
    script = ReleaseScript(SAMPLE_DATASET, {1: TaskScript(code=[replace(canonical(1)), submit()])})
    with FakeProvider("openai", responder=script) as server:
        run = run_release({**BASE, "task-ids": [1], "guidance-level": 2}, server, seeded.root)
    assert run.ok, run.describe()
    assert script.kinds(run.requests) == ["code", "code"]  # no turn-0 call, no feedback after a pass
    assert len(run.test_runs) == 1
    first = run.requests[0].messages[-1]["content"]
    assert "t0-0-analysis" in first and "t0-0-actionable_feedback" not in first  # the seed's raw feedback at L2
    assert WRONG_CODE.splitlines()[0] in first  # the seed's memory
    records = run.results(1)
    assert [r["turn_number"] for r in records] == [0, 1]
    assert records[0] == seeded.seed(1)[0]
    assert_passed(records[1], tests=10)
    assert records[1]["feedback_interaction_history"] == []


# ---------------------------------------------------------------- e: replay of a finished run


def test_e_replay_at_level1(level4: tuple[ReleaseRun, ReleaseScript]) -> None:
    seeded, _ = level4
    script = ReleaseScript(SAMPLE_DATASET, {1: TaskScript(code=[submit(), submit()])})
    config = {**BASE, "task-ids": [1], "replay-feedback-level": 1, "resume": True}
    with FakeProvider("openai", responder=script) as server:
        run = run_release(config, server, seeded.root)
    assert run.ok, run.describe()
    assert script.kinds(run.requests) == ["code", "code"] and len(run.test_runs) == 2
    prompts = users(run, script)
    assert "t0-0-description" in prompts[0] and "t0-0-analysis" not in prompts[0]  # turn 0's feedback at L1
    assert "t1-0-description" in prompts[1] and "t1-0-analysis" not in prompts[1]
    original = run.results(1)
    assert len(original) == 3  # untouched
    replayed = run.replay(1, level=1)
    assert [r["turn_number"] for r in replayed] == [1, 2]
    assert [len(r["agent_memory"]) for r in replayed] == [len(original[0]["agent_memory"]) + 2,
                                                          len(original[1]["agent_memory"]) + 2]
    assert all(r["feedback_interaction_history"] == [] for r in replayed)


# ---------------------------------------------------------------- c: memory summaries


@pytest.mark.slow
def test_c_memory_summary_calls(tmp_path: Path) -> None:
    code = [browse(), replace(WRONG_CODE), submit(), read("dpo/policy.py"), replace(canonical(1)), submit()]
    script = ReleaseScript(SAMPLE_DATASET, {1: TaskScript(code=code, feedback=[feedback_records("t0")])})
    config = {"max-turn": 2, "max-steps": 3, "guidance-level": 4, "memory-threshold": 3, "task-ids": [1]}
    with FakeProvider("openai", responder=script) as server:
        run = run_release(config, server, tmp_path / "summary run")
    assert run.ok, run.describe()
    assert script.kinds(run.requests) == ["code"] * 3 + ["feedback"] + ["summary", "code"] * 3
    code_system = run.requests[0].messages[0]["content"]
    summaries = [r for r in run.requests if script.kind(r)[0] == "summary"]
    for request in summaries:
        assert_code_call(request)  # same endpoint and parameters as a code call
        assert request.messages[0]["content"] != code_system
    assert script.summary in summaries[1].messages[-1]["content"]  # an earlier summary is summarised again
    records = run.results(1)
    assert records[1]["code_input_tokens"] == [CODE_USAGE.input_tokens] * 3  # summary calls are not counted
    memory = records[1]["agent_memory"]
    assert len(memory) == 8 and memory[0]["role"] == "system" and memory[0]["content"].endswith(script.summary)
    assert_passed(records[1], tests=10)


# ---------------------------------------------------------------- d: the agent setting (task 2)


@pytest.mark.slow
def test_d_agent_setting_on_task2(tmp_path: Path) -> None:
    code = [replace(WRONG_CODE), submit(), replace(canonical(2)), submit()]
    script = ReleaseScript(SAMPLE_DATASET, {2: TaskScript(code=code, feedback=[feedback_records("t0")])})
    config = {**BASE, "evaluation-setting": "agent", "task-ids": [2]}
    with FakeProvider("openai", responder=script) as server:
        run = run_release(config, server, tmp_path / "agent run")
    assert run.ok, run.describe()
    assert script.kinds(run.requests) == ["code", "code", "feedback", "code", "code"]
    assert [t["env"] for t in run.test_runs] == ["recode_sample_numpy"] * 2
    prompts = users(run, script)
    assert WRONG_CODE.splitlines()[0] in prompts[2]  # history is kept across turns in `agent` too
    assert "t0-0-direct_code_feedback" in prompts[2]
    records = run.results(2)
    assert [r["turn_number"] for r in records] == [0, 1] and all(set(r) == RECORD_KEYS for r in records)
    assert [len(r["agent_memory"]) for r in records] == [4, 8]
    assert_failed(records[0], tests=10)
    assert_passed(records[1], tests=10)
    assert not run.seed_dir.exists()  # only memory_agent shares a seed


# ---------------------------------------------------------------- other providers' clients, by environment


def _provider_config(protocol: str, server: FakeProvider) -> dict:
    """The YAML keys that select ``protocol``'s client in the release (Azure: the server is the endpoint)."""
    if protocol == "gemini":
        return {"api-provider": "google", "model": "gemini-2.5-pro"}
    if protocol == "anthropic":
        return {"api-provider": "anthropic", "model": "claude-opus-4-1"}
    return {"api-provider": "azure-openai", "deployment": "dep-x", "endpoint": server.url,
            "api-version": "2024-12-01-preview"}


def _one_call_run(protocol: str, root: Path) -> tuple[ReleaseRun, ReleaseScript]:
    """memory_agent, one turn of one step at L0: one code call (REPLACE, then the file is submitted)."""
    script = ReleaseScript(SAMPLE_DATASET, {1: TaskScript(code=[replace(WRONG_CODE)])})
    with FakeProvider("openai" if protocol == "azure" else protocol, responder=script) as server:
        config = {"max-turn": 1, "max-steps": 1, "guidance-level": 0, "task-ids": [1],
                  **_provider_config(protocol, server)}
        return run_release(config, server, root), script


@pytest.mark.slow
def test_gemini_client_reaches_the_fake_server(tmp_path: Path) -> None:
    run, script = _one_call_run("gemini", tmp_path / "gemini")
    assert run.ok, run.describe()
    assert script.kinds(run.requests) == ["code"] and len(run.test_runs) == 1
    request = run.requests[0]
    assert request.route == "/v1/models/gemini-2.5-pro:generateContent"
    assert set(request.body) == {"contents", "generationConfig"}  # no systemInstruction: one joined text
    assert [len(c["parts"]) for c in request.body["contents"]] == [1]
    config = request.body["generationConfig"]
    assert (config["temperature"], config["topP"]) == (0, 1)
    assert list(config["thinkingConfig"].values()) == [1000]  # the budget of gemini-2.5-pro (0 for other models)
    assert run.results(1)[0]["code_input_tokens"] == [CODE_USAGE.input_tokens]


@pytest.mark.slow
def test_azure_client_reaches_the_fake_server(tmp_path: Path) -> None:
    run, script = _one_call_run("azure", tmp_path / "azure")
    assert run.ok, run.describe()
    request = run.requests[0]
    assert script.kinds(run.requests) == ["code"]
    assert request.route == "/openai/deployments/dep-x/chat/completions"
    assert "api-version=2024-12-01-preview" in request.path
    assert set(request.body) == {"model", "messages", "temperature", "top_p"}
    assert (request.body["model"], request.body["temperature"], request.body["top_p"]) == ("dep-x", 0, 1)
    assert run.results(1)[0]["code_input_tokens"] == [CODE_USAGE.input_tokens]


@pytest.mark.slow
@pytest.mark.skipif(ANTHROPIC_TAKES_TEMPERATURE, reason="this anthropic SDK still takes temperature and top_p")
def test_anthropic_sdk_2_rejects_the_release_call_before_sending(tmp_path: Path) -> None:
    """The release passes temperature/top_p, which anthropic>=2's Messages.create no longer takes (it pins 0.39)."""
    run, _ = _one_call_run("anthropic", tmp_path / "anthropic")
    assert run.rc == 0 and not run.ok
    assert "unexpected keyword argument 'temperature'" in run.stdout
    assert run.requests == [] and run.test_runs == []


# ---------------------------------------------------------------- a defect: the shipped relative work-dir


@pytest.mark.slow
def test_relative_work_dir_loses_the_test_report(tmp_path: Path) -> None:
    """With ``work-dir: work_dir`` (the shipped value) pytest writes the report relative to ITS cwd."""
    script = ReleaseScript(SAMPLE_DATASET, {1: TaskScript(code=[replace(WRONG_CODE)])})
    config = {"work-dir": "work_dir", "max-turn": 1, "max-steps": 1, "guidance-level": 0, "task-ids": [1]}
    with FakeProvider("openai", responder=script) as server:
        run = run_release(config, server, tmp_path / "relative")
    assert run.rc == 0 and not run.ok and "FileNotFoundError" in run.stdout
    annotation = run.root / "work_dir/dataset/annotations/annotation_1"
    report = "work_dir/dataset/annotations/annotation_1/pytest_report/report.xml"
    assert not (run.root / report).exists() and (annotation / "dpo-numpy/dpo" / report).is_file()
    assert (annotation / "dpo-numpy/dpo/losses.py").read_text(encoding="utf-8") == WRONG_CODE.strip()  # left dirty
    assert not run.result_dir.joinpath("task_1_result.pkl").exists()
