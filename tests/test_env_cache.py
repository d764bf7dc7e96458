"""Building and resolving environments: a real uv build, idempotency, failure isolation, locks, cheap hits."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import agent.envs.cache as env_cache
from agent.envs.backends import BuildPlan, build_plan, read_pip_settings
from agent.envs.cache import EnvError, ensure_env, env_root, env_settings, resolve_python, spec_for_task
from scripts.manage_envs import main as manage_main
from tests.env_testlib import make_dataset

REPO = Path(__file__).resolve().parents[1]
BROKEN = "nonexistent-pkg @ file:///nonexistent/nonexistent_pkg-1.0-py3-none-any.whl\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One real uv run over: two env names with the same tiny requirements, and one broken env."""
    root = tmp_path_factory.mktemp("uvbuild")
    dataset = make_dataset(
        root / "ds", {1: "tiny", 2: "tiny_alias", 3: "broken"},
        {"tiny.txt": "pytest\n", "tiny_alias.txt": "# same thing\nPyTest\n", "broken.txt": BROKEN},
    )
    args = ["--dataset-dir", str(dataset.root), "--env-backend", "uv", "--env-dir", str(root / "envs")]
    completed = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "manage_envs.py"), *args], capture_output=True, text=True, timeout=300
    )
    return {"dataset": dataset, "args": args, "envs": root / "envs", "first": completed}


def test_real_uv_build_isolates_the_failure_and_reports_its_log(built: dict) -> None:
    first = built["first"]
    assert first.returncode == 1, first.stdout + first.stderr
    assert "Traceback" not in first.stdout + first.stderr
    settings = env_settings("uv", built["envs"])
    tiny, broken = (spec_for_task(built["dataset"], i, settings) for i in (1, 3))
    assert f"{tiny.name} (tiny; tiny_alias; tasks 1, 2): built in" in first.stdout
    broken_log = env_root(broken, settings) / "build.log"
    assert f"{broken.name} (broken; task 3): FAILED:" in first.stdout and f"see {broken_log}" in first.stdout
    assert "nonexistent" in broken_log.read_text()
    failed_line = next(line for line in first.stdout.splitlines() if "FAILED" in line)
    assert "exited with 1: error" in failed_line and "nonexistent_pkg" in failed_line
    python = env_root(tiny, settings) / "prefix" / "bin" / "python"
    probe = subprocess.run([str(python), "-m", "pytest", "--version"], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and "pytest" in probe.stdout + probe.stderr
    marker = json.loads((env_root(tiny, settings) / "recode_env.json").read_text())
    assert (marker["fingerprint"], marker["python"]) == (tiny.fingerprint, str(python))


def test_second_run_is_up_to_date_and_rebuilds_nothing(built: dict, capsys: pytest.CaptureFixture[str]) -> None:
    tiny = spec_for_task(built["dataset"], 1, env_settings("uv", built["envs"]))
    marker = env_root(tiny, env_settings("uv", built["envs"])) / "recode_env.json"
    stamp = marker.stat().st_mtime_ns
    assert manage_main([*built["args"], "--task-ids", "1", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{tiny.name} (tiny; tiny_alias; tasks 1, 2): up to date" in out
    assert "all 1 environment up to date; nothing to do" in out
    assert marker.stat().st_mtime_ns == stamp
    assert manage_main([*built["args"], "--list"]) == 0
    listed = capsys.readouterr().out
    assert f"{tiny.name} (tiny; tiny_alias; tasks 1, 2): ready" in listed and ": failed" in listed


def site_packages(python: Path) -> Path:
    return next(python.parents[1].glob("lib/python3.*/site-packages"))


def pyc_of(python: Path, module: str) -> list[Path]:
    """The .pyc files of one installed package of the environment, for its own interpreter's tag."""
    tag = subprocess.run([str(python), "-c", "import sys; print(sys.implementation.cache_tag)"],
                         capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    return list((site_packages(python) / module).glob(f"__pycache__/*.{tag}.pyc"))


def test_build_precompiles_and_the_read_only_sandbox_uses_the_pyc(built: dict) -> None:
    """uv installs without bytecode; the build compiles it, and an import with writes impossible loads it."""
    tiny = spec_for_task(built["dataset"], 1, env_settings("uv", built["envs"]))
    root = env_root(tiny, env_settings("uv", built["envs"]))
    python = root / "prefix" / "bin" / "python"
    assert pyc_of(python, "_pytest") and pyc_of(python, "pluggy")
    record = json.loads((root / "recode_env.json").read_text())["bytecode"]
    assert record["site_packages"] == [str(site_packages(python))] and record["compileall_exit"] in (0, 1)
    verbose = subprocess.run([str(python), "-v", "-c", "import _pytest.python"], capture_output=True, text=True,
                             timeout=60, env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"})
    loaded = [line for line in verbose.stderr.splitlines() if line.startswith("# code object from") and "_pytest" in line]
    assert loaded and all(".pyc" in line for line in loaded), loaded[:3]


def test_an_existing_env_without_bytecode_gets_it_once(built: dict, capsys: pytest.CaptureFixture[str]) -> None:
    settings = env_settings("uv", built["envs"])
    tiny = spec_for_task(built["dataset"], 1, settings)
    root = env_root(tiny, settings)
    python = root / "prefix" / "bin" / "python"
    marker = json.loads((root / "recode_env.json").read_text())
    del marker["bytecode"]
    (root / "recode_env.json").write_text(json.dumps(marker))
    for pyc in site_packages(python).rglob("*.pyc"):
        pyc.unlink()
    assert not pyc_of(python, "_pytest")
    assert manage_main([*built["args"], "--task-ids", "1,2"]) == 0
    out = capsys.readouterr().out
    assert f"{tiny.name} (tiny; tiny_alias; tasks 1, 2): bytecode compiled in" in out
    assert pyc_of(python, "_pytest") and env_cache.PYTEST_WARMED in json.loads(
        (root / "recode_env.json").read_text())["bytecode"]
    stamp = (root / "recode_env.json").stat().st_mtime_ns
    assert manage_main([*built["args"], "--task-ids", "1", "2"]) == 0
    assert "all 1 environment up to date; nothing to do" in capsys.readouterr().out
    assert (root / "recode_env.json").stat().st_mtime_ns == stamp


def test_an_env_compiled_before_the_pytest_step_gets_only_that_step(built: dict,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """pytest caches its rewritten copies of entry-point plugins only where it may write: at build time."""
    settings = env_settings("uv", built["envs"])
    root = env_root(spec_for_task(built["dataset"], 1, settings), settings)
    marker = json.loads((root / "recode_env.json").read_text())
    compiled = {k: v for k, v in marker["bytecode"].items() if k != env_cache.PYTEST_WARMED}
    (root / "recode_env.json").write_text(json.dumps({**marker, "bytecode": compiled}))
    log_before = (root / "build.log").read_text()
    assert manage_main([*built["args"], "--task-ids", "1"]) == 0
    assert "bytecode compiled in" in capsys.readouterr().out
    added = (root / "build.log").read_text()[len(log_before):]
    assert "-m pytest --collect-only" in added and "compileall" not in added
    record = json.loads((root / "recode_env.json").read_text())["bytecode"]
    assert record == {**compiled, env_cache.PYTEST_WARMED: 5}


@pytest.mark.slow
def test_venv_build_precompiles_too(tmp_path: Path) -> None:
    spec, settings = one_task_env(tmp_path, "pytest\n")
    result = ensure_env(spec, settings, progress=lambda _: None)
    python = Path(result.python)
    assert result.status == "built" and pyc_of(python, "_pytest")
    assert "bytecode" in json.loads((env_root(spec, settings) / "recode_env.json").read_text())


def test_cache_hit_spawns_no_subprocess(built: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECODE_ENV_DIR", str(built["envs"]))
    monkeypatch.setenv("RECODE_ENV_BACKEND", "uv")
    monkeypatch.delenv("RECODE_ENV_PYTHON", raising=False)
    monkeypatch.delenv("RECODE_REQUIREMENTS_MAP", raising=False)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cache hit must not start a process")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(env_cache.subprocess, "run", forbidden)
    monkeypatch.setattr(env_cache, "_MEMO", {})
    cold = resolve_python(built["dataset"], 2)
    assert env_cache._MEMO, "the first hit is memoised"
    assert resolve_python(built["dataset"], 1) == resolve_python(built["dataset"], 2) == cold
    assert cold.endswith("/prefix/bin/python") and Path(cold).exists()
    assert resolve_python(built["dataset"], 1, backend="current") == sys.executable


def test_uv_install_of_pinned_torch_takes_the_local_cpu_wheel(built: dict, tmp_path: Path) -> None:
    """The uv command honours pip's find-links/indexes: torch==2.13.0 must not resolve to a CUDA build."""
    tiny = spec_for_task(built["dataset"], 1, env_settings("uv", built["envs"]))
    tag = "cp" + tiny.python_version.replace(".", "")
    local = [w for link in read_pip_settings().find_links for w in Path(link).glob(f"torch-2.13.0+cpu-{tag}-*.whl")]
    if not local:
        pytest.skip(f"pip's find-links hold no local torch 2.13.0 CPU wheel for {tag} on this machine")
    requirements = tmp_path / "torch.txt"
    requirements.write_text("torch==2.13.0\n")
    prefix = env_root(tiny, env_settings("uv", built["envs"])) / "prefix"
    install = build_plan("uv", prefix, requirements, tiny.python_version).commands[1]
    dry = subprocess.run([*install, "--dry-run"], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "+ torch==2.13.0+cpu" in dry.stdout + dry.stderr
    assert "nvidia" not in dry.stdout + dry.stderr


def test_unbuilt_env_without_build_names_the_command(built: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECODE_ENV_DIR", str(built["envs"]))
    with pytest.raises(EnvError, match=r"is not built; run: python scripts/manage_envs.py .* --task-ids 3$"):
        resolve_python(built["dataset"], 3, backend="uv", build=False)


def wrapper_script(python: str) -> str:
    """A shell script that runs ``python`` with its arguments; the path is quoted (users' paths have spaces)."""
    return f'#!/bin/sh\nexec {shlex.quote(python)} "$@"\n'


def fake_plan_factory(counter: Path, delay: float, python: str = sys.executable):
    """A build_plan stand-in whose single command counts builds and makes ``python`` the env's.

    A wrapper script, not a symlink: a symlinked venv interpreter would lose its venv (and pytest).
    """
    def fake_plan(backend: str, prefix: Path, requirements: Path, python_version: str, indexes: tuple = ()) -> BuildPlan:
        script = (
            "import os, sys, time\n"
            f"open({str(counter)!r}, 'a').write('build\\n')\n"
            f"time.sleep({delay})\n"
            f"os.makedirs({str(prefix / 'bin')!r})\n"
            f"open({str(prefix / 'bin' / 'python')!r}, 'w').write({wrapper_script(python)!r})\n"
            f"os.chmod({str(prefix / 'bin' / 'python')!r}, 0o755)\n"
        )
        return BuildPlan(commands=((python, "-c", script),))
    return fake_plan


def one_task_env(tmp_path: Path, requirements: str = "pytest\n") -> tuple:
    """(spec, settings) of a one-task dataset under tmp_path, venv backend."""
    dataset = make_dataset(tmp_path / "ds", {1: "a"}, {"a.txt": requirements})
    settings = env_settings("venv", tmp_path / "envs")
    return spec_for_task(dataset, 1, settings), settings


def spaced_python(tmp_path: Path) -> str:
    """This interpreter, reached through a path with a space: a venv under ``python home/`` that sees this
    interpreter's packages (a .pth file), as a user's checkout in ``~/My Projects`` has."""
    venv = tmp_path / "python home" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "outer.pth").write_text("\n".join(sys.path[1:]) + "\n")
    return str(python)


@pytest.mark.parametrize("where", ["this interpreter", "a path with a space"])
def test_concurrent_callers_build_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    spec, settings = one_task_env(tmp_path)
    counter = tmp_path / "builds.txt"
    python = sys.executable if where == "this interpreter" else spaced_python(tmp_path)
    assert " " in python or where == "this interpreter"  # which may have one too: a venv in "~/My Projects"
    monkeypatch.setattr(env_cache, "build_plan", fake_plan_factory(counter, 0.5, python))
    monkeypatch.setattr(env_cache, "compile_bytecode",
                        lambda python, log, env, done=None: {"site_packages": [], env_cache.PYTEST_WARMED: 5})
    results: list = []
    messages: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(ensure_env(spec, settings, progress=messages.append))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert counter.read_text() == "build\n"
    assert sorted(r.status for r in results) == ["built", "up to date"]
    assert any(m.startswith("waiting for another process") for m in messages)
    assert ensure_env(spec, settings, rebuild=True, progress=messages.append).status == "built"
    assert counter.read_text() == "build\nbuild\n"


def test_waits_for_a_build_in_another_process_and_reuses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, settings = one_task_env(tmp_path)
    root = env_root(spec, settings)
    root.mkdir(parents=True)
    other = (
        "import os, sys, time\nfrom filelock import FileLock\n"
        f"with FileLock({str(root / 'build.lock')!r}):\n"
        "    print('locked', flush=True)\n    time.sleep(1.0)\n"
        f"    os.makedirs({str(root / 'prefix' / 'bin')!r})\n"
        f"    os.symlink(sys.executable, {str(root / 'prefix' / 'bin' / 'python')!r})\n"
        f"    open({str(root / 'recode_env.json')!r}, 'w').write('{{\"bytecode\": {{\"pytest_plugins_exit\": 5}}}}')\n"
    )
    builder = subprocess.Popen([sys.executable, "-c", other], stdout=subprocess.PIPE, text=True)
    assert builder.stdout.readline().strip() == "locked"
    monkeypatch.setattr(env_cache, "build_plan", fake_plan_factory(tmp_path / "never.txt", 0))
    messages: list[str] = []
    result = ensure_env(spec, settings, progress=messages.append)
    assert builder.wait(timeout=30) == 0
    assert result.status == "up to date" and not (tmp_path / "never.txt").exists()
    assert messages and messages[0].startswith("waiting for another process")


def test_env_without_pytest_fails_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, settings = one_task_env(tmp_path, "six\n")

    def no_pytest_plan(backend: str, prefix: Path, requirements: Path, python_version: str, indexes: tuple = ()) -> BuildPlan:
        script = f"import os; os.makedirs({str(prefix / 'bin')!r}); os.symlink('/bin/false', {str(prefix / 'bin' / 'python')!r})"
        return BuildPlan(commands=((sys.executable, "-c", script),))

    monkeypatch.setattr(env_cache, "build_plan", no_pytest_plan)
    with pytest.raises(EnvError, match=r"cannot import pytest; add pytest to .*a\.txt \(log: .*build\.log\)"):
        ensure_env(spec, settings, progress=lambda _: None)
    assert not (env_root(spec, settings) / "recode_env.json").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--task-ids", "99"], "error: unknown task id 99"), (["--dataset-dir", "/nonexistent/ds"], "error: dataset not found")],
)
def test_broken_dataset_or_unknown_task_is_one_line(
    tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = make_dataset(tmp_path / "ds", {1: "a"}, {"a.txt": "pytest\n"})
    code = manage_main(["--dataset-dir", str(dataset.root), "--env-backend", "uv", "--env-dir", str(tmp_path / "envs"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1


def test_task_with_missing_test_sh_is_skipped_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = make_dataset(tmp_path / "ds", {1: "a", 2: "a"}, {"a.txt": "pytest\n"})
    (dataset.task_dir(2) / "test.sh").unlink()
    code = manage_main(["--dataset-dir", str(dataset.root), "--env-backend", "uv", "--env-dir", str(tmp_path / "envs"), "--list"])
    out = capsys.readouterr().out
    assert code == 1
    assert "task 2: skipped: task 2 is missing" in out and "(a; task 1): missing" in out


def test_dataset_without_runnable_tasks_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = make_dataset(tmp_path / "ds", {}, {})
    assert manage_main(["--dataset-dir", str(dataset.root), "--env-backend", "uv", "--env-dir", str(tmp_path / "envs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "lists no runnable task" in err and err.count("\n") == 1
