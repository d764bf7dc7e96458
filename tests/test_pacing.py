"""The pacer's logic on a fake clock (no timing): token-bucket arithmetic, reservations corrected by usage,
and the providers' rate-limit headers lowering the buckets. scripts/bench_pacing.py measures it for real."""
from __future__ import annotations

import pytest

from agent.models.pacing import HEADROOM, Pacer, TokenBucket, provider_remaining, reset_seconds
from agent.models.types import ChatRequest, ModelSpec, Tokens
from tests.fake_clock import FakeClock


def request(chars: int, max_output: int | None = None) -> ChatRequest:
    spec = ModelSpec("openai", "gpt-5-mini", max_output_tokens=max_output)
    return ChatRequest.build(spec, [{"role": "user", "content": "x" * chars}], None)


def test_bucket_starts_full_goes_into_debt_and_refills_at_its_rate() -> None:
    bucket = TokenBucket(capacity=600, per_sec=10, now=0.0)
    assert bucket.take(500, 0.0) == 0.0
    assert bucket.take(200, 0.0) == pytest.approx(10.0)  # 100 in debt at 10 a second
    assert bucket.take(50, 20.0) == 0.0  # refilled 200 by then: 100 - 50 left
    assert bucket.level == pytest.approx(50)
    bucket.refill(1000.0)
    assert bucket.level == 600  # never above the capacity
    assert bucket.take(10_000, 1000.0) == 0.0  # larger than the bucket: charged as a full one
    bucket.adjust(-100, 1000.0)
    assert bucket.level == pytest.approx(100)


def test_pacer_waits_before_sending_and_usage_corrects_the_estimate() -> None:
    clock = FakeClock(start=100.0)
    pacer = Pacer(requests_per_minute=None, tokens_per_minute=6000, minute=60.0, clock=clock, sleep=clock.sleep,
                  headroom=1.0)
    first = pacer.before(request(4000, max_output=500))  # 1000 prompt + at most 500 answer
    assert first.tokens == 1500 and first.waited_sec == 0.0
    pacer.after(first, Tokens(input=1000, output=100))  # it counted 1100: 400 given back
    assert pacer.buckets["tokens"].level == pytest.approx(4900)
    assert pacer.estimate(request(4000)) == pytest.approx(1100)  # answers now expected as the one seen
    pacer.before(request(19_600, max_output=1))  # 4901: one token of debt, a hundredth of a second at 100 a second
    assert clock.slept == [pytest.approx(0.01)]
    pacer.after(first, Tokens(input=1000, output=300))  # answers of 100 and 300: 200 +- 100
    assert pacer.estimate(request(4000)) == pytest.approx(1000 + 300)


def test_requests_per_minute_paces_calls_one_after_another() -> None:
    clock = FakeClock(start=100.0)
    pacer = Pacer(requests_per_minute=2, tokens_per_minute=None, minute=60.0, clock=clock, sleep=clock.sleep,
                  headroom=1.0)
    waits = [pacer.before(request(10)).waited_sec for _ in range(4)]
    assert waits == [0.0, 0.0, pytest.approx(30.0), pytest.approx(30.0)]


def test_headers_lower_the_bucket_to_what_the_provider_says_is_left() -> None:
    clock = FakeClock(start=100.0)
    pacer = Pacer(requests_per_minute=100, tokens_per_minute=60_000, minute=60.0, clock=clock, sleep=clock.sleep,
                  headroom=1.0)
    pacer.observe({"x-ratelimit-remaining-tokens": "20000", "x-ratelimit-reset-tokens": "10s",
                   "x-ratelimit-remaining-requests": "99"})
    assert pacer.buckets["tokens"].level == pytest.approx(20_000)  # the reset says no more than 60000 - 10 s x 1000
    assert pacer.buckets["requests"].level == pytest.approx(99)
    pacer.observe({"x-ratelimit-remaining-tokens": "50000", "x-ratelimit-reset-tokens": "45s"})
    assert pacer.buckets["tokens"].level == pytest.approx(15_000)  # a bucket full again in 45 s holds 15000 now
    pacer.observe({"x-ratelimit-remaining-tokens": "59000"})  # never raised above what we know
    assert pacer.buckets["tokens"].level == pytest.approx(15_000)


def test_reset_formats_and_anthropic_headers() -> None:
    assert reset_seconds("6m0s", 0) == 360 and reset_seconds("20ms", 0) == pytest.approx(0.02)
    assert reset_seconds("1.5s", 0) == 1.5 and reset_seconds("soon", 0) is None and reset_seconds(None, 0) is None
    assert reset_seconds("1970-01-01T00:01:00Z", 30.0) == pytest.approx(30.0)
    headers = {"anthropic-ratelimit-tokens-remaining": "700",
               "anthropic-ratelimit-tokens-reset": "1970-01-01T00:00:40Z"}
    assert provider_remaining(headers, "tokens", per_sec=10, capacity=600, now_epoch=0.0) == pytest.approx(200)
    assert provider_remaining({}, "tokens", per_sec=10, capacity=600, now_epoch=0.0) is None


def test_a_model_with_a_limit_is_paced_through_its_sdk_and_reads_the_headers(monkeypatch) -> None:
    """The pacer sits in the real call path: build_model's calls reserve, and the SDK's responses reach it."""
    from agent.models.build import build_model
    from agent.models.pacing import pacer_for
    from tests.fake_providers import FakeProvider, Reply, model_spec, success_body

    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    with FakeProvider("openai") as server:
        server.push(Reply(body=success_body("openai", "ok", input_tokens=30, output_tokens=5),
                          headers={"x-ratelimit-remaining-tokens": "1234", "x-ratelimit-reset-tokens": "1ms"}))
        spec = ModelSpec("openai", "gpt-5-mini", base_url=server.base_url, tokens_per_minute=600_000)
        build_model(spec).complete([{"role": "user", "content": "x" * 120}])
        pacer = pacer_for(spec)
        assert pacer is not None and pacer.answers == 1 and pacer.answer_tokens == 5
        assert pacer.buckets["tokens"].level <= 1234 + 1  # lowered by the header (plus a moment's refill)
        assert pacer.buckets["tokens"].capacity == 600_000 * HEADROOM
    assert pacer_for(model_spec(server)) is None  # no limit: no pacing
