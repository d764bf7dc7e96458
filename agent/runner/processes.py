"""Run one contained process: capped output, a wall-clock deadline, and an end to every process it made.

How "every process" is found, strongest first:
* a per-run pids cgroup (also caps the process count: a fork bomb stops at
  ``pids.max``): all its members are killed until it is empty;
* bubblewrap's PID namespace: killing bubblewrap kills the namespace's init
  (``--die-with-parent``), and the kernel then kills everything inside,
  including processes that called ``setsid``;
* otherwise the process group and session of the child are killed. A process
  that double-forks into a new session escapes this last fallback; it is the
  documented limit of running without a cgroup and without bubblewrap.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

READ_CHUNK = 65536
EXIT_GRACE_SEC = 2.0
CHANNEL_LIMIT = 4 * 1024 * 1024
KILL_ROUNDS = 200


class PidsCgroup:
    """A throw-away child cgroup with ``pids.max``; every process of one run lives in it."""

    def __init__(self, root: Path, max_pids: int | None) -> None:
        self.path = root / f"recode-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        if max_pids:
            (self.path / "pids.max").write_text(str(max_pids))

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def members(self) -> list[int]:
        try:
            return [int(p) for p in Path(self.procs_file).read_text().split()]
        except OSError:
            return []

    def kill_all(self) -> None:
        """SIGKILL members until none is left (a fork bomb may still be forking while we kill)."""
        for round_ in range(KILL_ROUNDS):
            members = self.members()
            if not members:
                return
            for pid in members:
                _kill(pid)
            time.sleep(min(0.0005 * 2 ** round_, 0.02))  # exiting processes usually leave within a millisecond

    def remove(self) -> None:
        for _ in range(KILL_ROUNDS):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                self.kill_all()
                time.sleep(0.01)


@dataclass(frozen=True)
class Completed:
    """What the parent observed of one run."""

    exit_code: int | None
    timed_out: bool
    output: str
    channel: bytes
    duration_sec: float


class CappedBuffer:
    """Keeps the first three quarters and the last quarter of ``limit`` bytes of a stream."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit * 3 // 4
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_limit:
            self.tail += data
            del self.tail[:-self.tail_limit]

    def text(self) -> str:
        kept = len(self.head) + len(self.tail)
        middle = f"\n[... {self.total - kept} bytes of output omitted ...]\n" if self.total > kept else ""
        return self.head.decode("utf-8", "replace") + middle + self.tail.decode("utf-8", "replace")


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def session_members(sid: int) -> list[int]:
    """Processes whose session id is ``sid`` (the child was started as a session leader)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


def end_process_tree(proc: subprocess.Popen, cgroup: PidsCgroup | None, sweep: bool) -> None:
    """Kill the child and everything it started (see the module docstring for how).

    ``sweep`` scans /proc for the child's session: only needed when neither a
    cgroup nor a PID namespace holds the run.
    """
    if cgroup is not None:
        cgroup.kill_all()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if sweep:
        for pid in session_members(proc.pid):
            _kill(pid)


def run_process(argv: list[str], *, env: dict[str, str], cwd: str, timeout_sec: float, output_limit: int,
                channel_fd: int, pass_fds: tuple[int, ...], cgroup: PidsCgroup | None, pid_namespace: bool,
                preexec: Callable[[], None] | None = None) -> Completed:
    """Start ``argv`` in a new session, read stdout+stderr and the guard channel until both close.

    ``channel_fd`` is our read end of the guard's pipe; ``pass_fds`` are the
    descriptors the child inherits (closed here once it started).
    ``pid_namespace`` says the command runs in its own PID namespace.
    """
    sweep = cgroup is None and not pid_namespace
    start = time.monotonic()
    deadline = start + timeout_sec
    output = CappedBuffer(output_limit)
    channel = bytearray()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, pass_fds=pass_fds, start_new_session=True,
                            preexec_fn=preexec)
    for fd in pass_fds:
        os.close(fd)
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "output")
    selector.register(channel_fd, selectors.EVENT_READ, "channel")
    timed_out = False
    cleaned = False
    try:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = not cleaned
                break
            for key, _ in selector.select(timeout=min(remaining, 0.2)):
                data = os.read(key.fd, READ_CHUNK)
                if not data:
                    selector.unregister(key.fileobj)
                elif key.data == "output":
                    output.add(data)
                elif len(channel) < CHANNEL_LIMIT:
                    channel += data
            if not cleaned and proc.poll() is not None:
                end_process_tree(proc, cgroup, sweep)  # leftovers may hold the pipes open
                cleaned = True
                deadline = min(deadline, time.monotonic() + EXIT_GRACE_SEC)
    finally:
        end_process_tree(proc, cgroup, sweep)
        selector.close()
        proc.stdout.close()
        os.close(channel_fd)
        proc.wait()
    return Completed(exit_code=None if timed_out else proc.returncode, timed_out=timed_out,
                     output=output.text(), channel=bytes(channel), duration_sec=time.monotonic() - start)
