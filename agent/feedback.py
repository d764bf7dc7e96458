"""Feedback records: schema, validation, level formatting and the sources that produce them.

A feedback source turns one FeedbackRequest (what the researcher sees after a
submission) into a FeedbackReply holding RAW records; the level decides later
how much of each record the CodeAgent is shown. Sources:

* ``LLMFeedback``: the feedback model answers with structured output, which is
  validated; a bad answer is retried with the problem appended, a bounded
  number of times, then the reply carries ``error``: the job stops at that turn
  (metrics/run_status.py) and the next run asks again.
* ``FileFeedback``: human-written records keyed by task and turn (format below).
* ``InteractiveFeedback``: a person at the terminal types the records.
* ``ReplayFeedback``: the raw records another level's run received, turn by turn.

Feedback file format (``feedback-source: file``), JSON Lines or YAML: a list of
entries ``{"task_index": int, "turn_number": int, "feedback": [records]}`` where
each record has the six string fields of ``FIELDS`` and category T0..T4. The entry
for (task, turn) is the feedback on the attempt of that turn; a (task, turn)
that needs feedback but has no entry stops the job there, saying so in
``feedback_error``, until the file has it.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Protocol

import yaml

from agent.prompts import FEEDBACK_REQUEST, FEEDBACK_RETRY, FEEDBACK_SYSTEM
from agent.text import one_line

FIELDS = ("interface", "category", "description", "analysis", "actionable_feedback", "direct_code_feedback")
CATEGORIES = ("T0", "T1", "T2", "T3", "T4")
FEEDBACK_SCHEMA = {
    "type": "object",
    "properties": {
        "feedback": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {name: ({"type": "string", "enum": list(CATEGORIES)} if name == "category"
                                      else {"type": "string"}) for name in FIELDS},
                "required": list(FIELDS),
                "additionalProperties": False,
            },
        }
    },
    "required": ["feedback"],
    "additionalProperties": False,
}
# What each level reveals, cumulatively (category is never shown): (field, label) pairs.
LEVEL_FIELDS = (
    (),
    (("description", "Description"),),
    (("description", "Description"), ("analysis", "Analysis")),
    (("description", "Description"), ("analysis", "Analysis"), ("actionable_feedback", "Actionable feedback")),
    (("description", "Description"), ("analysis", "Analysis"), ("actionable_feedback", "Actionable feedback"),
     ("direct_code_feedback", "Code suggestion")),
)
MAX_FEEDBACK_ATTEMPTS = 3
_FEEDBACK_HEAD = re.compile(r"^### Feedback \d+: (.*)$")


class FeedbackFormatError(ValueError):
    """Feedback that does not match the schema; the message says where."""


def validate_records(payload: object) -> list[dict]:
    """The records of a ``{"feedback": [...]}`` payload, each checked field by field."""
    if not isinstance(payload, dict) or "feedback" not in payload:
        raise FeedbackFormatError('expected a JSON object with the key "feedback"')
    records = payload["feedback"]
    if not isinstance(records, list):
        raise FeedbackFormatError('"feedback" must be a list of records')
    clean = []
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise FeedbackFormatError(f"record {i} is not an object")
        missing = [name for name in FIELDS if name not in record]
        if missing:
            raise FeedbackFormatError(f"record {i} lacks {', '.join(missing)}")
        wrong = [name for name in FIELDS if not isinstance(record[name], str)]
        if wrong:
            raise FeedbackFormatError(f"record {i}: {', '.join(wrong)} must be strings")
        category = record["category"].strip().upper()
        if category not in CATEGORIES:
            raise FeedbackFormatError(
                f"record {i}: category '{record['category']}' is not one of {', '.join(CATEGORIES)}")
        clean.append({**{name: record[name] for name in FIELDS}, "category": category})
    return clean


def parse_feedback(text: str) -> list[dict]:
    """Parse and validate a feedback answer; a ```json fence around it is tolerated."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        raise FeedbackFormatError(f"the answer is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return validate_records(payload)


def _fenced(code: str) -> str:
    code = code.strip("\n")
    return code if code.lstrip().startswith("```") else f"```python\n{code}\n```"


def format_feedback(records: list[dict], level: int) -> str:
    """The text the CodeAgent sees for ``records`` at ``level`` (empty at L0 or without records)."""
    if level <= 0 or not records:
        return ""
    fields = LEVEL_FIELDS[min(level, len(LEVEL_FIELDS) - 1)]
    items = []
    for number, record in enumerate(records, start=1):
        lines = [f"### Feedback {number}: `{record['interface'].strip()}`"]
        for name, label in fields:
            value = record[name].strip()
            if not value:
                continue
            lines.append(f"{label}:\n{_fenced(value)}" if name == "direct_code_feedback" else f"{label}: {value}")
        items.append("\n".join(lines))
    return "\n\n".join(items)


def feedback_brief(text: str) -> str:
    """A ``format_feedback`` text in brief (for memory): each item's interface and description."""
    labels = tuple(f"{label}:" for _, label in LEVEL_FIELDS[-1])
    items: list[list[str]] = []
    in_description = False
    for line in text.splitlines():
        head = _FEEDBACK_HEAD.match(line)
        if head:
            items.append([head.group(1).strip()])
            in_description = False
        elif items and line.startswith(labels):
            in_description = line.startswith("Description:")
            if in_description:
                items[-1].append(line[len("Description:"):])
        elif in_description:
            items[-1][-1] += " " + line
    if not items:
        return one_line(text)
    return "; ".join(": ".join([item[0]] + [one_line(part) for part in item[1:]]) for item in items)


@dataclass(frozen=True)
class FeedbackRequest:
    """Everything the researcher sees about one attempt."""

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
    """Raw records plus what producing them cost; ``error`` is set when no valid records came."""

    records: list[dict]
    source: str
    usage: list[dict] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    error: str | None = None


class FeedbackSource(Protocol):
    def __call__(self, request: FeedbackRequest) -> FeedbackReply: ...


class LLMFeedback:
    """The simulated researcher: a model answering with schema-checked structured output."""

    def __init__(self, model, max_attempts: int = MAX_FEEDBACK_ATTEMPTS) -> None:
        self.model = model
        self.max_attempts = max_attempts

    def __call__(self, request: FeedbackRequest) -> FeedbackReply:
        prompt = FEEDBACK_REQUEST.format(latex=request.latex, instruction=request.instruction,
                                         canonical=request.canonical, turn=request.turn,
                                         code=request.code, digest=request.digest)
        messages = [{"role": "system", "content": FEEDBACK_SYSTEM}, {"role": "user", "content": prompt}]
        usage: list[dict] = []
        problem = ""
        for _ in range(self.max_attempts):
            completion = self.model.complete(messages, response_schema=FEEDBACK_SCHEMA)
            usage.append(completion.usage.to_dict())
            messages.append({"role": "assistant", "content": completion.text})
            try:
                return FeedbackReply(parse_feedback(completion.text), "llm", usage, messages)
            except FeedbackFormatError as exc:
                problem = str(exc)
                messages.append({"role": "user", "content": FEEDBACK_RETRY.format(problem=problem)})
        error = f"the feedback model gave no valid records in {self.max_attempts} attempts (last problem: {problem})"
        return FeedbackReply([], "llm", usage, messages[:-1], error)


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


class ReplayFeedback:
    """Raw records of another level's run, turn by turn; ``fallback`` answers turns it lacks."""

    def __init__(self, by_turn: dict[int, list[dict]], level: int, fallback: FeedbackSource) -> None:
        self.by_turn = by_turn
        self.level = level
        self.fallback = fallback

    def __call__(self, request: FeedbackRequest) -> FeedbackReply:
        records = self.by_turn.get(request.turn)
        if records:
            return FeedbackReply(records, f"replay:L{self.level}")
        reply = self.fallback(request)
        note = f"replay level {self.level} has no feedback at turn {request.turn}"
        return replace(reply, source=f"{reply.source} ({note})")


def unified_diff(previous: str, current: str) -> str:
    diff = difflib.unified_diff(previous.splitlines(), current.splitlines(),
                                "previous turn", "this turn", lineterm="")
    return "\n".join(diff) or "(no change since the previous turn)"


class InteractiveFeedback:
    """A person at the terminal gives the feedback: shown the digest and the diff, types each field.

    An empty interface ends the list; Ctrl-D (end of input) ends it too, keeping
    the items already completed. ``direct_code_feedback`` spans lines until a
    line holding only ``.``.
    """

    def __init__(self, read: Callable[[str], str] = input, write: Callable[[str], None] = print) -> None:
        self.read = read
        self.write = write

    def _category(self) -> str:
        while True:
            answer = self.read("  category T0-T4 [T2]: ").strip().upper() or "T2"
            if answer in CATEGORIES:
                return answer
            self.write(f"  '{answer}' is not one of {', '.join(CATEGORIES)}")

    def _code(self) -> str:
        lines = []
        while (line := self.read("  | ")) != ".":
            lines.append(line)
        return "\n".join(lines)

    def _item(self, number: int) -> dict | None:
        interface = self.read(f"Item {number} interface (empty line: done): ").strip()
        if not interface:
            return None
        category = self._category()
        description = self.read("  description: ")
        analysis = self.read("  analysis: ")
        actionable = self.read("  actionable feedback: ")
        self.write("  direct code feedback (end with a line holding only '.'):")
        return {"interface": interface, "category": category, "description": description,
                "analysis": analysis, "actionable_feedback": actionable, "direct_code_feedback": self._code()}

    def __call__(self, request: FeedbackRequest) -> FeedbackReply:
        shown = [f"===== Task {request.task_index}, turn {request.turn} (guidance level L{request.level}) =====",
                 request.digest, "----- Changes since the previous turn -----",
                 unified_diff(request.previous_code, request.code)]
        self.write("\n".join(shown))
        records: list[dict] = []
        try:
            while (item := self._item(len(records) + 1)) is not None:
                records.append(item)
        except EOFError:
            self.write(f"\n(end of input: {len(records)} item(s) kept)")
        history = [{"role": "user", "content": "\n".join(shown)},
                   {"role": "assistant", "content": json.dumps({"feedback": records})}]
        return FeedbackReply(records, "interactive", history=history)
