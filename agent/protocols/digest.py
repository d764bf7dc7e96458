"""The improved protocol's test digest: what the agent and the feedback model read about one test run, and its
brief for memory.

The digest is shown even at guidance level 0 (it is the test output a
researcher would see); memory keeps only its brief, made from the same result.
"""
from __future__ import annotations

import re
import tempfile

from agent.common.text import cap, name_list, one_line
from agent.task.test_names import function_of, node_and_case
from metrics.junit_outcome import outcome_counts, summary_passed

MAX_MESSAGE_CHARS = 4_000
MAX_DIGEST_MESSAGES_CHARS = 16_000
MAX_BRIEF_NAMES = 25  # test names listed per verdict in a digest brief
# Parts of test output that change from run to run (object addresses, private temp folders):
# masked so identical attempts give identical prompts (response-cache hits, reproducible resumes).
_VOLATILE = ((re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x..."),
             (re.compile(re.escape(tempfile.gettempdir()) + r"/[^/\s'\"]+"), "<tmp>"))


def format_test_digest(execution: dict, test_cases: tuple[str, ...] | list[str] = ()) -> str:
    """Totals, every test's PASS/FAILED and the failure messages with tracebacks (shown even at L0).

    Test cases of the metadata that never ran (e.g. the module failed to import)
    are listed as NOT RUN, so the agent knows what is still missing. Object addresses
    and temp paths are masked, so the same attempt always yields the same digest.
    """
    summary: dict = execution.get("test_summary") or {}
    lines = _head(execution)
    lines += [f"{'PASS' if ok else 'FAILED'} {_short(name)}" for name, ok in summary.items()]
    lines += [f"NOT RUN {name}" for name in _not_run(summary, test_cases)]
    messages = execution.get("failure_messages") or []
    if messages:
        lines.append("Failure messages:")
        lines.append(cap("\n\n".join(cap(m, MAX_MESSAGE_CHARS) for m in messages), MAX_DIGEST_MESSAGES_CHARS))
    elif execution.get("status") not in ("passed", None) and execution.get("output"):
        lines.append("Output of the test run (tail):")
        lines.append(execution["output"][-MAX_MESSAGE_CHARS:])
    return _masked("\n".join(lines))


def digest_brief(execution: dict, test_cases: tuple[str, ...] | list[str] = ()) -> str:
    """A test result in brief (for memory): totals, the tests by verdict, the first error; no traceback."""
    summary: dict = execution.get("test_summary") or {}
    parts = _head(execution)
    verdicts = {"Failed": [_short(n) for n, ok in summary.items() if not ok], "Not run": _not_run(summary, test_cases),
                "Passed": [_short(n) for n, ok in summary.items() if ok]}
    parts += [f"{label}: {name_list(names, MAX_BRIEF_NAMES)}." for label, names in verdicts.items() if names]
    messages = execution.get("failure_messages") or []
    if messages and messages[0].strip():
        parts.append(f"First error: {one_line(_masked(messages[0].strip().splitlines()[0]))}")
    return " ".join(parts)


def _head(execution: dict) -> list[str]:
    """The totals line, and the time limit when the run hit it."""
    tests, errors, failures, skipped = outcome_counts(execution)
    lines = [f"Status: {execution.get('status')}. Tests run: {tests}, passed: {summary_passed(execution)}, "
             f"failures: {failures}, errors: {errors}, skipped: {skipped}."]
    if execution.get("status") == "timeout":
        lines.append(f"The test run was stopped after {execution.get('duration_sec', 0):.0f} s (time limit).")
    return lines


def _short(name: str) -> str:
    """A test as the digest names it: without the release's ``test.py::`` prefix."""
    return name.split("::", 1)[1] if name.startswith("test.py::") else name


def _not_run(summary: dict, test_cases: tuple[str, ...] | list[str]) -> list[str]:
    """Test cases of the metadata that are not in the report (e.g. the module failed to import)."""
    cases = {node_and_case(name)[1] for name in summary}
    ran = cases | {function_of(case) for case in cases}
    return [name for name in test_cases if name not in ran]


def _masked(text: str) -> str:
    for pattern, mask in _VOLATILE:
        text = pattern.sub(mask, text)
    return text
