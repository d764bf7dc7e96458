"""What a configuration value may be: each kind checks a YAML value, says in words what it expects (the same
words in the error, the docs page and config/default.yaml) and converts an accepted value."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Integer:
    low: int | None = None
    high: int | None = None

    @property
    def what(self) -> str:
        if self.high is not None:
            return f"an integer from {self.low} to {self.high}"
        return "an integer" + (f" >= {self.low}" if self.low is not None else "")

    def accepts(self, value: Any) -> bool:
        return (is_int(value) and (self.low is None or value >= self.low)
                and (self.high is None or value <= self.high))

    def convert(self, value: Any) -> Any:
        return value


@dataclass(frozen=True)
class Number:
    """A number at least ``low`` (above it when ``above``); ``unit`` is said after "a number" (of US dollars)."""
    low: float = 0.0
    above: bool = False
    unit: str = ""

    @property
    def what(self) -> str:
        return f"a number{self.unit} {'>' if self.above else '>='} {self.low:g}"

    def accepts(self, value: Any) -> bool:
        return is_number(value) and (value > self.low if self.above else value >= self.low)

    def convert(self, value: Any) -> float:
        return float(value)


@dataclass(frozen=True)
class Choice:
    """One of ``options``; ``aliases`` are other names of an option (the release's ``google`` for gemini)."""
    options: tuple[str, ...]
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def what(self) -> str:
        return "one of " + ", ".join(self.options)

    def accepts(self, value: Any) -> bool:
        return self.aliases.get(value, value) in self.options if isinstance(value, str) else False

    def convert(self, value: Any) -> str:
        return self.aliases.get(value, value)


@dataclass(frozen=True)
class Text:
    what: str = "a non-empty string"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value != ""

    def convert(self, value: Any) -> Any:
        return value


@dataclass(frozen=True)
class FilePath(Text):
    """A path as text; relative to the working folder, ``~`` expanded."""
    what: str = "a path"

    def convert(self, value: Any) -> Path:
        return Path(value).expanduser().resolve()


@dataclass(frozen=True)
class Flag:
    what: str = "true or false"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)

    def convert(self, value: Any) -> bool:
        return value


@dataclass(frozen=True)
class OneOrList:
    """One ``item`` or a list of them, kept in order without repeats; an empty list is None where ``empty_ok``."""
    item: Integer | Text
    what: str
    empty_ok: bool = False

    def bad_items(self, value: Any) -> list:
        """The items that are not an ``item`` (the first is reported in the error)."""
        return [item for item in self.items(value) if not self.item.accepts(item)]

    def accepts(self, value: Any) -> bool:
        return not self.bad_items(value) if self.items(value) else self.empty_ok

    def items(self, value: Any) -> list:
        return value if isinstance(value, list) else [value]

    def convert(self, value: Any) -> tuple | None:
        return tuple(dict.fromkeys(self.items(value))) or None


@dataclass(frozen=True)
class Devices:
    """CUDA device ids: integers or non-empty names, each once."""
    what: str = "a list of CUDA device ids like [0, 1]"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, list) and all(is_int(g) or isinstance(g, str) and g for g in value)

    def convert(self, value: Any) -> tuple:
        return tuple(value)


@dataclass(frozen=True)
class Entries:
    """The ``models`` list: mappings of model keys, checked key by key when each model is read."""
    what: str = "a non-empty list of mappings like {model: NAME, api-provider: P}"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, list) and bool(value) and all(isinstance(entry, dict) for entry in value)

    def convert(self, value: Any) -> list:
        return value


Kind = Union[Integer, Number, Choice, Text, FilePath, Flag, OneOrList, Devices, Entries]
