"""Checking the records a person typed in the form, field by field.

Acceptance is the LLM's own rule, :func:`agent.feedback.validate_records`: each
field is probed through it alone (the other fields set to valid values), so an
error message is the one the feedback model would get, attached to its field.
A person also gets two checks a model needs no form for: at least one record,
and no empty field among those the CodeAgent will be shown at the request's
level (``agent.feedback.guidance.shown_fields``).
"""
from __future__ import annotations

import re

from agent.feedback import CATEGORIES, FIELDS, FeedbackFormatError, validate_records
from agent.feedback.guidance import shown_fields

_VALID = {name: "" for name in FIELDS} | {"category": CATEGORIES[0]}
_RECORD_PREFIX = re.compile(r"^record 0:? ")
EMPTY = "the agent is shown this field at this level: write it"
NO_RECORDS = "add at least one record"


def _field_error(record: dict, name: str) -> str | None:
    """validate_records' message for ``name`` of ``record`` alone, or None when it passes."""
    probe = dict(_VALID)
    if name in record:
        probe[name] = record[name]
    else:
        del probe[name]
    try:
        validate_records({"feedback": [probe]})
    except FeedbackFormatError as exc:
        return _RECORD_PREFIX.sub("", str(exc))
    return None


def check_records(payload: object, level: int) -> tuple[list[dict], dict]:
    """(clean records, {}) when the form is acceptable, else ([], errors).

    ``errors`` is ``{"form": [messages], "records": [{field: message}, ...]}``,
    one mapping per submitted record (empty where the record is fine).
    """
    records = payload.get("feedback") if isinstance(payload, dict) else None
    if not isinstance(records, list):
        return [], {"form": ['expected a JSON object {"feedback": [records]}'], "records": []}
    form = [] if records else [NO_RECORDS]
    per_record: list[dict] = []
    for record in records:
        if not isinstance(record, dict):
            per_record.append({"interface": "this record is not an object"})
            continue
        problems = {name: message for name in FIELDS if (message := _field_error(record, name))}
        for name in shown_fields(level):
            if name not in problems and not record[name].strip():
                problems[name] = EMPTY
        per_record.append(problems)
    if form or any(per_record):
        return [], {"form": form, "records": per_record}
    return validate_records(payload), {}
