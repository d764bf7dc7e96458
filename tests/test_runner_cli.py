"""The test runner's command line as a user meets it: its flags, and a failure's cause in the plain output."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.runner_testlib import make_task

REPO = Path(__file__).resolve().parents[1]
MISSING = "import recode_no_such_module\n\n\ndef test_add():\n    assert True\n"


def runner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "agent" / "clean_test_runner.py"), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_a_collection_failure_shows_its_cause_without_json(tmp_path: Path) -> None:
    """A test module that cannot import (the core install has no torch) names the missing module on the
    plain output, with what to do, not only 'collection failure'."""
    dataset = make_task(tmp_path / "my data", test_py=MISSING)
    done = runner("--dataset-dir", str(dataset.root), "--task-ids", "1", "--canonical")
    assert done.returncode == 1, done.stderr
    cause = next(line for line in done.stdout.splitlines() if "collection failure" in line)
    assert "ModuleNotFoundError: No module named 'recode_no_such_module'" in cause
    assert "--env-mode" in cause


def test_task_ids_and_the_release_s_task_id(tmp_path: Path) -> None:
    dataset = make_task(tmp_path / "data")
    for flag in ("--task-ids", "--task-id"):
        done = runner("--dataset-dir", str(dataset.root), flag, "1", "--canonical")
        assert done.returncode == 0 and done.stdout.startswith("task 1: passed"), done.stderr
        assert "note:" not in done.stderr  # the release's spelling is not deprecated
    done = runner("--dataset-dir", str(dataset.root), "--task-ids", "1,2", "--canonical")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "the runner tests one task per call; pass one id" in done.stderr
