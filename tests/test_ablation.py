"""The four ablations end to end on a small real offline run (scripted models, real tests).

One run of the real workflow (tasks 3 and 5, guidance level 1, two turns) is
made once for the module; each ablation then runs on it through its main(),
and again to show that a rerun reuses every stored unit: no model call, no
test run. Model calls are counted at the scripted model, test runs at the
runner entry the HumanAgent uses.
"""
from __future__ import annotations

import json
import pickle
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ablation import feedback_ablation, feedback_category, human_feedback, step_ablition
from ablation.ablation_common import (
    Continuation, Tally, Trajectory, UnitStore, ablation_folder, for_each, incomplete_notes, load_run,
    run_model_name, sample, text_table, unsolved_turns,
)
import agent.runner.core as runner
from agent.task.dataset import DatasetManager
from agent.config import load_config
from agent.models.build import Completion, Usage
from agent.models.scripted import ScriptedModel
from agent.job.layout import Job, result_folder
from agent.job.parts import RunParts
from agent.job.replay import replay_task, replay_turn
from agent.job.workflow import run_task
from scripts.import_researchcodebench import main as import_main

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "config" / "scripted"
TASKS = (3, 5)
DATASET = DatasetManager(REPO / "work_dir" / "dataset")


def write_config(path: Path, output: Path, human_script: Path = SCRIPTS / "feedback_model.yaml",
                 human_model: str = "scripted-researcher", **extra) -> Path:
    values = {
        "api-provider": "scripted", "model": "scripted-coder", "script": str(SCRIPTS / "code_model.yaml"),
        "human-api-provider": "scripted", "human-agent-model": human_model, "human-script": str(human_script),
        "evaluation-setting": "memory_agent", "guidance-level": 1, "max-turn": 2, "max-steps": 3,
        "work-dir": str(REPO / "work_dir" / "dataset"), "output-dir": str(output), "sandbox": "off",
        "task-ids": list(TASKS), "parallel-mode": "none", "protocol": "improved", **extra,
    }
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> dict:
    """A finished two-turn L1 run of tasks 3 and 5, made by the real workflow."""
    root = tmp_path_factory.mktemp("ablation")
    config = write_config(root / "run.yaml", root / "out")
    cfg = load_config(config)
    outcomes = [run_task(cfg, Job(cfg.models[0], 1, task)) for task in TASKS]
    assert [o["state"] for o in outcomes] == ["finished", "finished"]
    return {"root": root, "config": config, "cfg": cfg, "run": result_folder(cfg, cfg.models[0], 1)}


class Counter:
    """Counts scripted-model calls and test runs made while an ablation runs in this process."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = self.tests = 0
        complete, run_tests = ScriptedModel.complete, runner.run_candidate

        def counted_complete(model, *args, **kwargs):
            self.calls += 1
            return complete(model, *args, **kwargs)

        def counted_run(*args, **kwargs):
            self.tests += 1
            return run_tests(*args, **kwargs)

        monkeypatch.setattr(ScriptedModel, "complete", counted_complete)
        monkeypatch.setattr(runner, "run_candidate", counted_run)

    def reset(self) -> tuple[int, int]:
        seen, (self.calls, self.tests) = (self.calls, self.tests), (0, 0)
        return seen


@pytest.fixture
def counter(monkeypatch) -> Counter:
    return Counter(monkeypatch)


def run_twice(module, argv: list[str], counter: Counter, capsys) -> tuple[str, tuple[int, int]]:
    """Run an ablation, then again: the second run must call no model, run no test and print the same table."""
    assert module.main(argv) == 0
    first = capsys.readouterr().out
    work = counter.reset()
    assert module.main(argv) == 0
    second = capsys.readouterr().out
    assert counter.reset() == (0, 0)
    assert "0 unit(s) computed" in second and "0 model call(s), 0 test run(s)" in second
    table = first.split("\nthis run:")[0]
    assert second.split("\nthis run:")[0] == table
    return first, work


def summary(report: str) -> tuple[Path, dict]:
    folder = Path(report.strip().splitlines()[-1].removeprefix("results: "))
    rows = json.loads((folder / "summary.json").read_text())["rows"]
    return folder, {row[next(iter(row))]: row for row in rows}


def unit_files(folder: Path) -> dict[str, dict]:
    """The unit files of a results folder by name, without the hash of the feedback text they ran with."""
    return {re.sub(r"_[0-9a-f]{8}$", "", p.stem): json.loads(p.read_text()) for p in folder.glob("task_*.json")}


@pytest.mark.slow
def test_feedback_ablation_levels_from_another_feedback_model(source, counter, capsys, tmp_path) -> None:
    other = write_config(tmp_path / "other.yaml", source["root"] / "out", human_model="other-researcher")
    argv = ["--yaml-location", str(source["config"]), "--feedback-yaml", str(other), "--samples", "1", "--seed", "3"]
    report, (calls, tests) = run_twice(feedback_ablation, argv, counter, capsys)
    folder, rows = summary(report)
    assert "feedback_other-researcher" in folder.name
    assert tests == 4 and calls >= 5  # one feedback call, at least one code-model call per level
    pair = sample(unsolved_turns(load_run(source["run"], RunParts(source["cfg"]))), 1, 3)[0]
    units = unit_files(folder)
    prefix = f"task_{pair[0]}_turn_{pair[1]}_"
    assert sorted(units) == [prefix + c for c in ("L1", "L2", "L3", "L4", "feedback")]
    feedback = units[prefix + "feedback"]
    assert feedback["records"] and {u["model"] for u in feedback["usage"]} == {"other-researcher"}
    # The scripted coder fixes every bug only when shown the level-4 code suggestion (task 5) or
    # the level-3 actionable feedback (task 3); level 1 text never suffices.
    assert list(rows) == ["recorded turn (start)", "L1", "L2", "L3", "L4"]
    assert rows["L1"]["solved"] == 0.0 and rows["L4"]["solved"] == 1.0
    assert rows["L4"]["test-case pass"] == 1.0 and rows["recorded turn (start)"]["solved"] == 0.0
    unit = units[prefix + "L4"]
    assert "Code suggestion:" in unit["feedback_text"] and unit["record"]["status"] == "passed"
    assert unit["record"]["turn_number"] == pair[1] + 1 and unit["record"]["guidance_level"] == 4
    assert unit["record"]["feedback_source"] == "llm" and all(rows[f"L{n}"]["incomplete"] == 0 for n in range(1, 5))


def test_feedback_that_cannot_be_produced_leaves_the_sample_incomplete(source, counter, capsys, tmp_path) -> None:
    script = tmp_path / "mute.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"responses": ["no schema here"]}]}))
    mute = write_config(tmp_path / "mute_config.yaml", source["root"] / "out", human_script=script,
                        human_model="mute-researcher")
    argv = ["--yaml-location", str(source["config"]), "--feedback-yaml", str(mute), "--samples", "1", "--guidance-level",
            "2", "4"]
    for _ in range(2):  # nothing is kept as a result: the next run asks for the feedback again
        assert feedback_ablation.main(argv) == 0
        report = capsys.readouterr().out
        folder, rows = summary(report)
        calls, tests = counter.reset()
        assert tests == 0 and calls >= 1  # only the feedback model was asked
        assert [(rows[c]["samples"], rows[c]["incomplete"], rows[c]["solved"]) for c in ("L2", "L4")] == [
            (0, 1, None), (0, 1, None)]
        assert "incomplete, not scored: task" in report and "(L2, L4): no feedback:" in report
        assert "1 unit(s) computed, 0 reused" in report
    assert sorted(unit_files(folder)) == [p.stem for p in folder.glob("task_*_feedback.json")]


@pytest.mark.slow
def test_human_feedback_against_llm_and_no_feedback(source, counter, capsys, tmp_path) -> None:
    human = tmp_path / "human.yaml"
    record = {"interface": "retinanet_classification_loss", "category": "T3", "analysis": "",
              "description": "The loss is normalised by every anchor.", "direct_code_feedback": "",
              "actionable_feedback": "Divide by the number of positive anchors."}
    entries = [{"task_index": 3, "turn_number": 0, "feedback": [record]},
               {"task_index": 3, "turn_number": 5, "feedback": [record]}]  # no such turn: incomplete
    human.write_text(yaml.safe_dump(entries))
    argv = ["--yaml-location", str(source["config"]), "--feedback-file", str(human), "--samples", "4"]
    report, (_, tests) = run_twice(human_feedback, argv, counter, capsys)
    folder, rows = summary(report)
    assert tests == 3 and list(rows) == ["recorded turn (start)", "human", "llm", "none"]
    assert all((row["samples"], row["incomplete"]) == (1, 1) for row in rows.values())  # never scored
    assert "incomplete, not scored: task 3 turn 5 (human, llm, none): no such turn in" in report
    units = unit_files(folder)
    assert sorted(units) == ["task_3_turn_0_human", "task_3_turn_0_llm", "task_3_turn_0_none"]
    recorded = load_run(source["run"], RunParts(source["cfg"]))[3].turns[0]["feedback_items"]
    assert recorded and recorded[0]["description"] in units["task_3_turn_0_llm"]["feedback_text"]  # the run's own
    assert units["task_3_turn_0_none"]["feedback_text"] == ""
    assert units["task_3_turn_0_none"]["record"]["guidance_level"] == 0
    assert [units[f"task_3_turn_0_{c}"]["record"]["feedback_source"] for c in ("human", "llm", "none")] == [
        "file", "replay:L1", "none"]
    assert rows["llm"]["solved"] == 1.0  # level 4 shows the actionable feedback that fixes task 3
    # An edited human entry runs anew; the LLM and no-feedback units stay valid.
    human.write_text(human.read_text().replace("positive anchors", "anchors with label > 0"))
    assert human_feedback.main(argv) == 0
    assert counter.reset()[1] == 1 and "1 unit(s) computed, 2 reused" in capsys.readouterr().out
    assert len(list(folder.glob("task_3_turn_0_human_*.json"))) == 2  # the first answer is kept


def test_llm_condition_asks_the_feedback_model_when_the_turn_got_none(source, counter, tmp_path) -> None:
    cfg = source["cfg"]
    parts = RunParts(cfg)
    cont = Continuation(cfg, parts, cfg.models[0], source["run"], load_run(source["run"], parts))
    store = UnitStore(tmp_path, Tally())
    records = human_feedback.LLMRecords(cont, source["config"], store, 4)
    assert cont.runs[5].turns[1]["feedback_items"] == []  # the last turn gets no feedback in the run
    assert cont.stored_feedback((5, 1), 4).missing == "the turn has no feedback records (none given)"
    fresh = records((5, 1))
    assert fresh.records and fresh.missing is None and fresh.source == "llm" and counter.reset()[0] == 1
    assert records((5, 1)) == fresh and counter.reset()[0] == 0
    assert (tmp_path / "task_5_turn_1_llm_feedback.json").exists()
    assert records((5, 0)).source == "replay:L1" and counter.reset()[0] == 0  # the run's own records


def judge_config(path: Path, output: Path, script: Path) -> Path:
    return write_config(path, output, human_script=script, human_model="scripted-judge")


def test_feedback_category_labels_every_item(source, counter, capsys, tmp_path) -> None:
    judge = judge_config(tmp_path / "judge.yaml", source["root"] / "out", SCRIPTS / "judge_model.yaml")
    argv = ["--yaml-location", str(source["config"]), "--judge-yaml", str(judge)]
    report, (calls, tests) = run_twice(feedback_category, argv, counter, capsys)
    folder, _ = summary(report)
    runs = load_run(source["run"], RunParts(source["cfg"]))
    items = sum(len(runs[task].turns[0]["feedback_items"]) for task in TASKS)
    assert tests == 0 and calls == items > 0
    units = [json.loads(p.read_text()) for p in sorted(folder.glob("*/task_*.json"))]
    labels = [lab for u in units for lab in u["labels"]]
    assert len(labels) == items and all(lab["error"] is None and lab["attempts"] == 1 for lab in labels)
    assert {(u["model"], u["level"]) for u in units} == {("scripted-coder", 1)}
    # Neither task passes at turn 1 (level-1 text fixes one bug of two), so nothing is resolved.
    assert all(lab["adopted"] == "PARTIAL" and lab["resolved"] == "NO" for lab in labels)
    assert {lab["error_type"] for lab in labels} == {lab["feedback_category"] for lab in labels}
    assert "items" in report and "error type" in report and "0 of" in report


@pytest.mark.parametrize("answers, attempts, error", [
    (["not json", '{"error_type": "t3", "adopted": "yes", "resolved": "no", "reason": "r"}'], 2, False),
    (['{"error_type": "T9", "adopted": "YES", "resolved": "NO", "reason": "r"}'], 3, True),
])
def test_judge_answers_are_validated_and_retried(source, counter, capsys, tmp_path, answers, attempts, error) -> None:
    script = tmp_path / "judge_script.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"index-from": "assistant-count", "responses": answers}]}))
    judge = judge_config(tmp_path / "judge.yaml", source["root"] / "out", script)
    argv = ["--yaml-location", str(source["config"]), "--judge-yaml", str(judge), "--samples", "1"]
    assert feedback_category.main(argv) == 0
    folder, rows = summary(capsys.readouterr().out)
    labels = [lab for p in folder.glob("*/task_*.json") for lab in json.loads(p.read_text())["labels"]]
    assert labels and all(lab["attempts"] == attempts for lab in labels)
    assert all((lab["error"] is not None) == error for lab in labels)
    assert rows["all"]["items"] == (0 if error else len(labels))
    if not error:
        assert {lab["error_type"] for lab in labels} == {"T3"} and rows["all"]["adopted YES"] == 1.0


def test_step_ablation_replays_actions_and_tests_after_each_change(source, counter, capsys) -> None:
    argv = ["--yaml-location", str(source["config"]), "--samples", "1", "--seed", "0"]
    report, (calls, tests) = run_twice(step_ablition, argv, counter, capsys)
    folder, rows = summary(report)
    task, turn = sample([(t, n) for t in TASKS for n in range(2)], 1, 0)[0]
    unit = json.loads((folder / f"task_{task}_turn_{turn}.json").read_text())
    record = load_run(source["run"], RunParts(source["cfg"]))[task].turns[turn]
    assert calls == 0 and unit["matches_record"]
    assert [s["action"] for s in unit["steps"]] == ["start"] + [a["action"] for a in record["actions"]]
    changed = [s for s in unit["steps"] if s["changed"]]
    assert tests == len({s["step"] for s in changed}) and all(s["action"] in ("start", "REPLACE") for s in changed)
    final = unit["steps"][-1]
    assert final["pass_rate"] == unit["recorded"]["pass_rate"] == rows["recorded submission"]["test-case pass"]
    assert "start" in rows and f"step {record['actions'][-1]['step']}" in rows


def test_same_seed_same_samples_and_order_does_not_matter() -> None:
    pool = [(task, turn) for task in range(10) for turn in range(5)]
    picked = sample(pool, 7, seed=11)
    assert picked == sample(list(reversed(pool)), 7, seed=11) == sorted(picked)
    assert len(set(picked)) == 7 and set(picked) <= set(pool)
    assert any(sample(pool, 7, seed=s) != picked for s in range(12, 20))
    assert sample(pool[:3], 7, seed=11) == pool[:3]


def test_unsolved_turns_are_the_failed_submissions(source) -> None:
    runs = load_run(source["run"], RunParts(source["cfg"]))
    assert unsolved_turns(runs) == [(3, 0), (3, 1), (5, 0), (5, 1)]
    assert isinstance(runs[3], Trajectory) and runs[3].previous_code(0, DatasetManager(source["cfg"].work_dir)) == ""


@pytest.mark.parametrize("module", [feedback_ablation, human_feedback, feedback_category, step_ablition])
def test_user_errors_are_one_line(module, source, tmp_path, capsys) -> None:
    script = REPO / "ablation" / f"{module.__name__.rsplit('.', 1)[-1]}.py"
    done = subprocess.run([sys.executable, str(script), "--yaml-location", str(tmp_path / "missing.yaml")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: config file not found") and len(done.stderr.splitlines()) == 1
    for args, expected in ((["--samples", "0"], "--samples: must be at least 1"),
                           (["--max-workers", "0"], "--max-workers: must be at least 1"),
                           (["--source-run", str(tmp_path / "no")], "does not exist")):
        assert module.main(["--yaml-location", str(source["config"]), *args]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and expected in captured.err and len(captured.err.splitlines()) == 1


def test_corrupt_unit_and_missing_human_feedback_are_one_line_errors(source, capsys, tmp_path) -> None:
    out = tmp_path / "out"
    config = write_config(tmp_path / "run.yaml", out)
    argv = ["--yaml-location", str(config), "--source-run", str(source["run"]), "--samples", "1"]
    assert human_feedback.main(argv) == 2
    assert capsys.readouterr().err.startswith("error: no human feedback: pass --feedback-file")
    folder = ablation_folder(load_config(config), "steps", (source["run"].name, "replay"),
                             {"source": str(source["run"].resolve())})
    task, turn = sample([(t, n) for t in TASKS for n in range(2)], 1, 0)[0]
    (folder / f"task_{task}_turn_{turn}.json").write_text("{not json")
    assert step_ablition.main(argv + ["--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert "is corrupt; move it away" in err and len(err.strip().splitlines()) == 1


def test_step_replay_reads_the_code_of_agent_and_baseline_answers() -> None:
    edit = "reflect: fix line 2\naction: EDIT 2 2\n```python\nb = 3\n```"
    action = step_ablition.code_action(edit, {"action": "EDIT"})
    assert (action.name, action.start, action.end, action.code) == ("EDIT", 2, 2, "b = 3\n")
    bare = "Here is the file:\n```python\nx = 1\n```\n"  # the baseline answers with a block, no action line
    assert step_ablition.code_action(bare, {"action": "REPLACE"}).code == "x = 1\n"
    assert step_ablition.code_action("action: REPLACE\n```python\nunclosed", {"action": "REPLACE"}) is None
    history = [{"role": "user", "content": "p", "kind": "step"}, {"role": "assistant", "content": "a1", "kind": "step"},
               {"role": "assistant", "content": "s", "kind": "summary"}, {"role": "assistant", "content": "a2"}]
    assert step_ablition.step_answers({"code_interaction_history": history}) == ["a1", "a2"]


def test_tables_and_run_folder_names() -> None:
    table = text_table(["condition", "samples", "solved"], [["L1", 2, 0.5], ["L2", 2, None]]).splitlines()
    assert table[0].split() == ["condition", "samples", "solved"] and table[2].split() == ["L1", "2", "50.0%"]
    assert table[3].split() == ["L2", "2", "-"]
    assert run_model_name(Path("memory_agent_org_m-1_feedback_fixed_guidance_2_replay4")) == "org_m-1"
    assert run_model_name(Path("my_run")) == "my_run"


def test_a_replay_judge_answers_from_the_cache_of_its_config(source, counter, capsys, tmp_path) -> None:
    cache = tmp_path / "cache.sqlite"
    out = source["root"] / "out"
    scripted = write_config(tmp_path / "scripted.yaml", out, human_script=SCRIPTS / "judge_model.yaml",
                            human_model="judge", **{"cache-path": str(cache)})
    replay = write_config(tmp_path / "replay.yaml", out, human_model="judge", **{"cache-path": str(cache)})
    replay.write_text(replay.read_text().replace("human-api-provider: scripted", "human-api-provider: replay"))
    argv = ["--yaml-location", str(source["config"]), "--samples", "1", "--judge-yaml"]
    assert feedback_category.main(argv + [str(scripted)]) == 0
    recorded = summary(capsys.readouterr().out)
    assert counter.reset()[0] > 0
    assert feedback_category.main(argv + [str(replay)]) == 0
    replayed = summary(capsys.readouterr().out)
    assert counter.reset()[0] == 0 and replayed[0] != recorded[0] and replayed[1] == recorded[1]
    cache.unlink()
    assert feedback_category.main(argv + [str(replay), "--samples", "2"]) == 2  # the second sample is not cached
    assert "no cached answer" in capsys.readouterr().err


class BlockModel:
    """A code model answering every request with one python block (the snippet setting's answer)."""

    def __init__(self, block: str) -> None:
        self.block = block
        self.prompts: list[str] = []

    def complete(self, messages, *, response_schema=None):
        self.prompts.append(messages[-1]["content"])
        return Completion(f"```python\n{self.block}\n```", Usage("fake", "block", 10, 5, None, None, 0.0, 0.0))


def test_a_snippet_run_continues_through_the_workflows_replay(tmp_path: Path) -> None:
    """The ablations take one more turn with the main job's replay: the snippet setting included."""
    pset = REPO / "tests" / "fixtures" / "rcb" / "pset"
    assert import_main(["--pset", str(pset), "--out", str(tmp_path / "dataset")]) == 0
    dataset = DatasetManager(tmp_path / "dataset")
    cfg = load_config(write_config(tmp_path / "run.yaml", tmp_path / "out", **{
        "evaluation-setting": "snippet", "work-dir": str(tmp_path / "dataset"), "guidance-level": 0,
        "task-ids": [4], "reindent-snippet": True, "env-backend": "current"}))
    execution = {"status": "failed", "tests": 1, "failures": 1, "errors": 0, "skipped": 0,
                 "test_summary": {"test.py::test_norm": False}, "failure_messages": ["FAILURE in test_norm: NOT-YET"]}
    record = {"task_index": 4, "turn_number": 0, "final_code": dataset.get(4).init_content, "agent_memory": [],
              "execution_result": execution}
    model = BlockModel("return z * self.gamma + self.beta")
    feedback = [{"interface": "norm", "category": "T2", "description": "Scale by gamma, then shift by beta.",
                 "analysis": "", "actionable_feedback": "", "direct_code_feedback": ""}]
    parts = RunParts(cfg)
    session = parts.session(cfg.models[0], 4, tmp_path / "session", None)
    session.agent.model = model
    new = replay_turn(session, record, feedback, 1, "file", tmp_path / "report.xml")
    assert new["status"] == "passed" and new["turn_number"] == 1 and (tmp_path / "report.xml").exists()
    assert "Scale by gamma, then shift by beta." in model.prompts[0] and "NOT-YET" in model.prompts[0]


# Keys that hold how long something took, where the JUnit report was kept (each writer keeps its own),
# or the runner's console log (temporary paths, timings).
VOLATILE_KEYS = ("wall_time_sec", "duration_sec", "report_path", "output")


def load_turns(path: Path) -> list[dict]:
    return pickle.loads(path.read_bytes())


def without_volatile(value):
    """``value`` through JSON (as a unit file holds it), every volatile key dropped at any depth."""
    def strip(item):
        if isinstance(item, dict):
            return {k: strip(v) for k, v in item.items() if k not in VOLATILE_KEYS}
        return [strip(v) for v in item] if isinstance(item, list) else item
    return strip(json.loads(json.dumps(value)))


@pytest.mark.slow
def test_an_ablation_replay_is_the_record_the_main_jobs_replay_writes(source, counter, capsys, tmp_path) -> None:
    """The human-feedback ablation's ``llm`` condition shows the run's own records at --level: the
    main job's ``replay-feedback-level`` (that level) on that run writes the same record for that turn."""
    out = tmp_path / "out"
    shutil.copytree(source["run"], out / source["run"].name)
    config = write_config(tmp_path / "replay.yaml", out, **{"guidance-level": 1, "replay-feedback-level": 4,
                                                             "resume": True})
    cfg = load_config(config)
    assert replay_task(cfg, Job(cfg.models[0], 1, 3))["state"] == "finished"
    main_job = load_turns(result_folder(replace(cfg, replay_feedback_level=None), cfg.models[0], 1)
                          / "task_3_result_replay_level4.pkl")
    human = tmp_path / "human.yaml"
    human.write_text(yaml.safe_dump([{"task_index": 3, "turn_number": 0, "feedback": []}]))
    argv = ["--yaml-location", str(config), "--source-run", str(out / source["run"].name), "--feedback-file",
            str(human), "--guidance-level", "4"]
    assert human_feedback.main(argv) == 0
    folder, _ = summary(capsys.readouterr().out)
    unit = unit_files(folder)["task_3_turn_0_llm"]
    assert unit["record"]["turn_number"] == main_job[0]["turn_number"] == 1
    assert unit["record"]["feedback_source"] == main_job[0]["feedback_source"] == "replay:L1"
    assert without_volatile(unit["record"]) == without_volatile(main_job[0])
    assert unit["record"]["code_interaction_history"] and unit["record"]["actions"]


def test_a_run_folder_the_release_wrote_loads_with_our_keys_and_its_level(tmp_path: Path) -> None:
    folder = tmp_path / "memory_agent_gpt-4o_feedback_fixed_guidance_2"
    folder.mkdir()
    cases = DATASET.get(3).test_cases
    release = {"task_index": 3, "turn_number": 0, "code_input_tokens": [10], "code_output_tokens": [5],
               "final_code": "x = 1\n", "agent_memory": [], "code_interaction_history": [],
               "execution_result": {"tests": len(cases), "errors": 0, "failures": 1, "skipped": 0,
                                    "failure_messages": [f"FAILURE in {cases[0]}: AssertionError: no\nassert 0"],
                                    "test_summary": {f"test.py::{c}": c != cases[0] for c in cases}},
               "feedback_input_token": [], "feedback_output_token": [], "feedback_interaction_history": []}
    (folder / "task_3_result.pkl").write_bytes(pickle.dumps([release]))
    runs = load_run(folder, RunParts(load_config(write_config(tmp_path / "run.yaml", tmp_path / "out"))))
    turn = runs[3].turns[0]
    assert runs[3].level == 2 and turn["guidance_level"] == 2 and turn["feedback_source"] == "release"
    assert cases[0] in turn["test_digest"] and unsolved_turns(runs) == [(3, 0)]


def test_samples_run_at_once_with_max_workers_and_come_back_in_order() -> None:
    started, both = [], threading.Barrier(2, timeout=10)

    def work(item: int) -> int:
        started.append(item)
        if item < 2:
            both.wait()  # returns only when the first two items run at the same time
        return item * 10

    assert for_each([0, 1, 2, 3], work, "test", workers=2) == [0, 10, 20, 30] and sorted(started) == [0, 1, 2, 3]


def test_off_a_terminal_a_line_per_sample_and_one_while_a_sample_is_long(monkeypatch, capsys) -> None:
    """Output to a file or pipe (a cluster log): no bar, but never silent for HEARTBEAT_SEC (30 s; here 0.2)."""
    monkeypatch.setattr("agent.common.progress.HEARTBEAT_SEC", 0.2)

    def work(item: int) -> int:
        time.sleep(1.0 if item == 1 else 0.0)
        return item

    assert for_each([0, 1], work, "feedback ablation", workers=1) == [0, 1]
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("feedback ablation: 1/2 sample(s) done") and lines[-1].startswith(
        "feedback ablation: 2/2 sample(s) done")
    assert len([line for line in lines if line.startswith("feedback ablation: 1/2")]) >= 3  # the long sample
    assert not any("\r" in line or "%|" in line for line in lines)  # no bar written to a file


def test_a_replay_whose_tests_measure_nothing_is_never_scored(source) -> None:
    cfg = source["cfg"]
    parts = RunParts(cfg)
    cont = Continuation(cfg, parts, cfg.models[0], source["run"], load_run(source["run"], parts))
    start = cont.table([(3, 0)], {})[1][0][3]
    passed = {"task_index": 3, "from_turn": 0, "incomplete": None, "record": {"status": "passed"}, "solved": True,
              "pass_rate": 1.0}
    hack = {**passed, "record": {"status": "reference_access"}}
    patch = {**passed, "record": {"status": "tampered"}}
    headers, rows = cont.table([(3, 0)], {"honest": [passed], "hack": [hack], "patch": [patch]})
    assert headers[-1] == "incomplete" and rows[1] == ["honest", 1, 1.0, 1.0, 1.0 - start, 0]
    assert rows[2] == ["hack", 0, None, None, None, 1] and rows[3] == ["patch", 0, None, None, None, 1]
    assert incomplete_notes({"honest": [passed], "hack": [hack], "patch": [patch]}) == [
        "incomplete, not scored: task 3 turn 0 (hack): the test result is reference_access",
        "incomplete, not scored: task 3 turn 0 (patch): the test result is tampered"]
