"""The release's name for the CodeAgent's actions, kept for code written against it: see :mod:`agent.task.action`."""
from agent.task.action import *  # noqa: F401,F403
