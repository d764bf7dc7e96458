"""Claiming jobs on a shared output folder, so each job is done by one process at a time, on one machine or
several sharing the folder (NFS included).

A key's claims live in ``<folder>/<key>/`` as numbered generation files.
The holder of a key is the writer of its highest generation, while that file
is not released and its holder is alive: on this machine (same host and boot
id) a holder whose process is gone is dead at once; on another machine, when
its heartbeat (the file's mtime, touched by :meth:`Claims.renew`) is older
than the lease time. A claim creates the next generation with ``link()``,
which is atomic on local file systems and NFS alike, so of several processes
racing for a key exactly one wins, and a dead holder's key is taken over by
exactly one. Generations only grow (a release marks its file released), so a
slow racer can never create a generation below the current one. Clocks of
the machines are assumed to agree to well within the lease time (NTP).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TTL_SEC = 120.0
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_GENERATION = re.compile(r"^\d{12}$")


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: enough to tell, from any machine, whether it is still there."""

    host: str
    boot_id: str
    pid: int
    start: str  # the process's start time (clock ticks since boot): a reused pid has another

    @staticmethod
    def this_process() -> Holder:
        return Holder(socket.gethostname(), _read(BOOT_ID).strip(), os.getpid(), process_start(os.getpid()) or "")


@dataclass
class Lease:
    """A claim held by this process; ``lost`` is set once a renewal finds it taken over."""

    key: str
    path: Path
    token: str
    ttl_sec: float
    previous: dict[str, Any] = field(default_factory=dict, compare=False)  # the generation it followed, if any
    lost: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)


def process_start(pid: int) -> str | None:
    """Start time of a running process (clock ticks since boot); None once it has exited, zombies included.
    With the pid it names one process for good: a reused pid has a later start time."""
    fields = _read(Path(f"/proc/{pid}/stat")).rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 and fields[0] not in "ZXx" else None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def key_folder(key: str) -> str:
    """A folder name for ``key``: readable, and unique through a hash of the key."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("._")[:80]
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


class Claims:
    """Leases on keys under ``folder`` for ``holder`` (default: this process)."""

    def __init__(self, folder: Path, ttl_sec: float = DEFAULT_TTL_SEC, holder: Holder | None = None) -> None:
        self.folder = Path(folder)
        self.ttl_sec = ttl_sec
        self.holder = holder or Holder.this_process()

    def claim(self, key: str) -> Lease | None:
        """The lease on ``key``, or None while another live holder has it."""
        where = self.folder / key_folder(key)
        where.mkdir(parents=True, exist_ok=True)
        while True:
            current = _generations(where)
            held = self._held(current[-1]) if current else False
            if held is None:
                continue  # removed by a newer claim meanwhile: look again
            if held:
                return None
            lease = self._create(key, where / f"{(int(current[-1].name) if current else 0) + 1:012d}",
                                 _record(current[-1]) if current else {})
            if lease is not None:
                for older in current:
                    older.unlink(missing_ok=True)
                return lease

    def renew(self, lease: Lease) -> bool:
        """Refresh the heartbeat; False (and ``lease.lost`` set) when the lease was taken over."""
        current = _generations(lease.path.parent)
        if not current or current[-1] != lease.path or _record(lease.path).get("token") != lease.token:
            lease.lost.set()
            return False
        os.utime(lease.path)
        return True

    def release(self, lease: Lease) -> None:
        """Give the key back (its generation stays, marked released, so generations keep growing)."""
        if _record(lease.path).get("token") == lease.token:
            _write_new(lease.path.with_name(f".{lease.path.name}.{lease.token}"),
                       {**_record(lease.path), "released": True, "released_at": time.time()}, replace=lease.path)

    def holder_of(self, key: str) -> dict[str, Any] | None:
        """The live holder's record of ``key`` (host, pid, ...), None when nobody holds it."""
        current = _generations(self.folder / key_folder(key))
        return _record(current[-1]) if current and self._held(current[-1]) is True else None

    @contextmanager
    def holding(self, lease: Lease) -> Iterator[Lease]:
        """Renew ``lease`` while the block runs, then release it; a job should check ``lease.lost`` before
        writing what only the holder may write."""
        heartbeat = Heartbeat(self)
        heartbeat.hold(lease)
        try:
            yield lease
        finally:
            heartbeat.close()

    def _held(self, path: Path) -> bool | None:
        """Whether generation file ``path`` is a live claim; None when it vanished (a newer claim removed it).
        An unreadable one (a damaged file) holds until its heartbeat expires."""
        record = _record(path)
        if not record and not path.exists():
            return None
        if record.get("released"):
            return False
        holder = record.get("holder", {})
        if (holder.get("host"), holder.get("boot_id")) == (self.holder.host, self.holder.boot_id):
            if process_start(int(holder.get("pid", 0))) != holder.get("start"):
                return False  # its process is gone (or the pid is another process's now)
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return None
        return age <= float(record.get("ttl_sec", self.ttl_sec))

    def _create(self, key: str, path: Path, previous: dict[str, Any]) -> Lease | None:
        token = secrets.token_hex(16)
        record = {"key": key, "token": token, "ttl_sec": self.ttl_sec, "holder": asdict(self.holder),
                  "claimed_at": time.time()}
        return Lease(key, path, token, self.ttl_sec, previous) if _write_new(
            path.with_name(f".{path.name}.{token}"), record, link=path) else None


class Heartbeat:
    """Keeps the leases a process holds alive from one thread (a renewal every third of the lease time), so a
    driver with hundreds of jobs in flight runs one heartbeat, not one per job."""

    def __init__(self, claims: Claims) -> None:
        self.claims = claims
        self._leases: dict[str, Lease] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="claims heartbeat", daemon=True)
        self._thread.start()

    def hold(self, lease: Lease) -> None:
        with self._guard:
            self._leases[lease.token] = lease

    def drop(self, lease: Lease) -> None:
        """Stop renewing ``lease`` and release it."""
        with self._guard:
            self._leases.pop(lease.token, None)
        self.claims.release(lease)

    def close(self) -> None:
        """Release every lease still held (a run that ends, or stops on an interrupt)."""
        self._stop.set()
        self._thread.join()
        with self._guard:
            leases, self._leases = list(self._leases.values()), {}
        for lease in leases:
            self.claims.release(lease)

    def _beat(self) -> None:
        while not self._stop.wait(self.claims.ttl_sec / 3):
            with self._guard:
                leases = list(self._leases.values())
            for lease in leases:
                self.claims.renew(lease)


def _generations(where: Path) -> list[Path]:
    try:
        return sorted(p for p in where.iterdir() if _GENERATION.match(p.name))
    except FileNotFoundError:
        return []


def _record(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_new(temp: Path, record: dict[str, Any], *, link: Path | None = None, replace: Path | None = None) -> bool:
    """Write ``record`` to ``temp`` durably, then ``link`` it (exclusive: False if taken) or ``replace`` with it."""
    with open(temp, "x", encoding="utf-8") as handle:
        handle.write(json.dumps(record))
        handle.flush()
        os.fsync(handle.fileno())
    try:
        if replace is not None:
            os.replace(temp, replace)
            return True
        try:
            os.link(temp, link)
        except FileExistsError:
            return False
        except OSError as error:  # NFS may report a failure for a link it made: the count tells
            if error.errno == errno.EEXIST or os.stat(temp).st_nlink != 2:
                return False
        return True
    finally:
        temp.unlink(missing_ok=True)
