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
        raise EnvError(f"unknown environment backend '{name}'; choose one of {', '.join(BACKENDS)} (--env-backend / RECODE_ENV_BACKEND)")
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
            raise EnvError("backend 'conda' needs conda on PATH (not found); install Miniconda or use --env-backend uv")
        return found
    if backend == "uv":
        found = shutil.which("uv")
        if found:
            return found
        try:
            from uv import find_uv_bin
        except ImportError:
            raise EnvError("backend 'uv' needs uv (pip install uv) or use --env-backend venv") from None
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


def uv_index_args(settings: PipSettings, extra_index_urls: tuple[str, ...] = ()) -> list[str]:
    """uv flags equivalent to pip's settings, plus ``extra_index_urls`` of the environment (PyTorch indexes).

    pip merges all indexes and picks the best version; uv by default stops at
    the first index that has a package, so ``unsafe-best-match`` restores pip's
    behaviour whenever more than one source is configured.
    """
    args: list[str] = []
    if settings.no_index:
        args.append("--no-index")
    if settings.index_url:
        args += ["--index-url", settings.index_url]
    for url in (*settings.extra_index_urls, *extra_index_urls):
        args += ["--extra-index-url", url]
    for link in settings.find_links:
        args += ["--find-links", link]
    for constraint in settings.constraints:
        args += ["--constraint", constraint]
    if settings.extra_index_urls or settings.find_links or extra_index_urls:
        args += ["--index-strategy", "unsafe-best-match"]
    return args


def _pip_index_args(extra_index_urls: tuple[str, ...]) -> tuple[str, ...]:
    """pip reads the user's own settings itself; only the environment's indexes are added."""
    return tuple(arg for url in extra_index_urls for arg in ("--extra-index-url", url))


@dataclass(frozen=True)
class BuildPlan:
    """The commands that build one environment, in order, and extra environment variables for them.

    ``installer`` + arguments + ``installer_tail`` is one more install into the
    environment (post-install steps use it).
    """

    commands: tuple[tuple[str, ...], ...]
    extra_env: dict[str, str] = field(default_factory=dict)
    installer: tuple[str, ...] = ()
    installer_tail: tuple[str, ...] = ()

    def install(self, requirements: tuple[str, ...], no_deps: bool = False, find_links: tuple[str, ...] = ()) -> tuple[str, ...]:
        """Command installing ``requirements`` (pip requirement strings) into the environment."""
        if not self.installer:
            raise EnvError("this build plan has no installer for post-install steps")
        links = tuple(arg for link in find_links for arg in ("--find-links", link))
        return (*self.installer, *(("--no-deps",) if no_deps else ()), *requirements, *links, *self.installer_tail)


def _pip_plan(create: tuple[str, ...], prefix: Path, requirements: Path, extra_index_urls: tuple[str, ...]) -> BuildPlan:
    """Create, then install with the environment's own pip (which reads the user's pip configuration)."""
    installer = (str(interpreter(prefix)), "-m", "pip", "install")
    tail = _pip_index_args(extra_index_urls)
    return BuildPlan(commands=(create, (*installer, "--requirement", str(requirements), *tail)),
                     installer=installer, installer_tail=tail)


def conda_plan(
    conda: str, prefix: Path, requirements: Path, python_version: str, extra_index_urls: tuple[str, ...] = ()
) -> BuildPlan:
    """conda creates the prefix with python + pip; the prefix's pip installs."""
    create = (conda, "create", "--yes", "--quiet", "--prefix", str(prefix), f"python={python_version}", "pip")
    return _pip_plan(create, prefix, requirements, extra_index_urls)


def uv_plan(
    uv: str, prefix: Path, requirements: Path, python_version: str, pip: PipSettings,
    extra_index_urls: tuple[str, ...] = (),
) -> BuildPlan:
    extra_env = {"SSL_CERT_FILE": pip.cert} if pip.cert and "SSL_CERT_FILE" not in os.environ else {}
    installer = (uv, "pip", "install", "--python", str(interpreter(prefix)))
    tail = tuple(uv_index_args(pip, extra_index_urls))
    return BuildPlan(
        commands=(
            (uv, "venv", "--python", base_python(python_version), str(prefix)),
            (*installer, "--requirement", str(requirements), *tail),
        ),
        extra_env=extra_env,
        installer=installer,
        installer_tail=tail,
    )


def venv_plan(prefix: Path, requirements: Path, python_version: str, extra_index_urls: tuple[str, ...] = ()) -> BuildPlan:
    return _pip_plan((base_python(python_version), "-m", "venv", str(prefix)), prefix, requirements, extra_index_urls)


def build_plan(
    backend: str, prefix: Path, requirements: Path, python_version: str, extra_index_urls: tuple[str, ...] = ()
) -> BuildPlan:
    """The build commands of ``backend``; raises EnvError when its tool is missing."""
    if backend == "conda":
        return conda_plan(require_tool("conda"), prefix, requirements, python_version, extra_index_urls)
    if backend == "uv":
        return uv_plan(require_tool("uv"), prefix, requirements, python_version, read_pip_settings(), extra_index_urls)
    if backend == "venv":
        return venv_plan(prefix, requirements, python_version, extra_index_urls)
    raise EnvError(f"backend '{backend}' builds no environments")


# Prints the environment's site-packages folders, one per line (purelib and platlib may differ, e.g. lib64).
SITE_PACKAGES_QUERY = "import sysconfig; print('\\n'.join(sorted({sysconfig.get_path('purelib'), sysconfig.get_path('platlib')})))"
# Prints torch.__version__ and torch.version.cuda ('None' for CPU builds).
TORCH_VERSION_QUERY = "import torch; print(torch.__version__); print(torch.version.cuda)"


def bytecode_command(python: Path, site_packages: list[str]) -> tuple[str, ...]:
    """Precompile the environment's packages with its own interpreter.

    The sandbox mounts site-packages read-only, so without this every
    evaluation recompiles what it imports. No ``--invalidation-mode``:
    compileall then uses the interpreter's default (timestamp, or checked-hash
    under SOURCE_DATE_EPOCH), exactly what its import system checks, and a
    read-only bind mount keeps the source timestamps the .pyc files record.
    """
    return (str(python), "-m", "compileall", "-q", "-j0", *site_packages)
