"""What a run shows while it goes: jobs done, turns run, tests running, dollars spent.

On a terminal this is one tqdm bar refreshed in place. Elsewhere (a log file,
a cluster's job output) a bar would write a line per refresh, so each
finished job writes one line instead, carrying the same counters.
"""
from __future__ import annotations

import sys
from typing import Callable, TextIO

from tqdm import tqdm


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

    def job_done(self, job: object, outcome: dict) -> None:
        """The job's own total replaces the per-turn deltas streamed for it."""
        self.streamed.pop(job, None)
        self.final += outcome["cost_usd"] or 0.0
        self.errors += outcome["state"] == "error"
        self.done += 1
        what = f"task {outcome['task_index']} (L{outcome['level']}, {outcome['model']})"
        if self.bar is None:
            cost = "" if outcome["cost_usd"] is None else f", {_dollars(outcome['cost_usd'])}"
            print(f"[{self.done}/{self.total}] {what} {_verdict(outcome)}, {outcome['turns']} turns{cost} | "
                  f"{self.counters()}", file=self.stream, flush=True)
            return
        if outcome["state"] == "error":
            self.bar.write(f"{what} {_verdict(outcome)}", file=self.stream)
        self.bar.update(1)
        self._show()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
