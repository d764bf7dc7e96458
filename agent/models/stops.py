"""How an answer that ended short of complete is named and recorded (``Completion.stop``, agent/models/types.py).

One wording for the code model's and the feedback model's answers: a turn
record's ``answer_stops`` entries, and the one line saying why such an answer
is not used as if complete.
"""
from __future__ import annotations

from agent.models.types import Stop

# Stop reasons of an answer that is never used as if complete (by the improved protocol and by feedback
# parsing): cut off, refused, filtered. ``unknown`` (the provider did not say) is used: nothing says it is cut.
WITHHELD = ("length", "refusal", "content_filter")
_WHAT = {"length": "was truncated at the output limit", "refusal": "is a refusal",
         "content_filter": "was stopped by the provider's safety filter"}


def describe(stop: Stop) -> str:
    """``the answer was truncated at the output limit (length: <provider's words>)`` and the like."""
    words = (stop.provider_words or "").removeprefix(f"{stop.reason}: ")
    words = f": {words}" if words else ""
    return f"the answer {_WHAT.get(stop.reason, 'ended early')} ({stop.reason}{words})"


def withheld_problem(stop: Stop) -> str:
    """Why a code answer that ended this way is not carried out."""
    return f"{describe(stop)}, so nothing of it was applied"


def stop_entry(role: str, purpose: str, step: int | None, stop: Stop, text: str) -> dict:
    """A turn record's ``answer_stops`` entry: an answer that ended short of complete, with its raw text.
    ``applied`` says whether the harness acted on it as it came (the release's way) or withheld it."""
    return {"role": role, "purpose": purpose, "step": step, "reason": stop.reason,
            "provider_words": stop.provider_words, "applied": True, "text": text}
