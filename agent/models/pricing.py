"""Dollar cost of a call from a price table (US dollars per 1M tokens).

A model is found by its exact name, else by the longest table entry that is
a prefix of it followed by a snapshot suffix (``gpt-5-2025-08-07``,
``claude-sonnet-4-20250514``). Anything else is unknown and costs None:
a missing number is better than a wrong one.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from agent.models.types import InferenceError, Tokens

DEFAULT_PRICES_PATH = Path(__file__).resolve().parents[2] / "config" / "prices.yaml"
PRICE_FIELDS = ("input", "cached_input", "cache_write", "output")
SNAPSHOT_SUFFIX = re.compile(r"[-@]\d")


def load_prices(path: str | Path = DEFAULT_PRICES_PATH) -> dict[str, dict[str, float]]:
    """Read and check a price file: ``models: {name: {input, output[, cached_input][, cache_write]}}``."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise InferenceError(f"cannot read price table {path}: {error.strerror}; fix the prices path") from None
    except yaml.YAMLError as error:
        raise InferenceError(f"price table {path} is not valid YAML ({str(error).splitlines()[0]}); fix it") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise InferenceError(f"price table {path} has no 'models' mapping; see config/prices.yaml for the format")
    return {str(name): _check_entry(path, str(name), entry) for name, entry in models.items()}


def _check_entry(path: str | Path, name: str, entry: Any) -> dict[str, float]:
    if not isinstance(entry, dict) or not {"input", "output"} <= entry.keys() or not entry.keys() <= set(PRICE_FIELDS):
        raise InferenceError(f"price table {path}: {name} needs input and output (and optionally cached_input, "
                             "cache_write)")
    values = {}
    for field, value in entry.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise InferenceError(f"price table {path}: {name}.{field} must be a non-negative number")
        values[field] = float(value)
    return values


def find_price(prices: dict[str, dict[str, float]], model: str) -> dict[str, float] | None:
    """The entry for ``model``: exact name, else the longest prefix followed by a snapshot suffix."""
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name) and SNAPSHOT_SUFFIX.match(model, len(name))]
    return prices[max(matches, key=len)] if matches else None


def cost_usd(prices: dict[str, dict[str, float]], model: str, tokens: Tokens) -> float | None:
    """Dollars for ``tokens``; None when the model or a needed count is unknown.

    ``tokens.input`` is the whole prompt. Its part read from the prompt cache
    (``tokens.cached``) costs ``cached_input``, its part written to the cache
    (``tokens.cache_write``) costs ``cache_write``; each falls back to the input
    price when the entry has none (an upper bound for reads; the rule of the
    providers that bill no write surcharge). Reasoning tokens are part of the output.
    """
    price = find_price(prices, model)
    if price is None or tokens.input is None or tokens.output is None:
        return None
    cached = min(tokens.cached or 0, tokens.input)
    written = min(tokens.cache_write or 0, tokens.input - cached)
    dollars = (
        (tokens.input - cached - written) * price["input"]
        + cached * price.get("cached_input", price["input"])
        + written * price.get("cache_write", price["input"])
        + tokens.output * price["output"]
    )
    return dollars / 1_000_000


def cache_saving(prices: dict[str, dict[str, float]], model: str, tokens: Tokens) -> float | None:
    """Dollars the prompt cache saved on ``tokens``: their price as if nothing were cached or written, less their
    price (negative when writes cost more than the reads saved); None when either price is unknown."""
    paid = cost_usd(prices, model, tokens)
    whole = cost_usd(prices, model, Tokens(tokens.input, tokens.output))
    return None if paid is None or whole is None else whole - paid
