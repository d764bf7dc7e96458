"""Feedback replayed from another level's stored run (``replay-run-feedback-level: K``)."""
from __future__ import annotations

from dataclasses import replace

from agent.feedback.records import FeedbackReply, FeedbackRequest, FeedbackSource


class ReplayFeedback:
    """Raw records of another level's run, turn by turn; ``fallback`` answers turns it lacks."""

    def __init__(self, by_turn: dict[int, list[dict]], level: int, fallback: FeedbackSource) -> None:
        self.by_turn = by_turn
        self.level = level
        self.fallback = fallback

    def __call__(self, request: FeedbackRequest) -> FeedbackReply:
        records = self.by_turn.get(request.turn)
        if records:
            return FeedbackReply(records, f"replay:L{self.level}")
        reply = self.fallback(request)
        note = f"replay level {self.level} has no feedback at turn {request.turn}"
        return replace(reply, source=f"{reply.source} ({note})")
