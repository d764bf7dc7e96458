"""ResearchCodeBench annotations: parse ``# <paper2code name="...">`` snippets and derive challenge texts.

A snippet is delimited by a start and an end comment line, each alone on its
line at any indentation; snippets nest, and an end tag closes the innermost
open snippet of the same name at the same indentation. Everything here is a
pure function of the file text so the importer, the snippet setting and the
tests share one definition of a snippet, its code lines and its placeholder.
Line numbers are 1-based, as editors and error messages show them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

TODO_LINE = '# TODO: Implement block "{name}"'
SIZE_LINE = "# Approximately {n} line(s) of code."
SIZE_PATTERN = re.compile(r"^[ \t]*# Approximately \d+ line\(s\) of code\.[ \t\r]*$")

_TAG = re.compile(r'^(?P<indent>[ \t]*)#[ \t]*<(?P<end>/?)paper2code[ \t]+name="(?P<name>[^"]+)">\s*$')
_TAG_LIKE = re.compile(r"^[ \t]*#[ \t]*</?paper2code\b")


class AnnotationError(ValueError):
    """A malformed annotation; the message is one line starting with ``file:line:``."""


@dataclass(frozen=True)
class Snippet:
    """One annotated block: its tags' line numbers in the annotated file and their indentation."""

    name: str
    start: int
    end: int
    indent: str
    parent: str | None


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept; only ``\\n`` splits (form feeds inside code stay put)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


def is_tag_like(line: str) -> bool:
    """Whether a line looks like a paper2code tag, well-formed or not."""
    return bool(_TAG_LIKE.match(line))


def strip_tag_lines(text: str) -> str:
    """``text`` without any tag-like line; tolerant, for reference copies and other non-challenge files."""
    return "".join(line for line in split_lines(text) if not is_tag_like(line))


def parse_annotations(text: str, source: str = "<text>") -> list[Snippet]:
    """Every snippet of an annotated file, ordered by start line; raises AnnotationError naming file:line."""
    open_tags: list[tuple[str, int, str]] = []
    done: list[Snippet] = []
    first_seen: dict[str, int] = {}
    for number, line in enumerate(split_lines(text), start=1):
        if not is_tag_like(line):
            continue
        match = _TAG.match(line)
        if match is None:
            raise AnnotationError(
                f'{source}:{number}: malformed paper2code tag; write # <paper2code name="NAME"> '
                f'or # </paper2code name="NAME"> alone on its line')
        name, indent = match["name"], match["indent"]
        if not match["end"]:
            if name in first_seen:
                raise AnnotationError(f"{source}:{number}: snippet name '{name}' repeats (first at line "
                                      f"{first_seen[name]}); names must be unique within a file")
            first_seen[name] = number
            open_tags.append((name, number, indent))
            continue
        at = next((i for i in range(len(open_tags) - 1, -1, -1) if open_tags[i][0] == name and open_tags[i][2] == indent),
                  None)
        if at is None:
            same_name = [start for tag, start, _ in open_tags if tag == name]
            hint = (f"its start tag (line {same_name[-1]}) has a different indentation" if same_name
                    else "no start tag of that name is open")
            raise AnnotationError(f"{source}:{number}: end tag of '{name}' does not match: {hint}")
        if at != len(open_tags) - 1:
            inner, inner_start, _ = open_tags[-1]
            raise AnnotationError(f"{source}:{number}: end tag of '{name}' while '{inner}' (opened at line "
                                  f"{inner_start}) is still open inside it")
        _, start, _ = open_tags.pop()
        parent = open_tags[-1][0] if open_tags else None
        done.append(Snippet(name=name, start=start, end=number, indent=indent, parent=parent))
    if open_tags:
        name, start, _ = open_tags[-1]
        raise AnnotationError(f"{source}:{start}: snippet '{name}' is never closed; add # </paper2code name=\"{name}\">")
    return sorted(done, key=lambda s: s.start)


def _tag_numbers(snippets: list[Snippet]) -> set[int]:
    return {s.start for s in snippets} | {s.end for s in snippets}


def strip_tags(text: str, snippets: list[Snippet]) -> str:
    """The file as it runs: every tag line of ``snippets`` removed, nothing else changed."""
    tags = _tag_numbers(snippets)
    return "".join(line for number, line in enumerate(split_lines(text), start=1) if number not in tags)


def body_lines(text: str, snippet: Snippet, snippets: list[Snippet]) -> list[str]:
    """The snippet's ground-truth body: lines between its tags, nested children included, tag lines removed."""
    tags = _tag_numbers(snippets)
    lines = split_lines(text)
    return [lines[n - 1] for n in range(snippet.start + 1, snippet.end) if n not in tags]


def is_code_line(line: str) -> bool:
    """Neither blank nor comment-only; code followed by a trailing comment counts."""
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def count_code_lines(lines: list[str]) -> int:
    return sum(is_code_line(line) for line in lines)


def body_indent(lines: list[str], fallback: str) -> str:
    """Leading whitespace of the least indented non-blank body line (the tags' indentation if none)."""
    indents = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines if line.strip()]
    return min(indents, key=lambda s: len(s.expandtabs()), default=fallback)


def placeholder_lines(name: str, code_lines: int, indent: str, newline: str = "\n") -> list[str]:
    """The two comment lines that stand in for a removed block."""
    return [indent + TODO_LINE.format(name=name) + newline, indent + SIZE_LINE.format(n=code_lines) + newline]


def mask_snippet(text: str, snippet: Snippet, snippets: list[Snippet]) -> str:
    """The challenge file: every tag line removed and ``snippet``'s body replaced by its placeholder."""
    lines = split_lines(text)
    body = body_lines(text, snippet, snippets)
    newline = "\r\n" if lines[snippet.start - 1].endswith("\r\n") else "\n"
    holder = placeholder_lines(snippet.name, count_code_lines(body), body_indent(body, snippet.indent), newline)
    tags = _tag_numbers(snippets)
    before = [lines[n - 1] for n in range(1, snippet.start) if n not in tags]
    after = [lines[n - 1] for n in range(snippet.end + 1, len(lines) + 1) if n not in tags]
    return "".join(before + holder + after)


def masked_line(snippet: Snippet, snippets: list[Snippet]) -> int:
    """Line of the placeholder (and of the body's first line) once tag lines are gone."""
    tags_before = sum((s.start < snippet.start) + (s.end < snippet.start) for s in snippets)
    return snippet.start - tags_before
