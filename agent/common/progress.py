"""What a run shows while it goes: jobs done, turns run, tests running, dollars spent.

On a terminal this is one tqdm bar refreshed in place. Elsewhere (a log file,
a cluster's job output) a bar would write a line per refresh, so each
finished job writes one line instead, carrying the same counters, and a
:class:`Heartbeat` line when nothing was written for ``HEARTBEAT_SEC`` (a job
of ten turns can take many minutes: a silent log looks like a hung run).
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Callable, Iterable, Iterator, TextIO

from tqdm import tqdm


HEARTBEAT_SEC = 30.0  # off a terminal, the longest a long command stays silent
BEAT_SHARE = 0.9  # lines come this share of it apart: polling and a loaded machine delay each a little


def write_line(stream: TextIO, line: str) -> None:
    """One write per line: a run's worker processes share the stream, and print's two writes (the text, then
    the newline) let another process's line land between them."""
    stream.write(f"{line}\n")
    stream.flush()


class Heartbeat:
    """Off a terminal: lines on ``stream``, and one at least every :data:`HEARTBEAT_SEC` when the caller asks
    (:meth:`maybe`) whether one is due."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.interval = HEARTBEAT_SEC * BEAT_SHARE
        self.last = time.monotonic()

    def line(self, text: str) -> None:
        write_line(self.stream, text)
        self.last = time.monotonic()

    def maybe(self, status: Callable[[], str]) -> None:
        if time.monotonic() - self.last >= self.interval:
            self.line(status())


def to_stderr(line: str) -> None:
    """Progress and notes go to stderr, at once: stdout may be a table someone pipes on."""
    write_line(sys.stderr, line)


class Running:
    """A long step that writes nothing itself: what it is, and what it is doing now (``now``), for its lines."""

    def __init__(self, what: str, detail: str = "") -> None:
        self.what = what
        self.detail = detail

    def now(self, detail: str) -> None:
        self.detail = detail

    def line(self, seconds: float) -> str:
        return f"still {self.what} ({seconds:.0f} s{'; ' + self.detail if self.detail else ''})"


@contextlib.contextmanager
def still_running(what: str, say: Callable[[str], None], detail: str = "") -> Iterator[Running]:
    """``say("still <what> (N s; <detail>)")`` every HEARTBEAT_SEC while the block runs (a build, a download, a
    test run, a report), on a terminal or not; the block may update the detail with ``.now(text)``."""
    running, done, start = Running(what, detail), threading.Event(), time.monotonic()

    def beat() -> None:
        while not done.wait(HEARTBEAT_SEC * BEAT_SHARE):
            say(running.line(time.monotonic() - start))

    thread = threading.Thread(target=beat, name="recode-heartbeat", daemon=True)
    thread.start()
    try:
        yield running
    finally:
        done.set()
        thread.join()


def drain(futures: Iterable[Future], on_done: Callable[[Future], None], status: Callable[[int], str],
          stream: TextIO | None = None) -> None:
    """``on_done`` for each future as it finishes (its exception, if any, stops the rest); off a terminal also
    ``status(number done)`` after each and at least every HEARTBEAT_SEC while none finishes."""
    stream = stream or sys.stderr
    beat = None if stream.isatty() else Heartbeat(stream)
    pending, done = set(futures), 0
    while pending:
        finished, pending = wait(pending, timeout=min(1.0, beat.interval) if beat else 1.0,
                                 return_when=FIRST_COMPLETED)
        for future in finished:
            on_done(future)
        done += len(finished)
        if beat is not None and finished:
            beat.line(status(done))
        elif beat is not None:
            beat.maybe(lambda: status(done))


def _dollars(value: float) -> str:
    return f"${value:.4f}"


def _verdict(outcome: dict) -> str:
    if outcome["state"] == "error":
        return f"failed: {outcome['error']}"
    if outcome["state"] in ("refused", "tampered"):
        return f"stopped: {outcome['error']}"
    solved = "solved" if outcome["solved"] else "not solved"
    return f"{solved} (already finished)" if outcome["state"] == "skipped" else solved


class Progress:
    """Counters fed by the scheduler's callbacks: ``turn`` per saved turn, ``job_done`` per outcome,
    ``tick`` every poll (the running tests change between those events)."""

    def __init__(self, total: int, tests_running: Callable[[], int | None] = lambda: None,
                 stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.total = total
        self.tests_running = tests_running
        self.bar = tqdm(total=total, unit="job", dynamic_ncols=True, file=self.stream) if self.live else None
        self.heartbeat = None if self.live else Heartbeat(self.stream)
        self.done = 0
        self.turns = 0
        self.streamed: dict = {}
        self.final = 0.0
        self.errors = 0

    def spent(self) -> float:
        """Final totals of finished jobs plus the per-turn deltas of jobs in flight."""
        return self.final + sum(self.streamed.values())

    def counters(self) -> str:
        running = self.tests_running()
        parts = [f"{self.turns} turns", *([f"{running} tests running"] if running is not None else []),
                 _dollars(self.spent()), *([f"{self.errors} failed"] if self.errors else [])]
        return ", ".join(parts)

    def _show(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(self.counters(), refresh=True)

    def turn(self, job: object, message: dict) -> None:
        self.turns += 1
        self.streamed[job] = self.streamed.get(job, 0.0) + (message.get("cost_usd") or 0.0)
        self._show()

    def tick(self) -> None:
        self._show()
        if self.heartbeat is not None:
            self.heartbeat.maybe(lambda: f"[{self.done}/{self.total}] jobs done, still running | {self.counters()}")

    def job_done(self, job: object, outcome: dict) -> None:
        """The job's own total replaces the per-turn deltas streamed for it."""
        self.streamed.pop(job, None)
        self.final += outcome["cost_usd"] or 0.0
        self.errors += outcome["state"] == "error"
        self.done += 1
        what = f"task {outcome['task_index']} (L{outcome['level']}, {outcome['model']})"
        if self.bar is None:
            cost = "" if outcome["cost_usd"] is None else f", {_dollars(outcome['cost_usd'])}"
            self.heartbeat.line(f"[{self.done}/{self.total}] {what} {_verdict(outcome)}, {outcome['turns']} turns"
                                f"{cost} | {self.counters()}")
            return
        if outcome["state"] == "error":
            self.bar.write(f"{what} {_verdict(outcome)}", file=self.stream)
        self.bar.update(1)
        self._show()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
