"""Human feedback from the browser (``feedback-source: web``): a local form per turn that needs feedback."""
from agent.web.source import WebFeedback, WebFeedbackError, shared_server

__all__ = ["WebFeedback", "WebFeedbackError", "shared_server"]
