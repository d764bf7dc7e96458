"""What one test run's JUnit counts mean: the single interpretation used by the metrics, the harness's
records and the test digest the agent reads.

Layering: this module is pure standard library and lives in ``metrics/`` because
notebooks put only ``metrics`` on ``sys.path`` and metrics never import the
harness. The harness imports it as ``metrics.junit_outcome`` (the repository root is on
its path); the metric modules import it by its bare name. Nothing here imports
anything of the repository, so both names load the same code.

An ``execution_result`` is the release's dict: ``tests``, ``errors``,
``failures``, ``skipped`` (JUnit testsuite attributes), ``failure_messages``,
``test_summary``, plus the runner's ``status`` when our harness wrote it.
"""
from __future__ import annotations

from collections.abc import Mapping

OUTCOME_KEYS = ("tests", "errors", "failures", "skipped")
PASSED = "passed"


def outcome_counts(result: Mapping) -> tuple[int, int, int, int]:
    """(tests, errors, failures, skipped); an absent or None count reads as 0."""
    return tuple(result.get(key) or 0 for key in OUTCOME_KEYS)


def published_success(result: Mapping) -> bool:
    """The paper's success test: tests ran, and none errored, failed or was skipped.

    It reads the counts only, so it scores release result files (no status) and ours alike.
    """
    tests, errors, failures, skipped = outcome_counts(result)
    return tests > 0 and errors == failures == skipped == 0


def runner_solved(result: Mapping) -> bool:
    """Published success that the runner also called ``passed`` (a result without a status is the release's)."""
    return result.get("status", PASSED) in (PASSED, None) and published_success(result)


def passed_cases(result: Mapping) -> int:
    """Test cases passed, the release's way: none when anything errored, else tests - skipped - failures."""
    tests, errors, failures, skipped = outcome_counts(result)
    return 0 if errors else tests - skipped - failures


def case_pass_rate(result: Mapping, n_cases: int) -> float:
    """Share of the task's ``n_cases`` test cases (len(test_cases) of the metadata) passed, within [0, 1]."""
    if n_cases <= 0:
        return 0.0
    return min(1.0, max(0.0, passed_cases(result) / n_cases))


def summary_passed(result: Mapping) -> int:
    """Tests marked passed in ``test_summary`` (the per-test view; a skip is not a pass)."""
    return sum(1 for ok in (result.get("test_summary") or {}).values() if ok)
