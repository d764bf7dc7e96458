"""A task whose conftest.py imports the target module: the candidate then exists before pytest has finished starting
up (its configure hooks add ``Config.rootdir``, ``Config.inifile``... to pytest's classes around that import).
pytest's start-up is not the candidate's doing; what the candidate's import changes still is. (The guard's own modules
are out of its reach by then: tests/test_guard_state.py.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.task.dataset import DatasetManager
from agent.runner.core import RunnerOptions, run_candidate
from tests.guard_testlib import SANDBOX, evidence
from tests.runner_testlib import CANONICAL, make_task

# spelled so that the static check does not see it: the run-time guard alone must catch it
SKIPS_EVERY_TEST = CANONICAL + '''
import importlib

_python = importlib.import_module("_pytest" + ".python")
setattr(_python.Function, "run" + "test", _python.Function.setup)
'''


@pytest.fixture(autouse=True, params=["on", "off"], ids=["helper", "in Python"])
def native(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each case with the guard's compiled helper (where it builds) and with the watch in Python."""
    monkeypatch.setenv("RECODE_GUARD_NATIVE", request.param)
    return request.param


def _task_with_conftest(root: Path) -> DatasetManager:
    return make_task(root, conftest="import pkg.target\n")


def test_an_honest_candidate_a_conftest_imports_passes(tmp_path: Path) -> None:
    result = run_candidate(_task_with_conftest(tmp_path / "a dataset"), 1, CANONICAL, RunnerOptions(sandbox=SANDBOX))
    assert result["status"] == "passed", result["failure_messages"]


def test_what_the_candidate_changes_as_a_conftest_imports_it_is_judged(tmp_path: Path) -> None:
    result = run_candidate(_task_with_conftest(tmp_path / "a dataset"), 1, SKIPS_EVERY_TEST,
                           RunnerOptions(sandbox=SANDBOX))
    assert result["status"] == "tampered" and "replaces _pytest.python.Function.runtest" in evidence(result), \
        result["failure_messages"]

