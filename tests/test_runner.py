"""The test runner on a tiny task: verdicts, counts, isolation, infra errors and the CLI."""
from __future__ import annotations

import json
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import agent.runner.core as runner
from agent import clean_test_runner
from agent.runner.core import RunnerOptions, run_candidate
from agent.envs.cache import EnvError
from agent.runner.sandbox import bwrap_problem
from tests.runner_testlib import CANONICAL, TEST_CASES, TEST_PY, WRONG, make_task, tree_digest

REPO = Path(__file__).resolve().parents[1]
QUICK = RunnerOptions(timeout_sec=30)
HALF_RIGHT = CANONICAL.replace("return [v * k for v in values]", "return list(values)")


def printing(expression: str) -> str:
    """WRONG whose add() prints ``expression``: pytest shows a failing test's captured output."""
    return "import os, socket\n" + WRONG.replace("    return a - b", f"    print({expression})\n    return a - b")


@pytest.fixture
def dataset(tmp_path: Path):
    return make_task(tmp_path / "dataset")


def test_canonical_passes_wrong_fails_and_dataset_is_untouched(dataset, tmp_path: Path) -> None:
    before = tree_digest(dataset.root)
    report = tmp_path / "reports" / "turn_1.xml"
    good = run_candidate(dataset, 1, CANONICAL, QUICK, report_to=report)
    assert (good["status"], good["tests"], good["failures"], good["errors"]) == ("passed", 2, 0, 0)
    assert good["test_summary"] == {"test_add": True, "test_scale": True} and good["exit_code"] == 0
    assert good["report_path"] == str(report) and "<testcase" in report.read_text()
    assert good["interpreter"] == sys.executable
    bad = run_candidate(dataset, 1, WRONG, QUICK)
    assert (bad["status"], bad["tests"], bad["failures"], bad["exit_code"]) == ("failed", 2, 2, 1)
    assert bad["failure_messages"][0].startswith("test_add: assert") and bad["report_path"] is None
    assert tree_digest(dataset.root) == before
    forged = run_candidate(dataset, 1, "import os\nos._exit(0)\n", QUICK, report_to=report)
    assert forged["status"] == "tampered" and forged["report_path"] is None and not report.exists()


def test_partial_credit_is_counted_per_test(dataset) -> None:
    result = run_candidate(dataset, 1, HALF_RIGHT, QUICK)
    assert result["status"] == "failed" and (result["tests"], result["failures"]) == (2, 1)
    assert result["test_summary"] == {"test_add": True, "test_scale": False}


def test_expected_case_missing_from_report_is_not_a_pass(tmp_path: Path) -> None:
    dataset = make_task(tmp_path / "dataset", test_cases=TEST_CASES + ("test_extra",))
    result = run_candidate(dataset, 1, CANONICAL, QUICK)
    assert result["status"] == "failed" and result["test_summary"]["test_extra"] is False
    assert (result["tests"], result["failures"]) == (3, 1)
    assert any(m.startswith("test_extra: not in the report") for m in result["failure_messages"])


HONEST_BUT_UNUSUAL = CANONICAL.replace("def add(a, b):\n    return a + b", '''\
import functools, inspect, os, tempfile, traceback, warnings


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        warnings.warn("deprecated", DeprecationWarning, stacklevel=2)
        traceback.format_stack()
        inspect.signature(fn)
        with open(os.path.join(tempfile.gettempdir(), "generated_kernel.py"), "w") as out:
            out.write("X = 1\\n")
        return fn(*args)
    return wrapper


@logged
def add(a, b):
    return a + b''')
REEXPORTING_TEST = TEST_PY.replace("from pkg.target import add, scale", "from lib import add, scale")


def test_honest_but_unusual_code_is_not_tampering(tmp_path: Path) -> None:
    """Warnings, formatted stacks, signatures, generated files in /tmp and a package re-exporting the target are
    fine (a frame object of its own would not be: ``inspect.stack()`` hands the candidate the test's frames)."""
    dataset = make_task(tmp_path / "dataset", test_py=REEXPORTING_TEST)
    lib = dataset.repo_dir(1) / "lib"
    lib.mkdir()
    (lib / "__init__.py").write_text("from pkg.target import add, scale\n")
    result = run_candidate(dataset, 1, HONEST_BUT_UNUSUAL, QUICK)
    assert result["status"] == "passed", result["failure_messages"]


def test_repository_file_named_like_a_startup_module_does_not_shadow_it(dataset) -> None:
    (dataset.repo_dir(1) / "pkg" / "inspect.py").write_text("raise SystemExit('shadowed the standard inspect')\n")
    layout = runner.prepare(dataset, 1, CANONICAL, dataset.root.parent / "run")
    assert runner.shadowed_modules(layout.workdir, ("test.py", "canonical.py")) == {"inspect"}
    assert run_candidate(dataset, 1, CANONICAL, QUICK)["status"] == "passed"


def test_syntax_error_is_a_collection_error(dataset) -> None:
    result = run_candidate(dataset, 1, "def add(:\n", QUICK)
    assert result["status"] == "failed" and result["errors"] == 1
    assert not any(result["test_summary"].get(name) for name in TEST_CASES)


def test_environment_is_scrubbed_even_without_sandbox(dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-visible-nowhere")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-visible-nowhere")
    candidate = printing("sorted(os.environ.items())")
    result = run_candidate(dataset, 1, candidate, RunnerOptions(timeout_sec=30, sandbox="off"))
    assert "HOME" in result["output"] and "visible-nowhere" not in result["output"]


def test_sandbox_required_but_missing_is_infra_error(dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "bwrap_problem", lambda: "bubblewrap (bwrap) is not installed")
    result = run_candidate(dataset, 1, CANONICAL, RunnerOptions(timeout_sec=30, sandbox="required"))
    assert result["status"] == "infra_error" and "not installed" in result["failure_messages"][0]


def test_auto_without_sandbox_warns_once_and_runs(dataset, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(runner, "bwrap_problem", lambda: "bubblewrap is missing in this test")
    monkeypatch.setattr(runner, "_warned", set())
    statuses = [run_candidate(dataset, 1, CANONICAL, QUICK)["status"] for _ in range(2)]
    assert statuses == ["passed", "passed"]
    assert capsys.readouterr().err.count("bubblewrap is missing in this test") == 1


def test_missing_environment_is_infra_error(dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(*args, **kwargs):
        raise EnvError("environment recode_toy is not built; run scripts/manage_envs.py")

    monkeypatch.setattr("agent.envs.cache.resolve_python", missing)
    result = run_candidate(dataset, 1, CANONICAL, QUICK)
    assert result["status"] == "infra_error" and "manage_envs" in result["failure_messages"][0]


def test_interpreter_without_pytest_is_infra_error(dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "resolve_interpreter", lambda *a: ("/bin/false", None))
    result = run_candidate(dataset, 1, CANONICAL, QUICK)
    assert result["status"] == "infra_error" and "guard plugin" in result["failure_messages"][0]


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="sandbox must be one of"):
        RunnerOptions(sandbox="sometimes")
    with pytest.raises(ValueError, match="timeout_sec"):
        RunnerOptions(timeout_sec=0)


@pytest.mark.skipif(bwrap_problem() is not None, reason="needs a working bubblewrap")
def test_sandbox_hides_dataset_harness_processes_network_and_root(dataset) -> None:
    candidate = printing(f"'DATASET', os.path.exists({str(dataset.meta_path)!r}), "
                         f"'HARNESS', os.path.exists({str(REPO / 'agent' / 'utils.py')!r}), "
                         "'PIDS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:2], "
                         "'IFACES', sorted(n for _, n in socket.if_nameindex()), "
                         "'ROOT', os.getuid() == 0, 'HOME', os.access(os.environ['HOME'], os.W_OK)")
    output = run_candidate(dataset, 1, candidate, RunnerOptions(timeout_sec=30, sandbox="required"))["output"]
    assert "DATASET False HARNESS False PIDS [1, 2] IFACES ['lo'] ROOT False HOME True" in output


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "agent" / "clean_test_runner.py"), *args],
                          capture_output=True, text=True, cwd=REPO, env=env)


def test_cli_release_flags_on_disk_target_and_json(dataset, tmp_path: Path) -> None:
    """The release's command line: --work-dir holds dataset/, the target file on disk is what is tested."""
    work_dir = dataset.root.parent
    report = dataset.task_dir(1) / "pytest_report" / "report.xml"
    blank = _cli("--work-dir", str(work_dir), "--task-id", "1", "--timeout-sec", "30")
    assert blank.returncode == 1 and blank.stdout.startswith("task 1: failed")
    assert "cannot import name 'add'" in report.read_text()
    dataset.target_path(1).write_text(CANONICAL)
    before = {k: v for k, v in tree_digest(dataset.root).items() if "pytest_report" not in k}
    done = _cli("--work-dir", str(work_dir), "--task-id", "1", "--json", "--timeout-sec", "30")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "passed" and result["interpreter"] == sys.executable
    assert result["report_path"] == str(report) and "test_scale" in report.read_text()
    assert str(report) in done.stderr and "task 1: passed" in done.stderr
    after = {k: v for k, v in tree_digest(dataset.root).items() if "pytest_report" not in k}
    assert after == before


def test_cli_canonical_and_dataset_folder_itself(dataset) -> None:
    done = _cli("--dataset-dir", str(dataset.root), "--task-id", "1", "--canonical", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "passed", done.stderr


def test_cli_env_mode_flags_reach_the_environment_cache(dataset, tmp_path: Path, monkeypatch, capsys) -> None:
    """--env-map-path names the environment, --python-version its Python; without --env-mode: this interpreter."""
    asked = []

    def resolve(dataset, index, backend, build=True, *, python_version=None, env_name=None):
        asked.append((backend, python_version, env_name))
        return sys.executable

    monkeypatch.setattr("agent.envs.cache.resolve_python", resolve)
    env_map = tmp_path / "env_map.json"
    env_map.write_text(json.dumps({"1": "test_common1"}))
    common = ["--work-dir", str(dataset.root), "--task-id", "1", "--canonical", "--timeout-sec", "30"]
    assert clean_test_runner.main(common + ["--env-map-path", str(env_map), "--python-version", "3.10"]) == 0
    assert clean_test_runner.main(common) == 0
    assert clean_test_runner.main(common + ["--env-mode", "--env-backend", "uv"]) == 0
    assert asked == [(None, "3.10", "test_common1"), ("current", None, None), ("uv", None, None)]
    assert capsys.readouterr().out.count("task 1: passed") == 3


def test_cli_candidate_file_failure_exit_code(dataset, tmp_path: Path) -> None:
    candidate = tmp_path / "wrong.py"
    candidate.write_text(WRONG)
    done = _cli("--work-dir", str(dataset.root), "--task-id", "1", "--candidate", str(candidate))
    assert done.returncode == 1 and done.stdout.startswith("task 1: failed")
    stale = dataset.task_dir(1) / "pytest_report" / "report.xml"
    assert stale.is_file()
    candidate.write_text("import os\nos._exit(0)\n")
    done = _cli("--work-dir", str(dataset.root), "--task-id", "1", "--candidate", str(candidate))
    assert done.returncode == 1 and "task 1: tampered" in done.stdout and not stale.exists()
    assert "target.py:2 ends the test process (os._exit)" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--work-dir", "/no/such/dataset", "--task-id", "1"], "dataset not found"),
    (["--task-id", "9"], "unknown task id 9"),
    (["--task-id", "1", "--candidate", "/no/such/file.py"], "candidate file not found"),
    (["--task-id", "1", "--env-map-path", "/no/such/map.json"], "--env-map-path /no/such/map.json"),
])
def test_cli_user_errors_are_one_line(dataset, args: list[str], message: str) -> None:
    if "--work-dir" not in args:
        args = ["--work-dir", str(dataset.root), *args]
    done = _cli(*args)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


SLEEPER = "import time\nopen('sleeping', 'w').close()\ntime.sleep(120)\n" + CANONICAL  # marks its run folder
LOCKS_ITS_FILES = CANONICAL + '''
import os
os.makedirs("locked/inner", exist_ok=True)
open("locked/inner/data.txt", "w").write("x")
open(os.path.join(os.environ["TMPDIR"], "scratch.txt"), "w").write("x")
os.chmod("locked/inner", 0)
os.chmod("locked", 0)
'''


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp folder of this test alone, for the runner and any process it starts."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.slow
def test_nothing_is_left_in_the_temp_folder_after_a_batch(dataset, private_tmp: Path, monkeypatch) -> None:
    """Success, failure, collection error, crash, refused candidate, locked files, timeout, Ctrl-C."""
    batch = [CANONICAL, WRONG, HALF_RIGHT, "def add(:\n", "import faulthandler\ngetattr(faulthandler, '_sigsegv')()\n",
             "import canonical\n", LOCKS_ITS_FILES]
    statuses = []
    for sandbox in ("auto", "off"):
        options = RunnerOptions(timeout_sec=30, sandbox=sandbox)
        statuses += [run_candidate(dataset, 1, candidate, options)["status"] for candidate in batch]
        statuses.append(run_candidate(dataset, 1, SLEEPER, RunnerOptions(timeout_sec=2, sandbox=sandbox))["status"])
    assert statuses == ["passed", "failed", "failed", "failed", "error", "reference_access", "passed", "timeout"] * 2

    real_run = runner.run_process

    def interrupted(*args, **kwargs):
        real_run(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_process", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_candidate(dataset, 1, CANONICAL, QUICK)
    runner._cleaner.submit(int).result()  # deletions after normal runs happen off the caller's path
    assert sorted(p.name for p in private_tmp.iterdir()) == []


def test_ctrl_c_on_the_cli_leaves_nothing_behind(dataset, private_tmp: Path, tmp_path: Path) -> None:
    candidate = tmp_path / "sleeper.py"
    candidate.write_text(SLEEPER)
    proc = subprocess.Popen([sys.executable, str(REPO / "agent" / "clean_test_runner.py"), "--work-dir",
                             str(dataset.root), "--task-id", "1", "--candidate", str(candidate)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not list(private_tmp.glob("recode-run-*/ws/**/sleeping")) and time.monotonic() < deadline:
        time.sleep(0.05)  # until pytest is running the sleeping candidate, however loaded the machine
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert list(private_tmp.iterdir()) == []


@pytest.mark.skipif(bwrap_problem() is not None, reason="needs a working bubblewrap")
def test_interpreter_in_a_venv_under_tmp_runs_sandboxed(dataset, tmp_path: Path, monkeypatch) -> None:
    """The venv lives under /tmp (private in the sandbox) below a 0700 folder; an unreadable one is named."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site_packages = next(venv.glob("lib/python*/site-packages"))
    (site_packages / "suite.pth").write_text("\n".join(site.getsitepackages()) + "\n")  # pytest, even when the suite runs in a venv
    monkeypatch.setattr(runner, "resolve_interpreter", lambda *a: (str(venv / "bin" / "python"), None))
    options = RunnerOptions(timeout_sec=30, sandbox="required")
    result = run_candidate(dataset, 1, CANONICAL, options)
    assert result["status"] == "passed" and result["interpreter"] == str(venv / "bin" / "python"), result
    if os.geteuid() == 0 and shutil.which("setpriv"):  # tests then run as a fresh uid, which a 0700 venv excludes
        venv.chmod(0o700)
        result = run_candidate(dataset, 1, CANONICAL, options)
        assert result["status"] == "infra_error"
        assert f"{venv} cannot be made visible in the sandbox" in result["failure_messages"][0]
