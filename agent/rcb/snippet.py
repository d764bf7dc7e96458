"""The ``snippet`` evaluation setting (ResearchCodeBench's protocol): one call, insert the block, test once.

The model sees the paper, the context files, then the file with the block's
placeholder, and answers with the block's code; the LAST ```python fence of
the answer is the block. By default it replaces the two placeholder lines
verbatim (the release's behaviour: a wrongly indented block fails); with
``reindent`` it is dedented and indented to the placeholder's column first.
:func:`load_snippet_task` reads a task; everything else is pure.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from agent.protocols.prompts import SNIPPET_CONTEXT_FILE, SNIPPET_PROMPT
from agent.rcb.annotations import SIZE_PATTERN, TODO_LINE, split_lines
from agent.task.dataset import DatasetError, DatasetManager
from agent.task.workspace import PathEscapeError, resolve_inside

_FENCE_OPEN = re.compile(r"^[ \t]*```python[ \t]*$")
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$")


class SnippetError(ValueError):
    """The masked file has no placeholder for the block (the task is not a snippet task or was edited)."""


@dataclass(frozen=True)
class SnippetTask:
    """What the snippet prompt is built from; ``context_files`` are (repo-relative path, text) pairs."""

    index: int
    block: str
    file_path: str
    masked_file: str
    paper: str
    context_files: tuple[tuple[str, str], ...]


def load_snippet_task(dataset: DatasetManager, index: int) -> SnippetTask:
    """Read an imported ResearchCodeBench task (meta row with ``snippet``); DatasetError otherwise."""
    meta = dataset.get(index)
    block = meta.extra.get("snippet")
    if not isinstance(block, str) or not block:
        raise DatasetError(f"task {index} is not a ResearchCodeBench snippet task (its meta row has no 'snippet'); "
                           "use another evaluation-setting or import the task with scripts/import_researchcodebench.py")
    context = []
    for path in meta.extra.get("context_files") or []:
        try:
            context.append((path, resolve_inside(dataset.repo_dir(index), path).read_text(encoding="utf-8")))
        except (OSError, PathEscapeError) as exc:
            raise DatasetError(f"task {index}: context file '{path}' unreadable ({exc}); re-import the task") from None
    return SnippetTask(index=index, block=block, file_path=meta.target_file_path, masked_file=meta.init_content,
                       paper=dataset.latex(index), context_files=tuple(context))


def build_prompt(task: SnippetTask) -> str:
    """The single user message of a snippet run: paper, context files, masked file, block name."""
    context = "".join(SNIPPET_CONTEXT_FILE.format(path=path, text=text.rstrip("\n")) for path, text in task.context_files)
    return SNIPPET_PROMPT.format(paper=task.paper.rstrip("\n"), context=f"\n## Context files\n{context}" if context else "",
                         file_path=task.file_path, masked_file=task.masked_file.rstrip("\n"), block=task.block,
                         todo=TODO_LINE.format(name=task.block))


def extract_last_python_block(answer: str) -> str | None:
    """Body of the last complete ```python fence of ``answer`` (None when there is none)."""
    found = None
    body: list[str] | None = None
    for line in answer.splitlines():
        if body is None:
            if _FENCE_OPEN.match(line):
                body = []
        elif _FENCE_CLOSE.match(line):
            found, body = "\n".join(body), None
        else:
            body.append(line)
    return found


def placeholder_at(lines: list[str], block: str) -> int:
    """Index of the block's TODO line in ``lines`` (its size line follows); SnippetError if absent."""
    todo = TODO_LINE.format(name=block)
    for i, line in enumerate(lines[:-1]):
        if line.strip() == todo and SIZE_PATTERN.match(lines[i + 1].rstrip("\n")):
            return i
    raise SnippetError(f'no placeholder "{todo}" followed by its size line in the file')


def insert_block(masked_file: str, block: str, code: str, *, reindent: bool = False) -> str:
    """``masked_file`` with the placeholder of ``block`` replaced by ``code``.

    Verbatim by default; ``reindent`` dedents ``code`` and indents it to the placeholder's indentation.
    """
    lines = split_lines(masked_file)
    at = placeholder_at(lines, block)
    if reindent:
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip(" \t"))]
        code = textwrap.indent(textwrap.dedent(code), indent)
    body = code.rstrip("\n")
    inserted = [line + "\n" for line in body.split("\n")] if body.strip() else []
    return "".join(lines[:at] + inserted + lines[at + 2:])


def complete_file(task: SnippetTask, answer: str, *, reindent: bool = False) -> str:
    """The candidate target file for a model answer; no python fence means an empty block (a failure)."""
    return insert_block(task.masked_file, task.block, extract_last_python_block(answer) or "", reindent=reindent)
