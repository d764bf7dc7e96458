"""A task whose conftest.py imports the target module: the candidate then exists before pytest has finished starting
up (its configure hooks add ``Config.rootdir``, ``Config.inifile``... to pytest's classes around that import).
pytest's start-up is not the candidate's doing; what the candidate's import changes still is, and the guard's own
modules are already out of its reach."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.dataset import DatasetManager
from agent.runner.core import RunnerOptions, run_candidate
from tests.guard_testlib import SANDBOX, evidence
from tests.runner_testlib import CANONICAL, TEST_CASES, TEST_PY, make_task

# spelled so that the static check does not see it: the run-time guard alone must catch it
SKIPS_EVERY_TEST = CANONICAL + '''
import importlib

_python = importlib.import_module("_pytest" + ".python")
setattr(_python.Function, "run" + "test", _python.Function.setup)
'''

LOOKS_FOR_THE_GUARD = CANONICAL + '''
import sys

SEEN = sorted(name for name in sys.modules if "recode_guard" in name and name != "recode_guard_results")
'''

TEST_SEES_WHAT_IT_SAW = '''\
from pkg.target import add
import canonical
import pkg.target


def test_the_guard_was_out_of_reach_when_a_conftest_imported_the_candidate():
    assert pkg.target.SEEN == []


def test_add():
    assert add(2, 3) == canonical.add(2, 3)
'''


@pytest.fixture(autouse=True, params=["on", "off"], ids=["helper", "in Python"])
def native(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each case with the guard's compiled helper (where it builds) and with the watch in Python."""
    monkeypatch.setenv("RECODE_GUARD_NATIVE", request.param)
    return request.param


def _task_with_conftest(root: Path, test_py: str = TEST_PY, test_cases: tuple[str, ...] = TEST_CASES
                        ) -> DatasetManager:
    dataset = make_task(root, test_py=test_py, test_cases=test_cases)
    (root / "annotations" / "annotation_1" / "toy" / "pkg" / "conftest.py").write_text("import pkg.target\n")
    return dataset


def test_an_honest_candidate_a_conftest_imports_passes(tmp_path: Path) -> None:
    result = run_candidate(_task_with_conftest(tmp_path / "a dataset"), 1, CANONICAL, RunnerOptions(sandbox=SANDBOX))
    assert result["status"] == "passed", result["failure_messages"]


def test_what_the_candidate_changes_as_a_conftest_imports_it_is_judged(tmp_path: Path) -> None:
    result = run_candidate(_task_with_conftest(tmp_path / "a dataset"), 1, SKIPS_EVERY_TEST,
                           RunnerOptions(sandbox=SANDBOX))
    assert result["status"] == "tampered" and "replaces _pytest.python.Function.runtest" in evidence(result), \
        result["failure_messages"]


def test_the_guard_is_out_of_reach_of_a_candidate_a_conftest_imports(tmp_path: Path) -> None:
    dataset = _task_with_conftest(tmp_path / "a dataset", TEST_SEES_WHAT_IT_SAW, (
        "test_the_guard_was_out_of_reach_when_a_conftest_imported_the_candidate", "test_add"))
    result = run_candidate(dataset, 1, LOOKS_FOR_THE_GUARD, RunnerOptions(sandbox=SANDBOX))
    assert result["status"] == "passed", result["failure_messages"]
