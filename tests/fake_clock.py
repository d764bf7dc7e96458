"""A monotonic clock for tests of waiting code: time moves only when the code under test sleeps on it."""
from __future__ import annotations


class FakeClock:
    """Call it for the time; pass ``clock.sleep`` as the sleep function (each wait is kept in ``slept``)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
