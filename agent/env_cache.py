"""Per-task environments: find a task's interpreter, building its environment once.

Environments are keyed by the fingerprint of their requirements (see
``agent.envs.spec``), built by a backend (``agent.envs.backends``) under a file
lock, and marked complete only after a successful build, so an interrupted or
failed build is redone next time and a finished one is never redone.

On-disk layout (env dir = ``--env-dir`` / ``RECODE_ENV_DIR`` / ``work_dir/envs``)::

    <env dir>/<backend>-py<X.Y>-<fingerprint[:12]>/
        prefix/            the venv or conda prefix (prefix/bin/python)
        build.log          output of the last build
        build.lock         held while building (filelock), so concurrent processes build once
        requirements.txt   only for the built-in default group
        recode_env.json    completion marker, written last and atomically
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from filelock import FileLock, Timeout

from agent.atomic_file import atomic_write_text
from agent.envs.backends import build_plan, check_backend_name, default_backend, default_python_version, interpreter
from agent.envs.spec import (
    EnvError,
    EnvSpec,
    RequirementsMap,
    find_requirements_map,
    load_requirements_map,
    spec_for_env_name,
)
from agent.utils import DatasetError, DatasetManager

__all__ = [
    "BuildResult",
    "EnvError",
    "EnvSettings",
    "PlannedEnv",
    "ensure_env",
    "env_python",
    "env_root",
    "env_settings",
    "env_status",
    "plan_envs",
    "resolve_python",
    "spec_for_task",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ENV_DIR = REPO_ROOT / "work_dir" / "envs"
MARKER = "recode_env.json"
LOG = "build.log"
LOCK = "build.lock"
PREFIX = "prefix"


@dataclass(frozen=True)
class EnvSettings:
    """Where and how environments are built. ``requirements_map`` None: the dataset's own map, if any."""

    backend: str
    python_version: str
    env_dir: Path
    requirements_map: Path | None = None


def env_settings(
    backend: str | None = None,
    env_dir: str | Path | None = None,
    requirements_map: str | Path | None = None,
    python_version: str | None = None,
) -> EnvSettings:
    """Explicit values first, then RECODE_ENV_BACKEND / RECODE_ENV_DIR / RECODE_REQUIREMENTS_MAP /
    RECODE_ENV_PYTHON, then the defaults (conda if installed else uv; work_dir/envs)."""
    chosen = check_backend_name(backend) if backend else default_backend()
    directory = env_dir or os.environ.get("RECODE_ENV_DIR") or DEFAULT_ENV_DIR
    rmap = requirements_map or os.environ.get("RECODE_REQUIREMENTS_MAP") or None
    return EnvSettings(
        backend=chosen,
        python_version=python_version or default_python_version(chosen),
        env_dir=Path(directory).expanduser().resolve(),
        requirements_map=Path(rmap).expanduser() if rmap else None,
    )


def env_root(spec: EnvSpec, settings: EnvSettings) -> Path:
    return settings.env_dir / spec.name


def env_python(spec: EnvSpec, settings: EnvSettings) -> Path:
    return interpreter(env_root(spec, settings) / PREFIX)


def _is_ready(root: Path) -> bool:
    """Two stats, no subprocess: the marker is written only after a verified build."""
    return (root / MARKER).is_file() and interpreter(root / PREFIX).exists()


def env_status(spec: EnvSpec, settings: EnvSettings) -> str:
    """'ready', 'building' (another process holds the lock), 'failed' (a log but no marker) or 'missing'."""
    root = env_root(spec, settings)
    if _is_ready(root):
        return "ready"
    if not (root / LOG).is_file():
        return "missing"
    try:
        with FileLock(str(root / LOCK), timeout=0):
            return "failed"
    except Timeout:
        return "building"


def _requirements_map(dataset: DatasetManager, settings: EnvSettings) -> RequirementsMap:
    return load_requirements_map(find_requirements_map(dataset.root, settings.requirements_map))


def spec_for_task(dataset: DatasetManager, index: int, settings: EnvSettings, env_name: str | None = None) -> EnvSpec:
    """The environment spec of one task (reads its test.sh and requirements; runs nothing).

    ``env_name`` overrides the one test.sh activates (a release env map, task id -> env name).
    """
    env_name = env_name or dataset.test_sh(index).env_name
    return spec_for_env_name(
        env_name, dataset.root / "requirements", _requirements_map(dataset, settings), settings.backend, settings.python_version
    )


@dataclass
class PlannedEnv:
    """One environment to build and the tasks (and test.sh env names) it serves."""

    spec: EnvSpec
    tasks: list[int] = field(default_factory=list)
    env_names: list[str] = field(default_factory=list)


def plan_envs(
    dataset: DatasetManager, task_ids: list[int] | None, settings: EnvSettings
) -> tuple[list[PlannedEnv], dict[int, str]]:
    """Distinct environments of the selected tasks, plus task id -> one-line error for broken tasks.

    A task-level problem (missing test.sh, bad requirements file) is reported
    and skipped so the others still build; an unreadable meta file raises.
    """
    rmap = _requirements_map(dataset, settings)
    requirements_dir = dataset.root / "requirements"
    by_env_name: dict[str | None, EnvSpec] = {}
    planned: dict[str, PlannedEnv] = {}
    errors: dict[int, str] = {}
    for meta in dataset.select(task_ids):
        try:
            env_name = dataset.test_sh(meta.index).env_name
            if env_name not in by_env_name:
                by_env_name[env_name] = spec_for_env_name(
                    env_name, requirements_dir, rmap, settings.backend, settings.python_version
                )
        except (DatasetError, EnvError) as exc:
            errors[meta.index] = str(exc)
            continue
        spec = by_env_name[env_name]
        entry = planned.setdefault(spec.name, PlannedEnv(spec))
        entry.tasks.append(meta.index)
        label = env_name or "(no env in test.sh)"
        if label not in entry.env_names:
            entry.env_names.append(label)
    return list(planned.values()), errors


@dataclass(frozen=True)
class BuildResult:
    """Outcome of ensure_env: status 'up to date' or 'built' (failures raise EnvError)."""

    name: str
    status: str
    python: str
    log_path: str
    duration_sec: float


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ensure_env(
    spec: EnvSpec, settings: EnvSettings, rebuild: bool = False, progress: Callable[[str], None] = _stderr
) -> BuildResult:
    """Build the environment unless a finished one exists; safe to call from many processes at once."""
    root = env_root(spec, settings)
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        progress(f"waiting for another process to finish building {spec.name} ...")
        lock.acquire()
    try:
        if not rebuild and _is_ready(root):
            return BuildResult(spec.name, "up to date", str(env_python(spec, settings)), str(root / LOG), 0.0)
        return _build(spec, settings, progress)
    finally:
        lock.release()


def _run_logged(command: tuple[str, ...], log, env: dict[str, str]) -> int:
    log.write(f"$ {shlex.join(command)}\n")
    log.flush()
    try:
        return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env).returncode
    except OSError as exc:
        log.write(f"cannot run {command[0]}: {exc}\n")
        return 127


def _error_hint(log_path: Path) -> str:
    """': <last error line of the log>' (shortened), so the one-line failure says what went wrong."""
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    starts = [i for i, line in enumerate(lines) if line.lower().startswith("error")]
    if not starts:
        return ""
    end = starts[-1] + 1
    while end < len(lines) and lines[end][:1].isspace() and lines[end].strip():
        end += 1
    return ": " + " ".join(line.strip() for line in lines[starts[-1]:end])[:300]


def _build(spec: EnvSpec, settings: EnvSettings, progress: Callable[[str], None]) -> BuildResult:
    """Build from scratch (the lock is held): wipe, run the backend's commands, check pytest, mark."""
    root = env_root(spec, settings)
    prefix = root / PREFIX
    marker, log_path = root / MARKER, root / LOG
    marker.unlink(missing_ok=True)
    if prefix.exists():
        shutil.rmtree(prefix)
    if spec.requirements_file:
        requirements = Path(spec.requirements_file)
    else:
        requirements = root / "requirements.txt"
        requirements.write_text("\n".join(spec.requirements) + "\n", encoding="utf-8")
    plan = build_plan(spec.backend, prefix, requirements, spec.python_version)
    python = interpreter(prefix)
    progress(f"building {spec.name} for '{spec.group}' with {spec.backend} (log: {log_path})")
    start = time.monotonic()
    env = {**os.environ, **plan.extra_env}
    with log_path.open("w", encoding="utf-8") as log:
        log.write(f"# environment {spec.name}\n# group {spec.group}; requirements {requirements}\n")
        log.write(f"# backend {spec.backend}; python {spec.python_version}; fingerprint {spec.fingerprint}\n")
        for command in plan.commands:
            code = _run_logged(command, log, env)
            if code != 0:
                log.flush()
                raise EnvError(
                    f"building environment {spec.name} for '{spec.group}' failed "
                    f"({Path(command[0]).name} {command[1]} exited with {code}{_error_hint(log_path)}); see {log_path}"
                )
        if _run_logged((str(python), "-c", "import pytest"), log, env) != 0:
            raise EnvError(
                f"environment {spec.name} was built but cannot import pytest; add pytest to {requirements} "
                f"(log: {log_path})"
            )
    duration = time.monotonic() - start
    record = {**asdict(spec), "name": spec.name, "python": str(python), "built_at": time.time(), "build_seconds": duration}
    atomic_write_text(marker, json.dumps(record, indent=2))
    return BuildResult(spec.name, "built", str(python), str(log_path), duration)


_MEMO: dict[tuple[Path, int, EnvSettings], tuple[str, Path]] = {}


def resolve_python(dataset: DatasetManager, index: int, backend: str | None = None, build: bool = True, *,
                   python_version: str | None = None, env_name: str | None = None) -> str:
    """Absolute path of the interpreter of task ``index``'s environment (``env_name``: see ``spec_for_task``).

    A hit costs a memo lookup and two stats (no subprocess). A missing
    environment is built when ``build`` is true (under the file lock), else
    EnvError names the command that builds it.
    """
    settings = env_settings(backend, python_version=python_version)
    if settings.backend == "current":
        dataset.get(index)
        return sys.executable
    key = (dataset.root, index, settings, env_name)
    memo = _MEMO.get(key)
    if memo and _is_ready(memo[1]):
        return memo[0]
    spec = spec_for_task(dataset, index, settings, env_name)
    root = env_root(spec, settings)
    if not _is_ready(root):
        if not build:
            raise EnvError(
                f"environment {spec.name} of task {index} ('{spec.group}') is not built; "
                f"run: python scripts/manage_envs.py --dataset-dir {dataset.root} --backend {spec.backend} --task-ids {index}"
            )
        ensure_env(spec, settings)
    python = str(env_python(spec, settings))
    _MEMO[key] = (python, root)
    return python
