"""The simulated researcher: a feedback model answering in a JSON schema, its answer validated.

How it is asked is the protocol's (agent/protocols/): the two messages, the
schema and its record key, the allowed categories, and what a bad answer
leads to: the release repeats the same request (4 attempts), our improved
protocol asks again with the problem appended (3 attempts). After the last
attempt the reply carries ``error``: the job stops at that turn
(metrics/run_status.py) and the next run asks again. An answer that ended
short of complete (truncated, refused, filtered: ``Completion.stop``) is never
parsed as if complete: the problem says which, and the reply keeps its raw
text in ``unusable``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from agent.feedback.records import FeedbackFormatError, FeedbackReply, FeedbackRequest, validate_records
from agent.models.stops import WITHHELD, describe, stop_entry
from agent.models.types import ChatModel


@dataclass(frozen=True)
class FeedbackStyle:
    """How one protocol asks the feedback model. ``reask`` None: a bad answer is retried with the same request;
    else ``reask(problem)`` is appended as the next user message."""

    messages: Callable[[FeedbackRequest], list[dict]]
    schema: dict
    key: str
    categories: tuple[str, ...] | None
    attempts: int
    reask: Callable[[str], str] | None = None


def parse_feedback(text: str, key: str = "feedback", categories: tuple[str, ...] | None = None) -> list[dict]:
    """Parse and validate a feedback answer; a ```json fence around it is tolerated."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        raise FeedbackFormatError(f"the answer is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return validate_records(payload, key, categories)


class LLMFeedback:
    """A feedback model asked in one protocol's style."""

    def __init__(self, model: ChatModel, style: FeedbackStyle) -> None:
        self.model = model
        self.style = style

    def __call__(self, request: FeedbackRequest) -> FeedbackReply:
        style = self.style
        asked = style.messages(request)
        messages = list(asked)
        usage: list[dict] = []
        problem = ""
        unusable: list[dict] = []
        for _ in range(style.attempts):
            completion = self.model.complete(messages if style.reask else asked, response_schema=style.schema)
            usage.append(completion.usage.to_dict())
            messages.append({"role": "assistant", "content": completion.text})
            try:
                if not completion.stop.usable:
                    unusable.append(stop_entry("feedback", "feedback", None, completion.stop, completion.text))
                if completion.stop.reason in WITHHELD:
                    unusable[-1]["applied"] = False
                    raise FeedbackFormatError(describe(completion.stop))
                records = parse_feedback(completion.text, style.key, style.categories)
                return FeedbackReply(records, "llm", usage, messages, unusable=unusable)
            except FeedbackFormatError as exc:
                problem = str(exc)
                if style.reask:
                    messages.append({"role": "user", "content": style.reask(problem)})
        error = f"the feedback model gave no valid records in {style.attempts} attempts (last problem: {problem})"
        return FeedbackReply([], "llm", usage, messages[:-1] if style.reask else messages, error, unusable=unusable)

