"""Human-written feedback read from a file (``feedback-source: file``).

Format, JSON Lines or YAML: a list of entries ``{"task_index": int,
"turn_number": int, "feedback": [records]}`` where each record has the six
string fields of ``FIELDS`` and category T0..T4. The entry for (task, turn) is
the feedback on the attempt of that turn; a (task, turn) that needs feedback
but has no entry stops the job there, saying so in ``feedback_error``, until
the file has it.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from agent.feedback.records import FeedbackFormatError, FeedbackReply, FeedbackRequest, validate_records


def load_feedback_file(path: Path) -> dict[tuple[int, int], list[dict]]:
    """Read a feedback file (JSONL, or YAML for .yaml/.yml) into {(task, turn): records}.

    Every problem is a ValueError naming the file and the entry.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"feedback-file {path} cannot be read ({exc.strerror}); fix feedback-file") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            entries = yaml.safe_load(text) or []
        else:
            entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ValueError(f"feedback-file {path} does not parse: {str(exc).splitlines()[0]}") from None
    if not isinstance(entries, list):
        raise ValueError(f"feedback-file {path} must hold a list of entries")
    table: dict[tuple[int, int], list[dict]] = {}
    for number, entry in enumerate(entries, start=1):
        where = f"feedback-file {path}, entry {number}"
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), int) for k in ("task_index", "turn_number")):
            raise ValueError(f"{where}: needs integer task_index and turn_number")
        key = (entry["task_index"], entry["turn_number"])
        if key in table:
            raise ValueError(f"{where}: task {key[0]} turn {key[1]} appears twice")
        try:
            table[key] = validate_records(entry)
        except FeedbackFormatError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return table


class FileFeedback:
    """Human-written feedback read from a file (format in the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.table = load_feedback_file(self.path)

    def __call__(self, request: FeedbackRequest) -> FeedbackReply:
        records = self.table.get((request.task_index, request.turn))
        if records is None:
            return FeedbackReply([], "file", error=f"{self.path} has no entry for task {request.task_index} "
                                                   f"turn {request.turn}")
        return FeedbackReply(records, "file")
