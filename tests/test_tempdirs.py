"""Folders of killed harness processes are swept; a live process's folders are never touched."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import agent.common.tempdirs as tempdirs
from agent.runner.core import RunnerOptions, run_candidate
from tests.runner_testlib import CANONICAL, make_task

MAKE_AND_HANG = (
    "import sys, time\n"
    "sys.path.insert(0, {repo!r})\n"
    "from agent.common.tempdirs import make_dir\n"
    "print(make_dir('run'), flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture()
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(tempdirs, "_swept", set())
    return root


def _folder_of_a_killed_process(root: Path) -> Path:
    """What a SIGKILLed harness leaves: a run folder with content, its process gone."""
    env = {**os.environ, "TMPDIR": str(root)}
    repo = str(Path(__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, "-c", MAKE_AND_HANG.format(repo=repo)], stdout=subprocess.PIPE,
                            text=True, env=env)
    folder = Path(proc.stdout.readline().strip())
    (folder / "ws").mkdir()
    (folder / "ws" / "target.py").write_text("x = 1\n")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    return folder


def test_first_folder_of_a_process_sweeps_those_of_dead_processes(private_tmp: Path) -> None:
    dead = _folder_of_a_killed_process(private_tmp)
    live = private_tmp / f"recode-task-{os.getppid()}-abc"  # the parent of this test process is alive
    live.mkdir()
    foreign = private_tmp / "recode-notes"
    foreign.mkdir()
    assert dead.is_dir() and dead.name.startswith("recode-run-")
    mine = tempdirs.make_dir("task")
    assert not dead.exists() and live.is_dir() and foreign.is_dir()
    assert mine.name.startswith(f"recode-task-{os.getpid()}-") and mine.parent == private_tmp.resolve()
    with tempdirs.private_dir("seed") as other:
        assert other.is_dir()
    assert not other.exists()


def test_the_runner_sweeps_before_its_run_and_leaves_only_what_is_alive(private_tmp: Path, tmp_path: Path) -> None:
    dead = _folder_of_a_killed_process(private_tmp)
    dataset = make_task(tmp_path / "dataset")
    result = run_candidate(dataset, 1, CANONICAL, RunnerOptions(timeout_sec=60, sandbox="off"))
    assert result["status"] == "passed"
    assert not dead.exists()
