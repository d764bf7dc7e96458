"""Feedback: the records a researcher gives on an attempt, and the sources that produce them.

A source turns one FeedbackRequest (what the researcher sees after a
submission) into a FeedbackReply holding RAW records; the job's level decides
later how much of each record the CodeAgent is shown (agent/feedback/guidance.py) and
its protocol how that is worded (agent/protocols/). Sources: ``llm`` (a model,
agent/feedback/llm.py), ``file`` (human-written records), ``interactive`` (a
person at the terminal) and the records of another level's run (replay).
"""
from agent.feedback.file import FileFeedback, load_feedback_file
from agent.feedback.interactive import InteractiveFeedback, unified_diff
from agent.feedback.llm import FeedbackStyle, LLMFeedback, parse_feedback
from agent.feedback.records import (
    CATEGORIES, FIELDS, NO_FEEDBACK, FeedbackFormatError, FeedbackReply, FeedbackRequest, FeedbackSource,
    validate_records,
)
from agent.feedback.replay import ReplayFeedback

# The values of ``feedback-source``: what the configuration accepts. Each is made per job where a job's parts
# are at hand (agent/job/parts.py, MAKERS); the browser form's source lives in agent/web/.
SOURCES = ("llm", "file", "interactive", "web")

__all__ = [
    "CATEGORIES", "FIELDS", "NO_FEEDBACK", "FeedbackFormatError", "FeedbackReply", "FeedbackRequest",
    "FeedbackSource", "FeedbackStyle", "FileFeedback", "InteractiveFeedback", "LLMFeedback", "ReplayFeedback",
    "SOURCES", "load_feedback_file", "parse_feedback", "unified_diff", "validate_records",
]
