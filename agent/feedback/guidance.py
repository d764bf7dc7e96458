"""Guidance, in one place: the levels, which turns get feedback, which record fields a level shows, and the
dynamic raise.

A turn gets feedback when its level is above 0, its submission did not solve
the task and another turn follows. Only the ``llm`` source generates feedback
on its own, and under dynamic guidance a job that starts at level 0 can rise to
a level that shows feedback, so the run needs a feedback model then too (unless
the ceiling ``max-guidance-level`` is 0). Turn 0 is shared by the levels of a
(model, task) through the seed, whose raw feedback is generated once when some
level uses it. How the shown fields are worded is the protocol's business
(agent/protocols/); which fields a level reveals is the benchmark's, here.

Everything here is a pure function of plain values, so the config can ask
before a RunConfig exists.
"""
from __future__ import annotations

from dataclasses import dataclass

from metrics.result_format import LEVELS, MAX_LEVEL

__all__ = ["LEVELS", "MAX_LEVEL", "FeedbackPolicy", "raise_level", "shown_fields"]

# What each level reveals of a feedback record, cumulatively; ``category`` is never shown.
_REVEALED = ("interface", "description", "analysis", "actionable_feedback", "direct_code_feedback")
_SHOWN_COUNT = (0, 2, 3, 4, 5)  # per level, how many of _REVEALED it shows (L1: interface and description)


def shown_fields(level: int) -> tuple[str, ...]:
    """The record fields the CodeAgent sees at ``level``, in the order they are shown (none at L0)."""
    return _REVEALED[:_SHOWN_COUNT[max(0, min(level, MAX_LEVEL))]]


def raise_level(level: int, rate: float, best_before: float, max_level: int) -> int:
    """Dynamic guidance: one level more after a turn that did not beat the best pass rate so far."""
    return max(level, min(level + 1, max_level)) if rate <= best_before else level


@dataclass(frozen=True)
class FeedbackPolicy:
    """The parts of a run configuration that decide where feedback is given and who makes it.

    ``seed_copies_feedback``: every level's turn 0 is the seed's record with its
    raw feedback (the release copies the seed file whole), so every level waits
    for that feedback; otherwise only the levels that show it do.
    """

    levels: tuple[int, ...]
    guidance_type: str
    max_guidance_level: int
    max_turn: int
    source: str
    replays_a_run: bool = False  # feedback replayed from another level's stored run
    seed_copies_feedback: bool = False

    def gives_feedback(self, level: int, solved: bool, turn: int) -> bool:
        """Whether the turn ``turn`` at ``level`` gets feedback: level above 0, unsolved, not the last turn."""
        return level > 0 and not solved and turn < self.max_turn - 1

    def highest_level(self, start: int) -> int:
        """The highest level a job starting at ``start`` can reach (dynamic guidance raises it)."""
        return max(start, self.max_guidance_level) if self.guidance_type == "dynamic" else start

    def needs_feedback_model(self) -> bool:
        """Whether some turn of the run may ask the feedback model (a replay falls back to it)."""
        return self.source == "llm" and any(
            self.gives_feedback(self.highest_level(level), False, 0) for level in self.levels)

    def _seed_shows(self, level: int) -> bool:
        return self.source == "llm" and not self.replays_a_run and self.gives_feedback(level, False, 0)

    def seed_needs_feedback(self) -> bool:
        """Whether the shared seed needs its raw turn-0 feedback: some level of the run shows it."""
        return any(self._seed_shows(level) for level in self.levels)

    def seed_feedback_for(self, level: int) -> bool:
        """Whether a job at ``level`` takes its turn-0 feedback from the seed (and so waits for it)."""
        return self._seed_shows(level) or (self.seed_copies_feedback and self.seed_needs_feedback())
