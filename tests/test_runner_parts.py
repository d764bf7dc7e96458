"""Pure parts of the runner: environment scrubbing, command lines, verdict rules, the static check."""
from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from agent.runner.lint import raw_memory, reference_access
from agent.runner.verdict import GuardRecord, failed_run, judge, read_channel
from agent.runner.processes import CappedBuffer
from agent.runner.sandbox import (
    bwrap_argv,
    bwrap_failure,
    drop_privileges,
    limits_prefix,
    pth_folders,
    scrubbed_env,
    unreadable_problem,
    untraversable_folders,
)

REPO = Path(__file__).resolve().parents[1]

KEY = b"k" * 32
REPORT = (b'<testsuites><testsuite name="pytest" tests="2" errors="0" failures="1" skipped="0">'
          b'<testcase classname="test" name="test_add"/>'
          b'<testcase classname="test" name="test_scale"><failure message="assert 1 == 2">trace</failure></testcase>'
          b'</testsuite></testsuites>')
EXPECTED = ("test_add", "test_scale")


def seal_line(body: dict, key: bytes = KEY) -> str:
    text = json.dumps(body, sort_keys=True)
    return f"seal {text} {hmac.new(key, text.encode(), hashlib.sha256).hexdigest()}"


def record(exitstatus: int = 1, report: bytes = REPORT, tests=(("test", "test_add", True), ("test", "test_scale", False)),
           extra: str = "", flags: tuple[str, ...] = ()) -> GuardRecord:
    body = {"exitstatus": exitstatus, "junit_sha256": hashlib.sha256(report).hexdigest(),
            "tests": [list(t) for t in tests], "flags": list(flags)}
    return read_channel(f"hello\n{extra}{seal_line(body)}\n".encode(), KEY)


def test_scrubbed_env_keeps_only_the_allow_list() -> None:
    env = scrubbed_env({"PATH": "/usr/bin", "OPENAI_API_KEY": "sk", "GITHUB_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
                        "LANG": "en_US.UTF-8", "HF_TOKEN": "h", "OMP_NUM_THREADS": "1", "SSH_AUTH_SOCK": "/x"},
                       home="/run/home", tmpdir="/tmp", python_bin="/env/bin", extra={"PYTHONPATH": "/ws"})
    assert env == {"PATH": "/env/bin:/usr/bin", "LANG": "en_US.UTF-8", "OMP_NUM_THREADS": "1", "HOME": "/run/home",
                   "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": "/ws"}


def test_bwrap_argv_hides_then_shows_then_binds(tmp_path: Path) -> None:
    if str(REPO).startswith("/tmp/"):
        pytest.skip("needs a hidden folder outside /tmp: the checkout is under /tmp")
    guard, run = REPO / "agent" / "runner" / "pytest_guard", tmp_path / "run"
    (run / "wd").mkdir(parents=True)
    argv = bwrap_argv("bwrap", run_dir=str(run), workdir=str(run / "wd"), hidden=[str(REPO), str(REPO / "agent")],
                      visible=[str(guard), "/usr"], readonly_files=[str(run / "wd" / "canonical.py")], tmp_size_mb=None)
    joined = " ".join(argv)
    assert argv[:5] == ["bwrap", "--ro-bind", "/", "/", "--dev"] and argv[-1] == "--"
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session", "--cap-drop ALL",
                 "--perms 1777 --tmpfs /tmp", f"--chdir {run / 'wd'}"):
        assert flag in joined
    assert f"--tmpfs {REPO / 'agent'} " not in joined  # already inside the hidden checkout
    assert joined.index(f"--tmpfs {REPO}") < joined.index(f"--ro-bind {guard} {guard}") < joined.index(f"--bind {run}")
    assert joined.index(f"--bind {run} {run}") < joined.index(f"--ro-bind {run / 'wd' / 'canonical.py'}")
    assert "--ro-bind /usr /usr" not in joined  # not hidden, so nothing to mount back
    assert f"--tmpfs {run / 'wd' / '__pycache__'} --remount-ro {run / 'wd' / '__pycache__'}" in joined
    assert f"--perms 0755 --tmpfs {REPO}" in joined  # an unprivileged test user can traverse it


def test_bwrap_argv_mounts_back_what_lives_under_tmp(tmp_path: Path) -> None:
    """A venv under /tmp is mounted into the private /tmp; a hidden folder under /tmp needs no mount of its own."""
    venv, dataset, run = tmp_path / "venv", tmp_path / "dataset", tmp_path / "run"
    for folder in (venv, dataset, run):
        folder.mkdir()
    argv = bwrap_argv("bwrap", run_dir=str(run), workdir=str(run), hidden=[str(dataset)], visible=[str(venv)],
                      readonly_files=[], tmp_size_mb=None)
    joined = " ".join(argv)
    assert f"--tmpfs {dataset}" not in joined
    assert f"--perms 0755 --dir {tmp_path} --ro-bind {venv} {venv}" in joined
    assert joined.index("--tmpfs /tmp") < joined.index(f"--ro-bind {venv}") < joined.index(f"--bind {run} {run}")


def test_untraversable_folders_and_unreadable_paths(tmp_path: Path) -> None:
    locked, inner = tmp_path / "locked", tmp_path / "locked" / "env"
    inner.mkdir(parents=True)
    locked.chmod(0o700)
    assert str(locked) in untraversable_folders([str(inner)])
    assert unreadable_problem([str(inner)]) is None
    inner.chmod(0o700)
    problem = unreadable_problem([str(inner)])
    assert str(inner) in problem and "0700" in problem and "chmod -R o+rX" in problem
    assert "No such file" in unreadable_problem([str(tmp_path / "gone")])
    assert bwrap_failure("noise\nbwrap: Can't find source path /x/env: No such file or directory\n") == \
        "bwrap: Can't find source path /x/env: No such file or directory"


def test_pth_folders_follow_editable_installs(tmp_path: Path) -> None:
    site, project = tmp_path / "env" / "lib" / "python3.11" / "site-packages", tmp_path / "src" / "project"
    site.mkdir(parents=True)
    project.mkdir(parents=True)
    (site / "project.pth").write_text(f"{project}\n# comment\nimport sitecustom_hook\n{tmp_path / 'missing'}\n")
    assert pth_folders((str(tmp_path / "env"),)) == (str(project),)


def test_bwrap_argv_mount_points_gpus_and_caps_left_to_setpriv(tmp_path: Path) -> None:
    hidden, deep, run = tmp_path / "hidden", tmp_path / "hidden/a/b/env", tmp_path / "run"
    for folder in (deep, run):
        folder.mkdir(parents=True)
    argv = bwrap_argv("bwrap", run_dir=str(run), workdir=str(run), hidden=[str(hidden)], visible=[str(deep)],
                      readonly_files=[], tmp_size_mb=None, drop_caps=False, devices=["/dev/nvidia0"])
    joined = " ".join(argv)
    assert "--dev /dev --proc /proc --dev-bind /dev/nvidia0 /dev/nvidia0" in joined
    assert f"--perms 0755 --dir {hidden / 'a'} --perms 0755 --dir {hidden / 'a/b'} --ro-bind {deep} {deep}" in joined
    assert "--cap-drop" not in argv
    assert drop_privileges("/usr/bin/setpriv", 2000000123) == [
        "/usr/bin/setpriv", "--reuid=2000000123", "--regid=2000000123", "--clear-groups", "--inh-caps=-all",
        "--bounding-set=-all", "--"]


def test_limits_prefix_joins_cgroup_then_sets_rlimits() -> None:
    assert limits_prefix(memory_mb=None, nproc=None, cgroup_procs=None, prlimit="/usr/bin/prlimit") == []
    prefix = limits_prefix(memory_mb=2, nproc=10, cgroup_procs="/cg/cgroup.procs", prlimit="/usr/bin/prlimit")
    assert prefix == ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', "/cg/cgroup.procs",
                      "/usr/bin/prlimit", "--as=2097152", "--fsize=2097152", "--nproc=10", "--"]
    assert limits_prefix(memory_mb=2, nproc=None, cgroup_procs=None, prlimit=None) == []


def test_capped_buffer_keeps_head_and_tail() -> None:
    buffer = CappedBuffer(100)
    for _ in range(50):
        buffer.add(b"0123456789")
    text = buffer.text()
    assert text.startswith("0123456789") and text.endswith("789") and "400 bytes of output omitted" in text


def test_channel_accepts_only_the_keyed_seal() -> None:
    body = {"exitstatus": 0, "junit_sha256": None, "tests": [], "flags": []}
    forged = read_channel(f"hello\n{seal_line(body, key=b'x' * 32)}\n".encode(), KEY)
    assert forged.seal is None and "forged" in forged.problem
    twice = read_channel(f"hello\n{seal_line(body)}\n{seal_line(body)}\n".encode(), KEY)
    assert twice.seal is None and "more than one seal" in twice.problem
    flagged = read_channel(f"hello\nflag opens canonical.py\n{seal_line(body)}\n".encode(), KEY)
    assert flagged.hello and flagged.flags == ("opens canonical.py",) and flagged.seal == body


def test_trusted_report_gives_counts_and_messages() -> None:
    result = judge(expected=EXPECTED, exit_code=1, junit=REPORT, record=record(), duration=1.0, output="")
    assert (result["status"], result["tests"], result["failures"], result["errors"]) == ("failed", 2, 1, 0)
    assert result["test_summary"] == {"test_add": True, "test_scale": False}
    assert result["failure_messages"] == ["test_scale: assert 1 == 2\ntrace"]


@pytest.mark.parametrize("kwargs, status, reason", [
    ({"exit_code": 0}, "error", "disagrees with pytest's own exit status"),
    ({"junit": REPORT.replace(b"<failure", b"<x").replace(b"</failure>", b"</x>")}, "error",
     "changed after pytest wrote it"),
    ({"junit": None}, "error", "missing"),
    ({"record": record(tests=(("test", "test_add", False), ("test", "test_scale", False)))}, "tampered",
     "tampering: the report says test_add passed but the guard saw it fail, end early or never run"),
    ({"record": record(exitstatus=0), "exit_code": 0}, "error", "contradicts the report"),
    ({"record": record(extra="flag target.py:3 sets sys.settrace\n")}, "tampered",
     "tampering: target.py:3 sets sys.settrace"),
    ({"record": record(flags=("target.py:4 writes numpy.testing.assert_allclose",))}, "tampered",
     "tampering: target.py:4 writes numpy.testing.assert_allclose"),
    ({"record": read_channel(b"hello\n", KEY)}, "error", "ended before pytest finished"),
])
def test_untrusted_evidence_is_not_passed(kwargs: dict, status: str, reason: str) -> None:
    """Evidence that does not hold together is an error; a flag or a forged outcome is tampering, named."""
    args = {"expected": EXPECTED, "exit_code": 1, "junit": REPORT, "record": record(), "duration": 1.0, "output": ""}
    result = judge(**{**args, **kwargs})
    assert result["status"] == status and reason in result["failure_messages"][0]
    assert result["failure_messages"][0].startswith("session: tampering: ") == (status == "tampered")
    assert result["errors"] == 2 and result["test_summary"] == {"test_add": False, "test_scale": False}


def test_failed_run_zeroes_every_expected_case() -> None:
    result = failed_run(EXPECTED, "timeout", "timed out", output="line1\nline2")
    assert (result["tests"], result["errors"], result["status"]) == (2, 2, "timeout")
    assert result["failure_messages"] == ["session: timed out\nline1\nline2"]


@pytest.mark.parametrize("source, flagged", [
    ("from canonical import *\n", True),
    ("import canonical as ref\n", True),
    ("from . import canonical\n", True),
    ("import importlib\nm = importlib.import_module('canonical')\n", True),
    ("m = __import__('canonical')\n", True),
    ("SRC = open('/x/canonical.py').read()\n", True),
    ("MODE = 'canonical'\ndef canonical_form(x):\n    return x\n", False),
    ("# reimplements the canonical correlation\nimport numpy\n", False),
    ("def broken(:\n", False),
])
def test_reference_access(source: str, flagged: bool) -> None:
    assert bool(reference_access(source)) is flagged


@pytest.mark.parametrize("source, found", [
    ("class A:\n    @property\n    def __array_interface__(self):\n        return {}\n", ["t.py:1 builds a raw memory view (A)"]),
    ("def f():\n    class B:\n        __array_struct__ = None\n", ["t.py:2 builds a raw memory view (B)"]),
    ("class C:\n    def __init__(self):\n        self.__array_interface__ = {}\n", []),  # an instance attribute
    ("x = a.__array_interface__\n", []),  # reading one is not giving one
    ("if __name__ == '__main__':\n    class D:\n        __array_interface__ = {}\n", []),
    ("class E(:\n    __array_interface__ = {}\n", []),
])
def test_raw_memory_interfaces_are_named(source: str, found: list[str]) -> None:
    assert raw_memory(source, "t.py") == found
