"""What a step leaves in the CodeAgent's memory once its turn is over: compact notes, not transcripts.

Every step prompt already shows the paper, the task, the current file, the
latest full test digest and feedback, and the result of the last action, so
memory need not repeat any of them. For past turns it keeps what the benchmark asks a
summary to keep: each code change and its rationale, and which tests passed or
failed, plus one line per other observation. That bounds the prompt of a long
memory_agent run by the summary threshold instead of by the number of turns.

A message of the turn in progress carries its final form under ``note`` while
the turn runs (later steps of that turn still see, e.g., a file they READ);
``settle`` swaps the notes in when the turn ends, and a summary condenses notes.
"""
from __future__ import annotations

import ast
import difflib
import re

from agent.common.text import name_list, one_line
from agent.task.action import Action

MAX_NAMES = 12  # definition names listed per kind in a code-change note
SUMMARY_WORDS = 300  # the length a summary is asked for
MAX_SUMMARY_CHARS = 4_000  # a summary longer than this (about twice the request) is cut
_HIT_HEADER = re.compile(r"^\[\d+\] \S+:\d+ ")  # a RETRIEVE hit's "[k] path:line name" line


def _definitions(code: str) -> tuple[dict[str, str], set[str]] | str:
    """Functions and methods (qualified name -> source) and class names; the SyntaxError text if none."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    functions: dict[str, str] = {}
    classes: set[str] = set()

    def visit(nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                classes.add(prefix + node.name)
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[prefix + node.name] = ast.get_source_segment(code, node) or ""

    visit(tree.body, "")
    return functions, classes


def code_change(before: str, after: str) -> str:
    """The change from ``before`` to ``after`` in one line: line counts and the definitions touched."""
    if before == after:
        return "no change to the file"
    old, new = before.splitlines(), after.splitlines()
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed, added = removed + i2 - i1, added + j2 - j1
    parts = [f"file {len(old)} -> {len(new)} lines (+{added} -{removed})"]
    now = _definitions(after)
    if isinstance(now, str):
        return "; ".join(parts + [f"the new file does not parse ({now})"])
    then = _definitions(before)
    return "; ".join(parts + _touched(({}, set()) if isinstance(then, str) else then, now))


def _touched(then: tuple[dict[str, str], set[str]], now: tuple[dict[str, str], set[str]]) -> list[str]:
    """The classes and functions added, changed and removed, one "kind: names" part per kind."""
    (old_functions, old_classes), (functions, classes) = then, now
    kinds = {
        "added": sorted(classes - old_classes) + [n for n in functions if n not in old_functions],
        "changed": [n for n in functions if n in old_functions and functions[n] != old_functions[n]],
        "removed": sorted(old_classes - classes) + [n for n in old_functions if n not in functions],
    }
    return [f"{kind}: {name_list(names, MAX_NAMES)}" for kind, names in kinds.items() if names]


def answer_note(action: Action, label: str, before: str, after: str) -> str:
    """An answer as memory keeps it: the rationale on one line, the action (``label``), and for code
    the change it made to the file (``before`` -> ``after``) instead of the block."""
    lines = [f"reflect: {one_line(action.reflect)}"] if action.reflect.strip() else []
    detail = f" [python block not kept: {code_change(before, after)}]" if action.code is not None else ""
    return "\n".join(lines + [f"action: {label}{detail}"])


def invalid_note(problem: str, answer: str) -> str:
    """An answer that could not be parsed, as memory keeps it: the problem and the answer's start."""
    return f"(not in the reflect/action format: {one_line(problem)}) {one_line(answer)}"


def observation_note(text: str) -> str:
    """An action's result as memory keeps it: its first line (and RETRIEVE's hit lines), with a count."""
    lines = text.strip().splitlines() or [""]
    kept = [one_line(lines[0])] + [one_line(line) for line in lines[1:] if _HIT_HEADER.match(line)]
    more = len(lines) - len(kept)
    return "\n".join(kept) + (f"\n({more} more lines, not kept in memory)" if more else "")


def bounded_summary(text: str) -> str:
    """A summary as memory keeps it: cut when the model ignored the requested length."""
    text = text.strip()
    if len(text) <= MAX_SUMMARY_CHARS:
        return text
    return text[:MAX_SUMMARY_CHARS] + f"\n[summary cut at {MAX_SUMMARY_CHARS} characters]"


def settle(messages: list[dict]) -> list[dict]:
    """The messages in their lasting form: each one's note replaces its content."""
    return [{"role": m["role"], "content": m.get("note", m["content"])} for m in messages]
