"""The test digest: what the agent and the feedback model read about one test run, and its brief for memory.

The digest is shown even at guidance level 0 (it is the test output a
researcher would see); memory keeps only its brief.
"""
from __future__ import annotations

import re
import tempfile

from agent.text import cap, name_list, one_line
from metrics.junit_outcome import outcome_counts, summary_passed

MAX_MESSAGE_CHARS = 4_000
MAX_DIGEST_MESSAGES_CHARS = 16_000
MAX_BRIEF_NAMES = 25  # test names listed per verdict in a digest brief
# Parts of test output that change from run to run (object addresses, private temp folders):
# masked so identical attempts give identical prompts (response-cache hits, reproducible resumes).
_VOLATILE = ((re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x..."),
             (re.compile(re.escape(tempfile.gettempdir()) + r"/[^/\s'\"]+"), "<tmp>"))
_VERDICT = re.compile(r"^(PASS|FAILED|NOT RUN) (.+)$")
_DETAIL_HEADS = ("Failure messages:", "Output of the test run (tail):")


def format_test_digest(execution: dict, test_cases: tuple[str, ...] | list[str] = ()) -> str:
    """Totals, every test's PASS/FAILED and the failure messages with tracebacks (shown even at L0).

    Test cases of the metadata that never ran (e.g. the module failed to import)
    are listed as NOT RUN, so the agent knows what is still missing. Object addresses
    and temp paths are masked, so the same attempt always yields the same digest.
    """
    summary: dict = execution.get("test_summary") or {}
    tests, errors, failures, skipped = outcome_counts(execution)
    head = (f"Status: {execution.get('status')}. Tests run: {tests}, passed: {summary_passed(execution)}, "
            f"failures: {failures}, errors: {errors}, skipped: {skipped}.")
    lines = [head]
    if execution.get("status") == "timeout":
        lines.append(f"The test run was stopped after {execution.get('duration_sec', 0):.0f} s (time limit).")
    lines += [f"{'PASS' if ok else 'FAILED'} {name}" for name, ok in summary.items()]
    ran = {name.rsplit("::", 1)[-1].split("[")[0] for name in summary}
    lines += [f"NOT RUN {name}" for name in test_cases if name not in ran]
    messages = execution.get("failure_messages") or []
    if messages:
        lines.append("Failure messages:")
        lines.append(cap("\n\n".join(cap(m, MAX_MESSAGE_CHARS) for m in messages), MAX_DIGEST_MESSAGES_CHARS))
    elif execution.get("status") not in ("passed", None) and execution.get("output"):
        lines.append("Output of the test run (tail):")
        lines.append(execution["output"][-MAX_MESSAGE_CHARS:])
    digest = "\n".join(lines)
    for pattern, mask in _VOLATILE:
        digest = pattern.sub(mask, digest)
    return digest


def digest_brief(digest: str) -> str:
    """A ``format_test_digest`` text in brief (for memory): totals, the tests by verdict, the first error.

    Text of another shape (e.g. a hand-written digest) keeps its lines up to the details, flattened.
    """
    lines = digest.strip().splitlines()
    head: list[str] = []
    verdicts: dict[str, list[str]] = {"FAILED": [], "NOT RUN": [], "PASS": []}
    first_error = ""
    for number, line in enumerate(lines):
        if line in _DETAIL_HEADS:
            first_error = next((rest for rest in lines[number + 1:] if rest.strip()), "")
            break
        found = _VERDICT.match(line)
        if found:
            verdicts[found.group(1)].append(found.group(2))
        else:
            head.append(line)
    parts = [one_line(" ".join(head))]
    parts += [f"{label}: {name_list(verdicts[key], MAX_BRIEF_NAMES)}." for key, label in
              (("FAILED", "Failed"), ("NOT RUN", "Not run"), ("PASS", "Passed")) if verdicts[key]]
    if first_error:
        parts.append(f"First error: {one_line(first_error)}")
    return " ".join(part for part in parts if part)
