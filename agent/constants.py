"""The release's name for the prompt texts, kept for code written against it: see :mod:`agent.protocols.prompts`."""
from agent.protocols.prompts import *  # noqa: F401,F403
