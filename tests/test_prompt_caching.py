"""Prompt caching: each provider's real SDK against a local server that applies that provider's caching rules
(tests/caching_servers.py). The model sees the same text with caching on and off; what the cache served is read
from each API's usage fields and priced at its own rates. The slow test runs the main command's sweep."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from agent.config import load_config
from agent.job.fingerprint import job_fingerprint
from agent.models.build import build_model
from agent.models.pricing import cost_usd, load_prices
from agent.models.prompt_cache import PrefixTracker, anthropic_blocks, common_prefix, openai_cache_key
from agent.models.types import Tokens
from agent.job.record import cache_totals
from agent.run.summary import cache_note, cache_record
from tests import metrics_helpers  # noqa: F401 (puts metrics/ on the path, as the notebooks do)
from metric_cost import turn_cost  # noqa: E402
from tests.caching_servers import PromptCache, caching_responder, run_sweep
from tests.fake_providers import FakeProvider, model_spec, strip_cache_markers
from tests.fake_providers import no_provider_env  # noqa: F401 (fixture)

PAPER = "".join(f"Line {i} of the paper: a method, its equations and its experiments.\n" for i in range(400))
SYSTEM = "You implement research code. Answer with one action.\n" * 3


def job_calls(task: str) -> list[list[dict[str, str]]]:
    """Three calls of one job, as the release protocol makes them: the paper and task first, then what changes."""
    head = f"# Paper\n{PAPER}\n# Task\nImplement {task}.\n# History\n"
    return [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": head + tail}]
            for tail in ("(none)\n# Code\n(empty)\n", "step 1: READ\n# Code\n(empty)\n",
                         "step 1: READ\nstep 2: REPLACE\n# Code\ndef f(): ...\n")]


def sent(protocol: str, caching: bool, calls: list[list[dict[str, str]]]) -> tuple[list, list]:
    """The requests a model sent for ``calls`` (bodies) and the usage it recorded, against a caching server."""
    cache = PromptCache(protocol)
    with FakeProvider(protocol, caching_responder(protocol, cache, lambda request: "action: SUBMIT")) as server:
        model = build_model(replace(model_spec(server), prompt_caching=caching))
        usage = [model.complete(messages).usage for messages in calls]
    return [r.body for r in server.requests], usage


@pytest.mark.usefixtures("no_provider_env")
@pytest.mark.parametrize("protocol", ["anthropic", "openai", "gemini"])
def test_the_model_sees_the_same_text_and_the_cache_serves_the_stable_prefix(protocol: str) -> None:
    calls = job_calls(f"the {protocol} module")
    on, used_on = sent(protocol, True, calls)
    off, used_off = sent(protocol, False, calls)
    assert [strip_cache_markers(body) for body in on] == off
    assert [u.input_tokens for u in used_on] == [u.input_tokens for u in used_off]
    cached = [u.cached_tokens or 0 for u in used_on]
    assert cached[0] == 0 and cached[2] > len(PAPER) // 4 * 0.9  # the paper is read from the cache by the last call
    if protocol == "anthropic":  # only marked prompts are cached there; the write is billed above the input price
        assert all((u.cached_tokens or 0) == 0 and not u.cache_write_tokens for u in used_off)
        assert any(u.cache_write_tokens for u in used_on)
        assert all("cache_control" not in str(body) for body in off)
    if protocol == "openai":
        assert {body["prompt_cache_key"] for body in on} == {openai_cache_key(on[0]["model"], calls[0])}
    prices = load_prices()
    for usage in used_on:
        tokens = Tokens(usage.input_tokens, usage.output_tokens, usage.cached_tokens, None, usage.cache_write_tokens)
        assert usage.cost_usd == pytest.approx(cost_usd(prices, usage.model, tokens))
        assert usage.cache_saved_usd == pytest.approx(
            cost_usd(prices, usage.model, Tokens(usage.input_tokens, usage.output_tokens)) - usage.cost_usd)
    dollars = [sum(u.cost_usd for u in used) for used in (used_on, used_off)]
    if protocol == "anthropic":
        assert dollars[0] < dollars[1]
    else:  # automatic caching: the same hits either way (a key only steers a real service's routing to one cache)
        assert dollars[0] == pytest.approx(dollars[1]) and [u.cached_tokens for u in used_off] == cached


def test_breakpoints_split_text_at_line_breaks_and_reuse_earlier_ones() -> None:
    tracker = PrefixTracker()
    placed = []
    for messages in job_calls("x") + job_calls("x")[2:]:
        system, rest = anthropic_blocks("claude-sonnet-4", messages[0]["content"], messages[1:], tracker)
        assert system == messages[0]["content"]  # too short to cache on its own: left a plain string
        blocks = rest[0]["content"] if isinstance(rest[0]["content"], list) else []
        assert "".join(b["text"] for b in blocks) == messages[1]["content"] or not blocks
        assert all(b["text"].endswith("\n") for b in blocks if "cache_control" in b)
        assert sum("cache_control" in b for b in blocks) <= 3
        placed.append([len(b["text"]) for b in blocks if "cache_control" in b])
    assert placed[0] == []  # nothing known to be stable yet
    assert placed[1] and placed[2][0] == placed[1][0]  # the next call reads where the previous one wrote
    assert placed[3] == [sum(placed[2])]  # the same prompt again (a retry) reads, and writes nothing new
    assert common_prefix("abcdef", "abcxyz") == 3 and common_prefix("", "a") == 0


def test_prompt_caching_is_on_by_default_recorded_and_out_of_the_fingerprint(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text((Path(__file__).resolve().parents[1] / "config" / "offline.yaml").read_text())
    on = load_config(config)
    off = load_config(config, {"prompt-caching": False, "tokens-per-minute": 90000})
    assert on.prompt_caching and on.models[0].prompt_caching
    assert not off.prompt_caching and not off.models[0].prompt_caching and off.models[0].tokens_per_minute == 90000
    assert off.public_dict()["models"][0]["prompt_caching"] is False
    prints = [job_fingerprint(models={"code": vars(cfg.models[0])}, prompts={}, memory={}) for cfg in (on, off)]
    assert prints[0] == prints[1]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("protocol", ["anthropic", "openai", "gemini"])
def test_a_sweep_through_the_main_command(tmp_path_factory, protocol: str) -> None:
    """The main command on two sample tasks, caching on and off: the same text, the share served by the cache,
    the dollars of each run (scripts/bench_caching.py prints these figures)."""
    root = tmp_path_factory.mktemp("caching sweep")
    keys = {"task-ids": [1, 2], "guidance-level": [2], "max-turn": 2}
    on, off = run_sweep(protocol, True, root, **keys), run_sweep(protocol, False, root, **keys)
    assert on.returncode == 0 and off.returncode == 0, on.output[-2000:] + off.output[-2000:]
    assert len(on.requests) == len(off.requests) and on.seen() == off.seen()
    cache_on, cache_off = on.record["prompt_caching"], off.record["prompt_caching"]
    assert cache_on["enabled"] and not cache_off["enabled"] and cache_on["input_tokens"] == cache_off["input_tokens"]
    assert cache_on["cached_tokens"] > 0.1 * cache_on["input_tokens"]
    dollars = [sum(row["cost_usd"] for row in sweep.record["summary"]) for sweep in (on, off)]
    assert dollars[0] < dollars[1] if protocol == "anthropic" else dollars[0] == pytest.approx(dollars[1])
    if protocol == "anthropic":
        assert cache_off["cached_tokens"] == 0


def test_summary_line_and_cost_table_count_reads_writes_and_savings() -> None:
    calls = [{"input_tokens": 5000, "cached_tokens": 4000, "cache_write_tokens": 0, "cache_saved_usd": 0.0108,
              "cost_usd": 0.002},
             {"input_tokens": 5000, "cached_tokens": 0, "cache_write_tokens": 4000, "cache_saved_usd": -0.003,
              "cost_usd": 0.018},
             {"input_tokens": 5000, "cached_tokens": 4000, "cache_saved_usd": 0.0, "from_cache": True}]
    totals = cache_totals(calls)
    assert totals == {"cached_tokens": 4000, "cache_write_tokens": 4000, "cache_saved_usd": pytest.approx(0.0078)}
    record = cache_record([{"input_tokens": 10000, **totals}], enabled=True)
    assert cache_note(record) == ("prompt caching: 4,000 of 10,000 input tokens read from the providers' caches "
                                  "(40.0%), 4,000 written; saved $0.0078 at list prices (this run)")
    assert "off (prompt-caching: false)" in cache_note(cache_record([], enabled=False))
    row = turn_cost({"code_usage": calls[:2]})
    assert (row["code_cached"], row["code_cache_write"], row["cache_saved_usd"]) == (4000, 4000,
                                                                                    pytest.approx(0.0078))
