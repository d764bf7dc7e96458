"""Nothing outlives the run: after SIGKILL of the main command alone (not its process group), every
process it started (test workers, the forkserver, the resource tracker, test runs in flight) is gone
within seconds, and the same command then resumes to the results of an uninterrupted run."""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from agent.runner.sandbox import bwrap_problem
from tests.run_support import (
    SOLVE_AT, STANDARD_RUN, WRONG_CODE, descendants, results, run_cli, start_cli, wait_for, write_config,
    write_scripts,
)

GONE_WITHIN_SEC = 5.0
MARKER = "RECODE_TEST_RUN_MARKER"
NO_BWRAP = pytest.mark.skipif(bool(bwrap_problem()), reason=f"bubblewrap unusable here: {bwrap_problem()}")
RUNS = [("processes", "off"), pytest.param("processes", "required", marks=NO_BWRAP), ("threads", "off")]


@pytest.fixture(scope="module")
def holding(tmp_path_factory) -> tuple[tuple[Path, Path], Path, dict]:
    """Scripts whose wrong answers block in the tests while a hold file exists (so a test run is surely
    in flight, and one that outlived the kill would still be there; ``hold.in`` tells it is blocked),
    the hold file, and the results of these scripts run in order without it (a sandbox hides it)."""
    root = tmp_path_factory.mktemp("holding")
    hold = root / "hold"
    wait = (f"import os, time\nif os.path.exists({str(hold)!r}):\n    try:\n"
            f"        open({str(hold) + '.in'!r}, 'w').close()\n    except OSError:\n        pass\n"
            f"    while os.path.exists({str(hold)!r}):\n        time.sleep(0.05)\n")
    scripts = write_scripts(root / "scripts", SOLVE_AT, latency=0.3, wrong_code=wait + WRONG_CODE)
    done = run_cli(write_config(root / "run.yaml", scripts, root / "out", **STANDARD_RUN), "--parallel-mode", "none")
    assert done.returncode == 0, done.stderr
    return scripts, hold, results(root / "out")


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


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def marked(marker: str, tmpdir: Path) -> dict[int, str]:
    """Live processes of this run: the harness's carry the marker variable; test runs (whose environment
    is scrubbed) name the run's private temporary folder on their command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        line = cmdline(int(entry.name))
        state = stat_of(int(entry.name))
        if state and state[0] not in "ZX" and (f"{MARKER}={marker}".encode() in environ or str(tmpdir) in line):
            found[int(entry.name)] = line
    return found


def tree_with_test_run(pid: int, timeout: float = 90.0) -> dict[int, tuple[str, str]]:
    """Descendants of ``pid`` (pid -> (start time, command line)) once a test run (pytest) is among them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tree = {child: (s[1], cmdline(child)) for child in descendants(pid) if (s := stat_of(child))}
        if any("--junitxml=" in line for _, line in tree.values()):
            return tree
        time.sleep(0.02)
    raise AssertionError(f"no test run started under {pid} within {timeout} s")


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "sandbox"), RUNS)
def test_sigkill_leaves_no_process_and_the_rerun_resumes(tmp_path: Path, mode: str, sandbox: str, holding) -> None:
    scripts, hold, reference = holding
    config = write_config(tmp_path / "run.yaml", scripts, tmp_path / "out",
                          **{**STANDARD_RUN, "parallel-mode": mode, "sandbox": sandbox})
    tmpdir = tmp_path / "private tmp"
    tmpdir.mkdir()
    marker = uuid.uuid4().hex
    hold.touch()
    try:
        main = start_cli(config, env={MARKER: marker, "TMPDIR": str(tmpdir)})
        try:
            tree = tree_with_test_run(main.pid)
            if sandbox == "off":  # blocked in the candidate: past pytest's first output, which a dead reader ends
                wait_for(hold.name + ".in", hold.parent)
            if mode == "processes":
                assert any("forkserver import main" in line for _, line in tree.values()), tree
                assert any("resource_tracker import main" in line for _, line in tree.values()), tree
            os.kill(main.pid, signal.SIGKILL)
            main.communicate(timeout=30)
        finally:
            if main.poll() is None:
                main.kill()
        deadline = time.monotonic() + GONE_WITHIN_SEC
        while time.monotonic() < deadline and (any(running(p, s) for p, (s, _) in tree.items())
                                               or marked(marker, tmpdir)):
            time.sleep(0.05)
        assert not [line for p, (s, line) in tree.items() if running(p, s)]
        assert not marked(marker, tmpdir)
    finally:
        hold.unlink()
        Path(f"{hold}.in").unlink(missing_ok=True)
    assert len(results(tmp_path / "out")) < len(reference)

    done = run_cli(config)
    assert done.returncode == 0, done.stderr
    assert results(tmp_path / "out") == reference
