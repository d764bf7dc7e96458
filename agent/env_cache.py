"""The release's name for the environment cache, kept for code written against it: see :mod:`agent.envs.cache`."""
from agent.envs.cache import *  # noqa: F401,F403
