"""Whether a package index answers at all, asked once per run with a short connect.

uv asks every index it is given for every package, so one index that cannot be reached (PyTorch's CPU
index on a machine that reaches only PyPI) fails the whole build after its retries. A TCP connect to the
index's host (or to the proxy the environment names for it) with a timeout tells that in at most a few
seconds, without downloading anything; the answer is kept for the rest of the process.
"""
from __future__ import annotations

import socket
import threading
import urllib.request
from urllib.parse import urlsplit

PROBE_TIMEOUT_SEC = 3.0
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


def index_answers(url: str, timeout: float = PROBE_TIMEOUT_SEC) -> bool:
    """The index of ``url`` accepts a connection (asked once per host and port in this process)."""
    endpoint = _endpoint(url)
    if endpoint is None:
        return True
    with _lock:
        if endpoint not in _answers:
            _answers[endpoint] = _connects(*endpoint, timeout)
        return _answers[endpoint]
