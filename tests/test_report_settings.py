"""The analysis covers what was run: max-turn and tasks from the run records, and it refuses levels, models or
guidance types without results instead of writing an empty report over a good one."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metrics_helpers import REPO, write_dataset
from tests.report_helpers import MODEL, trajectory, write_run
from analysis import main_analysis
from run_settings import read_run_settings


def run_record(result_dir: Path, name: str, **config: object) -> None:
    folder = result_dir / "run_metadata"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"status": "finished", "config": {
        "evaluation_setting": "memory_agent", "guidance_type": "fixed", "models": [{"model": MODEL}], **config}}))


@pytest.fixture
def two_task_run(tmp_path: Path) -> tuple[Path, Path]:
    """A ``max-turn: 2`` run of tasks 1 and 2 in a dataset of 8 tasks; task 2 is solved at turn 1."""
    dataset = write_dataset(tmp_path / "ds", {task: 2 for task in range(1, 9)})
    results = tmp_path / "res"
    write_run(results, MODEL, "fixed", 2, {1: trajectory(1, 2, None, turns=2), 2: trajectory(2, 2, 1, turns=2)})
    run_record(results, "20260101-000000_1.json", max_turn=2, task_ids=[1, 2], guidance_levels=[2])
    return dataset, results


def analyse(dataset: Path, results: Path, *extra: str):
    return main_analysis("", ["--output-dir", str(results), "--dataset-dir", str(dataset), "--skip",
                              "codebert,codebleu", *extra])[1]


def test_recall_at_the_turns_run_over_the_tasks_run(two_task_run) -> None:
    analysis = analyse(*two_task_run)
    recall = next(t for t in analysis.tables() if t.title.startswith("Unit-test pass rate, Recall@"))
    assert recall.title == "Unit-test pass rate, Recall@2 (% of tasks)"
    assert recall.rows == [[MODEL.replace("/", "_"), 0.5]] and recall.notes == ["every cell uses all 2 requested tasks"]
    covers = analysis.sections[0].covers
    assert covers[:3] == ["max-turn 2 (from the run records): Recall@2", "2 tasks (from the run records): 1, 2",
                          "levels L2 (the run folders found; the run records asked for L2)"]
    index = analysis.index.read_text(encoding="utf-8")
    assert "max-turn 2 (from the run records): Recall@2" in index and "Recall@2 by guidance level" in \
        (analysis.out / "plots" / "recall_vs_level.svg").read_text()
    # flags win over the records, and say so
    flagged = analyse(*two_task_run, "--max-turn", "1", "--task-ids", "2", "--out", str(two_task_run[1] / "other"))
    assert flagged.sections[0].covers[:2] == ["max-turn 1 (from --max-turn): Recall@1",
                                               "1 tasks (from --task-ids): 2"]


def test_records_are_merged_and_disagreements_named(tmp_path: Path) -> None:
    run_record(tmp_path, "a.json", max_turn=2, task_ids=[1, 2], guidance_levels=[0])
    run_record(tmp_path, "b.json", max_turn=5, task_ids=[3], guidance_levels=[2])
    run_record(tmp_path, "c.json", max_turn=5, task_ids=[4], guidance_type="dynamic")
    (tmp_path / "run_metadata" / "d.json").write_text("{not json")
    settings = read_run_settings(tmp_path, "memory_agent", "fixed")
    assert (settings.max_turn, settings.task_ids, settings.levels) == (5, [1, 2, 3], [0, 2])
    assert settings.notes == ["run record d.json is unreadable or has no config; left out",
                              "run records disagree on max-turn (2, 5); using 5"]
    run_record(tmp_path, "e.json", max_turn=5, task_ids=None)
    assert read_run_settings(tmp_path, "memory_agent", "fixed").task_ids is None     # one run took every task


@pytest.mark.parametrize("args, message", [
    (["--guidance-level", "7"], "error: no results for level(s) 7 (memory_agent) under {res}; levels with results: 2"),
    (["--guidance-type", "fixed", "--guidance-level", "2,4"],
     "error: no results for level(s) 4 (memory_agent, fixed) under {res}; levels with results: 2"),
    (["--model", "org/typo"], "error: no results for model org/typo (memory_agent) under {res}; models with "
                               "results: org_model-a"),
    (["--guidance-type", "dynamic"], "error: no results for guidance type dynamic (memory_agent) under {res}; "
                                     "types with results: fixed"),
])
def test_a_selection_without_results_is_refused_and_the_report_kept(two_task_run, args: list[str],
                                                                    message: str) -> None:
    dataset, results = two_task_run
    good = analyse(dataset, results).index
    before = good.read_bytes()
    for script in ("scripts/report.py", "scripts/analyze_results.py"):
        done = subprocess.run([sys.executable, script, "--output-dir", str(results), "--dataset-dir", str(dataset),
                               *args], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr.strip() == message.format(res=results), done.stderr
    assert good.read_bytes() == before
