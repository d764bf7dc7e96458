"""Which environment a task needs: its requirements group, normalised and fingerprinted.

A task's test.sh names a conda env (``conda activate <env>``); the env's
requirements come from an optional mapping file, else
``<dataset>/requirements/<env>.txt``, else, for the published dataset's env
names, the release's ``requirements_*.txt`` at the dataset root (see
``agent.envs.release``), else the default group. The fingerprint
covers the normalised requirements, the python version and the backend, so two
env names with identical requirements share one built environment and any
edit that changes what gets installed yields a new one. Everything here is
pure or read-only: building lives in ``agent.envs.cache``.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from agent.envs.release import RELEASE_ENVS, PostStep, ReleaseEnv, canonical_name, plan_install
from agent.task.dataset import DatasetManager

MAP_FILE_NAME = "env_map.yaml"
DEFAULT_GROUP_FILE = "default.txt"
# The built-in default group is just what the test runner itself needs.
BUILTIN_DEFAULT = ("pytest", "pytest-timeout")
DEFAULT_GROUP = "default"
_SAFE_ENV_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?(.*)$")
_INCLUDE = re.compile(r"^(-r|--requirement|-c|--constraint)(?:\s+|=)(\S+)$")


class EnvError(Exception):
    """An environment problem the user can fix; the message is one line naming the fix or the log."""


def normalise_requirement(line: str) -> str:
    """One requirement line in a canonical spelling (names, extras, spacing), meaning unchanged."""
    match = _REQUIREMENT.match(line)
    if not match:
        return " ".join(line.split())
    name, extras, rest = match.groups()
    extras_part = ""
    if extras:
        items = sorted({canonical_name(e.strip()) for e in extras[1:-1].split(",") if e.strip()})
        extras_part = f"[{','.join(items)}]" if items else ""
    rest = rest.strip()
    if rest.startswith("@"):
        url, _, marker = rest[1:].partition(" ;")
        spec = "@" + url.strip()
    else:
        spec, _, marker = rest.partition(";")
        spec = "".join(spec.split())
    marker = " ".join(marker.split())
    return canonical_name(name) + extras_part + spec + (f"; {marker}" if marker else "")


def _logical_lines(text: str) -> list[str]:
    """Lines with pip's comment and continuation rules applied, blanks dropped."""
    joined = re.sub(r"\\\r?\n", "", text)
    lines = []
    for raw in joined.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line:
            lines.append(line)
    return lines


def normalise_requirements_file(path: Path, _seen: frozenset[Path] = frozenset()) -> list[str]:
    """Sorted, de-duplicated canonical lines of a requirements file, with -r/-c files inlined.

    Inlining makes an edit to an included file change the fingerprint too.
    """
    path = path.resolve()
    if path in _seen:
        raise EnvError(f"requirements file {path} includes itself (via -r/-c); remove the loop")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EnvError(f"cannot read requirements file {path}: {exc.strerror}; fix the path or the mapping") from None
    lines: set[str] = set()
    for line in _logical_lines(text):
        include = _INCLUDE.match(line)
        if include:
            option, target = include.groups()
            inner = normalise_requirements_file(path.parent / target, _seen | {path})
            prefix = "-c " if option in ("-c", "--constraint") else ""
            lines.update(prefix + item for item in inner)
        else:
            lines.add(normalise_requirement(line))
    return sorted(lines)


def fingerprint(
    requirements: list[str] | tuple[str, ...], python_version: str, backend: str, install: dict | None = None
) -> str:
    """sha256 hex over the normalised requirements, python version and backend.

    ``install`` (what is installed when it differs from the file: retagged
    lines, PyTorch indexes, post-install steps) joins the payload only when
    given, so environments of plain files keep the name they were built under.
    """
    data: dict = {"requirements": sorted(requirements), "python": python_version, "backend": backend}
    if install:
        data["install"] = install
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


@dataclass(frozen=True)
class RequirementsMap:
    """A mapping file: env name -> requirements file, plus an optional default group file."""

    path: Path | None
    envs: dict[str, Path | None]
    default: Path | None


def load_requirements_map(path: Path | None) -> RequirementsMap:
    """Read an env map YAML; relative paths are relative to the map's folder.

    Shape: ``{default: FILE?, envs: {ENV: FILE | null | {requirements: FILE|null, tasks: [...]}}}``
    (``tasks`` is informational: it is what scripts/extract_env_map.py writes).
    """
    if path is None:
        return RequirementsMap(None, {}, None)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise EnvError(f"cannot read requirements map {path}: {exc.strerror}; fix --requirements-map") from None
    except yaml.YAMLError as exc:
        raise EnvError(f"requirements map {path} is not valid YAML ({str(exc).splitlines()[0]}); fix it") from None
    if not isinstance(data, dict) or not isinstance(data.get("envs", {}) or {}, dict):
        raise EnvError(f"requirements map {path} must be a mapping with 'envs: {{ENV: FILE}}'; see scripts/extract_env_map.py")

    def to_path(value: object, where: str) -> Path | None:
        if isinstance(value, dict):
            value = value.get("requirements")
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise EnvError(f"requirements map {path}: {where} must name a requirements file, got {value!r}")
        return (path.parent / value).resolve()

    envs = {str(name): to_path(value, f"env '{name}'") for name, value in (data.get("envs") or {}).items()}
    return RequirementsMap(path, envs, to_path(data.get("default"), "'default'"))


def find_requirements_map(dataset_root: Path, explicit: Path | None) -> Path | None:
    """The map to use: an explicit one (must exist), else the dataset's requirements/env_map.yaml if present."""
    if explicit is not None:
        if not explicit.is_file():
            raise EnvError(f"requirements map {explicit} does not exist; fix --requirements-map / RECODE_REQUIREMENTS_MAP")
        return explicit.resolve()
    candidate = dataset_root / "requirements" / MAP_FILE_NAME
    return candidate if candidate.is_file() else None


def release_requirements(env_name: str | None, release_dir: Path | None) -> Path | None:
    """The published dataset's file of a release env name (``test_common1`` -> ``requirements_test_common.txt``) if present."""
    env = RELEASE_ENVS.get(env_name or "")
    if env is None or release_dir is None:
        return None
    path = release_dir / env.requirements_file
    return path if path.is_file() else None


def requirements_source(
    env_name: str | None, requirements_dir: Path, rmap: RequirementsMap, release_dir: Path | None = None
) -> tuple[str, Path | None]:
    """(group label, requirements file) for an env name; file None means the built-in default group.

    Order: the map's entry, ``requirements/<env>.txt``, the release's file of
    that env name in ``release_dir`` (the published dataset keeps them at its
    root), the map's ``default``, ``requirements/default.txt``, the built-in
    group (pytest, pytest-timeout).
    """
    if env_name:
        mapped = rmap.envs.get(env_name)
        if mapped is not None:
            if not mapped.is_file():
                raise EnvError(f"requirements file {mapped} for env '{env_name}' (from {rmap.path}) does not exist; fix the map")
            return env_name, mapped
        own = requirements_dir / f"{env_name}.txt"
        if _SAFE_ENV_NAME.fullmatch(env_name) and own.is_file():
            return env_name, own
        released = release_requirements(env_name, release_dir)
        if released is not None:
            return env_name, released
    if rmap.default is not None:
        if not rmap.default.is_file():
            raise EnvError(f"default requirements file {rmap.default} (from {rmap.path}) does not exist; fix the map")
        return DEFAULT_GROUP, rmap.default
    fallback = requirements_dir / DEFAULT_GROUP_FILE
    return DEFAULT_GROUP, (fallback if fallback.is_file() else None)


@dataclass(frozen=True)
class EnvSpec:
    """Everything that decides one built environment. ``name`` is its folder name under the env dir.

    ``install_lines`` empty: pip installs ``requirements_file`` as it is;
    otherwise these lines (retagged, see ``agent.envs.release``) are installed
    instead, with the PyTorch indexes of ``index_tags``, then ``post_install``.
    """

    env_name: str | None
    group: str
    requirements_file: str | None
    requirements: tuple[str, ...]
    backend: str
    python_version: str
    fingerprint: str
    install_lines: tuple[str, ...] = ()
    index_tags: tuple[str, ...] = ()
    post_install: tuple[PostStep, ...] = ()
    cpu: bool = False

    @property
    def name(self) -> str:
        return f"{self.backend}-py{self.python_version}-{self.fingerprint[:12]}"


def _absolute_include(line: str, base: Path) -> str:
    """An ``-r``/``-c`` line with its file made absolute (the rewritten copy lives elsewhere)."""
    include = _INCLUDE.match(line)
    if not include:
        return line
    option, target = include.groups()
    return f"{option} {(base / target).resolve()}"


def _release_env_of(source: Path | None, env_name: str | None) -> ReleaseEnv | None:
    """The release env whose post-install steps apply: only when built from that env's own file."""
    env = RELEASE_ENVS.get(env_name or "")
    return env if env is not None and source is not None and source.name == env.requirements_file else None


def spec_for_env_name(
    env_name: str | None, requirements_dir: Path, rmap: RequirementsMap, backend: str, python_version: str,
    *, cpu: bool = False, release_dir: Path | None = None,
) -> EnvSpec:
    """The spec of the environment that serves ``env_name`` (``cpu``: CPU builds of PyTorch wheels)."""
    group, source = requirements_source(env_name, requirements_dir, rmap, release_dir)
    requirements = tuple(normalise_requirements_file(source)) if source else BUILTIN_DEFAULT
    install_lines: tuple[str, ...] = ()
    index_tags: tuple[str, ...] = ()
    post: tuple[PostStep, ...] = ()
    install = None
    if source is not None:
        lines = _logical_lines(source.read_text(encoding="utf-8"))
        plan = plan_install(lines, _release_env_of(source, env_name), cpu)
        index_tags, post = plan.index_tags, plan.post_install
        if plan.changed:
            install_lines = tuple(_absolute_include(line, source.parent) for line in plan.lines)
        if plan.changed or index_tags or post:
            install = {
                "lines": sorted(normalise_requirement(line) for line in plan.lines),
                "indexes": list(index_tags),
                "post": [[list(step.requirements), step.no_deps, step.torch_wheel_page] for step in post],
            }
    return EnvSpec(
        env_name=env_name,
        group=group,
        requirements_file=str(source) if source else None,
        requirements=requirements,
        backend=backend,
        python_version=python_version,
        fingerprint=fingerprint(requirements, python_version, backend, install),
        install_lines=install_lines,
        index_tags=index_tags,
        post_install=post,
        cpu=cpu and install is not None,
    )


def load_task_env_map(path: Path) -> dict[int, str]:
    """A JSON ``{task id: env name}`` file (what scripts/extract_env_map.py writes, as the release's does)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EnvError(f"cannot read env map {path}: {exc.strerror}; fix the path") from None
    except json.JSONDecodeError as exc:
        raise EnvError(f"env map {path} is not valid JSON ({exc.msg}, line {exc.lineno}); fix it") from None
    if not isinstance(data, dict):
        raise EnvError(f"env map {path} must be a JSON object {{task id: env name}}; write it with scripts/extract_env_map.py")
    mapping: dict[int, str] = {}
    for key, value in data.items():
        if not (str(key).strip().isdigit() and (value is None or isinstance(value, str))):
            raise EnvError(f"env map {path}: entry {key!r}: {value!r} must map a task id to an env name")
        if value:
            mapping[int(key)] = value
    return mapping


def task_env_names(dataset: DatasetManager, task_ids: list[int] | None) -> dict[int, str | None]:
    """Task id -> env name from its test.sh (None when the script activates no env)."""
    return {meta.index: dataset.test_sh(meta.index).env_name for meta in dataset.select(task_ids)}
