"""Early test runs: the tests of a file the agent wrote, run while the model is still answering.

An agent turn is several model calls (write the file, maybe look around,
then SUBMIT), each 10-60 s with a real API, and only the submitted file is
tested. When a step leaves a new file, its tests may start at once on a test
slot nobody else asks for (agent/parallel/slots.py), so that by the time the agent
submits that very file its verdict is often ready. Nothing an agent or a
record sees changes: only the submitted file's run is ever used, it is the
runner's ordinary result for that exact text, and its JUnit report lands
where the submission's would. A run whose file changed is withdrawn if it
has not started, and its result is dropped if it has.
"""
from __future__ import annotations

import itertools
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

EarlyRun = Callable[[str, Path, Callable[[], bool]], "dict | None"]


@dataclass
class _Ahead:
    """One early run: its file, its report, the thread running it and what it gave."""

    code: str
    report: Path
    withdrawn: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    result: dict | None = None


class Lookahead:
    """A job's early runs. ``run(code, report, withdrawn)`` is the test run on a spare slot (None when
    withdrawn first); ``nudge`` wakes a withdrawn run still waiting for its slot."""

    def __init__(self, run: EarlyRun, nudge: Callable[[], None], scratch: Path) -> None:
        self.run = run
        self.nudge = nudge
        self.scratch = scratch
        self.names = itertools.count()
        self.latest: _Ahead | None = None
        self.older: list[_Ahead] = []

    def offer(self, code: str) -> None:
        """The agent wrote ``code``: start its tests early (replacing the previous file's)."""
        if self.latest is not None and self.latest.code == code:
            return
        self._drop_latest()
        ahead = _Ahead(code, self.scratch / f"early-{next(self.names)}.xml")
        ahead.thread = threading.Thread(target=self._run, args=(ahead,), name="early-tests", daemon=True)
        self.latest = ahead
        ahead.thread.start()

    def take(self, code: str, report_to: Path | None) -> dict | None:
        """The early result for the submitted ``code``, its report moved to ``report_to``; None when no early
        run of exactly this text got a slot (the caller then runs the tests as usual)."""
        ahead, self.latest = self.latest, None
        if ahead is None or ahead.code != code:
            if ahead is not None:
                self._withdraw(ahead)
            return None
        ahead.withdrawn.set()  # only stops a run still waiting; one holding its slot goes on
        self.nudge()
        ahead.thread.join()
        result = ahead.result
        if result is not None:
            result = _moved_report(result, ahead.report, report_to)
        ahead.report.unlink(missing_ok=True)
        return result

    def close(self) -> None:
        """Withdraw what waits and wait for what runs (its files live in ``scratch``, about to go)."""
        self._drop_latest()
        for ahead in self.older:
            ahead.thread.join()
            ahead.report.unlink(missing_ok=True)
        self.older = []

    def _drop_latest(self) -> None:
        if self.latest is not None:
            self._withdraw(self.latest)
            self.latest = None

    def _withdraw(self, ahead: _Ahead) -> None:
        ahead.withdrawn.set()
        self.nudge()
        self.older.append(ahead)

    def _run(self, ahead: _Ahead) -> None:
        try:
            ahead.result = self.run(ahead.code, ahead.report, ahead.withdrawn.is_set)
        except Exception:  # a lost worker or a cancelled run: the submission is then tested as usual
            ahead.result = None


def _moved_report(result: dict, early: Path, report_to: Path | None) -> dict:
    """The result as if the run had written its report to ``report_to``."""
    if report_to is None:
        return {key: value for key, value in result.items() if key != "report_path"}
    if result.get("report_path") is None:
        report_to.unlink(missing_ok=True)
        return result
    report_to.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(early, report_to)
    return {**result, "report_path": str(report_to)}
