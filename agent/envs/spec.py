"""Which environment a task needs: its requirements group, normalised and fingerprinted.

A task's test.sh names a conda env (``conda activate <env>``); the env's
requirements come from an optional mapping file, else
``<dataset>/requirements/<env>.txt``, else the default group. The fingerprint
covers the normalised requirements, the python version and the backend, so two
env names with identical requirements share one built environment and any
edit that changes what gets installed yields a new one. Everything here is
pure or read-only: building lives in ``agent.env_cache``.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from agent.utils import DatasetManager

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


def canonical_name(name: str) -> str:
    """PEP 503 normal form of a distribution name (``Foo_Bar.baz`` -> ``foo-bar-baz``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


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


def fingerprint(requirements: list[str] | tuple[str, ...], python_version: str, backend: str) -> str:
    """sha256 hex over the normalised requirements, python version and backend."""
    payload = json.dumps({"requirements": sorted(requirements), "python": python_version, "backend": backend})
    return hashlib.sha256(payload.encode()).hexdigest()


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


def requirements_source(env_name: str | None, requirements_dir: Path, rmap: RequirementsMap) -> tuple[str, Path | None]:
    """(group label, requirements file) for an env name; file None means the built-in default group.

    Order: the map's entry, ``requirements/<env>.txt``, the map's ``default``,
    ``requirements/default.txt``, the built-in group (pytest, pytest-timeout).
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
    if rmap.default is not None:
        if not rmap.default.is_file():
            raise EnvError(f"default requirements file {rmap.default} (from {rmap.path}) does not exist; fix the map")
        return DEFAULT_GROUP, rmap.default
    fallback = requirements_dir / DEFAULT_GROUP_FILE
    return DEFAULT_GROUP, (fallback if fallback.is_file() else None)


@dataclass(frozen=True)
class EnvSpec:
    """Everything that decides one built environment. ``name`` is its folder name under the env dir."""

    env_name: str | None
    group: str
    requirements_file: str | None
    requirements: tuple[str, ...]
    backend: str
    python_version: str
    fingerprint: str

    @property
    def name(self) -> str:
        return f"{self.backend}-py{self.python_version}-{self.fingerprint[:12]}"


def spec_for_env_name(
    env_name: str | None, requirements_dir: Path, rmap: RequirementsMap, backend: str, python_version: str
) -> EnvSpec:
    """The spec of the environment that serves ``env_name``."""
    group, source = requirements_source(env_name, requirements_dir, rmap)
    requirements = tuple(normalise_requirements_file(source)) if source else BUILTIN_DEFAULT
    return EnvSpec(
        env_name=env_name,
        group=group,
        requirements_file=str(source) if source else None,
        requirements=requirements,
        backend=backend,
        python_version=python_version,
        fingerprint=fingerprint(requirements, python_version, backend),
    )


def task_env_names(dataset: DatasetManager, task_ids: list[int] | None) -> dict[int, str | None]:
    """Task id -> env name from its test.sh (None when the script activates no env)."""
    return {meta.index: dataset.test_sh(meta.index).env_name for meta in dataset.select(task_ids)}
