"""ResearchCodeBench through the main command: import a fixture paper, run it in the `snippet`
and `memory_agent` settings with scripted models, then score it with metric_scaled_pass.py.

The scripted snippet model answers one block correctly and the other wrongly, so the scaled
and vanilla scores are not trivially 0 or 100 and can be checked by hand.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scripts.import_researchcodebench import main as import_main

REPO = Path(__file__).resolve().parents[1]
PSET = REPO / "tests" / "fixtures" / "rcb" / "pset"
GOOD_SCALE = "```python\n    scaled = np.asarray(logits, dtype=float) / temperature\n```"
WRONG_EXP = "```python\n    weights = np.ones_like(scaled)\n```"


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def write_config(tmp_path: Path, name: str, dataset: Path, setting: str, rules: list[dict]) -> Path:
    script = tmp_path / f"{name}_model.yaml"
    script.write_text(yaml.safe_dump({"rules": rules}), encoding="utf-8")
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump({
        "api-provider": "scripted", "model": "scripted-coder", "script": str(script),
        "evaluation-setting": setting, "guidance-level": 0, "max-turn": 1,
        "work-dir": str(dataset), "output-dir": str(tmp_path / "results"),
        "env-backend": "current", "parallel-mode": "none", "test-timeout-sec": 120,
    }), encoding="utf-8")
    return config


@pytest.mark.slow
def test_imported_paper_runs_in_snippet_and_memory_agent_settings_and_is_scored(tmp_path: Path) -> None:
    dataset = tmp_path / "rcb"
    assert import_main(["--pset", str(PSET), "--out", str(dataset), "--papers", "temp-softmax", "--no-resolve"]) == 0
    mapping = [json.loads(line) for line in (dataset / "researchcodebench_map.jsonl").read_text().splitlines()]
    lines = {row["snippet"]: row["code_lines"] for row in mapping}
    assert lines == {"scale logits": 1, "stable exp": 2}

    snippet = write_config(tmp_path, "snippet", dataset, "snippet", [
        {"when": 'block "scale logits"', "responses": [GOOD_SCALE]},
        {"when": 'block "stable exp"', "responses": [WRONG_EXP]},
    ])
    done = run(["agent/research_code_generation.py", "--yaml-location", str(snippet)], REPO)
    assert done.returncode == 0, done.stderr

    canonical = (dataset / "annotations" / f"annotation_{mapping[0]['index']}" / "canonical.py").read_text()
    agent = write_config(tmp_path, "agent", dataset, "memory_agent", [
        {"index-from": "assistant-count", "responses": [
            f"reflect: the paper defines the whole function\naction: REPLACE\n```python\n{canonical}```",
            "reflect: done\naction: SUBMIT"]},
    ])
    done = run(["agent/research_code_generation.py", "--yaml-location", str(agent)], REPO)
    assert done.returncode == 0, done.stderr

    scores = {}
    for setting in ("snippet", "memory_agent"):
        shown = run(["metrics/metric_scaled_pass.py", "--output-dir", str(tmp_path / "results"),
                     "--map", str(dataset / "researchcodebench_map.jsonl"), "--evaluation-setting", setting,
                     "--format", "json"], REPO)
        assert shown.returncode == 0, shown.stderr
        scores[setting] = json.loads(shown.stdout)
    overall = {setting: tables[0]["rows"] for setting, tables in scores.items()}
    # columns: model, level, scaled, vanilla, passed, scored, lines passed, lines scored, missing
    assert overall["snippet"] == [["scripted-coder", 0, 1 / 3, 0.5, 1, 2, 1, 3, 0]]
    assert overall["memory_agent"] == [["scripted-coder", 0, 1.0, 1.0, 2, 2, 3, 3, 0]]
