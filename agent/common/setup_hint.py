"""A missing dependency ends an entry command in one line naming the set-up command, not a traceback.

Entry files call :func:`name_missing_modules` right after making this checkout importable; it imports
nothing outside the standard library, so it works before any requirement is installed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType

CHECKOUT = Path(__file__).resolve().parents[2]
OWN_PACKAGES = {"agent", "metrics", "scripts", "ablation", "tests"}  # a module of ours missing is a bug
EXIT_USER_ERROR = 2


def setup_line(module: str) -> str:
    """The one line for a missing third-party ``module``."""
    return (f"error: the Python module '{module}' is not installed; set up with: python -m pip install -r "
            f"{CHECKOUT / 'requirements.txt'} (optional parts: requirements-extras.txt; see README, Set-up)")


def _hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
    name = getattr(error, "name", None) or ""
    if not issubclass(kind, ModuleNotFoundError) or not name or name.split(".")[0] in OWN_PACKAGES:
        sys.__excepthook__(kind, error, trace)
        return
    print(setup_line(name.split(".")[0]), file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_USER_ERROR)  # an excepthook cannot choose the exit code otherwise


def name_missing_modules() -> None:
    """Install the hook for the rest of this process."""
    sys.excepthook = _hook
