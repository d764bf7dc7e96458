"""The authors' release's reading of a code-model answer, reproduced decision for decision.

The release protocol (SPEC 8.6) must show a model what the release would show it, so the
release's reading of an answer is reproduced here exactly, quirks included: which answers it
accepts, which command it runs, and with what arguments (the text REPLACE writes to the file,
the path READ opens, the query RETRIEVE searches). Where the release raises instead of answering,
the command is "invalid" and ``defect`` names the crash, so the caller can show the
invalid-command text and record the difference. Pure functions: nothing here touches a file;
READ's path comes back unconfined, confining it is the caller's job.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["invalid", "submit", "replace", "read", "retrieve", "browse"]

# Answers on which the release raises instead of answering (tests/test_release_answers.py shows each).
REFLECT_UNHANDLED = "reflect-unhandled"  # REFLECT passes the header check, no branch returns: unpacking None
EDIT_DISABLED = "edit-disabled"  # EDIT N M parses, but the EDIT handler is not registered: KeyError
EDIT_WITHOUT_LINES = "edit-without-lines"  # EDIT without two line numbers int() takes: raises while parsing
REPLACE_NOT_UTF8 = "replace-not-utf8"  # REPLACE text with a lone surrogate: writing the file raises

_ACTION = re.compile("action", re.IGNORECASE)  # anywhere: "transaction" or "no action" in a reflection counts
_NEXT_LABEL = re.compile(r"\n\w+:")  # a line opening with a word and a colon ends the command ("else:" too)
_HEADER = re.compile(
    r"(?P<word>REPLACE|EDIT|READ|RETRIEVE|SUBMIT|BROWSE|REFLECT)"
    r"(?:\s+(?P<start>\d+)\s+(?P<end>\d+)|\s+(?P<rest>.*))?"
)  # case-sensitive, the whole first line; "READ 3 4" takes the numbers, not a path
_OPENINGS = ("```python", "```py", "```")  # REPLACE drops the first of these its text starts with
_ENDINGS = ("```", '"""')  # then the first of these it ends with


@dataclass(frozen=True)
class ReleaseCommand:
    """One answer as the release reads it.

    ``code``: the exact text REPLACE writes to the target file, which the release's record keeps
    stripped as final_code (EDIT: the lines after its header);
    ``path``: READ's path as given; ``query``: RETRIEVE's query; ``start``/``end``: EDIT's lines;
    ``command``: the text taken as the command; ``defect``: why the release would crash (kind is then
    "invalid").
    """

    kind: Kind
    command: str = ""
    code: str | None = None
    path: str | None = None
    query: str | None = None
    start: int | None = None
    end: int | None = None
    defect: str | None = None


def clean_answer(text: str) -> str:
    """The release's correction of every answer, before parsing and before it enters the memory:
    the newline after each triple backtick goes, so a bare fence glues to the next line
    ("```\\nimport x" becomes "```import x")."""
    return text.replace("```\n", "```")


def command_text(answer: str) -> str:
    """The command part of an answer: from the first "action" (any case, colon optional) to the
    first line that opens with ``word:``, trimmed; empty when "action" never occurs."""
    found = _ACTION.search(answer)
    if found is None:
        return ""
    after = found.end() + answer.startswith(":", found.end())
    rest = answer[after:].lstrip()
    label = _NEXT_LABEL.search(rest)
    return rest[: label.start() if label else len(rest)].strip()


def replace_text(body: str) -> str:
    """What REPLACE writes for the lines after its header: trimmed, one opening fence and then one
    closing fence (or a closing triple quote) cut off, and no trim after that, so the newline after
    an opening "```python" line stays as the file's first character."""
    text = body.strip()
    opening = next((fence for fence in _OPENINGS if text.startswith(fence)), "")
    text = text[len(opening):]
    ending = next((fence for fence in _ENDINGS if text.endswith(fence)), "")
    return text[: len(text) - len(ending)]


def _writable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _line_numbers(start: str | None, end: str | None) -> tuple[int, int] | None:
    """EDIT's two numbers, or None where the release's int() raises (absent, or past int's digit limit)."""
    if start is None or end is None:
        return None
    try:
        return int(start), int(end)
    except ValueError:
        return None


def parse_release_answer(cleaned: str) -> ReleaseCommand:
    """The command the release runs for an answer already passed through ``clean_answer``."""
    command = command_text(cleaned)
    lines = command.strip("`").splitlines()
    header = _HEADER.fullmatch(lines[0].strip()) if lines else None
    if header is None:
        return ReleaseCommand("invalid", command)
    word, body = header["word"], lines[1:]
    argument = header["rest"] or "\n".join(body).strip()
    if word == "REPLACE":
        code = replace_text("\n".join(body))
        if not _writable(code):
            return ReleaseCommand("invalid", command, code=code, defect=REPLACE_NOT_UTF8)
        return ReleaseCommand("replace", command, code=code)
    if word == "READ":
        return ReleaseCommand("read", command, path=argument)
    if word == "RETRIEVE":
        return ReleaseCommand("retrieve", command, query=argument)
    if word in ("SUBMIT", "BROWSE"):
        return ReleaseCommand(word.lower(), command)
    if word == "REFLECT":
        return ReleaseCommand("invalid", command, defect=REFLECT_UNHANDLED)
    numbers = _line_numbers(header["start"], header["end"])
    if numbers is None:
        return ReleaseCommand("invalid", command, defect=EDIT_WITHOUT_LINES)
    return ReleaseCommand("invalid", command, code="\n".join(body), start=numbers[0], end=numbers[1],
                          defect=EDIT_DISABLED)
