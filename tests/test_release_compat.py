"""A user of the authors' release switches to this harness without editing anything.

Driven with the release's own ``config/default.yaml`` (its keys and shipped
values, written out below), filled in as a user would (key, model names,
task ids), from a folder laid out like the release's checkout (``config/``,
``work_dir/dataset``) used as the working folder, against a local
OpenAI-compatible server reached through ``OPENAI_BASE_URL`` only. Result
files and seeds "written by the release" are built by hand in the release's
record shape. Engineers add their own classes here: one class per concern.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.action import ACTIONS, RELEASE_ACTIONS, ActionFormatError, parse_answer
from agent.agents import CodeAgent, TaskBrief
from agent.config import ConfigError, load_config
from agent.protocols.prompts import FEEDBACK_REQUEST, FEEDBACK_SYSTEM
from agent.models.build import PROVIDER_ENV_VARS, Completion, Usage
from agent.task.dataset import DatasetManager
from agent.protocols.base import TurnInput
from agent.protocols.improved import ImprovedProtocol
from agent.protocols.release import ReleaseProtocol
from agent.protocols.release_texts import load_release_texts
from agent.task.workspace import RepoWorkspace
from tests.fake_providers import FakeProvider, FakeUsage, ReceivedRequest, Reply, openai_completion, openai_response
from tests.loop_config import asks_summary, turn_of, wrote_file

OURS = load_release_texts(None)

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / "agent" / "research_code_generation.py"
DATASET = DatasetManager(REPO / "work_dir" / "dataset")
TASK = 1
USER_KEY = "sk-user-filled-in-0000"
WRONG = "def not_the_answer():\n    return None\n"
FEEDBACK = [{"interface": "dpo_loss", "category": "T2", "description": "DESCRIPTION-wrong-sign",
             "analysis": "ANALYSIS-paper-eq-7", "actionable_feedback": "ACTIONABLE-flip-it",
             "direct_code_feedback": "return -x"}]
RUN_FOLDER = "memory_agent_gpt-4o_feedback_fixed_guidance_{level}"
FAILING = DATASET.get(TASK).test_cases[0]  # a test every stored wrong turn fails (release_turn)

# The release's config/default.yaml: every key with the value its shipped file sets.
RELEASE_DEFAULT_YAML = """\
api-key: "YOUR_API_KEY"
api-provider: "openai"
model: "gpt-4o"
deployment: ""
endpoint: ""
api-version: ""
human-api-key: "YOUR_API_KEY"
human-api-provider: "openai"
human-agent-model: "o4-mini"
human-deployment: ""
human-endpoint: ""
human-api-version: ""
guidance-level: 4
guidance-type: "fixed"
evaluation-setting: "memory_agent"
max-turn: 10
max-steps: 3
memory-threshold: 15
memory-to-keep: 10
work-dir: "work_dir"
output-dir: "experiment_results"
init_seed: "init_seed"
resume: false
task-ids:
replay-feedback-level:
"""


def filled_in(**values: object) -> str:
    """The release file with some lines edited the way a user edits them (``key: value`` in place)."""
    text = RELEASE_DEFAULT_YAML.replace('"YOUR_API_KEY"', f'"{USER_KEY}"')
    text = text.replace("task-ids:\n", f"task-ids: [{TASK}]\n")
    for key, value in values.items():
        key = key if key == "init_seed" else key.replace("_", "-")
        text, found = re.subn(rf"^{re.escape(key)}:.*$", f"{key}: {json.dumps(value)}", text, flags=re.M)
        assert found == 1, key
    return text


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A release-like checkout: config/default.yaml and work_dir/dataset (the sample tasks)."""
    root = tmp_path / "checkout"
    (root / "config").mkdir(parents=True)
    (root / "work_dir").mkdir()
    (root / "work_dir" / "dataset").symlink_to(REPO / "work_dir" / "dataset")
    (root / "config" / "default.yaml").write_text(filled_in())
    return root


class ReleaseUserServer:
    """One OpenAI-compatible server for both models: wrong code before ``solve_at``, then the reference.

    The code model answers in the release's format (the command on the line after ``action:``).
    """

    def __init__(self, solve_at: int | None = 1) -> None:
        self.solve_at = solve_at
        self.server = FakeProvider("openai", self.respond)

    def respond(self, request: ReceivedRequest) -> Reply:
        prompt = request.last_user_text
        if request.route.endswith("/responses"):  # the release's feedback call
            return Reply(body=openai_response({"feedbacks": FEEDBACK}, FakeUsage(input_tokens=100, output_tokens=20)))
        if request.body["model"] == "o4-mini":
            text = json.dumps({"feedback": FEEDBACK})
        elif asks_summary(prompt):
            text = "Earlier turns replaced the file; tests failed."
        elif wrote_file(prompt):
            text = "reflect: test it\naction:\nSUBMIT"
        else:
            solved = self.solve_at is not None and turn_of(prompt) >= self.solve_at
            code = DATASET.canonical(TASK) if solved else WRONG
            text = f"reflect: write it\naction:\nREPLACE\n```python\n{code}```"
        return Reply(body=openai_completion(text, FakeUsage(input_tokens=100, output_tokens=20)))

    def code_prompts(self) -> list[str]:
        return [r.last_user_text for r in self.server.requests if r.body["model"] == "gpt-4o"]

    def __enter__(self) -> ReleaseUserServer:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)


def run_release_command(root: Path, server: ReleaseUserServer, *flags: str) -> subprocess.CompletedProcess:
    """``python agent/research_code_generation.py`` from the checkout, as the release's README runs it."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV_VARS}
    env.update(OPENAI_BASE_URL=server.server.base_url, RECODE_ENV_BACKEND="current")
    return subprocess.run([sys.executable, str(CLI), *flags], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)


def load_turns(path: Path) -> list[dict]:
    return pickle.loads(path.read_bytes())


def release_turn(turn: int, code: str, *, feedback: list[dict] | None = FEEDBACK, solved: bool = False) -> dict:
    """One turn record as the release writes it (only its keys, its types)."""
    cases = DATASET.get(TASK).test_cases
    failed = [] if solved else list(cases[:3])
    return {
        "task_index": TASK, "turn_number": turn, "code_input_tokens": [1200, 900], "code_output_tokens": [300, 40],
        "final_code": code, "agent_memory": [{"role": "user", "content": f"memory of turn {turn}"}],
        "code_interaction_history": [{"role": "user", "content": "prompt"}, {"role": "assistant", "content": "a"}],
        "execution_result": {
            "tests": len(cases), "errors": 0, "failures": len(failed), "skipped": 0,
            "failure_messages": [f"FAILURE in {name}: AssertionError: mismatch\nassert 1 == 2" for name in failed],
            "test_summary": {f"test.py::{name}": name not in failed for name in cases},
        },
        "feedback_input_token": [5000] if feedback else [], "feedback_output_token": [700] if feedback else [],
        "feedback_interaction_history": ([{"role": "user", "content": "compare the attempt"},
                                          {"role": "assistant", "content": feedback}] if feedback else []),
    }


def write_pickle(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(value))


class TestReleaseConfigRunsUnchanged:
    @pytest.mark.slow
    def test_the_filled_in_default_yaml_runs_records_and_skips_finished_work(self, checkout: Path) -> None:
        with ReleaseUserServer(solve_at=1) as server:
            done = run_release_command(checkout, server)
            assert done.returncode == 0, done.stderr
            calls = len(server.server.requests)
            assert {r.headers["authorization"] for r in server.server.requests} == {f"Bearer {USER_KEY}"}
            assert {r.body["model"] for r in server.server.requests} == {"gpt-4o", "o4-mini"}

            out = checkout / "experiment_results"
            turns = load_turns(out / RUN_FOLDER.format(level=4) / f"task_{TASK}_result.pkl")
            assert [t["turn_number"] for t in turns] == [0, 1] and turns[1]["status"] == "passed"
            seed = load_turns(out / "init_seed" / f"gpt-4o_task{TASK}_init.pkl")
            assert isinstance(seed, list) and len(seed) == 1 and seed[0]["final_code"] == turns[0]["final_code"]
            # the release's record types, readable the way its notebooks read them
            assert sum(turns[0]["code_input_tokens"]) == 100 * len(turns[0]["code_input_tokens"]) > 0
            assert sum(turns[0]["feedback_input_token"]) == 100 and turns[1]["feedback_input_token"] == []
            assert turns[0]["feedback_interaction_history"][1]["content"] == FEEDBACK
            assert turns[0]["feedback_interaction_history"][0]["role"] == "user"
            assert turns[1]["feedback_interaction_history"] == []
            result = turns[0]["execution_result"]
            assert set(result["test_summary"]) == {f"test.py::{n}" for n in DATASET.get(TASK).test_cases}
            assert result["failure_messages"] and all(m.startswith(("FAILURE in ", "ERROR in "))
                                                      for m in result["failure_messages"])
            assert turns[0]["token_totals"]["code_input_tokens"] == sum(turns[0]["code_input_tokens"])
            assert "ACTIONABLE-flip-it" in turns[0]["feedback_text"]  # level 4 shows every field

            again = run_release_command(checkout, server)  # resume: false skips the finished task
            assert again.returncode == 0, again.stderr
            assert len(server.server.requests) == calls

    def test_config_values_as_the_release_means_them(self, checkout: Path, monkeypatch) -> None:
        monkeypatch.chdir(checkout)
        cfg = load_config("config/default.yaml")
        assert cfg.work_dir == (checkout / "work_dir" / "dataset").resolve()
        assert cfg.output_dir == checkout / "experiment_results"
        assert cfg.init_seed_dir == checkout / "experiment_results" / "init_seed"
        assert (cfg.guidance_levels, cfg.memory_threshold, cfg.memory_to_keep, cfg.resume) == ((4,), 15, 10, False)
        assert cfg.models[0].endpoint is None and cfg.models[0].deployment is None  # "" means not set
        assert cfg.task_ids == (TASK,) and cfg.replay_feedback_level is None
        (checkout / "config" / "dataset.yaml").write_text(filled_in(work_dir="work_dir/dataset"))
        assert load_config("config/dataset.yaml").work_dir == cfg.work_dir  # the dataset folder itself works too

    def test_the_placeholder_key_falls_back_to_the_environment(self, checkout: Path, monkeypatch) -> None:
        monkeypatch.chdir(checkout)
        (checkout / "config" / "raw.yaml").write_text(RELEASE_DEFAULT_YAML)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        cfg = load_config("config/raw.yaml")
        assert cfg.models[0].api_key == cfg.feedback_model.api_key == "sk-from-env"

    def test_a_missing_dataset_names_the_folder_it_was_resolved_against(self, checkout: Path, monkeypatch) -> None:
        elsewhere = checkout.parent / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        with pytest.raises(ConfigError) as info:
            load_config(checkout / "config" / "default.yaml")
        assert f"'work_dir' (relative to the working folder {elsewhere})" in str(info.value)
        assert "holds neither dataset/annotation_meta.jsonl nor annotation_meta.jsonl" in str(info.value)


class TestReleaseResultsResumeAndSeeds:
    def test_a_partial_release_result_is_skipped_then_continued_with_resume(self, checkout: Path) -> None:
        result = checkout / "experiment_results" / RUN_FOLDER.format(level=4) / f"task_{TASK}_result.pkl"
        release = [release_turn(0, WRONG)]
        write_pickle(result, release)
        with ReleaseUserServer(solve_at=1) as server:
            skipped = run_release_command(checkout, server)
            assert skipped.returncode == 0, skipped.stderr
            assert server.server.requests == [] and load_turns(result) == release  # resume: false keeps it

            (checkout / "config" / "default.yaml").write_text(filled_in(resume=True))
            resumed = run_release_command(checkout, server)
            assert resumed.returncode == 0, resumed.stderr
            turns = load_turns(result)
            assert [t["turn_number"] for t in turns] == [0, 1] and turns[1]["status"] == "passed"
            assert {k: turns[0][k] for k in release[0]} == {**release[0], "execution_result": {
                **release[0]["execution_result"], "status": "failed"}}
            first = server.code_prompts()[0]
            assert turn_of(first) == 1 and "DESCRIPTION-wrong-sign" in first and "ACTIONABLE-flip-it" in first
            failed = OURS.fill("test_line", path=f"test.py::{FAILING}", verdict=OURS.fill("test_fail"))
            assert failed in first  # the test information rebuilt from the release's execution_result

        sys.path.insert(0, str(REPO / "metrics"))
        from metric_passrate_unitest import get_model_passrates

        rates = get_model_passrates("gpt-4o", [TASK], checkout / "experiment_results",
                                    dataset_dir=checkout / "work_dir" / "dataset")
        assert rates[4] == 1.0

    def test_overwrite_recomputes_and_keeps_the_old_file(self, checkout: Path) -> None:
        folder = checkout / "experiment_results" / RUN_FOLDER.format(level=4)
        write_pickle(folder / f"task_{TASK}_result.pkl", [release_turn(0, WRONG, feedback=None, solved=True)])
        (checkout / "config" / "default.yaml").write_text(filled_in(max_turn=1) + "overwrite: true\n")
        with ReleaseUserServer(solve_at=0) as server:
            done = run_release_command(checkout, server)
            assert done.returncode == 0, done.stderr
        recomputed = load_turns(folder / f"task_{TASK}_result.pkl")[0]["final_code"]
        assert recomputed == DATASET.canonical(TASK).strip()  # the release protocol stores it stripped
        kept = list(folder.glob(f"task_{TASK}_result.*.pkl.bak"))
        assert len(kept) == 1 and load_turns(kept[0])[0]["final_code"] == WRONG

    def test_a_release_seed_is_reused_by_every_level(self, checkout: Path) -> None:
        seed_code = "def from_the_release_seed():\n    return 0\n"
        write_pickle(checkout / "experiment_results" / "init_seed" / f"gpt-4o_task{TASK}_init.pkl",
                     [release_turn(0, seed_code)])
        (checkout / "config" / "default.yaml").write_text(filled_in(max_turn=2))
        with ReleaseUserServer(solve_at=1) as server:
            done = run_release_command(checkout, server)
            assert done.returncode == 0, done.stderr
            assert all(turn_of(p) >= 1 for p in server.code_prompts())  # turn 0 came from the seed
            assert not any(r.body["model"] == "o4-mini" for r in server.server.requests)  # so did its feedback
        turns = load_turns(checkout / "experiment_results" / RUN_FOLDER.format(level=4) / f"task_{TASK}_result.pkl")
        assert turns[0]["final_code"] == seed_code and turns[0]["feedback_source"] == "seed"
        assert turns[0]["feedback_items"] == FEEDBACK and turns[1]["status"] == "passed"


class TestReleaseReplay:
    @pytest.mark.slow
    def test_replay_feedback_level_runs_one_new_turn_from_each_stored_turn(self, checkout: Path) -> None:
        """The configured level's run (1), each stored turn but the last continued once with its raw feedback
        shown at level K (4); into the configured level's folder; only with resume: true, as in the release."""
        source = checkout / "experiment_results" / RUN_FOLDER.format(level=1) / f"task_{TASK}_result.pkl"
        write_pickle(source, [release_turn(0, WRONG), release_turn(1, WRONG + "# turn 1\n"),
                              release_turn(2, WRONG + "# turn 2\n")])
        replay = source.with_name(f"task_{TASK}_result_replay_level4.pkl")
        with ReleaseUserServer(solve_at=None) as server:
            (checkout / "config" / "default.yaml").write_text(filled_in(guidance_level=1, replay_feedback_level=4))
            idle = run_release_command(checkout, server)
            assert idle.returncode == 0 and not server.code_prompts() and not replay.exists()
            assert "resume: true" in idle.stdout
            (checkout / "config" / "default.yaml").write_text(filled_in(guidance_level=1, replay_feedback_level=4,
                                                                        resume=True))
            done = run_release_command(checkout, server)
            assert done.returncode == 0, done.stderr
            prompts = [p for p in server.code_prompts() if not wrote_file(p)]
            assert not any(r.route.endswith("/responses") for r in server.server.requests)
        turns = load_turns(replay)
        assert [t["turn_number"] for t in turns] == [1, 2] and [t["guidance_level"] for t in turns] == [4, 4]
        assert "# turn 1" in prompts[1] and "# turn 1" not in prompts[0]  # each from its stored file
        assert "memory of turn 0" in prompts[0] and "memory of turn 1" in prompts[1]  # and its memory
        for prompt in prompts:  # the stored raw feedback, formatted at level 4
            assert "DESCRIPTION-wrong-sign" in prompt and "ANALYSIS-paper-eq-7" in prompt
        assert load_turns(source)[-1]["final_code"] == WRONG + "# turn 2\n"  # the stored run is only read


class _OneAnswer:
    """A model giving one fixed answer; ``system`` is the system prompt it was last sent."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.system = ""

    def complete(self, messages: list[dict], *, response_schema: dict | None = None) -> Completion:
        self.system = next((m["content"] for m in messages if m["role"] == "system"), "")
        return Completion(self.text, Usage("fake", "m", 1, 1, 0, 0, 0.0, 0.0))


class TestReleaseAgentProtocol:
    def test_the_command_may_follow_on_the_next_line(self) -> None:
        action = parse_answer("reflect: rewrite it\naction:\nREPLACE\n```python\nx = 1\n```")
        assert (action.name, action.code) == ("REPLACE", "x = 1\n")
        assert parse_answer("reflect: look\naction:\n\nREAD pkg/a.py").argument == "pkg/a.py"
        with pytest.raises(ActionFormatError, match="names no action"):
            parse_answer("reflect: hm\naction:\n```python\nx = 1\n```")

    def test_the_release_action_set_by_default_with_edit_opt_in(self, tmp_path: Path) -> None:
        (tmp_path / "repo").mkdir()
        (tmp_path / "repo" / "t.py").write_text("a = 1\n")
        ws = RepoWorkspace(tmp_path / "repo", "t.py")
        brief = TaskBrief("latex", "task", "t.py")
        improved = ImprovedProtocol(15, 10)
        model = _OneAnswer("reflect: fix\naction: EDIT 1 1\n```python\na = 2\n```")
        agent = CodeAgent(model, improved, improved.settings["agent"], brief, ws, max_steps=1, actions=RELEASE_ACTIONS)
        result = agent.run_turn(TurnInput(0))
        assert result.actions[0]["action"] == "INVALID" and ws.code == "a = 1\n"
        assert "unknown action 'EDIT'" in result.actions[0]["argument"]
        assert "REPLACE" in model.system and "EDIT" not in model.system
        cfg_agent = CodeAgent(_OneAnswer("reflect: fix\naction: EDIT 1 1\n```python\na = 2\n```"), improved,
                              improved.settings["agent"], brief, ws, max_steps=1, actions=ACTIONS)
        assert cfg_agent.run_turn(TurnInput(0)).actions[0]["action"] == "EDIT" and ws.code == "a = 2\n"
        release = ReleaseProtocol(load_release_texts(None), 15)
        ws.write_code("a = 1\n")
        edit = CodeAgent(_OneAnswer("reflect: fix\naction: EDIT 1 1\n```python\na = 2\n```"), release,
                         release.settings["agent"], brief, ws, max_steps=1, actions=RELEASE_ACTIONS)
        first = edit.run_turn(TurnInput(0)).actions[0]
        assert (first["action"], first["argument"], ws.code) == ("INVALID", "edit-disabled", "a = 1\n")

    def test_baseline_keeps_every_python_block(self, tmp_path: Path) -> None:
        (tmp_path / "repo").mkdir()
        ws = RepoWorkspace(tmp_path / "repo", "t.py")
        answer = "Imports:\n```python\nimport math\n```\nThen:\n```python\ndef f():\n    return math.pi\n```"
        for protocol, written in ((ImprovedProtocol(15, 10), "import math\n\ndef f():\n    return math.pi\n"),
                                  (ReleaseProtocol(load_release_texts(None), 15),
                                   "\nimport math\n\n\ndef f():\n    return math.pi\n")):
            CodeAgent(_OneAnswer(answer), protocol, protocol.settings["baseline"], TaskBrief("l", "t", "t.py"), ws,
                      max_steps=1, actions=RELEASE_ACTIONS).run_turn(TurnInput(0))
            assert ws.code == written

    def test_the_feedback_prompt_asks_for_every_difference(self) -> None:
        assert "not only the ones that cause errors" in FEEDBACK_REQUEST
        assert "EVERY difference you find" in FEEDBACK_SYSTEM


NOTEBOOK_CELL = """
import json, sys
sys.path.insert(0, "metrics")
from metric_passrate_testcase import get_model_passrates, load_task_ids_from_jsonl
import metric_passrate_unitest as unit, metric_MRR as mrr, pickle
ids = load_task_ids_from_jsonl()
turns = pickle.load(open("experiment_results/memory_agent_gpt-4o_feedback_fixed_guidance_4/task_1_result.pkl", "rb"))
print(json.dumps({"ids": ids, "cases": get_model_passrates("gpt-4o", [1])[4],
                  "unit": unit.get_model_passrates("gpt-4o", [1])[4], "mrr": mrr.get_model_mmr("gpt-4o", [1])[4],
                  "tokens": sum(turns[0]["code_input_tokens"])}))
"""


class TestReleaseCommandsAndNotebooksOnOurRun:
    """After the release's main command, its runner command and notebook cells work on what it wrote."""

    @pytest.mark.slow
    def test_runner_command_and_notebook_cell(self, checkout: Path) -> None:
        dataset = checkout / "work_dir" / "dataset"
        dataset.unlink()  # a copy: the runner leaves its report inside the dataset, as the release's does
        shutil.copytree(REPO / "work_dir" / "dataset", dataset, ignore=shutil.ignore_patterns("pytest_report"))
        (checkout / "metrics").symlink_to(REPO / "metrics", target_is_directory=True)
        (checkout / "config" / "default.yaml").write_text(filled_in(max_turn=2))
        with ReleaseUserServer(solve_at=1) as server:
            assert run_release_command(checkout, server).returncode == 0
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "RECODE_ENV_BACKEND": "current"}
        runner = [sys.executable, str(REPO / "agent" / "clean_test_runner.py"), "--work-dir", "work_dir",
                  "--task-id", str(TASK)]
        on_disk = subprocess.run(runner, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
        assert on_disk.returncode == 1, on_disk.stderr  # the target file on disk is the blanked one
        report = dataset / "annotations" / f"annotation_{TASK}" / "pytest_report" / "report.xml"
        assert report.is_file() and "<testcase" in report.read_text()
        gold = subprocess.run([*runner, "--canonical", "--json"], cwd=checkout, env=env, capture_output=True,
                              text=True, timeout=300)
        assert gold.returncode == 0 and json.loads(gold.stdout)["status"] == "passed", gold.stderr
        cell = subprocess.run([sys.executable, "-c", NOTEBOOK_CELL], cwd=checkout, env=env, capture_output=True,
                              text=True, timeout=120)
        assert cell.returncode == 0, cell.stderr
        values = json.loads(cell.stdout)
        assert values["ids"] == [meta.index for meta in DATASET.runnable()]
        assert values["cases"] == values["unit"] == 1.0 and values["mrr"] == 0.5  # solved at turn 1
        assert values["tokens"] == sum(load_turns(checkout / "experiment_results" / RUN_FOLDER.format(level=4)
                                                  / f"task_{TASK}_result.pkl")[0]["code_input_tokens"]) > 0
