"""Whether a package index answers at all, asked once per run with a short connect.

uv asks every index it is given for every package, so one index that cannot be reached (PyTorch's CPU
index on a machine that reaches only PyPI) fails the whole build after its retries. A TCP connect to the
index's host (or to the proxy the environment names for it) with a timeout tells that in a few seconds,
without downloading anything. A run's worker processes share the answer through a small record in the
environment folder (under a file lock, so one of them asks and the others wait for its answer), kept for
:data:`SHARED_FOR_SEC`; within a process it is kept for the process's life.
"""
from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from filelock import FileLock

from agent.common.atomic_file import atomic_write_text

PROBE_TIMEOUT_SEC = 3.0
SHARED_FOR_SEC = 600.0  # long enough for a run's first builds, short enough that a fixed network is seen soon
_DEFAULT_PORTS = {"http": 80, "https": 443}
_answers: dict[tuple[str, int], bool] = {}
_lock = threading.Lock()


def _endpoint(url: str) -> tuple[str, int] | None:
    """(host, port) a client connects to for ``url``: the proxy's when one applies; None for non-HTTP URLs
    (``file://`` mirrors are not probed: reading them needs no connection)."""
    parts = urlsplit(url)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname):
        proxied = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if proxied.hostname:
            return proxied.hostname, proxied.port or _DEFAULT_PORTS.get(proxied.scheme, 80)
    return parts.hostname, parts.port or _DEFAULT_PORTS[parts.scheme]


def _connects(host: str, port: int, timeout: float) -> bool:
    """A TCP connection opens within ``timeout``; the name lookup, which ignores socket timeouts, counts too."""
    answer: list[bool] = []

    def attempt() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                answer.append(True)
        except OSError:
            answer.append(False)

    thread = threading.Thread(target=attempt, name="recode-index-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answer and answer[0])


def _read(record: Path) -> dict:
    try:
        known = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _ask(endpoint: tuple[str, int], record: Path | None, timeout: float) -> tuple[bool, bool]:
    """(answers, asked now): the record's recent answer if another process of the run already asked."""
    if record is None:
        return _connects(*endpoint, timeout), True
    key = "%s:%d" % endpoint
    record.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{record}.lock"):
        known = _read(record)
        entry = known.get(key)
        if isinstance(entry, dict) and 0 <= time.time() - float(entry.get("at", 0)) < SHARED_FOR_SEC:
            return bool(entry.get("answers")), False
        answer = _connects(*endpoint, timeout)
        atomic_write_text(record, json.dumps({**known, key: {"answers": answer, "at": time.time()}}, indent=1))
        return answer, True


def index_answers(url: str, record: Path | None = None, timeout: float = PROBE_TIMEOUT_SEC) -> tuple[bool, bool]:
    """(the index of ``url`` accepts a connection, this call is the one that asked): asked once per host and
    port in this process, and, with ``record``, once per :data:`SHARED_FOR_SEC` among the processes sharing it."""
    endpoint = _endpoint(url)
    if endpoint is None:
        return True, False
    with _lock:
        if endpoint in _answers:
            return _answers[endpoint], False
        answer, asked = _ask(endpoint, record, timeout)
        _answers[endpoint] = answer
        return answer, asked
