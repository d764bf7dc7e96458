"""The turn record: built from a turn, checked to hold builtins only, and upgraded when a stored one is loaded.

A record is a dict with exactly ``RECORD_KEYS`` (metrics/result_format.py). The
release's keys keep the release's types: the four token fields are LISTS of
per-call counts (step calls; a memory summary is not among them, as in the
release); ``feedback_interaction_history`` is ``[user, assistant]`` whose
assistant content is the list of raw feedback records ([] when no feedback
ran); ``execution_result`` has ``test.py::<name>`` keys in ``test_summary`` and
``FAILURE in <name>: ...`` / ``ERROR in <name>: ...`` failure messages (plus the
runner's own keys: ``status``, ``missing_tests``, ``outcomes``, timings).

Our keys: ``status`` (the runner's), ``guidance_level`` (the level this turn's
feedback is shown at), ``feedback_items`` (the raw records), ``feedback_text``
(those records as the next turn shows them), ``test_digest`` (the test
information as the model is shown it), ``wall_time_sec``, ``code_usage`` /
``feedback_usage`` (every billed call; code ones carry ``purpose``: step,
summary or failed), ``code_cost_usd`` / ``feedback_cost_usd`` (None when a price
is unknown), ``actions``, ``feedback_source`` (llm, seed, file, interactive, web,
replay:L<K>, release, none, or pending while the feedback is asked), ``feedback_error``, ``token_totals``,
``feedback_conversation`` (the feedback model's whole exchange),
``code_calls`` (every call of the turn: messages, answer, usage, parameters;
its strings are the same objects as the history's, so a pickle stores them
once; each call's ``stop`` is why its answer ended: reason and the provider's
words), ``protocol`` (the protocol that produced the turn), ``stop_reason``,
``answer_stops`` (every answer of the turn, code or feedback, that ended short
of complete: truncated, refused, filtered; with its reason, the provider's
words, whether it was applied, and its raw text) and ``suspicious`` (the
runner's notes on acts the guard could not judge exactly; never a verdict).

Records are upgraded in one place, when they are loaded (``Upgrade``): a
record the release wrote, or one of ours from before a key existed, gets the
missing keys rebuilt from the release's keys.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from agent.feedback.records import FeedbackReply
from agent.task.test_names import node_and_case
from metrics.junit_outcome import case_pass_rate, published_success, runner_solved
from metrics.result_format import NEWER_KEYS, RECORD_KEYS, STOP_KEY, TOKEN_KEYS
from metrics.run_status import FEEDBACK_MISSING

RELEASE_TEST_FILE = "test.py"
PENDING = "pending"  # feedback_source of a turn kept while its feedback is asked (or still to be computed)
_BUILTIN_SCALARS = (str, int, float, bool, type(None), bytes)


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


def make_record(**fields: Any) -> dict:
    """A turn record with exactly RECORD_KEYS, checked to hold builtins only."""
    missing = [k for k in RECORD_KEYS if k not in fields]
    unknown = [k for k in fields if k not in RECORD_KEYS]
    if missing or unknown:
        raise KeyError(f"turn record: missing {missing}, unknown {unknown}")
    record = {key: fields[key] for key in RECORD_KEYS}
    check_builtins(record, f"turn {fields['turn_number']}")
    return record


# ---------------------------------------------------------------------- values of a record

def usage_totals(usage: list[dict]) -> tuple[int, int, float | None]:
    """(input tokens, output tokens, cost) of a list of Usage dicts; cost is None if any is unknown."""
    costs = [u.get("cost_usd") for u in usage]
    cost = None if any(c is None for c in costs) else float(sum(costs))
    return (sum(int(u.get("input_tokens") or 0) for u in usage),
            sum(int(u.get("output_tokens") or 0) for u in usage), cost)


CACHE_KEYS = ("cached_tokens", "cache_write_tokens", "cache_saved_usd")


def cache_totals(usage: list[dict]) -> dict[str, float]:
    """Prompt-cache figures of a job's calls: input tokens read from and written to the provider's cache, and the
    dollars that saved at list prices (calls answered from the response cache count nothing)."""
    live = [u for u in usage if not u.get("from_cache")]
    return {key: sum(u.get(key) or 0 for u in live) for key in CACHE_KEYS}


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
    """``test.py::<name>``; a name that already has a node path is kept (a ``::`` inside parameters is none)."""
    return name if node_and_case(name)[0] else f"{RELEASE_TEST_FILE}::{name}"


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


# ---------------------------------------------------------------------- building a record

@dataclass(frozen=True)
class Attempt:
    """One CodeAgent turn and the test result of its submission (``execution`` in the release's shape)."""

    turn: int
    result: Any  # agents.TurnResult
    execution: dict
    test_info: str
    previous_code: str
    started: float


def feedback_fields(reply: FeedbackReply, level: int | None, text: str) -> dict:
    """The feedback part of a turn record: the release's keys and ours."""
    fb_in, fb_out = token_lists(reply.usage)
    return {"feedback_items": reply.records, "feedback_usage": reply.usage,
            "feedback_interaction_history": release_feedback_history(reply.history, reply.records, reply.source),
            "feedback_conversation": reply.history, "feedback_input_token": fb_in, "feedback_output_token": fb_out,
            "feedback_cost_usd": usage_totals(reply.usage)[2], "feedback_source": reply.source,
            "feedback_error": reply.error, "guidance_level": level, "feedback_text": text,
            STOP_KEY: reply.refused or (FEEDBACK_MISSING if reply.error else None)}


def suspicious_notes(execution: dict) -> list[str]:
    """The runner's ``suspicious`` notes of a test result (acts the guard could not judge exactly)."""
    return [str(note) for note in execution.get("suspicious") or []]


def answer_stops(code: list[dict], reply: FeedbackReply) -> list[dict]:
    """The turn's ``answer_stops``: its code answers' (``code``) and its feedback's."""
    return [entry for entry in code if entry["role"] == "code"] + [dict(entry) for entry in reply.unusable]


def finished_record(fields: dict) -> dict:
    return make_record(**{**fields, "token_totals": record_token_totals(fields)})


def turn_record(task_index: int, attempt: Attempt, reply: FeedbackReply, level: int | None, text: str,
                protocol: str, code: str) -> dict:
    """The record of one turn: ``code`` is the file as the protocol records it, ``text`` the feedback as the
    next turn shows it."""
    result = attempt.result
    code_in, code_out = token_lists([u for u in result.usage if u.get("purpose") == "step"])
    return finished_record({
        "task_index": task_index, "turn_number": attempt.turn, "code_input_tokens": code_in,
        "code_output_tokens": code_out, "final_code": code, "agent_memory": result.memory,
        "code_interaction_history": result.history, "execution_result": attempt.execution,
        "status": attempt.execution.get("status"), "test_digest": attempt.test_info,
        "wall_time_sec": round(time.monotonic() - attempt.started, 3), "code_usage": result.usage,
        "code_cost_usd": usage_totals(result.usage)[2], "actions": result.actions, "code_calls": result.calls,
        "protocol": protocol, **feedback_fields(reply, level, text),
        "answer_stops": answer_stops(result.unusable, reply),
        "suspicious": suspicious_notes(attempt.execution),
    })


def with_feedback(record: dict, reply: FeedbackReply, level: int | None, text: str) -> dict:
    """``record`` with the feedback part of ``reply`` (a turn whose feedback came later, or from the seed)."""
    return finished_record({**record, **feedback_fields(reply, level, text),
                            "answer_stops": answer_stops(record["answer_stops"], reply)})


# ---------------------------------------------------------------------- upgrading a stored record

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


@dataclass(frozen=True)
class Upgrade:
    """Makes a stored record whole: ``level`` is the job's (None for a seed), ``test_info`` and
    ``feedback_text`` word a result and records as the run's protocol does."""

    level: int | None
    test_info: Callable[[dict], str]
    feedback_text: Callable[[list[dict], int], str]

    def __call__(self, record: dict) -> dict:
        """A record with every key of ours, rebuilt from the release keys where missing; a whole one unchanged.

        Handles release records (no key of ours) and our older ones (total token counts,
        the whole feedback conversation under ``feedback_interaction_history``).
        """
        if set(RECORD_KEYS) - set(NEWER_KEYS) <= set(record) and isinstance(record.get("code_input_tokens"), list):
            if set(NEWER_KEYS) <= set(record):
                return record
            execution = record.get("execution_result") or {}
            newer = {"answer_stops": [], "suspicious": suspicious_notes(execution)}
            return make_record(**{**newer, **record})
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
        shown = record.get("guidance_level", self.level)
        defaults = {
            "status": execution["status"], "guidance_level": shown, "feedback_items": items,
            "feedback_text": self.feedback_text(items, shown or 0) if items else "",
            "test_digest": self.test_info(fields["execution_result"]),
            "code_usage": _usage_from_tokens(fields["code_input_tokens"], fields["code_output_tokens"]),
            "feedback_usage": _usage_from_tokens(fields["feedback_input_token"], fields["feedback_output_token"]),
            "actions": [], "feedback_source": source, "feedback_conversation": [], "code_calls": [],
            "agent_memory": [], "code_interaction_history": [], "answer_stops": [],
            "suspicious": suspicious_notes(execution),
        }
        for key, value in defaults.items():
            if fields[key] is None:
                fields[key] = value
        fields["guidance_level"] = shown
        fields["token_totals"] = record_token_totals(fields)
        return make_record(**fields)
