"""Prompt caching that changes no text the model sees: where the stable prefix of a call ends, and how each
provider is told.

Providers cache the *prefix* of a prompt: a call that starts with the same text as a recent one pays the
cached price for that part. OpenAI and Gemini (2.5) cache on their own; OpenAI routes calls that carry the
same ``prompt_cache_key`` to the same cache (:func:`openai_cache_key`: one key per system prompt and start of
the first user message, i.e. per task and kind of call). Anthropic caches only up to the blocks a request marks
with ``cache_control`` (at most :data:`MAX_BREAKPOINTS`, each prefix from a per-model minimum length):
:func:`anthropic_blocks` marks the system prompt and the end of the part of the prompt that agrees with a
recent call of the same model (:class:`PrefixTracker`), splitting a message's text into two text blocks at a
line break when the agreement ends inside it. Joined, the blocks are the message's text byte for byte.
"""
from __future__ import annotations

import hashlib
import threading
from collections import deque
from typing import Any

MAX_BREAKPOINTS = 4  # Anthropic's limit per request
CHARS_PER_TOKEN = 4  # the rough size used to tell whether a prefix reaches the minimum
KEY_CHARS = 2048  # characters of the first user message that name a task in the OpenAI cache key
RECENT_PROMPTS = 64  # prompts of one model remembered in this process (a few per job in flight)
EPHEMERAL = {"type": "ephemeral"}
# Anthropic's minimum cacheable prefix in tokens by model-name start (shorter prefixes are not cached).
ANTHROPIC_MINIMUM = (("claude-opus-4-5", 4096), ("claude-haiku-4-5", 4096), ("claude-3-haiku", 2048),
                     ("claude-3-5-haiku", 2048))
ANTHROPIC_DEFAULT_MINIMUM = 1024  # Sonnet and Opus 4 / 4.1, Sonnet 3.7


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (binary search on slices: C-speed compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class PrefixTracker:
    """The recent prompts of one model in this process and where their breakpoints were, shared by all its jobs
    (thread-safe). A provider caches at block boundaries only, so a later call reads a prefix only where it
    places a breakpoint at the very same place: :meth:`plan` hands back the earlier ones it may reuse."""

    def __init__(self, keep: int = RECENT_PROMPTS) -> None:
        self._seen: deque[tuple[str, tuple[int, ...]]] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def plan(self, text: str) -> tuple[int, int | None]:
        """How many leading characters ``text`` shares with the closest recent prompt, and the furthest earlier
        breakpoint inside a shared part (None: none)."""
        with self._lock:
            seen = list(self._seen)
        agreed, usable = 0, []
        for other, cuts in seen:
            shared = common_prefix(text, other)
            agreed = max(agreed, shared)
            usable += [c for c in cuts if c <= shared]
        return agreed, max(usable, default=None)

    def remember(self, text: str, cuts: tuple[int, ...]) -> None:
        with self._lock:
            self._seen.append((text, cuts))


_TRACKERS: dict[tuple[str, str], PrefixTracker] = {}
_TRACKERS_LOCK = threading.Lock()


def tracker_for(provider: str, model: str) -> PrefixTracker:
    """The process's tracker of ``model`` (jobs of one model find each other's prefixes)."""
    with _TRACKERS_LOCK:
        return _TRACKERS.setdefault((provider, model), PrefixTracker())


def anthropic_minimum(model: str) -> int:
    return next((size for start, size in ANTHROPIC_MINIMUM if model.startswith(start)), ANTHROPIC_DEFAULT_MINIMUM)


def _segments(system: str, messages: list[dict[str, Any]]) -> list[str]:
    """The prompt as the ordered texts the provider concatenates: the system prompt, then each message."""
    return [system, *(m["content"] for m in messages)]


def _flat(segments: list[str]) -> str:
    """One string whose prefixes are the prompt's prefixes (a separator keeps message boundaries apart)."""
    return "\x1e".join(segments)


def _locate(segments: list[str], flat: int) -> tuple[int, int]:
    """(segment, offset) of a position of :func:`_flat`'s string."""
    start = 0
    for index, text in enumerate(segments):
        if flat <= start + len(text):
            return index, flat - start
        start += len(text) + 1
    return len(segments) - 1, len(segments[-1])


def _snapped(segments: list[str], agreed: int) -> int | None:
    """The flat position where a stable prefix of ``agreed`` characters ends, moved back to just after a line
    break (or the end of a segment) so the text on either side splits cleanly; None when nothing is stable."""
    index, inside = _locate(segments, agreed)
    text = segments[index]
    if inside < len(text):
        newline = text.rfind("\n", 0, inside)
        if newline < 0:
            return agreed - inside - 1 if index > 0 else None
        agreed -= inside - newline - 1
    return agreed


def _block(text: str, marked: bool) -> dict[str, Any]:
    return {"type": "text", "text": text, **({"cache_control": dict(EPHEMERAL)} if marked else {})}


def anthropic_blocks(model: str, system: str, messages: list[dict[str, Any]],
                     tracker: PrefixTracker) -> tuple[Any, list[dict[str, Any]]]:
    """The ``system`` and ``messages`` fields with cache breakpoints (each where its prefix reaches the model's
    minimum): after the system prompt, at the earlier breakpoint this call shares with a recent one (a read),
    and where its agreement with the closest recent call ends (a write the next calls read). Text unchanged;
    unmarked parts stay plain strings."""
    segments = _segments(system, messages)
    flat = _flat(segments)
    agreed, reused = tracker.plan(flat)
    minimum = anthropic_minimum(model) * CHARS_PER_TOKEN
    fresh = _snapped(segments, agreed) if agreed < len(flat) else None  # a resent prompt (a retry) writes nothing
    wanted = {len(system) if system else None, reused, fresh}
    cuts = tuple(sorted(c for c in wanted if c is not None and c >= minimum))[-(MAX_BREAKPOINTS - 1):]
    tracker.remember(flat, cuts)
    marks: dict[int, list[int]] = {}
    for cut in cuts:
        index, offset = _locate(segments, cut)
        marks.setdefault(index, []).append(offset)
    shaped = [_shaped(text, marks.get(index, [])) for index, text in enumerate(segments)]
    return shaped[0], [{**message, "content": content} for message, content in zip(messages, shaped[1:])]


def _shaped(text: str, offsets: list[int]) -> Any:
    """A segment as the API takes it: the plain string, or text blocks each ending at a breakpoint offset."""
    offsets = sorted(o for o in offsets if 0 < o <= len(text))
    if not offsets:
        return text
    edges = [0, *offsets]
    blocks = [_block(text[a:b], True) for a, b in zip(edges, edges[1:])]
    return blocks + ([_block(text[offsets[-1]:], False)] if offsets[-1] < len(text) else [])


def openai_cache_key(model: str, messages: list[dict[str, Any]]) -> str:
    """A ``prompt_cache_key`` shared by the calls of one task and kind: a hash of the model, the system prompt and
    the start of the first user message (where the paper and the task begin)."""
    system = "\n".join(m["content"] for m in messages if m["role"] == "system")
    first = next((m["content"] for m in messages if m["role"] == "user"), "")
    digest = hashlib.sha256("\x1e".join((model, system, first[:KEY_CHARS])).encode("utf-8")).hexdigest()
    return "recode-" + digest[:24]
