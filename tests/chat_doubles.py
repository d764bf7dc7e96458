"""Test doubles for the code agent's unit tests: a chat model answering from a list, and a small repository."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from agent.models.build import Completion, InferenceError, Usage
from agent.task.workspace import RepoWorkspace


class ListModel:
    """Answers from a list (the last answer repeats) and records every request; a summary request (as
    ``is_summary`` tells it) gets ``summary``, and the call numbers in ``fail`` raise InferenceError."""

    def __init__(self, answers: list[str], is_summary: Callable[[list[dict]], bool], summary: str = "SUMMARY",
                 fail: tuple[int, ...] = ()) -> None:
        self.answers, self.is_summary, self.summary, self.fail = list(answers), is_summary, summary, fail
        self.requests: list[list[dict]] = []

    def complete(self, messages: list[dict], *, response_schema: dict | None = None) -> Completion:
        self.requests.append([dict(m) for m in messages])
        if len(self.requests) in self.fail:
            raise InferenceError("context too long", usage=Usage("fake", "m", 5, 0, 0, 0, 0.0, 0.0))
        if self.is_summary(messages):
            text = self.summary
        else:
            text = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return Completion(text, Usage("fake", "m", 7, 3, 0, 0, 0.0, 0.01))


def small_repo(root: Path) -> RepoWorkspace:
    """``pkg/target.py`` (empty, the file to write) beside ``pkg/util.py``, and a canonical answer outside."""
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "target.py").write_text("")
    (repo / "pkg" / "util.py").write_text("def helper():\n    return 41\n")
    (root / "canonical.py").write_text("SECRET = 1\n")
    return RepoWorkspace(repo, "pkg/target.py")
