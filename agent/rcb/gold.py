"""What a gold-check outcome means: as expected, weak test, unrunnable (with its reason) or broken.

A task behaves as expected when its reference passes and its starting file
(the placeholder, or the blanked file) does not. When both pass, the task is
fine but its tests cannot tell the two apart: a weak test, worth knowing
before reading a score, never a broken task. A reference that fails because
the tests reached something this machine cannot provide offline (a stubbed
import, the network) is unrunnable, and the evidence says which; any other
reference failure is broken. One classification serves the gold-check
script and the importer's ``--report-weak``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from agent.runner.core import RunnerOptions, run_candidate
from agent.task.dataset import DatasetManager

EXPECTED, WEAK, UNRUNNABLE, BROKEN = "as expected", "weak test", "unrunnable", "BROKEN"
KINDS = (EXPECTED, WEAK, UNRUNNABLE, BROKEN)
INIT_MAY_END = ("failed", "error", "timeout")
STUB_MARK = "RECODE-H stub:"
_NETWORK = re.compile(
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|nodename nor servname"
    r"|getaddrinfo failed|gaierror|URLError|MaxRetryError|NewConnectionError|ConnectionError|HTTPSConnectionPool"
    r"|couldn't connect to|LocalEntryNotFoundError|OfflineModeIsEnabled|Failed to establish a new connection")


@dataclass(frozen=True)
class Verdict:
    kind: str
    reason: str


def _messages(result: dict) -> str:
    return "\n".join(result.get("failure_messages") or []) + "\n" + (result.get("output") or "")


def _first_line_with(text: str, pattern: re.Pattern | str) -> str:
    for line in text.splitlines():
        if (pattern.search(line) if isinstance(pattern, re.Pattern) else pattern in line):
            return line.strip()[:400]
    return ""


def offline_reason(result: dict, stubs: dict[str, str]) -> str | None:
    """Why a failed reference run could not succeed on an offline machine, from its own messages (None: no sign)."""
    text = _messages(result)
    used = _first_line_with(text, STUB_MARK)
    if used:
        return "the tests use a stubbed import: " + used.split(STUB_MARK, 1)[1].strip()
    network = _first_line_with(text, _NETWORK)
    if network:
        return "the tests need the network (no network in the sandbox): " + network
    missing = re.search(r"No module named '([^']+)'", text)
    if missing and missing[1].split(".")[0] in stubs:
        return f"the tests import {missing[1]}, which cannot be installed offline ({stubs[missing[1].split('.')[0]]})"
    return None


def first_message(result: dict) -> str:
    return ((result.get("failure_messages") or ["no message"])[0].strip().splitlines() or ["no message"])[0][:160]


def classify(reference: dict, start: dict, stubs: dict[str, str] | None = None) -> Verdict:
    """Verdict of one task from its reference run and its starting-file run (runner result dicts)."""
    if reference["status"] == "passed":
        if start["status"] == "passed":
            return Verdict(WEAK, "the placeholder passes too: the tests cannot tell it from the answer")
        if start["status"] in INIT_MAY_END:
            return Verdict(EXPECTED, "")
        return Verdict(BROKEN, f"init_content ended '{start['status']}' (expected a failure): {first_message(start)}")
    reason = offline_reason(reference, stubs or {})
    if reason:
        return Verdict(UNRUNNABLE, reason)
    return Verdict(BROKEN, f"canonical {reference['status']}: {first_message(reference)}")


@dataclass(frozen=True)
class TaskCheck:
    """Both runs of one task and what they mean; ``paper`` is '' for tasks that are not from a paper."""

    index: int
    paper: str
    stubs: dict
    expected: tuple[str, ...]
    reference: dict
    start: dict
    verdict: Verdict

    @property
    def seconds(self) -> float:
        return self.reference["duration_sec"] + self.start["duration_sec"]


def check_task(dataset: DatasetManager, index: int, options: RunnerOptions) -> TaskCheck:
    """Run canonical.py and init_content of task ``index`` through the real runner and classify the pair."""
    meta = dataset.get(index)
    stubs = meta.extra.get("stubs") or {}
    reference = run_candidate(dataset, index, dataset.canonical(index), options)
    start = run_candidate(dataset, index, meta.init_content, options)
    return TaskCheck(index=index, paper=str(meta.extra.get("paper") or ""), stubs=stubs, expected=meta.test_cases,
                     reference=reference, start=start, verdict=classify(reference, start, stubs))
