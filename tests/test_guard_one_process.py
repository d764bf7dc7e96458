"""The guard watches the one test process the runner starts (recode_guard_core): a package whose ``addopts`` ask
pytest-xdist for workers (autograd's ``-n auto``) runs its tests in that process, with the record saying so, and
no process can ever wait for the guard's key: one that loads the plugin without it fails at once, in one line."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.runner.core import GUARD_DIR, RunnerOptions, run_candidate
from tests.guard_testlib import SANDBOX
from tests.runner_testlib import make_task

TEST_PY = '''\
import os
import subprocess
import sys

from pkg.target import add, scale


def test_add():
    assert add(2, 3) == 5


def test_scale():
    assert scale([1, 2], 3) == [3, 6]


def test_in_the_guards_process():
    assert os.environ.get("PYTEST_XDIST_WORKER") is None


def test_a_child_loading_the_guard_is_refused_at_once():
    done = subprocess.run([sys.executable, "-c", "import _recode_pytest_guard"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert "watches only the test process the runner started" in done.stderr
'''

CASES = ("test_add", "test_scale", "test_in_the_guards_process", "test_a_child_loading_the_guard_is_refused_at_once")


@pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="pytest-xdist is not installed (its extra)")
def test_a_suite_whose_addopts_ask_for_xdist_workers_runs_in_one_process(tmp_path: Path) -> None:
    dataset = make_task(tmp_path / "xdist dataset", test_py=TEST_PY, test_cases=CASES)
    (tmp_path / "xdist dataset" / "annotations" / "annotation_1" / "toy" / "pkg" / "pytest.ini").write_text(
        "[pytest]\naddopts = -n 2\n")
    result = run_candidate(dataset, 1, dataset.canonical(1), RunnerOptions(sandbox=SANDBOX, timeout_sec=120))
    assert result["status"] == "passed", (result["status"], result["failure_messages"][:3])
    assert result["notes"] == ["the tests ran in one process, the guard's: it turned off xdist's distribution (-n)"]


def test_a_process_loading_the_guard_never_waits_for_its_key(tmp_path: Path) -> None:
    """A descriptor that never delivers a key (a worker's inherited number, now something else): the plugin
    refuses at once with its one line instead of blocking in the read."""
    key_read, key_write = os.pipe()  # the write end stays open: a blocking read would wait forever
    out_read, out_write = os.pipe()
    paths = {name: str(tmp_path / f"{name}.py") for name in ("target", "canonical", "test")}
    config = {**paths, "repo": str(tmp_path), "junit": str(tmp_path / "report.xml"), "key_fd": key_read,
              "out_fd": out_write}
    env = {**os.environ, "RECODE_GUARD": json.dumps(config), "PYTHONPATH": str(GUARD_DIR)}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", "import _recode_pytest_guard"], env=env, capture_output=True,
                              text=True, pass_fds=(key_read, out_write), timeout=60)
    finally:
        for fd in (key_read, key_write, out_read, out_write):
            os.close(fd)
    assert done.returncode != 0
    assert "watches only the test process the runner started" in done.stderr
    assert time.monotonic() - started < 30
