"""Per-turn result records, their atomic on-disk store, turn-0 seeds and what resume needs.

A result file is a pickle holding a LIST of per-turn dicts of Python builtins
only (a notebook loads it without importing this package). It is rewritten
whole after every turn through a temporary file and ``os.replace``, so a crash
leaves either the previous or the new version, never a torn one. A sibling
``task_<id>_state.json`` says whether the task finished or errored.

Keys we add to the release's (RECORD_KEYS lists all): ``status`` (the runner's),
``guidance_level`` (the level this turn's ``feedback_text`` was formatted at;
with dynamic guidance the start level at turn 0, then one more after each later
turn that did not beat the best pass rate so far), ``feedback_items`` (the raw
records, [] when no feedback was given), ``feedback_text`` (shown to the agent
next turn), ``test_digest``, ``wall_time_sec``, ``code_usage``/``feedback_usage``
(Usage dicts; code ones carry ``purpose``: step or summary),
``code_cost_usd``/``feedback_cost_usd`` (None when a price is unknown),
``actions``, ``feedback_source`` (llm, seed, file, interactive, replay:L<K>, a
note when a replay had to generate, or none) and ``feedback_error`` (why no valid
records came, else None).

Turn-0 seeds (``seed_path``) are pickles of builtins: ``{"format": 1, "setting",
"model", "task_index", "feedback_model", "unclaimed_usage", "record"}`` where
``record`` is a turn-0 record with no level (``guidance_level`` None, empty
``feedback_text``) and ``feedback_items`` None until the raw feedback is computed.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from pathlib import Path
from typing import Any

from agent.atomic_file import atomic_write_bytes
from metrics.junit_outcome import case_pass_rate, runner_solved

RELEASE_KEYS = (
    "task_index", "turn_number", "code_input_tokens", "code_output_tokens", "final_code", "agent_memory",
    "code_interaction_history", "execution_result", "feedback_input_token", "feedback_output_token",
    "feedback_interaction_history",
)
OUR_KEYS = (
    "status", "guidance_level", "feedback_items", "feedback_text", "test_digest", "wall_time_sec",
    "code_usage", "feedback_usage", "code_cost_usd", "feedback_cost_usd", "actions",
    "feedback_source", "feedback_error",
)
RECORD_KEYS = RELEASE_KEYS + OUR_KEYS
SEED_FORMAT = 1
_BUILTIN_SCALARS = (str, int, float, bool, type(None), bytes)


class ResultError(Exception):
    """A result, state or seed file that cannot be used; the message names the file and the fix."""


def check_builtins(value: Any, where: str = "record") -> None:
    """Raise TypeError naming the first value that is not a plain builtin (dict/list/tuple/scalars)."""
    if isinstance(value, _BUILTIN_SCALARS):
        return
    if type(value) is dict:
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise TypeError(f"{where}: key {key!r} is a {type(key).__name__}")
            check_builtins(item, f"{where}[{key!r}]")
        return
    if type(value) in (list, tuple):
        for i, item in enumerate(value):
            check_builtins(item, f"{where}[{i}]")
        return
    raise TypeError(f"{where} is a {type(value).__module__}.{type(value).__name__}, not a builtin")


def load_pickle(path: Path) -> Any:
    try:
        with open(path, "rb") as handle:
            return pickle.load(handle)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, IndexError) as exc:
        raise ResultError(f"{path} is corrupt ({type(exc).__name__}); move it away to recompute that task") from None


def usage_totals(usage: list[dict]) -> tuple[int, int, float | None]:
    """(input tokens, output tokens, cost) of a list of Usage dicts; cost is None if any is unknown."""
    costs = [u.get("cost_usd") for u in usage]
    cost = None if any(c is None for c in costs) else float(sum(costs))
    return (sum(int(u.get("input_tokens") or 0) for u in usage),
            sum(int(u.get("output_tokens") or 0) for u in usage), cost)


def turn_solved(execution: dict) -> bool:
    """Whether the harness stops a job here: the published success test with a passing runner status."""
    return runner_solved(execution)


def pass_rate(execution: dict, n_cases: int) -> float:
    """Test-case pass rate of one turn; the denominator is len(test_cases) of the metadata."""
    return case_pass_rate(execution, n_cases)


def make_record(**fields: Any) -> dict:
    """A turn record with exactly RECORD_KEYS, checked to hold builtins only."""
    missing = [k for k in RECORD_KEYS if k not in fields]
    unknown = [k for k in fields if k not in RECORD_KEYS]
    if missing or unknown:
        raise KeyError(f"turn record: missing {missing}, unknown {unknown}")
    record = {key: fields[key] for key in RECORD_KEYS}
    check_builtins(record, f"turn {fields['turn_number']}")
    return record


def keep_report(execution: dict, dest: Path) -> dict:
    """Move the runner's JUnit copy to ``dest`` (next to the results) and point the record at it."""
    source = execution.get("report_path")
    if not source or not Path(source).is_file():
        return {**execution, "report_path": None}
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(source, dest)
    return {**execution, "report_path": str(dest)}


class ResultStore:
    """The result pickle and state file of one task in one result folder."""

    def __init__(self, folder: Path, task_index: int) -> None:
        self.folder = Path(folder)
        self.task_index = task_index
        self.result_path = self.folder / f"task_{task_index}_result.pkl"
        self.state_path = self.folder / f"task_{task_index}_state.json"
        self.report_dir = self.folder / "reports"

    def load(self) -> list[dict]:
        """Stored turns (empty when none); a file that is not a clean turn list is a ResultError."""
        if not self.result_path.exists():
            return []
        turns = load_pickle(self.result_path)
        fix = "move it away to recompute that task"
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise ResultError(f"{self.result_path} is not a list of turn dicts; {fix}")
        for number, turn in enumerate(turns):
            if turn.get("turn_number") != number or turn.get("task_index") != self.task_index:
                raise ResultError(f"{self.result_path}: turn {number} is out of order or of another task; {fix}")
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
        self.mark(finished=finished, error=None, turns=len(turns))

    def mark(self, *, finished: bool, error: str | None, turns: int | None = None) -> None:
        state = {"finished": finished, "error": error, "turns": turns,
                 "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        atomic_write_bytes(self.state_path, (json.dumps(state, indent=1) + "\n").encode())

    def set_aside(self) -> Path | None:
        """Rename an existing result (a non-resumed rerun) so nothing computed is lost."""
        if not self.result_path.exists():
            return None
        backup = self.result_path.with_name(f"{self.result_path.stem}.{time.strftime('%Y%m%d-%H%M%S')}.pkl.bak")
        os.replace(self.result_path, backup)
        return backup


def safe_model_name(name: str) -> str:
    return name.replace("/", "_")


def seed_path(init_seed_dir: Path, setting: str, model_name: str, task_index: int) -> Path:
    """``<init_seed_dir>/<setting>_<model>/task_<id>_seed.pkl``: one turn-0 seed per (setting, model, task)."""
    return Path(init_seed_dir) / f"{setting}_{safe_model_name(model_name)}" / f"task_{task_index}_seed.pkl"


def load_seed(path: Path) -> dict | None:
    """The seed at ``path`` or None; an unreadable or foreign file is a ResultError."""
    if not path.exists():
        return None
    seed = load_pickle(path)
    if not isinstance(seed, dict) or seed.get("format") != SEED_FORMAT or not isinstance(seed.get("record"), dict):
        raise ResultError(f"{path} is not a turn-0 seed of this harness; move it away to recompute it")
    return seed


def save_seed(path: Path, seed: dict) -> None:
    check_builtins(seed, str(path))
    atomic_write_bytes(path, pickle.dumps(seed, protocol=4))
