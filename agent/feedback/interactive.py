"""A person at the terminal gives the feedback (``feedback-source: interactive``)."""
from __future__ import annotations

import difflib
import json
from typing import Callable

from agent.feedback.records import CATEGORIES, FeedbackReply, FeedbackRequest


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
