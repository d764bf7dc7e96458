"""Shared test setup. Environments: tests use this interpreter, never build conda/uv envs."""
import os

os.environ.setdefault("RECODE_ENV_BACKEND", "current")
