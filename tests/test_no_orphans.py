"""Nothing outlives the run: after SIGKILL of the main command alone (not its process group), every
process it started (test workers, the forkserver, the resource tracker, test runs in flight) is gone
within seconds, and the same command then resumes to an uninterrupted run's results."""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from agent.runner.sandbox import bwrap_problem
from tests.run_support import (
    SOLVE_AT, STANDARD_RUN, reference_results, results, run_cli, start_cli, write_config, write_scripts,
)
from tests.test_resume import descendants

GONE_WITHIN_SEC = 5.0
MARKER = "RECODE_TEST_RUN_MARKER"
SANDBOXES = ["off", pytest.param("required", marks=pytest.mark.skipif(
    bool(bwrap_problem()), reason=f"bubblewrap unusable here: {bwrap_problem()}"))]


def stat_of(pid: int) -> tuple[str, str] | None:
    """(state, start time) of ``pid``; None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[0], fields[19]


def running(pid: int, start: str) -> bool:
    """``pid`` is still the process that started at ``start`` and has not exited (zombies have)."""
    found = stat_of(pid)
    return found is not None and found[1] == start and found[0] not in "ZX"


def ours(marker: str, tmpdir: Path) -> dict[int, str]:
    """Live processes of this run: the harness's carry the marker variable; test runs (whose environment
    is scrubbed) name the run's private temporary folder on their command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"{MARKER}={marker}".encode() in environ.split(b"\0") or str(tmpdir) in cmdline:
            found[int(entry.name)] = cmdline
    return {pid: cmd for pid, cmd in found.items() if (s := stat_of(pid)) and s[0] not in "ZX"}


def wait_for_test_run(pid: int, timeout: float = 90.0) -> dict[int, str]:
    """Descendants of ``pid`` (pid -> start time) at a moment when a test run is in flight."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tree = descendants(pid)
        if any(b"--junitxml=" in _cmdline(child) for child in tree):  # pytest's argv in a test run
            return {child: s[1] for child in tree if (s := stat_of(child))}
        time.sleep(0.02)
    raise AssertionError(f"no test run started under {pid} within {timeout} s")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_sigkill_leaves_no_process_and_the_rerun_resumes(tmp_path: Path, sandbox: str, tmp_path_factory) -> None:
    reference = reference_results(tmp_path_factory.getbasetemp())
    scripts = write_scripts(tmp_path / "scripts", SOLVE_AT, latency=0.3)
    config = write_config(tmp_path / "run.yaml", scripts, tmp_path / "out",
                          **{**STANDARD_RUN, "parallel-mode": "processes", "sandbox": sandbox})
    tmpdir = tmp_path / "private tmp"
    tmpdir.mkdir()
    marker = uuid.uuid4().hex
    main = start_cli(config, env={MARKER: marker, "TMPDIR": str(tmpdir)})
    try:
        tree = wait_for_test_run(main.pid)
        names = {pid: _cmdline(pid).replace(b"\0", b" ").decode(errors="replace")[:300] for pid in tree}
        assert any("forkserver import main" in name for name in names.values()), names
        assert any("resource_tracker import main" in name for name in names.values()), names
        os.kill(main.pid, signal.SIGKILL)
        main.communicate(timeout=30)
    finally:
        if main.poll() is None:
            main.kill()
    deadline = time.monotonic() + GONE_WITHIN_SEC
    while time.monotonic() < deadline and (any(running(p, s) for p, s in tree.items()) or ours(marker, tmpdir)):
        time.sleep(0.05)
    assert not [names[p] for p, s in tree.items() if running(p, s)]
    assert not ours(marker, tmpdir)
    assert len(results(tmp_path / "out")) < len(reference)

    done = run_cli(config)
    assert done.returncode == 0, done.stderr
    assert results(tmp_path / "out") == reference
