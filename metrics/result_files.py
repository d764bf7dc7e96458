"""The result-file format on disk: where a run's pickles live, how to load them safely, how to read a turn.

Every metric reads results through this module, so a missing file, a corrupt
file and an unfinished task are counted the same way everywhere.

Names, keys and the safe loader are the result format's (``result_format.py``); this module adds how
metrics read a run: which tasks are missing, corrupt, unfinished or incomplete.
"""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from junit_outcome import OUTCOME_KEYS
from result_format import (  # noqa: F401  (re-exported to the metric modules)
    LEVELS, STOP_KEY, folder_model_name, result_path, run_folder_name, safe_load_pickle, state_path,
)
from run_status import INFRA_ERROR, UNTRUSTED_STATUSES

DEFAULT_RESULT_DIR = "experiment_results"
DEFAULT_SETTING = "memory_agent"
DEFAULT_GUIDANCE_TYPE = "fixed"


class ResultFileError(Exception):
    """A result file that exists but cannot be used; the message says why in one line."""


@dataclass(frozen=True)
class RunSelection:
    """Which runs to read: the folder naming of docs/ARCHITECTURE.md "Result files" minus the model name."""

    result_dir: Path | str | None = DEFAULT_RESULT_DIR
    setting: str = DEFAULT_SETTING
    guidance_type: str = DEFAULT_GUIDANCE_TYPE
    levels: Iterable[int] = LEVELS

    @property
    def root(self) -> Path:
        """The results folder; None (the release functions' default) means ``experiment_results``."""
        return Path(self.result_dir if self.result_dir is not None else DEFAULT_RESULT_DIR)

    def folder(self, model: str, level: int) -> Path:
        return self.root / run_folder_name(self.setting, model, self.guidance_type, level)










def load_turns(path: Path) -> list[dict]:
    """The per-turn records of one result pickle; raises ResultFileError when unusable."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResultFileError(f"unreadable ({exc.strerror or exc})") from None
    try:
        turns = safe_load_pickle(data)
    except Exception as exc:  # a corrupt pickle can raise nearly anything while loading
        raise ResultFileError(f"not a loadable pickle ({type(exc).__name__}: {exc})") from None
    if not isinstance(turns, list) or not turns:
        raise ResultFileError(f"expected a non-empty list of turn dicts, got {_describe(turns)}")
    for number, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise ResultFileError(f"turn {number} is {type(turn).__name__}, expected dict")
        _check_execution(number, turn.get("execution_result"))
    return turns


def _check_execution(number: int, result: object) -> None:
    """Metrics do arithmetic on the counts, so a record whose counts are not integers is corrupt."""
    if result is None:
        return
    if not isinstance(result, dict):
        raise ResultFileError(f"turn {number}: execution_result is {type(result).__name__}, expected dict")
    for key in OUTCOME_KEYS:
        value = result.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ResultFileError(f"turn {number}: execution_result['{key}'] is {type(value).__name__}, expected int")


def _describe(value: object) -> str:
    return "an empty list" if value == [] else type(value).__name__


def read_state(folder: Path, task_id: int) -> dict:
    """The sibling ``task_<id>_state.json`` ({"finished", "error", ...}); ``{}`` when absent (release results)."""
    try:
        state = json.loads(state_path(folder, task_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def execution(turn: dict) -> dict:
    """The turn's execution_result, ``{}`` when the turn was never tested."""
    return turn.get("execution_result") or {}


def turn_status(turn: dict) -> str | None:
    """The runner status of a turn (our key, or the runner's own copy inside execution_result)."""
    return turn.get("status") or execution(turn).get("status")


def has_infra_error(turns: list[dict]) -> bool:
    """Whether any turn failed for a reason that is not the model's (environment, sandbox...)."""
    return any(turn_status(turn) == INFRA_ERROR for turn in turns)


def is_infra_error_message(error: str) -> bool:
    """The run stops a task whose tests could not run and records ``InfraError: ...`` in its state file."""
    return error.startswith("InfraError")


def incomplete_reason(turns: list[dict], state: dict) -> str | None:
    """Why a job's result cannot be scored at its level, or None when it can.

    A job is incomplete when it stopped early for a reason that is not the
    model's: its last turn or its state names a ``stop_reason`` (feedback
    missing, budget), its state records the error that stopped it, or a turn's
    test run was an infrastructure failure or reached for the reference. Such a
    job is neither solved nor unsolved. Release result files carry none of these
    keys, so every one of their tasks is complete.
    """
    stop = state.get(STOP_KEY) if STOP_KEY in state or not turns else turns[-1].get(STOP_KEY)
    if stop:
        return str(stop)
    error = state.get("error")
    if error:
        return INFRA_ERROR if is_infra_error_message(str(error)) else "stopped by an error"
    return next((status for turn in turns if (status := turn_status(turn)) in UNTRUSTED_STATUSES), None)


@dataclass
class LevelRun:
    """The loaded results of one (model, level) run plus an account of what could not be used."""

    model: str
    level: int
    folder: Path
    trajectories: dict[int, list[dict]] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    corrupt: dict[int, str] = field(default_factory=dict)
    unfinished: list[int] = field(default_factory=list)  # interrupted, resumable; scored on the turns so far
    errors: dict[int, str] = field(default_factory=dict)
    incomplete: dict[int, str] = field(default_factory=dict)  # task -> why it is neither solved nor unsolved

    @property
    def requested(self) -> int:
        return len(set(self.trajectories) | set(self.incomplete)) + len(self.missing) + len(self.corrupt)

    @property
    def infra_errors(self) -> list[int]:
        """Tasks hit by an infrastructure error: a turn's status, or the error that stopped the task."""
        by_status = {task for task, turns in self.trajectories.items() if has_infra_error(turns)}
        by_state = {task for task, error in self.errors.items() if is_infra_error_message(error)}
        return sorted(by_status | by_state)


def warn_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def load_run(
    model: str, level: int, task_ids: Iterable[int], selection: RunSelection,
    warn: Callable[[str], None] = warn_stderr,
) -> LevelRun:
    """Load every requested task of one run; missing files are counted, corrupt ones named via ``warn``."""
    run = LevelRun(model=model, level=level, folder=selection.folder(model, level))
    for task_id in task_ids:
        state = read_state(run.folder, task_id)
        if state.get("error"):
            run.errors[task_id] = str(state["error"])
        path = result_path(run.folder, task_id)
        if not path.exists():
            reason = incomplete_reason([], state)
            if reason is None:
                run.missing.append(task_id)
            else:
                run.incomplete[task_id] = reason  # stopped before its first turn was stored
            continue
        try:
            run.trajectories[task_id] = load_turns(path)
        except ResultFileError as exc:
            run.corrupt[task_id] = str(exc)
            warn(f"skipped corrupt result file {path}: {exc}")
            continue
        reason = incomplete_reason(run.trajectories[task_id], state)
        if reason is not None:
            run.incomplete[task_id] = reason
        elif state.get("finished") is False:
            run.unfinished.append(task_id)
    return run


def load_runs(
    model: str, task_ids: Iterable[int], selection: RunSelection, warn: Callable[[str], None] = warn_stderr,
) -> list[LevelRun]:
    """One :class:`LevelRun` per level of the selection, in level order."""
    ids = list(task_ids)
    return [load_run(model, level, ids, selection, warn) for level in selection.levels]


def discover_models(selection: RunSelection) -> list[str]:
    """Model folder names present under the result dir for this setting and guidance type, sorted."""
    pattern = re.compile(
        rf"^{re.escape(selection.setting)}_(.+)_feedback_{re.escape(selection.guidance_type)}_guidance_\d+$"
    )
    root = selection.root
    found = {m.group(1) for p in root.iterdir() if p.is_dir() and (m := pattern.match(p.name))} if root.is_dir() else set()
    return sorted(found)
