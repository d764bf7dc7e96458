"""Whole-file writes that readers see as the old or the new content, never a mix.

Results, seeds, run records, environment markers, dataset rows and workspace
files all go through here: a temporary file beside the target, then
``os.replace``. ``durable`` adds an fsync for what must survive a crash (result
pickles); scratch files in private workspaces skip it, as it costs milliseconds
on the test runner's hot path.
"""
from __future__ import annotations

import os
import time
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically; the temp name is unique per process and call."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """``atomic_write_bytes`` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)
