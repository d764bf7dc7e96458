"""run_task end to end on the sample tasks with the scripted models and the real test runner, in our improved
protocol (the release's: tests/test_protocol_release.py).

The scripted code model (config/scripted/code_model.yaml) plants bugs at turn 0 and fixes
them according to what the prompt shows: task 2 from the test digest alone, task 1 from any
feedback, tasks 3/7 from actionable feedback (one of two bugs from a description alone).
"""
from __future__ import annotations

import json
import multiprocessing
import pickle
from pathlib import Path

import pytest
import yaml

from agent.job.layout import Job, is_finished, job_store, result_folder
from agent.job.parts import RunParts
from agent.job.record import check_builtins
from agent.job.replay import replay_task
from agent.job.results import ResultStore
from agent.job.seeds import Seeds, seed_path
from agent.job.workflow import run_task
from tests.loop_config import REPO, comparable
from tests.loop_config import make_config as any_config

pytestmark = pytest.mark.timeout(120)


def make_config(tmp_path: Path, **keys: object):
    return any_config(tmp_path, protocol="improved", **keys)


def ensure_seed(cfg, model, task: int) -> bool:
    return Seeds(cfg, RunParts(cfg)).ensure(model, task)


def run(cfg, level: int, task: int, **kwargs) -> tuple[dict, list[dict]]:
    outcome = run_task(cfg, Job(cfg.models[0], level, task), **kwargs)
    store = ResultStore(result_folder(cfg, cfg.models[0], level), task)
    return outcome, store.load()


@pytest.mark.slow
def test_levels_share_turn_zero_and_reveal_more_feedback(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, evaluation_setting="memory_agent", guidance_level=[0, 1, 2, 3, 4])
    assert ensure_seed(cfg, cfg.models[0], 3) is True
    assert ensure_seed(cfg, cfg.models[0], 3) is False
    outcomes, runs = {}, {}
    for level in range(5):
        outcomes[level], runs[level] = run(cfg, level, 3)
    assert [outcomes[level]["solved"] for level in range(5)] == [False, False, False, True, True]
    assert outcomes[1]["best_rate"] == outcomes[2]["best_rate"] == 0.8 > outcomes[0]["best_rate"] == 0.7
    assert len({runs[level][0]["final_code"] for level in range(5)}) == 1  # one shared turn 0
    texts = [runs[level][0]["feedback_text"] for level in range(5)]
    assert texts[0] == "" and runs[0][0]["feedback_items"] == [] and runs[0][0]["feedback_usage"] == []
    for level, (shown, hidden) in enumerate([("", "Description:"), ("Description:", "Analysis:"),
                                             ("Analysis:", "Actionable feedback:"),
                                             ("Actionable feedback:", "Code suggestion:"), ("Code suggestion:", "~")]):
        assert shown in texts[level] and hidden not in texts[level]
        assert "T2" not in texts[level] and "T3" not in texts[level]
    assert runs[4][0]["feedback_items"] == runs[1][0]["feedback_items"] and len(runs[1][0]["feedback_items"]) == 2
    assert {r[-1]["feedback_source"] for r in runs.values()} == {"none"}  # no feedback on the last turn
    for turns in runs.values():
        check_builtins(turns)
        assert all(t["guidance_level"] in range(5) for t in turns)
    # the seed's calls are counted once, in the first level job to use the seed
    assert outcomes[0]["api_calls"] > 3 and outcomes[0]["api_calls"] > outcomes[1]["api_calls"]
    assert outcomes[1]["api_calls"] == 2  # turn 1 only: REPLACE + SUBMIT, no feedback on the last turn


@pytest.mark.parametrize(
    "setting, level, task, actions0",
    [("baseline", 0, 2, ["REPLACE", "SUBMIT"]), ("agent", 1, 1, ["READ", "REPLACE", "SUBMIT"])],
)
def test_settings_end_to_end(tmp_path: Path, setting: str, level: int, task: int, actions0: list[str]) -> None:
    cfg = make_config(tmp_path, evaluation_setting=setting, guidance_level=level)
    outcome, turns = run(cfg, level, task)
    assert outcome["state"] == "finished" and outcome["solved"] and outcome["turns"] == 2
    assert [a["action"] for a in turns[0]["actions"]] == actions0
    assert turns[0]["status"] == "failed" and turns[1]["status"] == "passed"
    assert "FAILED test_" in turns[0]["test_digest"]
    assert all(t["agent_memory"] == [] for t in turns) if setting == "baseline" else True
    state = json.loads((result_folder(cfg, cfg.models[0], level) / f"task_{task}_state.json").read_text())
    assert state["finished"] is True and state["error"] is None
    assert is_finished(cfg, Job(cfg.models[0], level, task))
    again = run_task(cfg, Job(cfg.models[0], level, task))
    assert again["state"] == "skipped" and again["api_calls"] == 0 and again["solved"]


class Interrupt(BaseException):
    """Stands for SIGINT/SIGKILL between two turns (not an Exception, so run_task does not catch it)."""


@pytest.mark.slow
def test_dynamic_levels_rise_and_a_resumed_run_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    common = dict(evaluation_setting="memory_agent", guidance_type="dynamic", guidance_level=1, max_turn=4,
                  memory_threshold=6, memory_to_keep=2, init_seed=str(tmp_path / "seeds"))
    whole_cfg = make_config(tmp_path, output_dir=str(tmp_path / "whole"), **common)
    outcome, whole = run(whole_cfg, 1, 3)
    assert [t["guidance_level"] for t in whole] == [1, 1, 2, 3]  # +1 after turns 2 and 3: no new best rate
    assert "Analysis:" in whole[2]["feedback_text"] and "Analysis:" not in whole[1]["feedback_text"]
    assert result_folder(whole_cfg, whole_cfg.models[0], 1).name.endswith("_feedback_dynamic_guidance_1")
    assert outcome["turns"] == 4 and not outcome["solved"]

    cut_cfg = make_config(tmp_path, output_dir=str(tmp_path / "cut"), **common)

    def stop_after_turn_1(message: dict) -> None:
        if message["turn"] == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        run(cut_cfg, 1, 3, progress=stop_after_turn_1)
    store = ResultStore(result_folder(cut_cfg, cut_cfg.models[0], 1), 3)
    assert len(store.load()) == 2 and store.state()["finished"] is False
    assert not is_finished(cut_cfg, Job(cut_cfg.models[0], 1, 3))
    resumed_outcome, resumed = run(cut_cfg, 1, 3)
    assert resumed_outcome["state"] == "finished" and resumed_outcome["api_calls"] > 0
    assert comparable(resumed) == comparable(whole)


def _race(cfg_path: str, barrier, results) -> None:
    from agent.config import load_config
    cfg = load_config(cfg_path)
    barrier.wait()
    results.put(ensure_seed(cfg, cfg.models[0], 6))


def test_the_seed_is_computed_once_when_processes_race(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, evaluation_setting="baseline", guidance_level=[0, 2])
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(3), context.Queue()
    workers = [context.Process(target=_race, args=(str(tmp_path / "config_0.yaml"), barrier, results))
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert sorted(results.get(timeout=5) for _ in workers) == [False, False, True]
    seed = pickle.loads(seed_path(cfg.init_seed_dir, "scripted-coder", 6).read_bytes())
    assert len(seed) == 1 and seed[0]["status"] == "passed" and seed[0]["feedback_items"] == []


@pytest.mark.slow
def test_a_run_on_replayed_feedback_formats_it_at_this_level_with_a_documented_fallback(tmp_path: Path) -> None:
    source_cfg = make_config(tmp_path, evaluation_setting="agent", guidance_level=4, max_turn=3)
    _, level4 = run(source_cfg, 4, 3)
    assert len(level4) == 2  # solved at turn 1, so it has no feedback for turn 1
    cfg = make_config(tmp_path, evaluation_setting="agent", guidance_level=1, max_turn=3, replay_run_feedback_level=4)
    _, turns = run(cfg, 1, 3)
    assert result_folder(cfg, cfg.models[0], 1).name.endswith("_guidance_1_replay4")
    assert turns[0]["feedback_source"] == "replay:L4"
    assert turns[0]["feedback_items"] == level4[0]["feedback_items"]
    assert "Description:" in turns[0]["feedback_text"] and "Analysis:" not in turns[0]["feedback_text"]
    assert turns[1]["feedback_source"] == "llm (replay level 4 has no feedback at turn 1)"
    assert turns[1]["feedback_items"] and turns[1]["feedback_usage"]


@pytest.mark.slow
def test_release_replay_continues_each_stored_turn_but_the_last_with_its_feedback_at_level_k(tmp_path: Path) -> None:
    """The release's direction: the configured level's run (1), its records shown at level K (4)."""
    source_cfg = make_config(tmp_path, evaluation_setting="agent", guidance_level=1, max_turn=3)
    _, source = run(source_cfg, 1, 3)
    assert [t["feedback_source"] for t in source] == ["seed", "llm", "none"] and source[2]["status"] != "passed"
    cfg = make_config(tmp_path, evaluation_setting="agent", guidance_level=1, max_turn=3, replay_feedback_level=4)
    job = Job(cfg.models[0], 1, 3)
    assert replay_task(cfg, job)["state"] == "finished"
    store = job_store(cfg, job)
    assert store.folder == result_folder(source_cfg, cfg.models[0], 1)
    assert store.result_path.name == "task_3_result_replay_level4.pkl"
    replayed = store.load()
    assert [t["turn_number"] for t in replayed] == [1, 2]  # from stored turns 0 and 1, not the last
    assert [t["feedback_source"] for t in replayed] == ["replay:L1", "replay:L1"]
    assert [t["guidance_level"] for t in replayed] == [4, 4]
    shown = replayed[0]["code_calls"][0]["messages"][-1]["content"]
    assert "Code suggestion:" in shown and source[0]["feedback_items"][0]["direct_code_feedback"].strip() in shown
    assert replayed[1]["status"] == "passed"  # level 4's suggestion fixes what level 1's description did not
    no_resume = make_config(tmp_path, evaluation_setting="agent", guidance_level=1, max_turn=3,
                            replay_feedback_level=4, resume=False)
    skipped = replay_task(no_resume, job)
    assert skipped["state"] == "skipped" and "resume: true" in skipped["error"]


def test_feedback_from_a_file(tmp_path: Path) -> None:
    records = [{"interface": "dpo_loss_grad", "category": "T2", "description": "label smoothing is ignored",
                "analysis": "", "actionable_feedback": "", "direct_code_feedback": ""}]
    path = tmp_path / "human.jsonl"
    path.write_text(json.dumps({"task_index": 1, "turn_number": 0, "feedback": records}) + "\n")
    cfg = make_config(tmp_path, evaluation_setting="agent", guidance_level=2, feedback_source="file",
                      feedback_file=str(path))
    outcome, turns = run(cfg, 2, 1)
    assert outcome["solved"] and turns[0]["feedback_source"] == "file" and turns[0]["feedback_items"] == records
    assert "label smoothing is ignored" in turns[0]["feedback_text"]
    assert result_folder(cfg, cfg.models[0], 2).name.endswith("_source_file")


def test_an_errored_task_is_recorded_then_retried(tmp_path: Path) -> None:
    broken = make_config(tmp_path, evaluation_setting="agent", guidance_level=0, env_backend="conda")
    outcome, turns = run(broken, 0, 2)
    assert outcome["state"] == "error" and turns == []
    assert outcome["error"].startswith("InfraError: task 2 turn 0: the tests could not run (session: no environment")
    store = ResultStore(result_folder(broken, broken.models[0], 0), 2)
    assert store.state()["finished"] is False and "InfraError" in store.state()["error"]
    assert not is_finished(broken, Job(broken.models[0], 0, 2))
    fixed = make_config(tmp_path, evaluation_setting="agent", guidance_level=0)
    retried, turns = run(fixed, 0, 2)
    assert retried["state"] == "finished" and retried["solved"] and store.state()["error"] is None


def test_a_corrupt_result_is_an_error_and_is_left_untouched(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, evaluation_setting="agent", guidance_level=0)
    store = ResultStore(result_folder(cfg, cfg.models[0], 0), 2)
    store.folder.mkdir(parents=True)
    store.result_path.write_bytes(b"not a pickle")
    outcome = run_task(cfg, Job(cfg.models[0], 0, 2))
    assert outcome["state"] == "error" and "move it away" in outcome["error"]
    assert store.result_path.read_bytes() == b"not a pickle"


def test_snippet_setting_on_an_imported_researchcodebench_task(tmp_path: Path) -> None:
    from scripts.import_researchcodebench import main as import_rcb

    dataset = tmp_path / "rcb"
    assert import_rcb(["--pset", str(REPO / "tests/fixtures/rcb/pset"), "--out", str(dataset)]) == 0
    script = tmp_path / "snippet_model.yaml"
    script.write_text(yaml.safe_dump({"rules": [
        {"when": "## Your previous attempt",
         "responses": ["```python\n        return z * self.gamma + self.beta\n```"]},
        {"when": 'Implement block "affine"', "responses": ["```python\nreturn z * self.gamma + self.beta\n```"]},
    ]}))
    cfg = make_config(tmp_path, evaluation_setting="snippet", guidance_level=0, work_dir=str(dataset),
                      script=str(script))
    outcome, turns = run(cfg, 0, 4)
    assert outcome["solved"] and [t["status"] for t in turns] == ["failed", "passed"]  # verbatim, mis-indented
    assert turns[0]["code_interaction_history"][0]["content"].startswith("You are given a research paper")
    shown = turns[1]["code_interaction_history"][0]["content"]
    assert "SyntaxError: 'return' outside function" in shown  # the digest of turn 0
