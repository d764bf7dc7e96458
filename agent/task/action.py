"""The CodeAgent's actions: parse one model answer into an Action, execute it on a workspace.

Every path an action touches is resolved with ``resolve_inside`` against the
task's private repository copy, so ``READ ../canonical.py``, absolute paths and
symlinks pointing out of the repository are refused (the release leaked the
hidden reference this way). canonical.py and test.py are never in the copy.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from agent.task.retrieval import SKIPPED_DIRS, render_hits
from agent.task.workspace import PathEscapeError, RepoWorkspace, resolve_inside

ACTIONS = ("READ", "BROWSE", "RETRIEVE", "REPLACE", "EDIT", "SUBMIT")
RELEASE_ACTIONS = tuple(name for name in ACTIONS if name != "EDIT")  # the release ships EDIT disabled
CODE_ACTIONS = ("REPLACE", "EDIT")
MAX_READ_CHARS = 40_000
MAX_LISTED_FILES = 400
RETRIEVE_TOP_K = 5

_ACTION_LINE = re.compile(r"^[ \t>*_#`]*action[*_`]*[ \t]*:[*_`]*[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)
_REFLECT = re.compile(r"^[ \t>*_#`]*reflect[*_`]*[ \t]*:[*_`]*[ \t]*", re.IGNORECASE | re.MULTILINE)
_FENCE_OPEN = re.compile(r"^([ \t]*)```[ \t]*([\w+.-]*)[ \t]*$", re.MULTILINE)
_FENCE_CLOSE = re.compile(r"^([ \t]*)```[ \t]*$", re.MULTILINE)


class ActionFormatError(ValueError):
    """The answer does not follow the ``reflect: ... action: ...`` format; the message says why."""


@dataclass(frozen=True)
class Action:
    """One parsed action. ``code`` is the fenced block of REPLACE/EDIT; ``start``/``end`` EDIT's lines."""

    name: str
    argument: str = ""
    code: str | None = None
    reflect: str = ""
    start: int = 0
    end: int = 0


@dataclass(frozen=True)
class Observation:
    """What executing an action produced: shown to the agent as the result of its last action."""

    ok: bool
    text: str
    submitted: bool = False


def _fenced_blocks(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, language, body) of each closed fenced block, in order. A fence indented deeper than
    the opening one does not close it: it belongs to the code (a docstring showing a fenced example)."""
    blocks = []
    pos = 0
    while (opening := _FENCE_OPEN.search(text, pos)) is not None:
        closing = _FENCE_CLOSE.search(text, opening.end())
        while closing is not None and len(closing.group(1)) > len(opening.group(1)):
            closing = _FENCE_CLOSE.search(text, closing.end())
        if closing is None:
            break
        body = text[opening.end():closing.start()].strip("\n")
        blocks.append((opening.start(), closing.end(), opening.group(2).lower(), body + "\n"))
        pos = closing.end()
    return blocks


def python_blocks(text: str) -> str | None:
    """Every closed python block of the answer, joined in order (any closed block when none is python)."""
    blocks = _fenced_blocks(text)
    chosen = [b for b in blocks if b[2] in ("python", "py", "python3")] or blocks
    return "\n".join(b[3] for b in chosen) if chosen else None


def extract_code_block(text: str, after: int = 0) -> str | None:
    """The code of the first fenced block starting at or after ``after`` (a python one preferred).

    Returns None when there is no closed block; an unclosed block usually means
    the answer was cut off, and guessing where the code ends would submit garbage.
    """
    blocks = [b for b in _fenced_blocks(text) if b[0] >= after]
    python = [b for b in blocks if b[2] in ("python", "py", "python3")]
    chosen = (python or blocks or [None])[0]
    return chosen[3] if chosen else None


def _outside_code(text: str, matches: list[re.Match[str]]) -> list[re.Match[str]]:
    spans = [(b[0], b[1]) for b in _fenced_blocks(text)]
    return [m for m in matches if not any(s <= m.start() < e for s, e in spans)]


def _command(text: str, line: re.Match[str]) -> tuple[list[str], int]:
    """The command's words and where its line ends: on the ``action:`` line, else the next non-empty line."""
    words = line.group(1).strip().strip("`*").split(None, 1)
    if words:
        return words, line.end()
    following = re.compile(r"^[ \t]*(\S.*)$", re.MULTILINE).search(text, line.end())
    if following is None or _FENCE_OPEN.match(following.group(0)):
        return [], line.end()
    return following.group(1).strip().strip("`*").split(None, 1), following.end()


def parse_answer(text: str, actions: tuple[str, ...] = ACTIONS) -> Action:
    """Turn a model answer into an Action or raise ActionFormatError saying what is wrong.

    The command may follow ``action:`` on the same line or, as the release's
    prompt shows it, on the next line. ``actions`` are the ones this agent may use.
    Windows line endings are read as newlines (the code is written with ``\n``).
    """
    text = text.replace("\r\n", "\n")
    if not text.strip():
        raise ActionFormatError("the answer is empty")
    lines = _outside_code(text, list(_ACTION_LINE.finditer(text)))
    if not lines:
        raise ActionFormatError("no `action:` line was found")
    line = lines[0]
    words, command_end = _command(text, line)
    if not words:
        raise ActionFormatError("the `action:` line names no action")
    name = words[0].strip("`*:").upper()
    argument = words[1].strip().strip("`*").strip() if len(words) > 1 else ""
    if name not in actions:
        raise ActionFormatError(f"unknown action '{words[0]}' (known: {', '.join(actions)})")
    reflect_match = _REFLECT.search(text, 0, line.start())
    reflect = text[reflect_match.end():line.start()].strip() if reflect_match else ""
    if name in ("READ", "RETRIEVE") and not argument:
        raise ActionFormatError(f"{name} needs an argument on the same line")
    start = end = 0
    if name == "EDIT":
        numbers = re.fullmatch(r"(\d+)\s*[ ,-]\s*(\d+)", argument)
        if not numbers:
            raise ActionFormatError(f"EDIT needs two line numbers, as in `EDIT 3 7`; got '{argument}'")
        start, end = int(numbers.group(1)), int(numbers.group(2))
    code = None
    if name in CODE_ACTIONS:
        code = extract_code_block(text, after=command_end)
        if code is None:
            code = extract_code_block(text)
        if code is None:
            raise ActionFormatError(f"{name} must be followed by a closed fenced python block")
    return Action(name=name, argument=argument, code=code, reflect=reflect, start=start, end=end)


def numbered(code: str) -> str:
    """The file with 1-based line numbers, as the agent sees it (EDIT uses these numbers)."""
    lines = code.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, start=1))


def _read(action: Action, ws: RepoWorkspace) -> Observation:
    path = resolve_inside(ws.repo, action.argument)
    rel = path.relative_to(ws.repo).as_posix() or "."
    if path.is_dir():
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir() if p.name not in SKIPPED_DIRS)
        return Observation(True, f"{rel} is a directory holding:\n" + "\n".join(entries))
    if not path.is_file():
        return Observation(False, f"{action.argument} does not exist; BROWSE lists the repository files")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return Observation(False, f"{rel} is a binary file ({len(data)} bytes)")
    text = data.decode("utf-8", errors="replace")
    note = ""
    if len(text) > MAX_READ_CHARS:
        text, note = text[:MAX_READ_CHARS], f"\n... (cut at {MAX_READ_CHARS} characters of {len(data)} bytes)"
    return Observation(True, f"{rel}:\n{numbered(text)}{note}")


def _browse(action: Action, ws: RepoWorkspace) -> Observation:
    files = ws.files()
    shown = files[:MAX_LISTED_FILES]
    more = f"\n... and {len(files) - len(shown)} more files" if len(files) > len(shown) else ""
    return Observation(True, f"{len(files)} files in the repository:\n" + "\n".join(shown) + more)


def _retrieve(action: Action, ws: RepoWorkspace) -> Observation:
    return Observation(True, render_hits(ws.index.search(action.argument, k=RETRIEVE_TOP_K)))


def _replace(action: Action, ws: RepoWorkspace) -> Observation:
    ws.write_code(action.code or "")
    count = len((action.code or "").splitlines())
    return Observation(True, f"The target file was replaced; it now has {count} lines.")


def _edit(action: Action, ws: RepoWorkspace) -> Observation:
    lines = ws.code.splitlines(keepends=True)
    start, end = action.start, action.end
    if start < 1 or end < start - 1 or end > len(lines):
        return Observation(
            False,
            f"EDIT {start} {end} is not a valid range: the file has {len(lines)} lines; use 1 <= N, "
            f"N-1 <= M <= {len(lines)} (M = N-1 inserts before line N)",
        )
    new = (action.code or "").splitlines(keepends=True)
    if new and not new[-1].endswith("\n"):
        new[-1] += "\n"
    if start > 1 and not lines[start - 2].endswith("\n"):
        lines[start - 2] += "\n"
    ws.write_code("".join(lines[:start - 1] + new + lines[end:]))
    return Observation(True, f"Lines {start}..{end} were replaced by {len(new)} lines; the file now has "
                             f"{len(ws.code.splitlines())} lines.")


def _submit(action: Action, ws: RepoWorkspace) -> Observation:
    return Observation(True, "Submitted for testing.", submitted=True)


_HANDLERS = {"READ": _read, "BROWSE": _browse, "RETRIEVE": _retrieve, "REPLACE": _replace,
             "EDIT": _edit, "SUBMIT": _submit}


def execute(action: Action, ws: RepoWorkspace) -> Observation:
    """Run one action; refused paths and bad ranges become a failed Observation, never an exception."""
    try:
        return _HANDLERS[action.name](action, ws)
    except PathEscapeError as exc:
        return Observation(False, f"Refused: {exc}. Only files inside the repository can be read.")
    except OSError as exc:
        return Observation(False, f"{action.name} failed: {exc.strerror or exc}")
