"""Test slots: how many test runs may start at once, and on which GPU.

Model calls and test runs are scheduled separately. Jobs spend most of their
time waiting on model APIs, so many of them (``max-workers``) can be in
flight at once, while their test runs compete for cores and devices. Every
test run therefore first takes a slot here: a CPU slot (at most
``test-slots`` at once), or, for a task that needs a GPU, one device of
``gpus`` with fewer than ``jobs-per-gpu`` runs on it (at most ``gpu-slots``
GPU runs in all). A GPU run takes no CPU slot, so 8 GPUs x 2 jobs means 16
GPU runs at once on any number of cores.

A slot nobody asks for may serve an early run (``early-tests``,
agent/parallel/lookahead.py): the tests of a file the agent wrote but has not
submitted yet. Early requests wait in a line of their own, are served only
while no submission waits for that kind of slot, and are withdrawn (never
started) once their file changes or is submitted.

The slots are a resource of the process that drives the jobs, so the active
:class:`TestSlots` is process-wide (``serving``); a process that serves none
(a Ray worker, a script) runs its tests directly.
"""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

if TYPE_CHECKING:
    from agent.task.dataset import DatasetManager
    from agent.runner.options import RunnerOptions

GPU_META_KEY = "needs_gpu"  # annotation_meta.jsonl: false for a task whose tests need no GPU


def cpu_count() -> int:
    """CPUs this process may use (the affinity mask, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class SlotConfig:
    """Limits on concurrent test runs; ``gpus`` are CUDA device ids (``nvidia-smi`` numbering)."""

    test_slots: int = field(default_factory=cpu_count)
    gpus: tuple[str, ...] = ()
    jobs_per_gpu: int = 1
    gpu_slots: int | None = None  # None: len(gpus) * jobs_per_gpu
    early_tests: bool = True  # idle slots run the tests of written, not yet submitted files

    @property
    def gpu_capacity(self) -> int:
        full = len(self.gpus) * self.jobs_per_gpu
        return full if self.gpu_slots is None else min(self.gpu_slots, full)

    def needs_gpu(self, task_extra: Mapping[str, Any]) -> bool:
        """With a GPU list, a task needs a GPU unless its metadata says ``needs_gpu: false``."""
        return bool(self.gpus) and task_extra.get(GPU_META_KEY, True) is not False


@dataclass(frozen=True)
class Span:
    """One test run as the slots saw it (monotonic seconds): asked for a slot, got it, gave it back."""

    start: float
    end: float
    gpu: str | None
    asked: float
    early: bool = False


class TestSlots:
    """Admission of test runs in this process; ``call`` runs one (in this thread or on a worker pool)."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, config: SlotConfig, call: Callable[..., dict]) -> None:
        self.config = config
        self.call = call
        self._changed = threading.Condition()
        self._cpu_busy = 0
        self._on_gpu = {gpu: 0 for gpu in config.gpus}
        self._waiting: dict[bool, deque[object]] = {False: deque(), True: deque()}
        self._early: dict[bool, deque[object]] = {False: deque(), True: deque()}
        self.spans: list[Span] = []

    @property
    def running(self) -> int:
        """Test runs holding a slot now (for the progress bar)."""
        with self._changed:
            return self._cpu_busy + sum(self._on_gpu.values())

    def _free_gpu(self) -> str | None:
        if sum(self._on_gpu.values()) >= self.config.gpu_capacity:
            return None
        free = [gpu for gpu, n in self._on_gpu.items() if n < self.config.jobs_per_gpu]
        return min(free, key=lambda gpu: self._on_gpu[gpu]) if free else None

    def _free(self, needs_gpu: bool) -> bool:
        return self._free_gpu() is not None if needs_gpu else self._cpu_busy < self.config.test_slots

    @contextmanager
    def hold(self, needs_gpu: bool, *, early: Callable[[], bool] | None = None) -> Iterator[str | None]:
        """Wait for a slot, first come first served; yields the device id of a GPU slot, None for a CPU slot.

        Serving in arrival order keeps each job's place from one turn to the
        next, so jobs that started together spread out instead of queueing
        behind each other again at every turn (and none waits indefinitely).
        ``early``: an early run's "withdrawn?" check; it is served only while
        no submission waits, and raises :class:`Withdrawn` once withdrawn.
        """
        line = self._waiting[needs_gpu] if early is None else self._early[needs_gpu]
        ticket = object()
        asked = time.monotonic()

        def served() -> bool:
            first = line[0] is ticket and (early is None or not self._waiting[needs_gpu])
            return (first and self._free(needs_gpu)) or (early is not None and early())

        with self._changed:
            line.append(ticket)
            self._changed.wait_for(served)
            line.remove(ticket)
            self._changed.notify_all()  # the next in line may fit as well
            if early is not None and early():  # served because withdrawn (withdrawal wins a tie)
                raise Withdrawn
            gpu = self._free_gpu() if needs_gpu else None
            if gpu is None:
                self._cpu_busy += 1
            else:
                self._on_gpu[gpu] += 1
        start = time.monotonic()
        try:
            yield gpu
        finally:
            with self._changed:
                if gpu is None:
                    self._cpu_busy -= 1
                else:
                    self._on_gpu[gpu] -= 1
                self.spans.append(Span(start, time.monotonic(), gpu, asked, early is not None))
                self._changed.notify_all()

    def nudge(self) -> None:
        """Wake the waiting requests so a withdrawn early one leaves its line."""
        with self._changed:
            self._changed.notify_all()


class Withdrawn(Exception):
    """An early run was withdrawn before it got a slot."""


_active: TestSlots | None = None


def active_slots() -> TestSlots | None:
    return _active


@contextmanager
def serving(slots: TestSlots | None) -> Iterator[None]:
    """Make ``slots`` this process's test slots while the jobs of a run are in flight."""
    global _active
    previous, _active = _active, slots
    try:
        yield
    finally:
        _active = previous


# ---------------------------------------------------------------------- a job's test runs

def runner_call() -> Callable[..., dict]:
    """The test runner, imported when first needed: the configuration reads this module's modes and must
    not pull in the runner's machinery (sandbox probes, process control)."""
    from agent.runner.core import run_candidate

    return run_candidate


def run_tests(dataset: DatasetManager, index: int, candidate: str, options: RunnerOptions,
              report_to: Path | None = None) -> dict:
    """One test run, through this process's test slots when it serves some (``agent/parallel/slots.py``).

    With a GPU list the run sees exactly its device (``CUDA_VISIBLE_DEVICES``),
    or none at all when its task needs no GPU.
    """
    slots = active_slots()
    if slots is None:
        return runner_call()(dataset, index, candidate, options, report_to=report_to)
    return _in_slot(slots, dataset, index, candidate, options, report_to, None)


def run_early_tests(dataset: DatasetManager, index: int, candidate: str, options: RunnerOptions,
                    report_to: Path, withdrawn: Callable[[], bool]) -> dict | None:
    """The test run of a file not yet submitted, on a slot nobody else asks for (agent/parallel/lookahead.py);
    None when it was withdrawn first or this process serves no slots (then early runs are off).
    ``early-tests: false`` is honoured where the job is built: its Session makes no Lookahead."""
    slots = active_slots()
    if slots is None:
        return None
    try:
        return _in_slot(slots, dataset, index, candidate, options, report_to, withdrawn)
    except Withdrawn:
        return None


def nudge_early_runs() -> None:
    """Let withdrawn early runs still waiting for a slot leave their line."""
    slots = active_slots()
    if slots is not None:
        slots.nudge()


def _in_slot(slots: TestSlots, dataset: DatasetManager, index: int, candidate: str, options: RunnerOptions,
             report_to: Path | None, early: Callable[[], bool] | None) -> dict:
    with slots.hold(slots.config.needs_gpu(dataset.get(index).extra), early=early) as gpu:
        if slots.config.gpus:
            options = replace(options, cuda_devices=gpu or "")
        return slots.call(dataset, index, candidate, options, report_to=report_to)
