"""Which turns get feedback: the one rule the config, the seeds and every job follow.

A turn gets feedback when its level is above 0, its submission did not solve
the task and another turn follows. Only the ``llm`` source generates feedback,
and under dynamic guidance a job that starts at level 0 can rise to a level
that shows feedback, so the run needs a feedback model then too (unless the
ceiling ``max-guidance-level`` is 0). Turn 0 is shared by every level through
the seed, whose raw feedback is generated once when some level shows it.

Everything here is a pure function of plain values, so the config can ask
before a RunConfig exists.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.config import RunConfig


@dataclass(frozen=True)
class FeedbackPolicy:
    """The parts of a run configuration that decide where feedback is given and who makes it."""

    levels: tuple[int, ...]
    guidance_type: str
    max_guidance_level: int
    max_turn: int
    source: str
    replays_a_run: bool = False  # feedback replayed from another level's stored run

    @classmethod
    def of(cls, cfg: RunConfig) -> FeedbackPolicy:
        return cls(cfg.guidance_levels, cfg.guidance_type, cfg.max_guidance_level, cfg.max_turn,
                   cfg.feedback_source, cfg.replay_run_feedback_level is not None)

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

    def seed_feedback_for(self, level: int) -> bool:
        """Whether a job at ``level`` takes its turn-0 feedback from the seed's generated records."""
        return self.source == "llm" and not self.replays_a_run and self.gives_feedback(level, False, 0)

    def seed_needs_feedback(self) -> bool:
        """Whether the shared seed needs its raw turn-0 feedback: some level of the run shows it."""
        return any(self.seed_feedback_for(level) for level in self.levels)
