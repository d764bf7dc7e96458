"""Feedback records and the data every feedback source shares: the request, the reply, the source protocol.

A record is one difference the researcher found, with the string fields of
``FIELDS``. ``category`` (T0..T4) is kept for analysis and never shown to the
CodeAgent; the release's schema leaves it free text, so validation takes the
allowed categories as an argument (None: any string).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

FIELDS = ("interface", "category", "description", "analysis", "actionable_feedback", "direct_code_feedback")
CATEGORIES = ("T0", "T1", "T2", "T3", "T4")


class FeedbackFormatError(ValueError):
    """Feedback that does not match the schema; the message says where."""


def validate_records(payload: object, key: str = "feedback",
                     categories: tuple[str, ...] | None = CATEGORIES) -> list[dict]:
    """The records of a ``{key: [...]}`` payload, each checked field by field (categories upper-cased)."""
    if not isinstance(payload, dict) or key not in payload:
        raise FeedbackFormatError(f'expected a JSON object with the key "{key}"')
    records = payload[key]
    if not isinstance(records, list):
        raise FeedbackFormatError(f'"{key}" must be a list of records')
    return [_checked(i, record, categories) for i, record in enumerate(records)]


def _checked(i: int, record: object, categories: tuple[str, ...] | None) -> dict:
    if not isinstance(record, dict):
        raise FeedbackFormatError(f"record {i} is not an object")
    missing = [name for name in FIELDS if name not in record]
    if missing:
        raise FeedbackFormatError(f"record {i} lacks {', '.join(missing)}")
    wrong = [name for name in FIELDS if not isinstance(record[name], str)]
    if wrong:
        raise FeedbackFormatError(f"record {i}: {', '.join(wrong)} must be strings")
    clean = {name: record[name] for name in FIELDS}
    if categories is not None:
        category = record["category"].strip().upper()
        if category not in categories:
            raise FeedbackFormatError(
                f"record {i}: category '{record['category']}' is not one of {', '.join(categories)}")
        clean["category"] = category
    return clean


@dataclass(frozen=True)
class FeedbackRequest:
    """Everything the researcher sees about one attempt; ``digest`` is the test information as the
    protocol renders it."""

    task_index: int
    turn: int
    level: int
    latex: str
    instruction: str
    canonical: str
    code: str
    previous_code: str
    digest: str


@dataclass(frozen=True)
class FeedbackReply:
    """Raw records plus what producing them cost; ``error`` is set when no valid records came.

    ``history`` is the whole exchange (every message, every attempt). ``refused`` is the provider's reason
    when it refuses the request as sent (``context_length``...: agent/models/types.py ``RequestFatal``);
    ``unusable`` lists the answers that came but could not be used as complete (truncated, refused,
    filtered), each with its stop reason, the provider's words and its raw text.
    """

    records: list[dict]
    source: str
    usage: list[dict] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    error: str | None = None
    refused: str | None = None
    unusable: list[dict] = field(default_factory=list)


NO_FEEDBACK = FeedbackReply([], "none")


class FeedbackSource(Protocol):
    def __call__(self, request: FeedbackRequest) -> FeedbackReply: ...
