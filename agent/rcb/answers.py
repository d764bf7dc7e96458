"""Canned snippet answers for the ``scripted`` model: each task's reference block, or its placeholder.

A run with the reference answers must score 100 scaled pass@1 on every
runnable paper, and one with the placeholders exactly the code-line share of
the weak tests: together they check the whole path from import to score
against known results. One rule per task matches the snippet prompt by file
and block name, plus a line of the masked file when another task has the
same file and block (papers often share file names).
"""
from __future__ import annotations

import re

from agent.rcb.annotations import split_lines
from agent.rcb.snippet import SnippetTask, placeholder_at

ANSWERS = ("reference", "placeholder")


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


def answer_rules(tasks: list[tuple[SnippetTask, str]], answer: str) -> list[dict]:
    """Scripted-model rules answering each (task, canonical) with ``answer`` ('reference' or 'placeholder')."""
    rules = []
    for task, canonical in tasks:
        same = [other for other, _ in tasks if other is not task
                and (other.file_path, other.block) == (task.file_path, task.block)]
        pattern = re.escape(f"## File `{task.file_path}` with the missing block")
        if same:
            line = _distinct_line(task, same)
            pattern += "(?s:.*)" + re.escape(line) if line else ""
        pattern += "(?s:.*)" + re.escape(f'the block "{task.block}"')
        code = (reference_block(task.masked_file, canonical, task.block) if answer == "reference"
                else placeholder_block(task.masked_file, task.block))
        rules.append({"when": pattern, "responses": [f"```python\n{code.rstrip(chr(10))}\n```"]})
    return rules
