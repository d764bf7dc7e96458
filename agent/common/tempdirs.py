"""Private temporary folders that a killed harness does not leave behind for good.

A harness killed with SIGKILL (or by the OOM killer, or a lost machine) cannot
delete its folders, and a days-long sweep that is restarted a few times would
otherwise fill /tmp with task copies and test reports. So every folder's name
carries the pid of the process that made it (``recode-<kind>-<pid>-<random>``),
and the first folder a process makes removes those whose process is gone. A
reused pid only delays a sweep; a live process's folder is never touched.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_NAME = re.compile(r"recode-[a-z]+-(\d+)-")
_swept: set[str] = set()
_lock = threading.Lock()


def prefix(kind: str) -> str:
    """The name prefix of this process's folders of ``kind``."""
    return f"recode-{kind}-{os.getpid()}-"


def make_dir(kind: str) -> Path:
    """A new private folder (mode 0700, symlinks resolved); the caller removes it with :func:`remove_tree`."""
    root = tempfile.gettempdir()
    with _lock:
        if root not in _swept:
            _swept.add(root)
            sweep_dead(Path(root))
    return Path(os.path.realpath(tempfile.mkdtemp(prefix=prefix(kind))))


@contextmanager
def private_dir(kind: str) -> Iterator[Path]:
    """:func:`make_dir` for the length of a ``with`` block."""
    path = make_dir(kind)
    try:
        yield path
    finally:
        remove_tree(path)


def sweep_dead(root: Path) -> list[Path]:
    """Remove the folders under ``root`` made by processes that no longer exist; the removed paths."""
    removed = []
    for entry in root.glob("recode-*-*-*"):
        match = _NAME.match(entry.name)
        if match and entry.is_dir() and not entry.is_symlink() and not _alive(int(match.group(1))):
            remove_tree(entry)
            removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_tree(path: Path) -> None:
    """Delete a folder even where the candidate removed permissions on its own files."""
    def unlock(function, name: str, exc_info) -> None:
        try:
            os.chmod(os.path.dirname(name), 0o700)
            os.chmod(name, 0o700)
            function(name)
        except OSError:
            pass

    if path.exists():
        shutil.rmtree(path, onerror=unlock)
