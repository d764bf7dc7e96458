"""Canned snippet answers for the ``scripted`` model: each task's reference block, or its placeholder.

A run with the reference answers must score 100 scaled pass@1 on every
runnable paper, and one with the placeholders exactly the code-line share of
the weak tests: together they check the whole path from import to score
against known results. One rule per task matches the snippet prompt by file
and block name, plus a line of the masked file when another task has the
same file and block (papers often share file names).

The ``agent`` protocol serves the feedback settings (baseline, agent,
memory_agent) over the same tasks: the answer REPLACEs the whole target file
(canonical.py, or the masked file unchanged), and a first rule SUBMITs after
any REPLACE. A task is told by its instruction's naming of its file, and from
the others sharing that file by a line only its masked file holds (its
placeholder). The rules read both of our protocols' prompts (the release's in
our own words, and the improved one's).
"""
from __future__ import annotations

import re

from agent.protocols.release_texts import load_release_texts
from agent.rcb.annotations import split_lines
from agent.rcb.snippet import SnippetTask, placeholder_at

ANSWERS = ("reference", "placeholder")
PROTOCOLS = ("snippet", "agent")
_OURS = load_release_texts(None)
# The last action wrote the file: our improved protocol's result header, or the release protocol's last slot
# (the user message ends with it) holding the REPLACE result, in our words.
_WRITTEN = (r"## Result of your last action \((?:REPLACE|EDIT)|"
            + re.escape(_OURS.fill("result_wrap", result=_OURS.fill("replace_done"), guidance=_OURS.fill("guidance"))
                        + "\n") + r"\Z")
SUBMIT_RULE = {"when": _WRITTEN, "responses": ["reflect: the target file is written; I submit it.\naction: SUBMIT"]}


def reference_block(masked_file: str, canonical: str, block: str) -> str:
    """The lines canonical.py has where the masked file has the block's placeholder."""
    masked, full = split_lines(masked_file), split_lines(canonical)
    at = placeholder_at(masked, block)
    after = len(masked) - at - 2
    return "".join(full[at: len(full) - after])


def placeholder_block(masked_file: str, block: str) -> str:
    masked = split_lines(masked_file)
    at = placeholder_at(masked, block)
    return "".join(masked[at: at + 2])


def _distinct_line(task: SnippetTask, others: list[SnippetTask]) -> str | None:
    taken = {line.strip() for other in others for line in other.masked_file.splitlines()}
    return next((line.strip() for line in task.masked_file.splitlines() if line.strip() and line.strip() not in taken),
                None)


def _distinguishing(task: SnippetTask, others: list[SnippetTask], head: str) -> str:
    """``head``, then (lazily, across lines) a line of the masked file no other task in ``others`` has."""
    line = _distinct_line(task, others) if others else None
    return head + ("(?s:.*)" + re.escape(line) if line else "")


def _snippet_rule(task: SnippetTask, canonical: str, answer: str, same_block: list[SnippetTask]) -> dict:
    pattern = _distinguishing(task, same_block, re.escape(f"## File `{task.file_path}` with the missing block"))
    pattern += "(?s:.*)" + re.escape(f'the block "{task.block}"')
    code = (reference_block(task.masked_file, canonical, task.block) if answer == "reference"
            else placeholder_block(task.masked_file, task.block))
    return {"when": pattern, "responses": [f"```python\n{code.rstrip(chr(10))}\n```"]}


def _agent_rule(task: SnippetTask, canonical: str, answer: str, same_file: list[SnippetTask]) -> dict:
    pattern = _distinguishing(task, same_file, re.escape(f" in `{task.file_path}` of the repository"))
    code = canonical if answer == "reference" else task.masked_file
    return {"when": pattern, "responses": [
        f"reflect: I write the whole target file.\naction: REPLACE\n```python\n{code.rstrip(chr(10))}\n```"]}


def answer_rules(tasks: list[tuple[SnippetTask, str]], answer: str, protocol: str = "snippet") -> list[dict]:
    """Scripted-model rules answering each (task, canonical) with ``answer`` ('reference' or 'placeholder'),
    in the snippet setting's protocol or the agent settings' one (``protocol``: 'snippet' or 'agent')."""
    if protocol == "snippet":
        return [_snippet_rule(task, canonical, answer, [other for other, _ in tasks if other is not task and (
            other.file_path, other.block) == (task.file_path, task.block)]) for task, canonical in tasks]
    return [SUBMIT_RULE] + [_agent_rule(task, canonical, answer, [
        other for other, _ in tasks if other is not task and other.file_path == task.file_path])
        for task, canonical in tasks]
