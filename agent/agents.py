"""The release's name for the CodeAgent and the HumanAgent, kept for code written against it: agent.job.agents."""
from agent.job.agents import *  # noqa: F401,F403
