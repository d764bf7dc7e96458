"""The price table: the shipped file, model lookup, cost arithmetic and bad tables."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.models.build import DEFAULT_PRICES_PATH, InferenceError, build_model, find_price, load_prices
from agent.models.types import Tokens
from agent.models.pricing import cost_usd
from tests.fake_providers import FakeProvider, model_spec, no_provider_env  # noqa: F401

TABLE = {
    "gpt-5": {"input": 1.25, "cached_input": 0.125, "output": 10.0},
    "gpt-5-mini": {"input": 0.25, "cached_input": 0.025, "output": 2.0},
    "gemini-2.5-pro": {"input": 1.25, "output": 10.0},
}


def test_shipped_table_covers_the_papers_models_and_says_to_check_prices() -> None:
    prices = load_prices()
    for model in ("gpt-5", "gpt-5-mini", "o4-mini", "deepseek-chat", "gemini-2.5-pro", "claude-sonnet-4"):
        assert find_price(prices, model) is not None, model
    header = DEFAULT_PRICES_PATH.read_text()
    assert "LIST prices" in header and 'as-of: "2025-10-01"' in header
    assert "CHECK YOUR PROVIDER'S CURRENT PRICE PAGE" in header


@pytest.mark.parametrize(
    ("model", "entry"),
    [
        ("gpt-5", "gpt-5"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),  # the longest prefix wins
        ("gpt-5-pro", None),  # a different model, not a snapshot: unknown rather than wrong
        ("gpt-5.1", None),
        ("gemini-2.5-pro", "gemini-2.5-pro"),
        ("llama3.1:8b", None),
    ],
)
def test_lookup(model: str, entry: str | None) -> None:
    assert find_price(TABLE, model) == (TABLE[entry] if entry else None)


def test_cost_with_cached_and_reasoning_tokens() -> None:
    tokens = Tokens(input=2_000_000, output=1_000_000, cached=1_000_000, reasoning=400_000)
    assert cost_usd(TABLE, "gpt-5", tokens) == pytest.approx(1.25 + 0.125 + 10.0)


def test_missing_cached_price_charges_the_input_price() -> None:
    tokens = Tokens(input=1_000_000, output=0, cached=500_000)
    assert cost_usd(TABLE, "gemini-2.5-pro", tokens) == pytest.approx(1.25)


def test_cache_writes_cost_their_own_price_and_reads_theirs() -> None:
    table = {"claude-sonnet-4": {"input": 3.0, "cached_input": 0.3, "cache_write": 3.75, "output": 15.0}}
    tokens = Tokens(input=4_000_000, output=1_000_000, cached=2_000_000, cache_write=1_000_000)
    assert cost_usd(table, "claude-sonnet-4-20250514", tokens) == pytest.approx(3.0 + 0.6 + 3.75 + 15.0)
    no_write_price = {"gpt-5": TABLE["gpt-5"]}  # OpenAI bills no write surcharge: writes cost the input price
    assert cost_usd(no_write_price, "gpt-5", Tokens(input=1_000_000, output=0, cache_write=1_000_000)) == 1.25


def test_shipped_table_prices_anthropic_cache_as_its_published_multiples() -> None:
    sonnet = find_price(load_prices(), "claude-sonnet-4")
    assert sonnet["cache_write"] == pytest.approx(1.25 * sonnet["input"])
    assert sonnet["cached_input"] == pytest.approx(0.1 * sonnet["input"])


def test_anthropic_cache_writes_are_read_from_the_wire_and_priced(no_provider_env) -> None:
    with FakeProvider("anthropic") as server:
        server.reply_text("hi", input_tokens=100, output_tokens=10, cached_tokens=3000, cache_write_tokens=1000)
        usage = build_model(model_spec(server)).complete([{"role": "user", "content": "hello"}]).usage
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens) == (4100, 3000, 1000)
    assert usage.cost_usd == pytest.approx((100 * 3.0 + 3000 * 0.3 + 1000 * 3.75 + 10 * 15.0) / 1e6)


def test_unknown_model_or_counts_cost_none() -> None:
    assert cost_usd(TABLE, "mystery-model", Tokens(10, 10)) is None
    assert cost_usd(TABLE, "gpt-5", Tokens(input=None, output=10)) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models:\n  m: {input: 1}\n", "m needs input and output"),
        ("models:\n  m: {input: 1, output: -2}\n", "m.output must be a non-negative number"),
        ("models:\n  m: {input: 1, output: 2, cache: 1}\n", "m needs input and output"),
        ("prices: {}\n", "has no 'models' mapping"),
        ("models: [\n", "is not valid YAML"),
    ],
)
def test_bad_tables_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(InferenceError, match=message) as raised:
        load_prices(path)
    assert "\n" not in str(raised.value)


def test_missing_table(tmp_path: Path) -> None:
    with pytest.raises(InferenceError, match="cannot read price table"):
        load_prices(tmp_path / "absent.yaml")
