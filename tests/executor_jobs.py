"""Job functions for the executor tests: importable by module name, so every backend can ship them."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def square_or_fail(value: int, report: Callable[[dict], None]) -> int:
    """Reports progress, then fails for 3 and returns value**2 otherwise."""
    report({"value": value})
    if value == 3:
        raise ValueError(f"job {value} failed on purpose")
    return value * value


def die_once(marker: str) -> int:
    """Kills its own worker process the first time (as a lost node would), succeeds when retried."""
    path = Path(marker)
    if not path.exists():
        path.write_text("died once")
        os._exit(1)
    return os.getpid()
