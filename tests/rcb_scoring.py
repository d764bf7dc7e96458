"""Helpers of the scored scripted runs: the expected numbers from the gold check, the measured ones from the
main command and metrics/metric_scaled_pass.py, each computed on its own so the tests compare the two.

The expected placeholder score of a paper is the code-line share of its weak tasks (those whose placeholder
passes in the gold check); the expected reference score is 100 on every paper with no unrunnable task. Scores
are compared as (code lines passed, code lines scored), integers, so "exactly" means exactly.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from agent.runner.core import RunnerOptions
from agent.rcb.answers import answer_rules
from agent.rcb.gold import UNRUNNABLE, WEAK, check_task
from agent.rcb.snippet import load_snippet_task
from agent.task.dataset import DatasetManager

REPO = Path(__file__).resolve().parents[1]


def map_rows(dataset: DatasetManager, task_ids: list[int] | None = None) -> list[dict]:
    """Rows of the dataset's researchcodebench_map.jsonl (of ``task_ids`` only, when given)."""
    rows = [json.loads(line) for line in (dataset.root / "researchcodebench_map.jsonl").read_text().splitlines()]
    return [row for row in rows if task_ids is None or row["index"] in task_ids]


def expected_scores(dataset: DatasetManager, task_ids: list[int], options: RunnerOptions) -> dict[str, dict]:
    """Per paper, as (lines passed, lines scored): 'reference' all its lines (None when a task is unrunnable),
    'placeholder' the lines of its weak tasks."""
    kinds = {index: check_task(dataset, index, options).verdict.kind for index in task_ids}
    expected = {}
    for row in map_rows(dataset, task_ids):
        paper = expected.setdefault(row["paper"], {"lines": 0, "weak": 0, "unrunnable": False})
        paper["lines"] += row["code_lines"]
        paper["weak"] += row["code_lines"] if kinds[row["index"]] == WEAK else 0
        paper["unrunnable"] |= kinds[row["index"]] == UNRUNNABLE
    return {name: {"reference": None if p["unrunnable"] else (p["lines"], p["lines"]),
                   "placeholder": (p["weak"], p["lines"])} for name, p in expected.items()}


def scored_run(dataset: DatasetManager, task_ids: list[int], answer: str, out: Path, *,
               setting: str = "snippet", extra: dict | None = None) -> dict[str, tuple[int, int]]:
    """Run the scripted model answering ``answer`` on ``task_ids``, then score them with metric_scaled_pass.py:
    paper -> (lines passed, lines scored), checked against the scaled pass@1 it prints."""
    tasks = [(load_snippet_task(dataset, index), dataset.canonical(index)) for index in task_ids]
    script = out / f"{answer}_{setting}_rules.yaml"
    protocol = "snippet" if setting == "snippet" else "agent"
    script.write_text(yaml.safe_dump({"rules": answer_rules(tasks, answer, protocol)}, width=100000))
    model = f"rcb-{answer}"
    config = out / f"{answer}_{setting}.yaml"
    config.write_text(yaml.safe_dump({
        "api-provider": "scripted", "model": model, "script": str(script), "evaluation-setting": setting,
        "guidance-level": 0, "max-turn": 1, "work-dir": str(dataset.root), "output-dir": str(out / "results"),
        "task-ids": task_ids, **(extra or {})}))
    done = subprocess.run([sys.executable, "agent/research_code_generation.py", "--yaml-location", str(config)],
                          cwd=REPO, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = subprocess.run([sys.executable, "metrics/metric_scaled_pass.py", "--output-dir", str(out / "results"),
                            "--map", str(dataset.root / "researchcodebench_map.jsonl"), "--evaluation-setting", setting,
                            "--model", model, "--format", "json"], cwd=REPO, capture_output=True, text=True,
                           timeout=300)
    assert shown.returncode == 0, shown.stderr
    per_paper = json.loads(shown.stdout)[1]
    at = {name: per_paper["columns"].index(name) for name in ("scaled pass@1", "lines passed", "lines scored")}
    papers = {row["paper"] for row in map_rows(dataset, task_ids)}
    scores = {}
    for row in per_paper["rows"]:
        if row[2] in papers:
            passed, scored = row[at["lines passed"]], row[at["lines scored"]]
            assert row[at["scaled pass@1"]] == passed / scored
            scores[row[2]] = (passed, scored)
    return scores
