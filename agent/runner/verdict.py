"""Turn what a test run left behind into the runner's result dict.

Evidence, and how much each is trusted:
* the guard channel (see ``agent/runner/pytest_guard``): ``hello`` proves the harness
  started; any ``flag`` line means tampering; the ``seal`` is authenticated
  with a per-run key the candidate never had, and carries pytest's exit
  status, the sha256 of the JUnit file and the guard's own per-test outcomes;
* the JUnit XML, believed only when its hash matches the seal;
* the process exit code, which must equal the sealed exit status.

Any ``access`` line (or access sealed by the guard) means the candidate used
the hidden reference: the run is ``reference_access`` with that line as its
evidence, whatever else happened, because no part of such a result measures
the candidate. Otherwise any ``flag`` line (or flag sealed by the guard) means
it used a capability research code never needs, changed something the
verdict relies on, or handed the test a value that fakes its comparisons:
the run is ``tampered``, with the first flag as its one line of evidence
(``target.py:12 sets sys.setprofile``). So is a report that says a test
passed which the guard saw fail or end early.

``passed`` needs all of it to agree: hello, a valid seal, no flag, the same
exit code, the sealed report, every expected test case present and passed in
the report AND by the guard's own observation, and no error, failure or skip.
What breaks that chain without a flag (exit early, crash, a forged seal, a
rewritten report) lands in ``error``. ``suspect`` lines (and those sealed) are
what the guard noticed but no exact rule decides: kept as ``suspicious`` in the
result, never a verdict.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from collections import defaultdict
from dataclasses import dataclass

from junitparser import Error, Failure, JUnitXml, Skipped

from metrics.run_status import REFERENCE_ACCESS, TAMPERED

SESSION = "session"


@dataclass(frozen=True)
class GuardRecord:
    """What the guard plugin reported: started?, tampering flags, the verified seal (or why not)."""

    hello: bool
    flags: tuple[str, ...]
    access: tuple[str, ...]
    seal: dict | None
    problem: str | None
    suspicious: tuple[str, ...] = ()  # what no exact rule could decide: carried in the result, never a verdict
    notes: tuple[str, ...] = ()  # how the guard ran the tests (in one process) or where a check of its failed


@dataclass(frozen=True)
class CaseResult:
    """One ``<testcase>`` of the report."""

    classname: str
    name: str
    outcome: str  # passed | failure | error | skipped
    message: str
    details: str


def read_channel(data: bytes, key: bytes) -> GuardRecord:
    """Parse the guard's lines; only a seal whose HMAC verifies under ``key`` counts."""
    hello = False
    flags: list[str] = []
    access: list[str] = []
    suspicious: list[str] = []
    notes: list[str] = []
    seals: list[dict] = []
    forged = 0
    for raw in data.decode("utf-8", "replace").splitlines():
        kind, _, rest = raw.partition(" ")
        if kind == "hello":
            hello = True
        elif kind == "flag" and rest:
            flags.append(rest)
        elif kind == "access" and rest:
            access.append(rest)
        elif kind == "suspect" and rest:
            suspicious.append(rest)
        elif kind == "note" and rest and rest not in notes:
            notes.append(rest)
        elif kind == "seal":
            body, _, mac = rest.rpartition(" ")
            expected = hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()
            if hmac.compare_digest(expected, mac):
                seals.append(json.loads(body))
            else:
                forged += 1
    problem = None
    if forged:
        problem = f"{forged} forged seal line(s) on the guard channel"
    elif len(seals) > 1:
        problem = "the guard channel holds more than one seal"
    seal = seals[0] if len(seals) == 1 else None
    access += [line for line in (seal or {}).get("access", []) if line not in access]
    suspicious += [line for line in (seal or {}).get("suspicious", []) if line not in suspicious]
    return GuardRecord(hello=hello, flags=tuple(flags), access=tuple(access), seal=seal, problem=problem,
                       suspicious=tuple(suspicious), notes=tuple(notes))


def parse_junit(xml: bytes) -> list[CaseResult]:
    """Every test case of a pytest JUnit report, with its outcome and message."""
    cases = []
    for suite in JUnitXml.fromstring(xml.decode("utf-8", "replace")):
        for case in suite:
            outcome, message, details = "passed", "", ""
            for result in case.result:
                kind = {Failure: "failure", Error: "error", Skipped: "skipped"}.get(type(result))
                if kind and (outcome == "passed" or kind == "error"):
                    outcome, message, details = kind, result.message or "", result.text or ""
            cases.append(CaseResult(case.classname or "", case.name or "", outcome, message, details))
    return cases


def _base(expected: tuple[str, ...], exit_code: int | None, duration: float, output: str) -> dict:
    return {"tests": 0, "errors": 0, "failures": 0, "skipped": 0, "failure_messages": [],
            "test_summary": {name: False for name in expected}, "status": "error", "exit_code": exit_code,
            "duration_sec": round(duration, 3), "output": output, "report_path": None}


def failed_run(expected: tuple[str, ...], status: str, reason: str, *, exit_code: int | None = None,
               duration: float = 0.0, output: str = "") -> dict:
    """A run without a trustworthy report: every expected test case counts as an error."""
    result = _base(expected, exit_code, duration, output)
    count = max(1, len(expected))
    tail = "\n".join(output.strip().splitlines()[-15:])
    result.update(tests=count, errors=count, status=status,
                  failure_messages=[f"{SESSION}: {reason}" + (f"\n{tail}" if tail else "")])
    return result


def sealed_report(record: GuardRecord, junit: bytes) -> bool:
    """True when ``junit`` is byte for byte the report pytest wrote under the guard's eyes."""
    return record.seal is not None and record.seal.get("junit_sha256") == hashlib.sha256(junit).hexdigest()


def _distrust(record: GuardRecord, exit_code: int | None, junit: bytes | None) -> str | None:
    """Why the evidence cannot be believed, or None when it holds together."""
    if record.problem:
        return record.problem
    seal = record.seal
    if seal is None:
        return f"the test process ended before pytest finished its session (exit code {exit_code})"
    if seal.get("exitstatus") != exit_code:
        return f"exit code {exit_code} disagrees with pytest's own exit status {seal.get('exitstatus')}"
    if junit is None or not sealed_report(record, junit):
        return "the JUnit report is missing or was changed after pytest wrote it"
    return None


def _guard_disagrees(cases: list[CaseResult], seal: dict) -> str | None:
    observed: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for classname, name, passed in seal.get("tests", []):
        observed[(classname, name)].append(bool(passed))
    for case in cases:
        if case.outcome == "passed" and not all(observed.get((case.classname, case.name), [False])):
            return f"the report says {case.name} passed but the guard saw it fail, end early or never run"
    return None


def tampering(record: GuardRecord) -> tuple[str, ...]:
    """Every flag the guard raised: on the channel as it happened, and sealed."""
    sealed = tuple((record.seal or {}).get("flags", ()))
    return record.flags + tuple(flag for flag in sealed if flag not in record.flags)


def evidence_verdict(expected: tuple[str, ...], record: GuardRecord, *, exit_code: int | None = None,
                     duration: float = 0.0, output: str = "") -> dict | None:
    """``reference_access`` or ``tampered`` when the guard saw either, with the first line of evidence, else None."""
    if record.access:
        return failed_run(expected, REFERENCE_ACCESS, "reference access: " + record.access[0], exit_code=exit_code,
                          duration=duration, output=output)
    flags = tampering(record)
    if flags:
        return failed_run(expected, TAMPERED, "tampering: " + flags[0], exit_code=exit_code, duration=duration,
                          output=output)
    return None


def judge(*, expected: tuple[str, ...], exit_code: int | None, junit: bytes | None, record: GuardRecord,
          duration: float, output: str) -> dict:
    """Result dict of a run that finished (not timed out) and whose guard started; what the guard found
    suspicious but could not decide is kept under ``suspicious`` whatever the verdict, and its notes under ``notes``."""
    result = _judged(expected=expected, exit_code=exit_code, junit=junit, record=record, duration=duration,
                     output=output)
    if record.suspicious:
        result["suspicious"] = list(record.suspicious)
    if record.notes:
        result["notes"] = list(record.notes)
    return result


def _judged(*, expected: tuple[str, ...], exit_code: int | None, junit: bytes | None, record: GuardRecord,
            duration: float, output: str) -> dict:
    caught = evidence_verdict(expected, record, exit_code=exit_code, duration=duration, output=output)
    if caught is not None:
        return caught
    reason = _distrust(record, exit_code, junit)
    if reason is None:
        cases = parse_junit(junit)
        disagreement = _guard_disagrees(cases, record.seal)
        if disagreement is not None:
            return failed_run(expected, TAMPERED, "tampering: " + disagreement, exit_code=exit_code,
                              duration=duration, output=output)
    if reason is None:
        bad = sum(c.outcome in ("failure", "error") for c in cases)
        if (exit_code == 0) != (bad == 0) and exit_code != 5:
            reason = f"exit code {exit_code} contradicts the report ({bad} failing test(s))"
    if reason is not None:
        return failed_run(expected, "error", reason, exit_code=exit_code, duration=duration, output=output)
    return summarize(cases, expected, exit_code=exit_code, duration=duration, output=output)


def failure_text(case: CaseResult) -> str:
    """``<test>: <message>`` then the report's text of the failure (pytest's traceback), stripped: the
    release's message, which the harness prefixes with ``FAILURE in`` / ``ERROR in`` as the release does."""
    return f"{case.name}: {case.message}" + (f"\n{case.details.strip()}" if case.details else "")


def summarize(cases: list[CaseResult], expected: tuple[str, ...], *, exit_code: int | None, duration: float,
              output: str) -> dict:
    """Counts, messages and the per-test summary of a trusted report; missing expected tests fail."""
    result = _base(expected, exit_code, duration, output)
    summary: dict[str, bool] = {}
    for case in cases:
        summary[case.name] = summary.get(case.name, True) and case.outcome == "passed"
        if case.outcome != "passed":
            result["failure_messages"].append(failure_text(case))
    missing = [name for name in expected if name not in summary]
    for name in missing:
        summary[name] = False
        result["failure_messages"].append(f"{name}: not in the report (expected by annotation_meta test_cases)")
    counts = {kind: sum(c.outcome == kind for c in cases) for kind in ("failure", "error", "skipped")}
    outcomes: dict[str, str] = {}  # per test, its worst outcome: the release-shaped messages need the kind
    for case in cases:
        if outcomes.get(case.name) != "error":
            outcomes[case.name] = case.outcome if case.outcome != "passed" else outcomes.get(case.name, "passed")
    result.update(tests=len(cases) + len(missing), failures=counts["failure"] + len(missing),
                  errors=counts["error"], skipped=counts["skipped"], test_summary=summary,
                  outcomes=outcomes, missing_tests=missing)
    clean = not missing and cases and not any(counts.values()) and exit_code == 0
    result["status"] = "passed" if clean else "failed"
    return result
