"""The release's name for the dataset reader, kept for code written against it: see :mod:`agent.task.dataset`."""
from agent.task.dataset import *  # noqa: F401,F403
