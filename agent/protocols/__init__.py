"""The protocols a run can follow, by name (``protocol:`` in the config): how the code model and the feedback
model are talked to. ``release`` reproduces the authors' harness call by call (the default: scores comparable
with the paper's); ``improved`` is ours (agent/protocols/improved.py says how it differs)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Callable

from agent.protocols.base import RunProtocol
from agent.protocols.improved import ImprovedProtocol
from agent.protocols.release import ReleaseProtocol
from agent.protocols.release_texts import load_release_texts

PROTOCOLS: dict[str, Callable[..., RunProtocol]] = {
    "release": lambda release_prompts, memory_threshold, memory_to_keep: ReleaseProtocol(
        _texts(release_prompts), memory_threshold),
    "improved": lambda release_prompts, memory_threshold, memory_to_keep: ImprovedProtocol(
        memory_threshold, memory_to_keep),
}
DEFAULT_PROTOCOL = "release"
_texts = lru_cache(maxsize=None)(load_release_texts)  # a checkout is parsed once per process


def make_protocol(name: str, *, release_prompts: Path | None = None, memory_threshold: int = 15,
                  memory_to_keep: int = 10) -> RunProtocol:
    """The protocol ``name`` with the run's memory settings (and, for the release's, its texts)."""
    return PROTOCOLS[name](release_prompts, memory_threshold, memory_to_keep)
