"""From a YAML file (and the command line's overrides) to the raw mapping the validator reads: the release's
empty string means "not set", ``${NAME}`` names an environment variable, and an unknown key is refused with
the closest known spelling."""
from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any, Iterable

import yaml

from agent.config.errors import ConfigError
from agent.config.reader import Reader
from agent.config.schema import KNOWN_KEYS, MODEL_KEYS

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def open_config(path: Path, overrides: dict, need_keys: bool) -> Reader:
    """The reader of ``path`` with the set ``overrides`` (hyphenated keys, from flags) on top."""
    source = str(path)
    raw = _with_overrides(read_yaml(path), overrides, source)
    check_keys(raw, KNOWN_KEYS, "", source)
    if isinstance(raw.get("models"), list):
        for entry in raw["models"]:
            if isinstance(entry, dict):
                check_keys(entry, MODEL_KEYS, " in a 'models' entry", source)
    flags = frozenset(key for key, value in overrides.items() if value is not None)
    expanded = {key: _expand_env(value, key, source) for key, value in raw.items()}
    return Reader(source, _unset_empty(expanded), need_keys, flags)


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}; pass --yaml-location with an existing YAML file")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}; fix the syntax") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values at the top level")
    return raw


def check_keys(keys: Iterable[Any], allowed: Iterable[str], where: str, source: str) -> None:
    allowed = list(allowed)
    for key in keys:
        if not isinstance(key, str) or key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else " (config/default.yaml lists every key)"
            raise ConfigError(f"{source}: unknown key '{key}'{where}{hint}")


def _expand_env(value: Any, key: str, source: str) -> Any:
    """Replace ``${NAME}`` in every string of ``value`` by the environment variable's value."""
    if isinstance(value, str):
        def lookup(match: re.Match) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(f"{source}: '{key}' uses ${{{name}}} but the environment variable {name} "
                                  "is not set; export it or write the value in the config")
            return os.environ[name]
        return _ENV_REF.sub(lookup, value)
    if isinstance(value, list):
        return [_expand_env(item, key, source) for item in value]
    if isinstance(value, dict):
        return {k: _expand_env(item, key, source) for k, item in value.items()}
    return value


def _unset_empty(raw: dict[str, Any]) -> dict[str, Any]:
    """Drop keys whose value is an empty string (the release's "not set"), also inside ``models`` entries."""
    clean = {key: value for key, value in raw.items() if value != ""}
    if isinstance(clean.get("models"), list):
        clean["models"] = [_unset_empty(entry) if isinstance(entry, dict) else entry for entry in clean["models"]]
    return clean


def _with_overrides(raw: dict[str, Any], overrides: dict, source: str) -> dict[str, Any]:
    """``raw`` with the set ``overrides`` on top; a ``model`` override of a file that lists ``models`` entries
    picks the entries of those names (each keeps its own provider keys)."""
    given = {key: value for key, value in overrides.items() if value is not None}
    if "model" not in given or "models" not in raw:
        return {**raw, **given}
    names = given.pop("model")
    names = names if isinstance(names, list) else [names]
    entries = [entry for entry in raw["models"] if isinstance(entry, dict)] if isinstance(raw["models"], list) else []
    listed = [entry.get("model") for entry in entries]
    missing = [name for name in names if name not in listed]
    if missing:
        raise ConfigError(f"{source}: model '{missing[0]}' is not among its 'models' entries "
                          f"({', '.join(map(str, listed))}); name one of them")
    return {**raw, **given, "models": [entry for entry in entries if entry.get("model") in names]}
