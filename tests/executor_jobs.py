"""Job functions for the executor tests: importable by module name, so every backend can ship them."""
from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from agent.runner.options import RunnerOptions
from agent.parallel.slots import run_tests


def square_or_fail(value: int, report: Callable[[dict], None]) -> int:
    """Reports progress, then fails for 3 and returns value**2 otherwise."""
    report({"value": value})
    if value == 3:
        raise ValueError(f"job {value} failed on purpose")
    return value * value


def die_once(marker: str) -> int:
    """Kills its own worker process the first time (as a lost node would), succeeds when retried."""
    path = Path(marker)
    if not path.exists():
        path.write_text("died once")
        os._exit(1)
    return os.getpid()


class FakeDataset:
    """Stands in for DatasetManager in slot tests: even task ids need no GPU (``needs_gpu: false``)."""

    def get(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(extra={"needs_gpu": False} if index % 2 == 0 else {})


def timed_test_run(dataset: FakeDataset, index: int, candidate: str, options: RunnerOptions,
                   report_to: Path | None = None) -> dict:
    """A fake test run: sleeps ``candidate`` seconds; says when it ran, where, and on which device."""
    start = time.time()
    time.sleep(float(candidate))
    return {"index": index, "start": start, "end": time.time(), "pid": os.getpid(), "cuda": options.cuda_devices}


def slow_test_run(dataset: FakeDataset, index: int, candidate: str, options: RunnerOptions,
                  report_to: Path | None = None) -> dict:
    """A test run that outlives any test (cancel must kill it)."""
    time.sleep(120)
    return {}


def job_with_test(index: int, seconds: float) -> dict:
    """A job whose only work is one test run through the process's test slots."""
    return run_tests(FakeDataset(), index, str(seconds), RunnerOptions())
