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
        requirements.txt   only for the built-in default group, or the file as rewritten for install
        recode_env.json    completion marker, written last and atomically; its "bytecode"
                           entry says the packages were precompiled (added to older envs by manage_envs)
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from filelock import FileLock, Timeout

from agent.common.atomic_file import atomic_write_text
from agent.common.progress import still_running, to_stderr
from agent.envs.backends import (
    SITE_PACKAGES_QUERY,
    TORCH_VERSION_QUERY,
    BuildPlan,
    build_plan,
    bytecode_command,
    check_backend_name,
    default_backend,
    default_python_version,
    interpreter,
)
from agent.envs.reach import PROBE_TIMEOUT_SEC, index_answers
from agent.envs.release import PostStep, pyg_wheel_base, pyg_wheel_page, torch_index_url
from agent.envs.size import announcement
from agent.envs.spec import (
    EnvError,
    EnvSpec,
    RequirementsMap,
    find_requirements_map,
    load_requirements_map,
    spec_for_env_name,
)
from agent.task.dataset import DatasetError, DatasetManager

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
    "build_commands",
    "compile_bytecode",
    "plan_envs",
    "reachable_torch_index",
    "resolve_python",
    "spec_for_task",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ENV_DIR = REPO_ROOT / "work_dir" / "envs"
MARKER = "recode_env.json"
LOG = "build.log"
LOCK = "build.lock"
PREFIX = "prefix"
PYTEST_WARMED = "pytest_plugins_exit"  # key of the marker's "bytecode" record: pytest's rewrite cache is filled


@dataclass(frozen=True)
class EnvSettings:
    """Where and how environments are built.

    ``requirements_map`` None: the dataset's own map, if any. ``release_dir``:
    the folder holding the release's ``requirements_*.txt`` (None: the dataset
    root, where the published dataset keeps them). ``cpu``: CPU builds of the
    PyTorch wheels instead of the CUDA ones the files pin; ``cpu_by_default``:
    chosen only because this machine has no GPU (not by a flag or
    RECODE_ENV_CPU), so an unreachable CPU index may be given up; ``torch_fallback``:
    the CPU index that was, when it was (see :func:`reachable_torch_index`).
    """

    backend: str
    python_version: str
    env_dir: Path
    requirements_map: Path | None = None
    cpu: bool = False
    release_dir: Path | None = None
    cpu_by_default: bool = False
    torch_fallback: str = ""


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def gpu_present() -> bool:
    """An NVIDIA GPU this machine can use: its driver is loaded, or its tool is installed."""
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def cpu_builds(setting: str | None) -> bool:
    """CPU builds of the PyTorch wheels: as RECODE_ENV_CPU says (1/0), else on a machine without a GPU, where
    the CUDA builds are gigabytes of ``nvidia-*`` wheels that cannot be used."""
    if setting is not None and setting.strip():
        return _flag(setting)
    return not gpu_present()


def env_settings(
    backend: str | None = None,
    env_dir: str | Path | None = None,
    requirements_map: str | Path | None = None,
    python_version: str | None = None,
    cpu: bool | None = None,
    release_dir: str | Path | None = None,
) -> EnvSettings:
    """Explicit values first, then RECODE_ENV_BACKEND / RECODE_ENV_DIR / RECODE_REQUIREMENTS_MAP /
    RECODE_ENV_PYTHON / RECODE_ENV_CPU / RECODE_REQUIREMENTS_DIR, then the defaults
    (conda if installed else uv; work_dir/envs; CPU builds without a GPU; the dataset root)."""
    chosen = check_backend_name(backend) if backend else default_backend()
    directory = env_dir or os.environ.get("RECODE_ENV_DIR") or DEFAULT_ENV_DIR
    rmap = requirements_map or os.environ.get("RECODE_REQUIREMENTS_MAP") or None
    release = release_dir or os.environ.get("RECODE_REQUIREMENTS_DIR") or None
    told = cpu is not None or bool(os.environ.get("RECODE_ENV_CPU", "").strip())
    return EnvSettings(
        backend=chosen,
        python_version=python_version or default_python_version(chosen),
        env_dir=Path(directory).expanduser().resolve(),
        requirements_map=Path(rmap).expanduser() if rmap else None,
        cpu=cpu_builds(os.environ.get("RECODE_ENV_CPU")) if cpu is None else cpu,
        release_dir=Path(release).expanduser().resolve() if release else None,
        cpu_by_default=not told and cpu_builds(None),
    )


PROBES = "index_probes.json"  # in the env dir: the run's answer of the CPU index, shared by its processes


def reachable_torch_index(
    settings: EnvSettings, specs: list[EnvSpec], warn: Callable[[str], None] | None = None
) -> EnvSettings:
    """``settings``, or the configured index's torch instead of the CPU builds when those were chosen only
    for want of a GPU, some of ``specs`` (the environments about to be built) need PyTorch's CPU index, and
    that index does not answer a short connect: uv asks every index for every package, so an unreachable one
    would fail the whole build. The process that asked says so, in one line naming the choices."""
    if not settings.cpu_by_default or not any("cpu" in spec.index_tags for spec in specs):
        return settings
    url = torch_index_url("cpu")
    answers, asked = index_answers(url, settings.env_dir / PROBES)
    if answers:
        return settings
    if asked:
        (warn or to_stderr)(f"warning: PyTorch's CPU index {url} did not answer within {PROBE_TIMEOUT_SEC:g} s, so "
                          "torch comes from the configured index (pip's settings; PyPI's Linux torch is the CUDA "
                          "build, ~3 GB more); choose with RECODE_TORCH_INDEX_URL=<a mirror of it> or "
                          "RECODE_ENV_CPU=0 (the configured index, no check)")
    return replace(settings, cpu=False, cpu_by_default=False, torch_fallback=url)


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


def _spec(env_name: str | None, dataset: DatasetManager, rmap: RequirementsMap, settings: EnvSettings) -> EnvSpec:
    return spec_for_env_name(
        env_name, dataset.root / "requirements", rmap, settings.backend, settings.python_version,
        cpu=settings.cpu, release_dir=settings.release_dir or dataset.root,
    )


def spec_for_task(dataset: DatasetManager, index: int, settings: EnvSettings, env_name: str | None = None) -> EnvSpec:
    """The environment spec of one task (reads its test.sh and requirements; runs nothing).

    ``env_name`` overrides the env its test.sh names (an env map's entry).
    """
    name = env_name or dataset.test_sh(index).env_name
    return _spec(name, dataset, _requirements_map(dataset, settings), settings)


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
    by_env_name: dict[str | None, EnvSpec] = {}
    planned: dict[str, PlannedEnv] = {}
    errors: dict[int, str] = {}
    for meta in dataset.select(task_ids):
        try:
            env_name = dataset.test_sh(meta.index).env_name
            if env_name not in by_env_name:
                by_env_name[env_name] = _spec(env_name, dataset, rmap, settings)
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
    """Outcome of ensure_env: status 'up to date', 'built' or 'bytecode compiled' (failures raise EnvError)."""

    name: str
    status: str
    python: str
    log_path: str
    duration_sec: float


def _read_marker(root: Path) -> dict:
    try:
        return json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def ensure_env(
    spec: EnvSpec, settings: EnvSettings, rebuild: bool = False, progress: Callable[[str], None] = to_stderr
) -> BuildResult:
    """Build the environment unless a finished one exists; safe to call from many processes at once.

    A finished environment built before packages were precompiled gets its
    bytecode now (once: the marker records it).
    """
    root = env_root(spec, settings)
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        progress(f"waiting for another process to finish building {spec.name} ...")
        with still_running(f"waiting for another process to finish building {spec.name}", progress,
                           f"its log: {root / LOG}"):
            lock.acquire()
    try:
        if not rebuild and _is_ready(root):
            marker = _read_marker(root)
            if PYTEST_WARMED in marker.get("bytecode", {}):
                return BuildResult(spec.name, "up to date", str(env_python(spec, settings)), str(root / LOG), 0.0)
            return _precompile(spec, settings, marker, progress)
        return _build(spec, settings, progress)
    finally:
        lock.release()


def _precompile(spec: EnvSpec, settings: EnvSettings, marker: dict, progress: Callable[[str], None]) -> BuildResult:
    """Add the bytecode (or only pytest's warm start) to a finished environment built without it."""
    root, start = env_root(spec, settings), time.monotonic()
    progress(f"precompiling the packages of {spec.name} (it was built before they were; once)")
    compiling = still_running(f"precompiling {spec.name}", progress)
    with (root / LOG).open("a", encoding="utf-8") as log, compiling:
        bytecode = compile_bytecode(env_python(spec, settings), log, dict(os.environ), marker.get("bytecode"))
    if bytecode is None:
        raise EnvError(f"precompiling the packages of {spec.name} failed; see {root / LOG}")
    atomic_write_text(root / MARKER, json.dumps({**marker, "bytecode": bytecode}, indent=2))
    return BuildResult(spec.name, "bytecode compiled", str(env_python(spec, settings)), str(root / LOG),
                       time.monotonic() - start)


def _run_logged(command: tuple[str, ...], log, env: dict[str, str], capture: bool = False) -> tuple[int, str]:
    """(exit code, stdout if ``capture``); the command and its output go to the log."""
    log.write(f"$ {shlex.join(command)}\n")
    log.flush()
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE if capture else log,
                              stderr=log if capture else subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, text=True)
    except OSError as exc:
        log.write(f"cannot run {command[0]}: {exc}\n")
        return 127, ""
    if capture:
        log.write(done.stdout)
    return done.returncode, done.stdout or ""


def compile_bytecode(python: Path, log, env: dict[str, str], done: dict | None = None) -> dict | None:
    """Precompile the environment's site-packages; the marker's record of it, or None when it could not run.

    compileall exits 1 when some file does not compile (packages ship
    templates or old-syntax test data); importing such a file fails anyway,
    so that still counts as done. ``done``: the record of an earlier
    compileall, so that only the pytest step is added.
    """
    if done is None:
        code, out = _run_logged((str(python), "-c", SITE_PACKAGES_QUERY), log, env, capture=True)
        folders = [line for line in out.splitlines() if line.strip()]
        if code != 0 or not folders:
            return None
        code, _ = _run_logged(bytecode_command(python, folders), log, env)
        if code not in (0, 1):
            return None
        done = {"site_packages": folders, "compileall_exit": code, "compiled_at": time.time()}
    warmed = warm_pytest_plugins(python, log, env)
    return None if warmed is None else {**done, PYTEST_WARMED: warmed}


def warm_pytest_plugins(python: Path, log, env: dict[str, str]) -> int | None:
    """Let pytest cache its assertion-rewritten copies of the plugins it loads by itself; its exit code.

    pytest rewrites the packages of every plugin it finds through entry points
    (pytest-timeout, anyio, ...) at each start unless a cached copy lies in
    their ``__pycache__``; site-packages is read-only in the sandbox, so only
    a start here, with writes allowed, can leave one. Collecting an empty
    folder loads them all and runs nothing (exit 5, no tests).
    """
    with tempfile.TemporaryDirectory(prefix="recode-warm-") as empty:
        command = (str(python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", empty)
        writable = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        code, _ = _run_logged(command, log, writable)
    return code if code in (0, 5) else None


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


def _requirements_to_install(spec: EnvSpec, root: Path) -> Path:
    """The file the main install reads: the original, or a rewritten copy when lines were retagged or moved."""
    if spec.requirements_file and not spec.install_lines:
        return Path(spec.requirements_file)
    lines = spec.install_lines or spec.requirements
    requirements = root / "requirements.txt"
    requirements.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return requirements


def _plan(spec: EnvSpec, prefix: Path, requirements: Path) -> BuildPlan:
    indexes = tuple(torch_index_url(tag) for tag in spec.index_tags)
    return build_plan(spec.backend, prefix, requirements, spec.python_version, indexes)


def post_install_command(plan: BuildPlan, step: PostStep, wheel_page: str | None) -> tuple[str, ...]:
    """The command of one post-install step; ``wheel_page``: the PyG page of the installed torch, for PyG steps."""
    links = (wheel_page,) if step.torch_wheel_page and wheel_page else ()
    return plan.install(step.requirements, step.no_deps, links)


def build_commands(spec: EnvSpec, settings: EnvSettings) -> list[str]:
    """Every command a build of ``spec`` runs, as shell lines (for --dry-run; nothing is run or written).

    The PyG wheel page depends on the torch build installed, so its URL shows
    ``<installed torch>``.
    """
    root = env_root(spec, settings)
    prefix = root / PREFIX
    if spec.requirements_file and not spec.install_lines:
        requirements = Path(spec.requirements_file)
    else:
        requirements = root / "requirements.txt"
    plan = _plan(spec, prefix, requirements)
    lines = [shlex.join(command) for command in plan.commands]
    page = f"{pyg_wheel_base()}/torch-<installed torch>.html"
    lines += [shlex.join(post_install_command(plan, step, page)) for step in spec.post_install]
    python = interpreter(prefix)
    lines.append(shlex.join(bytecode_command(python, [f"<site-packages of {python}>"])))
    return lines


def _torch_version(python: Path, log, env: dict[str, str]) -> tuple[str, str | None] | None:
    code, out = _run_logged((str(python), "-c", TORCH_VERSION_QUERY), log, env, capture=True)
    lines = out.split()
    if code != 0 or len(lines) < 2:
        return None
    return lines[0], None if lines[1] == "None" else lines[1]


def _build(spec: EnvSpec, settings: EnvSettings, progress: Callable[[str], None]) -> BuildResult:
    """Build from scratch (the lock is held): wipe, install, post-install, check pytest, precompile, mark."""
    root = env_root(spec, settings)
    prefix = root / PREFIX
    marker, log_path = root / MARKER, root / LOG
    marker.unlink(missing_ok=True)
    if prefix.exists():
        shutil.rmtree(prefix)
    requirements = _requirements_to_install(spec, root)
    plan = _plan(spec, prefix, requirements)
    python = interpreter(prefix)
    progress(f"building {announcement(spec, settings.torch_fallback)} (log: {log_path})")
    start = time.monotonic()
    env = {**os.environ, **plan.extra_env}

    def fail(command: tuple[str, ...], code: int) -> EnvError:
        log.flush()
        return EnvError(
            f"building environment {spec.name} for '{spec.group}' failed "
            f"({Path(command[0]).name} {command[1]} exited with {code}{_error_hint(log_path)}); see {log_path}"
        )

    building = still_running(f"building {spec.name}", progress, f"log: {log_path}")
    with log_path.open("w", encoding="utf-8") as log, building:
        log.write(f"# environment {spec.name}\n# group {spec.group}; requirements {requirements}\n")
        log.write(f"# backend {spec.backend}; python {spec.python_version}; fingerprint {spec.fingerprint}\n")
        for command in plan.commands:
            code, _ = _run_logged(command, log, env)
            if code != 0:
                raise fail(command, code)
        for step in spec.post_install:
            log.write(f"# post-install: {step.why}\n")
            torch = _torch_version(python, log, env) if step.torch_wheel_page else None
            if step.torch_wheel_page and torch is None:
                raise EnvError(f"environment {spec.name}: {', '.join(step.requirements)} need torch installed "
                               f"first (their wheels match its build); add torch to {requirements} (log: {log_path})")
            command = post_install_command(plan, step, pyg_wheel_page(*torch) if torch else None)
            code, _ = _run_logged(command, log, env)
            if code != 0:
                raise fail(command, code)
        if _run_logged((str(python), "-c", "import pytest"), log, env)[0] != 0:
            raise EnvError(
                f"environment {spec.name} was built but cannot import pytest; add pytest to {requirements} "
                f"(log: {log_path})"
            )
        bytecode = compile_bytecode(python, log, env)
    if bytecode is None:
        progress(f"warning: precompiling {spec.name} failed (see {log_path}); the next manage_envs run retries")
    duration = time.monotonic() - start
    record = {**asdict(spec), "name": spec.name, "python": str(python), "built_at": time.time(), "build_seconds": duration}
    if settings.torch_fallback:
        record["torch_index_unreachable"] = settings.torch_fallback
    if bytecode is not None:
        record["bytecode"] = bytecode
    atomic_write_text(marker, json.dumps(record, indent=2))
    return BuildResult(spec.name, "built", str(python), str(log_path), duration)


_MEMO: dict[tuple, tuple[str, Path]] = {}


def resolve_python(
    dataset: DatasetManager, index: int, backend: str | None = None, build: bool = True,
    *, python_version: str | None = None, env_name: str | None = None,
) -> str:
    """Absolute path of the interpreter of task ``index``'s environment.

    ``env_name`` overrides the env the task's test.sh names (an env map's
    entry). An environment built with the other PyTorch build (``manage_envs --cpu`` or ``--cuda``) serves
    when the default one is not built. A hit costs a memo lookup
    and two stats (no subprocess). A missing environment is built when
    ``build`` is true (under the file lock), else EnvError names the command
    that builds it.
    """
    settings = env_settings(backend, python_version=python_version)
    if settings.backend == "current":
        dataset.get(index)
        return sys.executable
    key = (dataset.root, index, settings, env_name)
    memo = _MEMO.get(key)
    if memo and _is_ready(memo[1]):
        return memo[0]
    variants = [settings, replace(settings, cpu=not settings.cpu)]
    specs = [spec_for_task(dataset, index, variant, env_name) for variant in variants]
    ready = next((spec for spec in specs if _is_ready(env_root(spec, settings))), None)
    spec = ready or specs[0]
    if ready is None:
        if not build:
            raise EnvError(
                f"environment {spec.name} of task {index} ('{spec.group}') is not built; "
                f"run: python scripts/manage_envs.py --dataset-dir {dataset.root} --env-backend {spec.backend} --task-ids {index}"
            )
        chosen = reachable_torch_index(settings, [spec])
        spec = spec if chosen is settings else specs[1]
        ensure_env(spec, chosen)
    python = str(env_python(spec, settings))
    _MEMO[key] = (python, env_root(spec, settings))
    return python
