"""Progress: a bar on a terminal; elsewhere one line per finished job with the same counters, no flood."""
from __future__ import annotations

import io
import time

from agent.common.progress import Progress


def outcome(task: int, state: str = "finished", solved: bool = False, cost: float | None = 0.25,
            error: str | None = None) -> dict:
    return {"task_index": task, "level": 2, "model": "coder", "state": state, "solved": solved, "turns": 3,
            "cost_usd": cost, "error": error}


def feed(progress: Progress) -> None:
    for _ in range(3):
        progress.turn("job-a", {"cost_usd": 0.1, "turn": 0})
        progress.tick()
    progress.turn("job-b", {"cost_usd": 0.05, "turn": 0})
    progress.job_done("job-a", outcome(1, solved=True, cost=0.3))
    progress.job_done("job-b", outcome(2, state="error", cost=None, error="InfraError: no environment"))
    progress.job_done("job-c", outcome(3, state="skipped"))


def test_not_a_terminal_one_line_per_finished_job() -> None:
    stream = io.StringIO()
    running = iter([2, 1, 0] + [0] * 20)
    progress = Progress(3, tests_running=lambda: next(running), stream=stream)
    feed(progress)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines == [
        "[1/3] task 1 (L2, coder) solved, 3 turns, $0.3000 | 4 turns, 2 tests running, $0.3500",
        "[2/3] task 2 (L2, coder) failed: InfraError: no environment, 3 turns | 4 turns, 1 tests running, $0.3000, "
        "1 failed",
        "[3/3] task 3 (L2, coder) not solved (already finished), 3 turns, $0.2500 | 4 turns, 0 tests running, "
        "$0.5500, 1 failed",
    ]


def test_terminal_bar_shows_jobs_turns_tests_and_dollars() -> None:
    stream = io.StringIO()
    progress = Progress(3, tests_running=lambda: 2, stream=stream, live=True)
    feed(progress)
    progress.close()
    text = stream.getvalue()
    assert "3/3" in text and "4 turns, 2 tests running, $0.5500, 1 failed" in text
    assert "task 2 (L2, coder) failed: InfraError: no environment" in text
    assert "[1/3]" not in text


def test_tests_running_left_out_when_unknown() -> None:
    progress = Progress(1, stream=io.StringIO())
    assert progress.counters() == "0 turns, $0.0000"


def test_not_a_terminal_a_line_while_a_long_job_runs(monkeypatch) -> None:
    """A job of many turns finishes after minutes: a log still gets a line at least every HEARTBEAT_SEC."""
    monkeypatch.setattr("agent.common.progress.HEARTBEAT_SEC", 1.0)  # a line is due after 0.9 s (BEAT_SHARE)
    stream = io.StringIO()
    progress = Progress(2, tests_running=lambda: 1, stream=stream)
    progress.tick()
    assert stream.getvalue() == ""  # not yet due
    time.sleep(1.0)
    progress.turn("job-a", {"cost_usd": 0.1, "turn": 0})
    progress.tick()
    progress.tick()  # just said: not due again
    assert stream.getvalue().splitlines() == ["[0/2] jobs done, still running | 1 turns, 1 tests running, $0.1000"]
    progress.job_done("job-a", outcome(1))
    time.sleep(0.03)
    progress.tick()  # the job's line reset the clock
    assert len(stream.getvalue().splitlines()) == 2
