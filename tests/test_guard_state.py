"""The guard's own state is out of the candidate's reach (recode_guard_core.hide_guard_modules): its modules are
gone from ``sys.modules`` before the candidate's module is imported (even by a conftest.py), and importing them
again is denied. (Reading its functions' globals: tests/test_guard_native.py and the hostile corpus.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.runner.core import RunnerOptions, run_candidate
from tests.guard_testlib import SANDBOX, evidence
from tests.runner_testlib import CANONICAL, make_task

LOOKS_FOR_THE_GUARD = CANONICAL + '''
import sys

SEEN = sorted(name for name in sys.modules if "recode_guard" in name and name != "recode_guard_results")
'''

TEST_PY = '''\
from pkg.target import add, scale
import canonical
import pkg.target


def test_the_guard_was_out_of_reach_when_the_candidate_was_imported():
    assert pkg.target.SEEN == []


def test_add():
    assert add(2, 3) == canonical.add(2, 3)
'''

CASES = ("test_the_guard_was_out_of_reach_when_the_candidate_was_imported", "test_add")


def _task(root: Path, conftest: str | None = None):
    return make_task(root, test_py=TEST_PY, test_cases=CASES, conftest=conftest)


@pytest.mark.parametrize("conftest", [None, "import pkg.target\n"], ids=["the test imports it", "a conftest does"])
def test_guard_modules_are_gone_before_the_candidate_is_imported(tmp_path: Path, conftest: str | None) -> None:
    """Also when the task's conftest.py imports the candidate's module, while pytest is still starting up."""
    result = run_candidate(_task(tmp_path / "a dataset", conftest), 1, LOOKS_FOR_THE_GUARD,
                           RunnerOptions(sandbox=SANDBOX))
    assert result["status"] == "passed", result["failure_messages"]


def test_importing_a_guard_module_again_is_denied(tmp_path: Path) -> None:
    source = CANONICAL + "\nimport recode_guard_origin\n"
    result = run_candidate(_task(tmp_path / "a dataset"), 1, source, RunnerOptions(sandbox=SANDBOX))
    assert result["status"] == "tampered" and "imports the guard's module recode_guard_origin" in evidence(result)
