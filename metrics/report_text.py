"""Long texts on a trajectory page, each shown once: a message repeating what an earlier one said shows a link.

The release's protocol puts the whole paper, the task and the numbered file in every call, so a 10-turn
trajectory repeats megabytes. A page registers every message and answer it shows (in page order) and
renders each new one as *segments*: literal lines, or a reference ``(earlier text, first line, end line)``
shown as a folded marker "lines a-b as in call N". Matching is by line, in two passes:

1. every paragraph (text between blank lines) of at least ``MIN_PARAGRAPH_CHARS`` that appeared before on
   the page is a reference to its first appearance (the paper, the task, system prompts, history entries
   that quote earlier answers, wherever they moved);
   Each run then grows over the lines that go on repeating its source (a short equation, a blank line);
2. what is still literal and long is diffed line by line against the same message of the previous call of
   that model, so an edited file or a grown history shows only its changed lines.

A reference may point into a text that is itself partly references; the page script rebuilds any full
text from these pieces on demand (``href``/``data-a``/``data-b``), and without script each marker is a
link to where the lines are. Nothing is lost: every line the model saw is on the page, once.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from report_html import Html, join, tag

MIN_PARAGRAPH_CHARS = 160   # shorter repeated paragraphs stay literal: a marker would be longer than them
MIN_DIFF_LINES = 24         # literal runs at least this long are diffed against the previous call's text
MIN_MATCH_LINES = 4         # equal runs shorter than this stay literal
MIN_MARKER_CHARS = 800      # a reference run shorter than this is shown literally (a marker is noise)
MAX_TEXT_CHARS = 2_000_000  # one text beyond this is cut (a flood of output), saying how much was left out
FENCE = re.compile(r"^```[ \t]*(python|py)?[^\n]*\n.*?^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Ref:
    """Lines ``[first, end)`` of the earlier text ``source`` (an element id on the page)."""

    source: str
    first: int
    end: int


@dataclass
class Shown:
    """A registered text: its id on the page, a label for links ("call 3 · user"), its lines."""

    id: str
    label: str
    lines: list[str]


@dataclass
class Registry:
    """The texts already on one page, for :func:`segments` to refer back to."""

    texts: dict[str, Shown] = field(default_factory=dict)
    paragraphs: dict[str, tuple[str, int]] = field(default_factory=dict)  # paragraph -> (text id, first line)

    def add(self, shown: Shown) -> None:
        self.texts[shown.id] = shown
        line = 0
        for paragraph in "\n".join(shown.lines).split("\n\n"):
            if len(paragraph) >= MIN_PARAGRAPH_CHARS:
                self.paragraphs.setdefault(paragraph, (shown.id, line))
            line += paragraph.count("\n") + 2


Origin = tuple[str, int] | None  # (text id, line) a line repeats, or None when it is new


def _by_paragraph(lines: list[str], registry: Registry) -> list[Origin]:
    origins: list[Origin] = [None] * len(lines)
    line = 0
    for paragraph in "\n".join(lines).split("\n\n"):
        count = paragraph.count("\n") + 1
        found = registry.paragraphs.get(paragraph) if len(paragraph) >= MIN_PARAGRAPH_CHARS else None
        if found is not None:
            origins[line:line + count] = [(found[0], found[1] + k) for k in range(count)]
        line += count + 1
    _extend_runs(lines, origins, registry)
    return origins


def _extend_runs(lines: list[str], origins: list[Origin], registry: Registry) -> None:
    """Grow each reference run over the new lines that go on repeating its source (short paragraphs, blank
    lines, a short equation between two long paragraphs): forward, then backward."""
    def follow(i: int, j: int) -> None:  # line i is new, line j (its neighbour) is a reference
        source, line = origins[j]
        target = line + (i - j)
        source_lines = registry.texts[source].lines
        if 0 <= target < len(source_lines) and source_lines[target] == lines[i]:
            origins[i] = (source, target)

    for i in range(1, len(lines)):
        if origins[i] is None and origins[i - 1] is not None:
            follow(i, i - 1)
    for i in range(len(lines) - 2, -1, -1):
        if origins[i] is None and origins[i + 1] is not None:
            follow(i, i + 1)


def _by_diff(lines: list[str], origins: list[Origin], previous: Shown | None) -> None:
    """Long literal runs matched line by line against ``previous`` (the same message one call earlier)."""
    if previous is None:
        return
    start = 0
    while start < len(lines):
        if origins[start] is not None:
            start += 1
            continue
        end = start
        while end < len(lines) and origins[end] is None:
            end += 1
        if end - start >= MIN_DIFF_LINES:
            matcher = difflib.SequenceMatcher(None, previous.lines, lines[start:end], autojunk=False)
            for block in matcher.get_matching_blocks():
                if block.size >= MIN_MATCH_LINES:
                    for k in range(block.size):
                        origins[start + block.b + k] = (previous.id, block.a + k)
        start = end


def segments(lines: list[str], registry: Registry, previous: Shown | None = None) -> list[str | Ref]:
    """The text as literal chunks (str, lines joined) and references to earlier texts, in order."""
    origins = _by_paragraph(lines, registry)
    _by_diff(lines, origins, previous)
    runs: list[tuple[Origin, int, int]] = []  # (origin of the first line, start, end) of each run
    for i, origin in enumerate(origins):
        if runs:
            first, start, _ = runs[-1]
            continues = (origin is None and first is None) or (
                origin is not None and first is not None and origin == (first[0], first[1] + i - start))
            if continues:
                runs[-1] = (first, start, i + 1)
                continue
        runs.append((origin, i, i + 1))
    out: list[str | Ref] = []
    for origin, start, end in runs:
        chars = sum(len(line) + 1 for line in lines[start:end])
        if origin is not None and chars >= MIN_MARKER_CHARS:
            out.append(Ref(origin[0], origin[1], origin[1] + end - start))
        elif out and isinstance(out[-1], str):
            out[-1] += "\n" + "\n".join(lines[start:end])
        else:
            out.append("\n".join(lines[start:end]))
    return out


def split_lines(text: str) -> list[str]:
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f"\n... [{len(text) - MAX_TEXT_CHARS} more characters not shown; the " \
                                       "result pickle has them all]"
    return text.split("\n")


def literal(text: str) -> Html:
    """A ``<pre>`` of exact text (its leading newline survives the parser), fenced Python marked for the
    highlighter."""
    parts: list[object] = []
    last = 0
    for match in FENCE.finditer(text):
        parts.append(text[last:match.start()])
        parts.append(tag("code", match.group(0), class_="py"))
        last = match.end()
    parts.append(text[last:])
    return Html("<pre class=\"lit\">\n" + join(parts) + "</pre>")


def marker(ref: Ref, registry: Registry) -> Html:
    """A link to the earlier text (``href`` names it; the script reads it too) with the line range."""
    label = registry.texts[ref.source].label
    text = f"⋯ {ref.end - ref.first} lines as in {label} (lines {ref.first + 1}-{ref.end}) ⋯"
    return tag("a", text, href=f"#{ref.source}", class_="same", data_a=ref.first, data_b=ref.end)


def render(shown: Shown, registry: Registry, previous: Shown | None = None, class_: str = "text",
           fold: bool = True) -> Html:
    """The text as a ``div`` of literal blocks and markers (all literal when not ``fold``); registers it so
    later texts may refer to it."""
    pieces = segments(shown.lines, registry, previous) if fold else ["\n".join(shown.lines)]
    parts = [literal(part) if isinstance(part, str) else marker(part, registry) for part in pieces]
    registry.add(shown)
    size = sum(len(line) + 1 for line in shown.lines) - 1
    return tag("div", *parts, class_=class_, id=shown.id, data_chars=size)
