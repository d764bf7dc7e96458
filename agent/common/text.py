"""Text helpers shared by prompts, digests and memory notes: one-line forms, name lists, caps."""
from __future__ import annotations

MAX_BRIEF_LINE_CHARS = 300  # one line of free text kept in a brief (an error, a description)


def one_line(text: str, limit: int = MAX_BRIEF_LINE_CHARS) -> str:
    """``text`` on one line (whitespace collapsed), cut at ``limit`` characters with a marker."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + " [...]"


def name_list(names: list[str], limit: int) -> str:
    """The first ``limit`` names, comma-separated, and how many more there are."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def cap(text: str, limit: int) -> str:
    """``text`` cut at ``limit`` characters, saying how many more there were."""
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters)"
