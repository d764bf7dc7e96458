"""The harness's version, read where it is declared (pyproject.toml) so there is one place to change it."""
from __future__ import annotations

import re
from functools import lru_cache
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
DISTRIBUTION = "recode-h-harness"


@lru_cache(maxsize=1)
def harness_version() -> str:
    """This checkout's version, else the installed package's: part of a job's identity and of run records."""
    try:
        found = re.search(r'^version = "([^"]+)"', PYPROJECT.read_text(encoding="utf-8"), re.M)
    except OSError:
        found = None
    if found:
        return found[1]
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
