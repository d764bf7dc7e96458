"""The release's name for the model call interface, kept for code written against it: see :mod:`agent.models.build`."""
from agent.models.build import *  # noqa: F401,F403
