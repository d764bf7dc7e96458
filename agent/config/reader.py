"""The one validator: a key's value checked against its declaration (agent/config/schema.py), every failure a
:class:`ConfigError` naming the file, or the flag when a command-line flag set the key."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from agent.config.errors import ConfigError
from agent.config.kinds import OneOrList
from agent.config.schema import KEYS, Key

_UNSET = object()  # "read the key from the file", as opposed to an explicit None


class Reader:
    """Checked access to the raw mapping of one file (empty strings already dropped, ``${NAME}`` expanded)."""

    def __init__(self, source: str, raw: dict[str, Any], need_keys: bool = True,
                 flags: frozenset[str] = frozenset()) -> None:
        self.source = source
        self.raw = raw
        self.need_keys = need_keys  # False: API keys are not looked up (--estimate calls no model)
        self.flags = flags  # keys a command-line flag of the same name set: their mistakes are the flag's

    def fail(self, message: str) -> ConfigError:
        """The error, against the flag when it starts by naming a key a flag set (``--max-workers must...``),
        else against the file."""
        key = next((key for key in self.flags if message.startswith(f"'{key}' ")), None)
        if key is not None:
            return ConfigError(f"--{key}{message[len(key) + 2:]}")
        return ConfigError(f"{self.source}: {message}")

    def check(self, *problems: str | None) -> None:
        """Raise the first of ``problems`` (messages of broken rules) that is not None."""
        problem = next((problem for problem in problems if problem is not None), None)
        if problem is not None:
            raise self.fail(problem)

    def spelling(self, key: Key, values: Mapping[str, Any] | None = None) -> str | None:
        """Which of the key's spellings ``values`` (default: the file) sets, if any; both is a mistake."""
        given = [name for name in (key.name, *key.also) if name in (self.raw if values is None else values)]
        if len(given) > 1:
            raise self.fail(f"set either '{given[0]}' or '{given[1]}' (the same setting), not both")
        return given[0] if given else None

    def get(self, name: str) -> Any:
        """The run key's value as written; absent, or null where null means nothing, its default."""
        key = KEYS[name]
        written = self.spelling(key)
        value = None if written is None else self.raw[written]
        if value is None and not (key.nullable and written is not None):
            return key.default
        return value

    def read(self, key: Key, value: Any = _UNSET, name: str = "") -> Any:
        """``value`` (default: the key's own) checked against ``key``'s kind and converted; None stays None.
        ``name`` is the key as the user wrote it (a feedback model's ``human-*``, another spelling)."""
        if value is _UNSET:
            name, value = self.spelling(key) or key.name, self.get(key.name)
        name = name or key.name
        if value is None:
            return None
        kind = key.kind
        if isinstance(kind, OneOrList) and value == [] and not kind.empty_ok:
            raise self.fail(f"'{name}' is an empty list; give {kind.what}")
        if not kind.accepts(value):
            shown = kind.bad_items(value)[0] if isinstance(kind, OneOrList) else value
            raise self.fail(f"'{name}' must be {kind.what}, got {shown!r}")
        return kind.convert(value)

    def shown(self, name: str, value: Any = _UNSET) -> str:
        """How a path key was read, for errors: ``'work_dir' (relative to /cwd)`` or the absolute path."""
        text = str(self.get(name) if value is _UNSET else value)
        if Path(text).expanduser().is_absolute():
            return f"'{text}'"
        return f"'{text}' (relative to the working folder {Path.cwd()})"
