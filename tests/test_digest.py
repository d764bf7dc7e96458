"""The test digest the agent and the feedback model read, and its brief for memory."""
from __future__ import annotations

from agent.protocols.digest import digest_brief, format_test_digest


def test_digest_lists_each_test_failures_and_tests_that_never_ran() -> None:
    execution = {"status": "failed", "tests": 2, "failures": 1, "errors": 0, "skipped": 0,
                 "test_summary": {"test_a": True, "test_b": False},
                 "failure_messages": ["test_b: AssertionError: 1 != 2\nTraceback (most recent call last): ..."],
                 "output": "", "duration_sec": 1.0}
    digest = format_test_digest(execution, ("test_a", "test_b", "test_c"))
    assert "PASS test_a" in digest and "FAILED test_b" in digest and "NOT RUN test_c" in digest
    assert "AssertionError: 1 != 2" in digest and "Traceback" in digest
    assert "Tests run: 2, passed: 1, failures: 1" in digest


def test_digest_of_a_collection_error_shows_the_output_tail() -> None:
    execution = {"status": "error", "tests": 0, "failures": 0, "errors": 1, "skipped": 0, "test_summary": {},
                 "failure_messages": [], "output": "ImportError: cannot import name 'dpo_loss'"}
    digest = format_test_digest(execution, ("test_a",))
    assert "ImportError" in digest and "NOT RUN test_a" in digest


def test_a_digest_brief_keeps_totals_verdicts_and_the_first_error_but_no_traceback() -> None:
    execution = {"status": "failed", "tests": 3, "failures": 2, "errors": 0, "skipped": 0,
                 "test_summary": {"test_a": True, "test_b": False, "test_c": False},
                 "failure_messages": ["test_b: AssertionError: 1 != 2\n>   assert f(1) == 2\nE   AssertionError",
                                      "test_c: KeyError: 'beta'\n>   cfg['beta']\nE   KeyError"]}
    brief = digest_brief(execution, ("test_a", "test_b", "test_c", "test_d"))
    assert brief == ("Status: failed. Tests run: 3, passed: 1, failures: 2, errors: 0, skipped: 0. "
                     "Failed: test_b, test_c. Not run: test_d. Passed: test_a. "
                     "First error: test_b: AssertionError: 1 != 2")
    timeout = {**execution, "status": "timeout", "duration_sec": 30.0, "failure_messages": []}
    assert "stopped after 30 s" in digest_brief(timeout)


def test_a_digest_brief_names_at_most_25_tests_per_verdict() -> None:
    execution = {"status": "failed", "tests": 30, "failures": 30, "errors": 0, "skipped": 0,
                 "test_summary": {f"test_{i}": False for i in range(30)}, "failure_messages": []}
    assert "test_24 and 5 more." in digest_brief(execution)


def test_a_digest_shows_test_names_without_the_release_file_prefix() -> None:
    execution = {"status": "failed", "tests": 1, "failures": 1, "errors": 0, "skipped": 0,
                 "test_summary": {"test.py::test_a": False}, "failure_messages": []}
    assert "FAILED test_a" in format_test_digest(execution, ("test_a",)) and "NOT RUN" not in format_test_digest(
        execution, ("test_a",))
    assert "Failed: test_a." in digest_brief(execution, ("test_a",))


def test_digest_masks_addresses_and_temp_paths() -> None:
    import tempfile
    message = (f"test_a: ImportError at {tempfile.gettempdir()}/recode-run-x1y2/ws/pkg/mod.py\n"
               "monkeypatch = <MonkeyPatch object at 0x7f43a1b2c3d0>")
    execution = {"status": "failed", "tests": 1, "failures": 1, "errors": 0, "skipped": 0,
                 "test_summary": {"test_a": False}, "failure_messages": [message]}
    digest = format_test_digest(execution)
    assert "<tmp>/ws/pkg/mod.py" in digest and "object at 0x..." in digest and "x1y2" not in digest


def test_a_parametrized_test_that_ran_is_not_listed_as_not_run() -> None:
    """Parameters holding ``::`` or brackets (an IPv6 URL) are part of the name, not a path."""
    names = ("test_url[http://[::1]:8329]", "test_ip[2a00:1450:4001:824::200e/129]", "test_one[a]")
    execution = {"status": "passed", "tests": 3, "failures": 0, "errors": 0, "skipped": 0,
                 "test_summary": {f"test.py::{name}": True for name in names}, "failure_messages": []}
    assert "NOT RUN" not in format_test_digest(execution, (*names, "test_one"))
    assert "Not run: test_two." in digest_brief(execution, (*names, "test_two"))
