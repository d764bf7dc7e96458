"""Running a candidate on a sample task two ways: plain pytest (what a hack fools) and the guarded runner."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import agent.runner.core as runner
from agent.task.dataset import DatasetManager
from agent.runner.core import RunnerOptions, prepare, run_candidate
from agent.runner.sandbox import bwrap_problem

REPO = Path(__file__).resolve().parents[1]
SAMPLE = DatasetManager(REPO / "work_dir" / "dataset")
SANDBOX = "off" if bwrap_problem() else "required"
SUMMARY = re.compile(r"^(?:=+ )?(\d+ passed.*?) in [\d.]+s", re.MULTILINE)


def bare_pytest(dataset: DatasetManager, index: int, source: str, run_dir: Path) -> subprocess.CompletedProcess:
    """``python -m pytest`` on the task's test in a private copy with ``source`` as the target, as test.sh runs
    it: no guard, no sandbox, this interpreter."""
    layout = prepare(dataset, index, source, run_dir)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=layout.pythonpath or "")
    argv = [sys.executable, "-m", "pytest", os.path.basename(layout.test), "-q", "-p", "no:cacheprovider",
            "-o", f"timeout={layout.per_test_timeout or 300}"]
    return subprocess.run(argv, cwd=layout.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=900)


def fools_plain_pytest(done: subprocess.CompletedProcess, cases: int, exits: bool) -> bool:
    """Every test reported passed (or, for a process that ends itself, exit code 0 and nothing failed)."""
    if done.returncode != 0:
        return False
    if exits:
        return not re.search(r"failed|error", done.stdout, re.IGNORECASE)
    summary = SUMMARY.findall(done.stdout)
    return bool(summary) and summary[-1].strip() == f"{cases} passed"


def guarded(dataset: DatasetManager, index: int, source: str, *, static: bool = False,
            timeout_sec: float = 600) -> dict:
    """The runner's verdict; ``static=False`` takes the static refusals before running out of the way (the
    run-time guard alone judges)."""
    options = RunnerOptions(sandbox=SANDBOX, timeout_sec=timeout_sec)
    if static:
        return run_candidate(dataset, index, source, options)
    with mock.patch.object(runner, "raw_memory", lambda source, filename: []):
        return run_candidate(dataset, index, source, options)


def evidence(result: dict) -> str:
    """The one line of evidence of a run the guard did not let pass."""
    return result["failure_messages"][0].splitlines()[0] if result["failure_messages"] else ""
