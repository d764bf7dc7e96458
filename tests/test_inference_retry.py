"""The retry policy on its own: retry-after parsing, waits, the count and the window, and which failures retry."""
from __future__ import annotations

import email.utils

import pytest

from agent.models.build import InferenceError, ModelSpec, build_model
from agent.models.providers import HttpFailure, by_status
from agent.models.types import Answer, RequestFatal, RunFatal, Tokens
from agent.models.retry import (
    BACKOFF_MAX_SEC,
    RETRY_AFTER_CAP_SEC,
    BadAnswer,
    Outage,
    TransientError,
    call_with_retries,
    parse_retry_after,
)
from tests.fake_clock import FakeClock

NOW = 1_750_000_000.0
POLICY = {"label": "p m", "provider": "P"}


def scripted_attempts(*outcomes: Exception | Answer):
    """An attempt function that raises or returns the given outcomes in order; counts calls."""
    queue = list(outcomes)
    calls = []

    def attempt() -> Answer:
        calls.append(1)
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return attempt, calls


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": email.utils.formatdate(NOW + 12, usegmt=True)}, 12.0),
        ({"retry-after": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"retry-after": "86400"}, RETRY_AFTER_CAP_SEC),
        ({"retry-after": "soon"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers: dict | None, seconds: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == seconds


def test_retry_after_is_honoured_and_backoff_is_bounded() -> None:
    attempt, calls = scripted_attempts(
        TransientError("HTTP 429", retry_after=7.0),
        TransientError("HTTP 500"),
        TransientError("HTTP 500"),
        Answer("ok", Tokens(1, 1)),
    )
    slept: list[float] = []
    answer, billed = call_with_retries(attempt, **POLICY, window_sec=0, max_retries=5, scale=1.0, sleep=slept.append)
    assert answer.text == "ok" and billed == Tokens()
    assert len(calls) == 4
    assert slept[0] == 7.0
    assert 0 <= slept[1] <= 2 and 0 <= slept[2] <= 4  # full jitter below 2**(attempt-1) s


def test_backoff_never_exceeds_its_cap() -> None:
    attempt, calls = scripted_attempts(*[TransientError("HTTP 500") for _ in range(12)], Answer("ok", Tokens()))
    slept: list[float] = []
    call_with_retries(attempt, **POLICY, window_sec=0, max_retries=12, scale=1.0, sleep=slept.append)
    assert len(slept) == 12 and all(0 <= s <= BACKOFF_MAX_SEC for s in slept)


def test_wait_scale_multiplies_every_wait() -> None:
    attempt, _ = scripted_attempts(TransientError("HTTP 429", retry_after=8.0), Answer("ok", Tokens()))
    slept: list[float] = []
    call_with_retries(attempt, **POLICY, window_sec=0, max_retries=1, scale=0.25, sleep=slept.append)
    assert slept == [2.0]


def test_bad_answers_stop_early_and_report_their_tokens() -> None:
    bad = [BadAnswer("empty completion", hint="raise max-output-tokens", tokens=Tokens(10, 2)) for _ in range(5)]
    attempt, calls = scripted_attempts(*bad)
    with pytest.raises(InferenceError, match="gave up after 3 attempt.*empty completion; raise max-output") as raised:
        call_with_retries(attempt, **POLICY, window_sec=0, max_retries=10, scale=0.0)
    assert len(calls) == 3
    assert raised.value.billed == Tokens(30, 6)


def test_zero_retries_means_one_attempt() -> None:
    attempt, calls = scripted_attempts(TransientError("HTTP 503"), Answer("never", Tokens()))
    with pytest.raises(Outage, match=r"^P says it is unavailable after 1 attempt\(s\) over 0 s \(last: HTTP 503\) "
                       r"\(outage\): run the same command again once it answers"):
        call_with_retries(attempt, **POLICY, window_sec=0, max_retries=0, scale=0.0)
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("status", "kind"),
    [(408, TransientError), (429, TransientError), (500, TransientError), (529, TransientError),
     (400, RequestFatal), (413, RequestFatal), (422, RequestFatal), (401, RunFatal), (403, RunFatal),
     (404, RunFatal)],
)
def test_which_statuses_retry(status: int, kind: type) -> None:
    spec = ModelSpec("openai", "m")
    failure = by_status(HttpFailure(status, None, None, "boom", {"retry-after": "3"}), spec)
    assert isinstance(failure, kind)
    if kind is TransientError:
        assert failure.retry_after == 3.0
    else:
        assert "\n" not in str(failure) and ("boom" in str(failure) or status == 401)


def test_a_storm_inside_the_window_is_waited_out_past_the_count() -> None:
    clock = FakeClock()
    attempt, calls = scripted_attempts(*[TransientError("HTTP 503") for _ in range(10)], Answer("ok", Tokens()))
    answer, _ = call_with_retries(attempt, **POLICY, max_retries=2, window_sec=600, scale=1.0,
                                  sleep=clock.sleep, clock=clock)
    assert answer.text == "ok" and len(calls) == 11  # 10 failures, max_retries 2
    assert clock.now < 600


def test_a_storm_longer_than_the_window_is_an_outage_that_stops_at_its_end() -> None:
    clock = FakeClock()
    attempt, calls = scripted_attempts(*[TransientError("HTTP 503", retry_after=30.0) for _ in range(100)])
    with pytest.raises(Outage) as raised:
        call_with_retries(attempt, **POLICY, max_retries=2, window_sec=300, scale=1.0, sleep=clock.sleep,
                          clock=clock)
    assert (raised.value.code, raised.value.provider) == ("outage", "P")
    assert clock.now == pytest.approx(300) and len(calls) == 11  # every 30 s (retry-after), the last at the end
    assert "after 11 attempt(s) over 300 s (last: HTTP 503)" in str(raised.value)


def test_the_window_shrinks_with_the_wait_scale() -> None:
    clock = FakeClock()
    attempt, calls = scripted_attempts(*[TransientError("HTTP 503", retry_after=10.0) for _ in range(100)])
    with pytest.raises(Outage):
        call_with_retries(attempt, **POLICY, max_retries=0, window_sec=600, scale=0.01, sleep=clock.sleep,
                          clock=clock)
    assert clock.now == pytest.approx(6.0) and 60 <= len(calls) <= 62  # waits of 0.1 s over a 6 s window


def test_a_refused_connection_is_bounded_by_the_count_alone() -> None:
    clock = FakeClock()
    refused = [TransientError("connection refused", windowed=False, code="unreachable", hint="check base-url")
               for _ in range(10)]
    attempt, calls = scripted_attempts(*refused)
    with pytest.raises(Outage, match=r"\(unreachable\): check base-url$"):
        call_with_retries(attempt, **POLICY, max_retries=2, window_sec=600, scale=1.0, sleep=clock.sleep,
                          clock=clock)
    assert len(calls) == 3


def test_fatal_errors_pass_at_once() -> None:
    for fatal in (RunFatal("P", "insufficient_quota", "the quota is exhausted", "add credits"),
                  RequestFatal("context_length", "too long")):
        attempt, calls = scripted_attempts(fatal, Answer("never", Tokens()))
        with pytest.raises(type(fatal)):
            call_with_retries(attempt, **POLICY, max_retries=5, window_sec=600, scale=0.0)
        assert len(calls) == 1


def test_bad_wait_scale_is_a_build_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECODE_RETRY_WAIT_SCALE", "fast")
    with pytest.raises(InferenceError, match="RECODE_RETRY_WAIT_SCALE='fast'"):
        build_model(ModelSpec("openai", "gpt-5", api_key="k", base_url="http://127.0.0.1:9/v1"))
