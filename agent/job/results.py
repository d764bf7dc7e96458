"""The result store: one task's result pickle and state file in one result folder, written atomically, read
safely.

A result file is a pickle holding a LIST of turn records of Python builtins
only (agent/job/record.py), so a notebook loads it without importing this
package. It is rewritten whole after every turn through a temporary file and
``os.replace``, so a crash leaves either the previous or the new version,
never a torn one. A sibling ``task_<id>_state.json`` says whether the task
finished, errored or stopped early, and under which job fingerprint, in
format ``STATE_FORMAT``.

Every pickle the harness reads (results, seeds) goes through ``load_pickle``:
the result format's restricted unpickler, the same one the metrics use, so a
results folder someone sent you never runs code when resumed.
"""
from __future__ import annotations

import json
import os
import pickle
import time
from pathlib import Path
from typing import Any

from agent.common.atomic_file import atomic_write_bytes
from agent.job.record import check_builtins, turn_solved
from metrics.result_format import (
    REPORTS_DIR, STATE_FORMAT, STOP_KEY, result_file_name, safe_load_pickle, state_file_name,
)

MOVE_AWAY = "move it away (or set overwrite: true) to recompute that task"


class ResultError(Exception):
    """A result, state or seed file that cannot be used; the message names the file and the fix."""


def load_pickle(path: Path, fix: str = MOVE_AWAY) -> Any:
    """A pickle of builtins; anything else (a corrupt file, a file asking for other globals) is a ResultError
    naming the file and ``fix``, and nothing in it is ever executed."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResultError(f"{path} cannot be read ({exc.strerror or exc}); {fix}") from None
    try:
        return safe_load_pickle(data)
    except pickle.UnpicklingError as exc:
        raise ResultError(f"{path} is not a plain result file ({exc}); {fix}") from None
    except Exception as exc:  # a corrupt pickle can raise nearly anything while loading
        raise ResultError(f"{path} is corrupt ({type(exc).__name__}); {fix}") from None


class ResultStore:
    """The result pickle and state file of one task in one result folder."""

    def __init__(self, folder: Path, task_index: int, *, replay_level: int | None = None,
                 fingerprint: dict | None = None) -> None:
        """``replay_level`` K: the release's replay file ``task_<id>_result_replay_level<K>.pkl``,
        whose n-th record is the new turn continuing stored turn n (so it is turn n + 1). ``fingerprint``:
        the identity of the job writing here (agent/job/fingerprint.py), kept in the state file."""
        self.folder = Path(folder)
        self.fingerprint = fingerprint
        self.task_index = task_index
        self.first_turn = 0 if replay_level is None else 1
        self.result_path = self.folder / result_file_name(task_index, replay_level)
        self.state_path = self.folder / state_file_name(task_index, replay_level)
        self.report_dir = self.folder / REPORTS_DIR

    def load(self) -> list[dict]:
        """Stored turns, as stored (empty when none); a file that is not a clean turn list is a ResultError.
        Records are made whole by the caller's ``record.Upgrade``."""
        if not self.result_path.exists():
            return []
        turns = load_pickle(self.result_path)
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise ResultError(f"{self.result_path} is not a list of turn dicts; {MOVE_AWAY}")
        for number, turn in enumerate(turns):
            if turn.get("turn_number") != number + self.first_turn or turn.get("task_index") != self.task_index:
                raise ResultError(f"{self.result_path}: turn {number} is out of order or of another task; "
                                  f"{MOVE_AWAY}")
        return turns

    def state(self) -> dict | None:
        if not self.state_path.exists():
            return None
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return state if isinstance(state, dict) else None

    def save(self, turns: list[dict], *, finished: bool) -> None:
        """Write every turn (atomically), then the state: a crash in between only loses the flag."""
        check_builtins(turns, str(self.result_path))
        atomic_write_bytes(self.result_path, pickle.dumps(turns, protocol=4))
        self.mark(finished=finished, error=None, turns=turns)

    def mark(self, *, finished: bool, error: str | None, turns: list[dict],
             stop_reason: str | None = None, refused: dict | None = None) -> None:
        """The state of the job whose stored turns are ``turns``; ``refused``: the settings a request the
        provider refuses as sent was made under (agent/job/layout.py ``resend_keys``)."""
        solved = bool(turns) and turn_solved(turns[-1].get("execution_result") or {})
        state = {"format": STATE_FORMAT, "finished": finished, "error": error, "turns": len(turns),
                 "solved": solved, STOP_KEY: stop_reason, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "fingerprint": self.fingerprint, **({"refused": refused} if refused is not None else {})}
        atomic_write_bytes(self.state_path, (json.dumps(state, indent=1) + "\n").encode())

    def set_aside(self) -> Path | None:
        """Rename an existing result (a non-resumed rerun) so nothing computed is lost."""
        if not self.result_path.exists():
            return None
        backup = self.result_path.with_name(f"{self.result_path.stem}.{time.strftime('%Y%m%d-%H%M%S')}.pkl.bak")
        os.replace(self.result_path, backup)
        return backup
