"""Interrupted runs: Ctrl-C stops cleanly (exit 130, finished turns kept, workers gone) and a run killed
with SIGKILL at any point resumes to exactly the results of an uninterrupted run."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.run_support import (
    SOLVE_AT, STANDARD_RUN, descendants, reference_results, results, run_cli, run_record, start_cli, wait_for,
    write_config, write_scripts,
)

RUN = {**STANDARD_RUN, "parallel-mode": "processes", "resume": True}


@pytest.fixture
def reference(tmp_path_factory) -> dict:
    return reference_results(tmp_path_factory.getbasetemp())


@pytest.fixture
def slow_config(tmp_path: Path) -> Path:
    """The reference run with slow model calls, so a signal lands mid-run."""
    scripts = write_scripts(tmp_path / "scripts", SOLVE_AT, latency=0.3)
    return write_config(tmp_path / "run.yaml", scripts, tmp_path / "out", **RUN)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def all_ended(pids: set[int], timeout: float = 10.0) -> bool:
    """Helper processes (forkserver, resource tracker) end once they see the driver gone."""
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_then_resume_completes(slow_config: Path, reference: dict) -> None:
    out = slow_config.parent / "out"
    process = start_cli(slow_config)
    wait_for("*guidance*/task_*_result.pkl", out)
    workers = descendants(process.pid)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == ("interrupted: finished turns are saved; "
                                               "run the same command again to resume")
    assert workers and all_ended(workers)
    saved = results(out)
    assert saved and all(turns == reference[name][:len(turns)] for name, turns in saved.items())
    assert run_record(out)["status"] == "interrupted"

    done = run_cli(slow_config)
    assert done.returncode == 0, done.stderr
    assert results(out) == reference


@pytest.mark.slow
def test_sigkill_then_resume_equals_an_uninterrupted_run(slow_config: Path, reference: dict) -> None:
    out = slow_config.parent / "out"
    process = start_cli(slow_config)
    wait_for("*guidance*/task_*_result.pkl", out)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert len(results(out)) < len(reference)

    done = run_cli(slow_config)
    assert done.returncode == 0, done.stderr
    assert results(out) == reference
