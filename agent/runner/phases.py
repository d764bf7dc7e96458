"""Where the time of one test run goes, measured inside the runner when someone asks.

``scripts/bench_runner.py`` wraps a call to the runner in ``recording()`` and
gets the seconds each phase of that very call took; outside ``recording()``
``phase`` costs one context-variable read, so normal runs pay nothing.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_sink: ContextVar[dict[str, float] | None] = ContextVar("recode_runner_phases", default=None)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the wall time of the block to ``name`` in the active recording (if any)."""
    sink = _sink.get()
    if sink is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        sink[name] = sink.get(name, 0.0) + time.perf_counter() - start


@contextmanager
def recording() -> Iterator[dict[str, float]]:
    """Collect the phases of the runner calls made in the block (this thread/context only)."""
    sink: dict[str, float] = {}
    token = _sink.set(sink)
    try:
        yield sink
    finally:
        _sink.reset(token)
