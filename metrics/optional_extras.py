"""Lazy imports of the optional extras (codebleu, torch, transformers) with a one-line fix when absent."""
from __future__ import annotations

import importlib
from types import ModuleType

EXTRAS_HINT = "pip install -r requirements-extras.txt"


class ExtraUnavailable(Exception):
    """An optional extra (package or model) cannot be used here; the message names the fix."""


def import_extra(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise ExtraUnavailable saying which metric needs it and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ExtraUnavailable(f"{purpose} needs the optional package '{module}' ({exc}); {EXTRAS_HINT}") from None
