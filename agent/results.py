"""Per-turn result records, their atomic on-disk store, turn-0 seeds and what resume needs.

A result file is a pickle holding a LIST of per-turn dicts of Python builtins
only (a notebook loads it without importing this package). It is rewritten
whole after every turn through a temporary file and ``os.replace``, so a crash
leaves either the previous or the new version, never a torn one. A sibling
``task_<id>_state.json`` says whether the task finished or errored.

Release keys keep the release's types: the four token fields are LISTS of
per-call counts; ``feedback_interaction_history`` is ``[user, assistant]`` whose
assistant content is the list of raw feedback records ([] when no feedback ran);
``execution_result`` has ``test.py::<name>`` keys in ``test_summary`` and
``FAILURE in <name>: ...`` / ``ERROR in <name>: ...`` failure messages (plus the
runner's own keys: ``status``, ``missing_tests``, ``outcomes``, timings).

Keys we add (OUR_KEYS): ``status`` (the runner's), ``guidance_level`` (the level
this turn's ``feedback_text`` was formatted at; with dynamic guidance the start
level at turn 0, then one more after each later turn that did not beat the best
pass rate so far), ``feedback_items`` (the raw records), ``feedback_text`` (shown
to the agent next turn), ``test_digest``, ``wall_time_sec``,
``code_usage``/``feedback_usage`` (Usage dicts; code ones carry ``purpose``: step
or summary), ``code_cost_usd``/``feedback_cost_usd`` (None when a price is
unknown), ``actions``, ``feedback_source`` (llm, seed, file, interactive,
replay:L<K>, release, a note when a replay had to generate, or none),
``feedback_error`` (why no valid records came, else None), ``token_totals``
(sums of the four token lists), ``feedback_conversation`` (the feedback
model's whole exchange, system prompt and retries included) and ``stop_reason``
(set on the last turn of a job that stopped early; metrics/run_status.py).

A record the release wrote lacks our keys: ``upgrade_record`` rebuilds them
from the release keys, so release result files and seeds load, resume and score.

Turn-0 seeds live where the release keeps them,
``<init_seed_dir>/<model>_task<id>_init.pkl``: a pickle of a LIST holding the one
turn-0 record (no level: ``guidance_level`` None, empty ``feedback_text``). What
only we need (setting, feedback model, whether the raw feedback was computed,
usage not yet counted by a job) is in a sibling ``..._init.meta.json``; a seed
without one was written by the release.
"""
from __future__ import annotations

import json
import os
import pickle
import time
from pathlib import Path
from typing import Any

from agent.atomic_file import atomic_write_bytes
from agent.digest import format_test_digest
from agent.feedback import format_feedback
from metrics.run_status import STOP_KEY
from metrics.junit_outcome import case_pass_rate, published_success, runner_solved

RELEASE_KEYS = (
    "task_index", "turn_number", "code_input_tokens", "code_output_tokens", "final_code", "agent_memory",
    "code_interaction_history", "execution_result", "feedback_input_token", "feedback_output_token",
    "feedback_interaction_history",
)
OUR_KEYS = (
    "status", "guidance_level", "feedback_items", "feedback_text", "test_digest", "wall_time_sec",
    "code_usage", "feedback_usage", "code_cost_usd", "feedback_cost_usd", "actions",
    "feedback_source", "feedback_error", "token_totals", "feedback_conversation", STOP_KEY,
)
RECORD_KEYS = RELEASE_KEYS + OUR_KEYS
SEED_FORMAT = 2
RELEASE_TEST_FILE = "test.py"
TOKEN_KEYS = ("code_input_tokens", "code_output_tokens", "feedback_input_token", "feedback_output_token")
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


def token_lists(usage: list[dict]) -> tuple[list[int], list[int]]:
    """The release's token fields: one input and one output count per API call."""
    return ([int(u.get("input_tokens") or 0) for u in usage], [int(u.get("output_tokens") or 0) for u in usage])


def token_total(value: Any) -> int:
    """Sum of a token field, whether a release list of per-call counts or an older total."""
    if isinstance(value, (list, tuple)):
        return sum(int(v or 0) for v in value)
    return int(value or 0)


def record_token_totals(record: dict) -> dict[str, int]:
    """The four token fields of a record, each summed (what a notebook's ``sum(r[...])`` gives)."""
    return {key: token_total(record.get(key)) for key in TOKEN_KEYS}


def turn_solved(execution: dict) -> bool:
    """Whether the harness stops a job here: the published success test with a passing runner status."""
    return runner_solved(execution)


def pass_rate(execution: dict, n_cases: int) -> float:
    """Test-case pass rate of one turn; the denominator is len(test_cases) of the metadata."""
    return case_pass_rate(execution, n_cases)


def _release_message(message: str, outcomes: dict[str, str], missing: set[str]) -> str | None:
    """``FAILURE in <name>: ...`` or ``ERROR in <name>: ...``; None for a skip (not a failed test)."""
    if message.startswith(("FAILURE in ", "ERROR in ")):
        return message
    name = max((n for n in (*outcomes, *missing) if message.startswith(f"{n}:")), key=len, default="")
    kind = "failure" if name in missing else outcomes.get(name, "error")
    if kind == "skipped":
        return None
    return f"{'ERROR' if kind == 'error' else 'FAILURE'} in {message}"


def release_test_id(name: str) -> str:
    return name if "::" in name else f"{RELEASE_TEST_FILE}::{name}"


def release_execution(execution: dict) -> dict:
    """The runner's result in the release's shape (idempotent); the runner's own keys are kept beside.

    A run without a trustworthy report has one ``session`` message: it becomes an
    ``ERROR in session: ...`` message and every expected test counts as an error,
    so release metric functions never read it as a success.
    """
    outcomes = execution.get("outcomes") or {}
    missing = set(execution.get("missing_tests") or ())
    messages = [_release_message(m, outcomes, missing) for m in execution.get("failure_messages") or []]
    return {**execution, "failure_messages": [m for m in messages if m is not None],
            "test_summary": {release_test_id(n): bool(ok) for n, ok in (execution.get("test_summary") or {}).items()}}


def release_feedback_history(conversation: list[dict], records: list[dict] | None, source: str) -> list[dict]:
    """``[user, assistant(list of raw records)]``; [] when no feedback ran."""
    if not conversation and not records:
        return []
    user = next((m["content"] for m in conversation if m.get("role") == "user"), f"(feedback from {source})")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": [dict(r) for r in records or []]}]


def _release_records(history: Any) -> list[dict]:
    """The raw records of a release ``feedback_interaction_history`` ([] when absent or of another shape)."""
    if isinstance(history, list) and history and isinstance(history[-1], dict):
        content = history[-1].get("content")
        if isinstance(content, list) and all(isinstance(r, dict) for r in content):
            return [dict(r) for r in content]
    return []


def _usage_from_tokens(inputs: list[int], outputs: list[int]) -> list[dict]:
    return [{"input_tokens": i, "output_tokens": o, "cost_usd": None, "purpose": "step"}
            for i, o in zip(inputs, outputs)]


def upgrade_record(record: dict, *, level: int | None, test_cases: tuple[str, ...] | list[str] = ()) -> dict:
    """A record with every key of ours, rebuilt from the release keys where missing; a full record is unchanged.

    Handles release records (no key of ours) and our older ones (total token counts,
    the whole feedback conversation under ``feedback_interaction_history``).
    """
    if set(RECORD_KEYS) <= set(record) and isinstance(record.get("code_input_tokens"), list):
        return record
    fields = {key: record.get(key) for key in RECORD_KEYS}
    for key in TOKEN_KEYS:
        value = record.get(key)
        fields[key] = list(value) if isinstance(value, (list, tuple)) else ([] if value is None else [int(value)])
    history = record.get("feedback_interaction_history") or []
    items = record.get("feedback_items")
    if items is None:
        items = _release_records(history)
    if not _release_records(history) and history:  # our older shape: the whole conversation
        fields["feedback_conversation"] = list(history)
    source = record.get("feedback_source") or "release"
    fields["feedback_interaction_history"] = (history if _release_records(history) or not history
                                              else release_feedback_history(history, items, source))
    execution = dict(record.get("execution_result") or {})
    if "status" not in execution:
        execution["status"] = "passed" if published_success(execution) else "failed"
    fields["execution_result"] = release_execution(execution)
    shown = record.get("guidance_level", level)
    defaults = {
        "status": execution["status"], "guidance_level": shown, "feedback_items": items,
        "feedback_text": format_feedback(items, shown or 0),
        "test_digest": format_test_digest(fields["execution_result"], test_cases),
        "code_usage": _usage_from_tokens(fields["code_input_tokens"], fields["code_output_tokens"]),
        "feedback_usage": _usage_from_tokens(fields["feedback_input_token"], fields["feedback_output_token"]),
        "actions": [], "feedback_source": source, "feedback_conversation": [],
        "agent_memory": [], "code_interaction_history": [],
    }
    for key, value in defaults.items():
        if fields[key] is None:
            fields[key] = value
    fields["guidance_level"] = shown
    fields["token_totals"] = record_token_totals(fields)
    return make_record(**fields)


def make_record(**fields: Any) -> dict:
    """A turn record with exactly RECORD_KEYS, checked to hold builtins only."""
    missing = [k for k in RECORD_KEYS if k not in fields]
    unknown = [k for k in fields if k not in RECORD_KEYS]
    if missing or unknown:
        raise KeyError(f"turn record: missing {missing}, unknown {unknown}")
    record = {key: fields[key] for key in RECORD_KEYS}
    check_builtins(record, f"turn {fields['turn_number']}")
    return record


class ResultStore:
    """The result pickle and state file of one task in one result folder."""

    def __init__(self, folder: Path, task_index: int, *, replay_level: int | None = None) -> None:
        """``replay_level`` K: the release's replay file ``task_<id>_result_replay_level<K>.pkl``,
        whose n-th record is the new turn continuing stored turn n (so it is turn n + 1)."""
        self.folder = Path(folder)
        self.task_index = task_index
        stem = f"task_{task_index}_result" + ("" if replay_level is None else f"_replay_level{replay_level}")
        self.first_turn = 0 if replay_level is None else 1
        self.result_path = self.folder / f"{stem}.pkl"
        self.state_path = self.folder / f"{stem.replace('_result', '_state', 1)}.json"
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
            if turn.get("turn_number") != number + self.first_turn or turn.get("task_index") != self.task_index:
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

    def mark(self, *, finished: bool, error: str | None, turns: int | None = None,
             stop_reason: str | None = None) -> None:
        state = {"finished": finished, "error": error, "turns": turns, STOP_KEY: stop_reason,
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


def seed_path(init_seed_dir: Path, model_name: str, task_index: int, setting: str | None = None) -> Path:
    """``<init_seed_dir>/<model>_task<id>_init.pkl``: the release's turn-0 seed of (model, task).

    The release's name has no evaluation setting. When that file is ours and of
    another setting than ``setting``, this setting's seed is
    ``<model>_task<id>_<setting>_init.pkl`` beside it, so two settings sharing an
    output folder never reuse each other's turn 0. A seed the release wrote
    (no meta file) is taken as the current setting's, as the release takes it.
    """
    stem = f"{safe_model_name(model_name)}_task{task_index}"
    release = Path(init_seed_dir) / f"{stem}_init.pkl"
    if setting is None or _seed_setting(release) in (None, setting):
        return release
    return release.with_name(f"{stem}_{setting}_init.pkl")


def _seed_setting(path: Path) -> str | None:
    try:
        return json.loads(_seed_meta_path(path).read_text(encoding="utf-8")).get("setting")
    except (OSError, ValueError, AttributeError):
        return None


def _seed_meta_path(path: Path) -> Path:
    return path.with_name(path.stem + ".meta.json")


def load_seed(path: Path, setting: str, test_cases: tuple[str, ...] | list[str] = ()) -> dict | None:
    """The seed at ``path`` as ``{"record", "setting", "feedback_model", "unclaimed_usage"}``, or None.

    ``record["feedback_items"]`` is None while the raw turn-0 feedback is not computed.
    A release seed (no meta file) counts as computed when it holds feedback or
    turn 0 solved the task. A seed of another evaluation setting is refused.
    """
    if not path.exists():
        return None
    turns = load_pickle(path)
    if not isinstance(turns, list) or len(turns) != 1 or not isinstance(turns[0], dict):
        raise ResultError(f"{path} is not a turn-0 seed (a list holding one turn record); move it away to "
                          "recompute it")
    meta_path = _seed_meta_path(path)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ResultError(f"{meta_path} is corrupt; move it and {path.name} away to recompute the seed") from None
    if meta.get("setting", setting) != setting:
        raise ResultError(f"{path} is the turn 0 of evaluation-setting '{meta['setting']}', not '{setting}'; "
                          "give this setting an init_seed folder of its own")
    record = upgrade_record(turns[0], level=None, test_cases=test_cases)
    done = meta.get("feedback_done", bool(record["feedback_interaction_history"])
                    or turn_solved(record["execution_result"]))
    return {"setting": setting, "feedback_model": meta.get("feedback_model"),
            "unclaimed_usage": list(meta.get("unclaimed_usage", [])),
            "record": record if done else {**record, "feedback_items": None}}


def save_seed(path: Path, seed: dict) -> None:
    """The record (release shape) first, then our meta file: a crash in between only recomputes feedback."""
    record = seed["record"]
    pending = record["feedback_items"] is None
    turns = [{**record, "feedback_items": [] if pending else record["feedback_items"]}]
    check_builtins(turns, str(path))
    meta = {"format": SEED_FORMAT, "setting": seed["setting"], "feedback_model": seed["feedback_model"],
            "feedback_done": not pending, "unclaimed_usage": seed["unclaimed_usage"]}
    check_builtins(meta, str(_seed_meta_path(path)))
    atomic_write_bytes(path, pickle.dumps(turns, protocol=4))
    atomic_write_bytes(_seed_meta_path(path), (json.dumps(meta, indent=1) + "\n").encode())
