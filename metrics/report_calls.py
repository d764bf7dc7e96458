"""The model calls of one turn, as the trajectory page lists them: what was sent, what came back, what it cost.

Three record shapes carry calls, newest first:

* ``code_calls`` (ours): one entry per call in order, ``{"purpose", "step", "messages": [{"role",
  "content"}], "answer", "usage", "params"}``;
* ``code_interaction_history`` alone (older records of ours and the release's): per call a ``user``
  message holding the prompt, then the ``assistant`` answer; no system prompt, no parameters. Usage
  then comes from ``code_usage`` (ours) or the release's per-call token lists;
* the feedback model's ``feedback_conversation`` (ours: system, user, each answer and each retry
  request in order; one call per answer) or the release's ``feedback_interaction_history``
  (``[user, assistant]``, the assistant content being the raw records).

Everything is read defensively: a record is hostile data and any key may be missing or odd.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from report_html import text_of


@dataclass(frozen=True)
class Call:
    """One request and its answer; ``usage`` holds what the record knew (tokens, cost_usd, latency_sec...)."""

    model: str                   # "code" or "feedback"
    purpose: str                 # step, summary, retry, feedback...
    step: int | None
    messages: list[dict]         # {"role", "content"} as sent, in order
    answer: str
    usage: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    note: str = ""               # what the record could not tell (e.g. no system prompt stored)


def _dicts(value: object) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _message(item: dict) -> dict:
    return {"role": str(item.get("role") or "?"), "content": text_of(item.get("content"))}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _release_usage(turn: dict, number: int, keys: tuple[str, str]) -> dict:
    """Token counts of call ``number`` from the release's per-call lists (no price, no time)."""
    usage = {}
    for name, key in zip(("input_tokens", "output_tokens"), keys):
        values = turn.get(key)
        if isinstance(values, list) and number < len(values):
            usage[name] = values[number]
    return usage


def _usage_for(turn: dict, number: int, count: int, usage_key: str, token_keys: tuple[str, str]) -> dict:
    """The usage dict of call ``number`` of ``count``: ours when the list matches the calls, else the release's."""
    usage = _dicts(turn.get(usage_key))
    if len(usage) == count:
        return usage[number]
    return _release_usage(turn, number, token_keys)


def code_calls(turn: dict) -> list[Call]:
    """The code model's calls of one turn, in order."""
    recorded = _dicts(turn.get("code_calls"))
    if recorded:
        return [Call("code", str(call.get("purpose") or "step"), _int(call.get("step")),
                     [_message(m) for m in _dicts(call.get("messages"))], text_of(call.get("answer")),
                     call.get("usage") if isinstance(call.get("usage"), dict) else {},
                     call.get("params") if isinstance(call.get("params"), dict) else {})
                for call in recorded]
    return _calls_from_history(turn)


def _calls_from_history(turn: dict) -> list[Call]:
    """Pairs of (prompt, answer) from ``code_interaction_history``; a prompt without an answer is a call too."""
    history = _dicts(turn.get("code_interaction_history"))
    pairs: list[tuple[dict, dict | None]] = []
    for item in history:
        if item.get("role") == "assistant" and pairs and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], item)
        elif item.get("role") == "assistant":
            pairs.append(({}, item))
        else:
            pairs.append((item, None))
    calls, step = [], 0
    for number, (prompt, answer) in enumerate(pairs):
        usage = _usage_for(turn, number, len(pairs), "code_usage", ("code_input_tokens", "code_output_tokens"))
        purpose = str(prompt.get("kind") or (answer or {}).get("kind") or usage.get("purpose") or "step")
        step = step + 1 if purpose == "step" else step
        calls.append(Call("code", purpose, step if purpose == "step" else None,
                          [_message(prompt)] if prompt else [], text_of((answer or {}).get("content")), usage,
                          note="the record keeps each call's prompt and answer only (no system prompt, no "
                               "sampling parameters)"))
    return calls


def feedback_calls(turn: dict) -> list[Call]:
    """The feedback model's calls: each answer with every message sent before it (retries included)."""
    conversation = _dicts(turn.get("feedback_conversation"))
    note = ""
    if not conversation:
        conversation = _dicts(turn.get("feedback_interaction_history"))
        note = "the release's record of the feedback exchange: the request and the raw records it returned"
    answers = [i for i, message in enumerate(conversation) if message.get("role") == "assistant"]
    calls = []
    for number, index in enumerate(answers):
        usage = _usage_for(turn, number, len(answers), "feedback_usage",
                           ("feedback_input_token", "feedback_output_token"))
        calls.append(Call("feedback", "feedback" if number == 0 else "retry", None,
                          [_message(m) for m in conversation[:index]], text_of(conversation[index].get("content")),
                          usage, note=note))
    unanswered = conversation[answers[-1] + 1:] if answers else conversation
    if unanswered:  # a request whose answer never came (the call failed)
        calls.append(Call("feedback", "unanswered", None, [_message(m) for m in conversation], "",
                          note="no answer is recorded for this request"))
    return calls
