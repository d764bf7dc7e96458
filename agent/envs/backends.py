"""How each backend builds an environment: pure command construction plus pip-settings discovery.

Backends: ``conda`` (the release's choice), ``uv`` (the default without conda),
``venv`` (stdlib + pip) and ``current`` (this interpreter, nothing built).
uv ignores pip's configuration, so the user's find-links / index / constraint
settings are read from ``pip config list`` and the PIP_* variables and passed
on explicitly; otherwise e.g. ``torch==2.13.0`` would resolve to a multi-GB
CUDA build instead of the local CPU wheel.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from agent.envs.spec import EnvError

BACKENDS = ("conda", "uv", "venv", "current")
CONDA_PYTHON = "3.10"  # the release's environments
_PIP_OPTIONS = ("index-url", "extra-index-url", "find-links", "no-index", "constraint", "cert")


def default_backend(environ: dict[str, str] | None = None) -> str:
    """RECODE_ENV_BACKEND if set, else conda when installed, else uv."""
    environ = os.environ if environ is None else environ
    chosen = environ.get("RECODE_ENV_BACKEND", "").strip()
    if chosen:
        return check_backend_name(chosen)
    return "conda" if shutil.which("conda") else "uv"


def check_backend_name(name: str) -> str:
    if name not in BACKENDS:
        raise EnvError(f"unknown environment backend '{name}'; choose one of {', '.join(BACKENDS)} (--backend / RECODE_ENV_BACKEND)")
    return name


def current_python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def default_python_version(backend: str, environ: dict[str, str] | None = None) -> str:
    """RECODE_ENV_PYTHON if set; conda uses the release's 3.10; others this interpreter's version.

    Matching this interpreter keeps uv/venv offline-capable (no python download)
    and lets cp3X-only local wheels (like the CPU torch) match.
    """
    environ = os.environ if environ is None else environ
    chosen = environ.get("RECODE_ENV_PYTHON", "").strip()
    if chosen:
        return chosen
    return CONDA_PYTHON if backend == "conda" else current_python_version()


def interpreter(prefix: Path) -> Path:
    """The python of a venv or conda prefix (POSIX layout)."""
    return prefix / "bin" / "python"


def require_tool(backend: str) -> str:
    """Absolute path of the backend's tool; EnvError naming the fix when it is missing."""
    if backend == "conda":
        found = shutil.which("conda")
        if not found:
            raise EnvError("backend 'conda' needs conda on PATH (not found); install Miniconda or use --backend uv")
        return found
    if backend == "uv":
        found = shutil.which("uv")
        if found:
            return found
        try:
            from uv import find_uv_bin
        except ImportError:
            raise EnvError("backend 'uv' needs uv (pip install uv) or use --backend venv") from None
        return find_uv_bin()
    return sys.executable


def base_python(version: str) -> str:
    """What to build a uv/venv env from: this interpreter if the version matches, else pythonX.Y on PATH."""
    if version == current_python_version():
        return sys.executable
    return shutil.which(f"python{version}") or version


@dataclass(frozen=True)
class PipSettings:
    """The index-related pip settings that uv must be told about explicitly."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    constraints: tuple[str, ...] = ()
    cert: str | None = None


def parse_pip_settings(config_list: str, environ: dict[str, str]) -> PipSettings:
    """Effective settings from ``pip config list`` output plus PIP_* variables.

    pip's precedence: environment variables over the ``install`` section over
    ``global``; files are already merged by ``pip config list``.
    """
    rank = {"global": 0, "install": 1, ":env:": 2}
    found: dict[str, tuple[int, str]] = {}
    for line in config_list.splitlines():
        key, sep, raw = line.partition("=")
        section, _, option = key.strip().rpartition(".")
        if not sep or section not in rank or option not in _PIP_OPTIONS:
            continue
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip().strip("'\"")
        if option not in found or rank[section] >= found[option][0]:
            found[option] = (rank[section], str(value))
    for option in _PIP_OPTIONS:
        value = environ.get("PIP_" + option.upper().replace("-", "_"))
        if value is not None:
            found[option] = (rank[":env:"], value)
    values = {option: value for option, (_, value) in found.items()}
    return PipSettings(
        index_url=values.get("index-url") or None,
        extra_index_urls=tuple(values.get("extra-index-url", "").split()),
        find_links=tuple(values.get("find-links", "").split()),
        no_index=values.get("no-index", "").strip().lower() in ("1", "true", "yes", "on"),
        constraints=tuple(values.get("constraint", "").split()),
        cert=values.get("cert") or None,
    )


def read_pip_settings() -> PipSettings:
    """The user's pip settings; without a working pip, just the PIP_* variables."""
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=False
        )
        text = listed.stdout if listed.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    return parse_pip_settings(text, dict(os.environ))


def uv_index_args(settings: PipSettings) -> list[str]:
    """uv flags equivalent to pip's settings.

    pip merges all indexes and picks the best version; uv by default stops at
    the first index that has a package, so ``unsafe-best-match`` restores pip's
    behaviour whenever more than one source is configured.
    """
    args: list[str] = []
    if settings.no_index:
        args.append("--no-index")
    if settings.index_url:
        args += ["--index-url", settings.index_url]
    for url in settings.extra_index_urls:
        args += ["--extra-index-url", url]
    for link in settings.find_links:
        args += ["--find-links", link]
    for constraint in settings.constraints:
        args += ["--constraint", constraint]
    if settings.extra_index_urls or settings.find_links:
        args += ["--index-strategy", "unsafe-best-match"]
    return args


@dataclass(frozen=True)
class BuildPlan:
    """The commands that build one environment, in order, and extra environment variables for them."""

    commands: tuple[tuple[str, ...], ...]
    extra_env: dict[str, str] = field(default_factory=dict)


def conda_plan(conda: str, prefix: Path, requirements: Path, python_version: str) -> BuildPlan:
    """conda creates the prefix with python + pip; the prefix's pip (which reads pip's config) installs."""
    return BuildPlan(
        commands=(
            (conda, "create", "--yes", "--quiet", "--prefix", str(prefix), f"python={python_version}", "pip"),
            (str(interpreter(prefix)), "-m", "pip", "install", "--requirement", str(requirements)),
        )
    )


def uv_plan(uv: str, prefix: Path, requirements: Path, python_version: str, pip: PipSettings) -> BuildPlan:
    extra_env = {"SSL_CERT_FILE": pip.cert} if pip.cert and "SSL_CERT_FILE" not in os.environ else {}
    return BuildPlan(
        commands=(
            (uv, "venv", "--python", base_python(python_version), str(prefix)),
            (uv, "pip", "install", "--python", str(interpreter(prefix)), "--requirement", str(requirements), *uv_index_args(pip)),
        ),
        extra_env=extra_env,
    )


def venv_plan(prefix: Path, requirements: Path, python_version: str) -> BuildPlan:
    return BuildPlan(
        commands=(
            (base_python(python_version), "-m", "venv", str(prefix)),
            (str(interpreter(prefix)), "-m", "pip", "install", "--requirement", str(requirements)),
        )
    )


def build_plan(backend: str, prefix: Path, requirements: Path, python_version: str) -> BuildPlan:
    """The build commands of ``backend``; raises EnvError when its tool is missing."""
    if backend == "conda":
        return conda_plan(require_tool("conda"), prefix, requirements, python_version)
    if backend == "uv":
        return uv_plan(require_tool("uv"), prefix, requirements, python_version, read_pip_settings())
    if backend == "venv":
        return venv_plan(prefix, requirements, python_version)
    raise EnvError(f"backend '{backend}' builds no environments")
