"""Stopping a whole run at once when a provider refuses every further call (quota, key, permission, model).

A ``RunFatal`` error (agent/models/types.py) met by any job closes the run's
:class:`Gate`: from then on every model call of this process's jobs raises
:class:`RunHalted` before it is sent, so at most the calls already in flight
are made after the first such error. A job that meets either keeps its saved
turns and leaves its state as a killed run would (resumable, not failed); the
scheduler stops starting work, and the main command ends with the error's
line. Gates are found by output folder, so the jobs of a run (threads of this
process) reach theirs without it crossing a process boundary; a job in
another process (Ray) carries the error back in its outcome instead.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent.models.types import ChatModel, Completion, RunFatal

RUN_FATAL_KEY = "run_fatal"  # an outcome's copy of the run-fatal line (None: none met)


class RunHalted(Exception):
    """This job's next model call was not sent: the run is stopping (the first run-fatal line in ``str``)."""


class Gate:
    """Open until the first run-fatal error; then every call through it is refused."""

    def __init__(self) -> None:
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self.reason: str | None = None

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self, reason: str) -> None:
        """Refuse every later call; the first reason given is the one the run ends with."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            self._closed.set()

    def check(self) -> None:
        if self._closed.is_set():
            raise RunHalted(self.reason)


_GATES: dict[str, Gate] = {}
_GATES_LOCK = threading.Lock()


def _key(output_dir: str | Path) -> str:
    return str(Path(output_dir).resolve())


@contextmanager
def run_gate(output_dir: str | Path) -> Iterator[Gate]:
    """The gate of the run writing to ``output_dir`` in this process, open for the run's duration."""
    gate = Gate()
    with _GATES_LOCK:
        _GATES[_key(output_dir)] = gate
    try:
        yield gate
    finally:
        with _GATES_LOCK:
            if _GATES.get(_key(output_dir)) is gate:
                del _GATES[_key(output_dir)]


def gate_of(output_dir: str | Path) -> Gate | None:
    with _GATES_LOCK:
        return _GATES.get(_key(output_dir))


class GatedModel:
    """A model whose calls pass the run's gate: refused once the run stops, closing it on a run-fatal error."""

    def __init__(self, model: ChatModel, gate: Gate) -> None:
        self.model = model
        self.gate = gate

    def complete(self, messages: list[dict[str, str]], *, response_schema: dict | None = None) -> Completion:
        self.gate.check()
        try:
            return self.model.complete(messages, response_schema=response_schema)
        except RunFatal as error:
            self.gate.close(str(error))
            raise


def gated(model: ChatModel, output_dir: str | Path) -> ChatModel:
    """``model`` behind the gate of the run writing to ``output_dir`` (as it is when no run is open there)."""
    gate = gate_of(output_dir)
    return model if gate is None else GatedModel(model, gate)
