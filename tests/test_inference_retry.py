"""The retry policy on its own: retry-after parsing, waits, bounds, and which failures retry."""
from __future__ import annotations

import email.utils

import pytest

from agent.models.build import InferenceError, ModelSpec, build_model
from agent.models.types import Answer, Tokens
from agent.models.retry import (
    BACKOFF_MAX_SEC,
    RETRY_AFTER_CAP_SEC,
    BadAnswer,
    TransientError,
    call_with_retries,
    parse_retry_after,
    status_failure,
)

NOW = 1_750_000_000.0


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
    answer, billed = call_with_retries(attempt, label="p m", max_retries=5, scale=1.0, sleep=slept.append)
    assert answer.text == "ok" and billed == Tokens()
    assert len(calls) == 4
    assert slept[0] == 7.0
    assert 0 <= slept[1] <= 2 and 0 <= slept[2] <= 4  # full jitter below 2**(attempt-1) s


def test_backoff_never_exceeds_its_cap() -> None:
    attempt, calls = scripted_attempts(*[TransientError("HTTP 500") for _ in range(12)], Answer("ok", Tokens()))
    slept: list[float] = []
    call_with_retries(attempt, label="p m", max_retries=12, scale=1.0, sleep=slept.append)
    assert len(slept) == 12 and all(0 <= s <= BACKOFF_MAX_SEC for s in slept)


def test_wait_scale_multiplies_every_wait() -> None:
    attempt, _ = scripted_attempts(TransientError("HTTP 429", retry_after=8.0), Answer("ok", Tokens()))
    slept: list[float] = []
    call_with_retries(attempt, label="p m", max_retries=1, scale=0.25, sleep=slept.append)
    assert slept == [2.0]


def test_bad_answers_stop_early_and_report_their_tokens() -> None:
    bad = [BadAnswer("empty completion", hint="raise max-output-tokens", tokens=Tokens(10, 2)) for _ in range(5)]
    attempt, calls = scripted_attempts(*bad)
    with pytest.raises(InferenceError, match="gave up after 3 attempt.*empty completion; raise max-output") as raised:
        call_with_retries(attempt, label="p m", max_retries=10, scale=0.0)
    assert len(calls) == 3
    assert raised.value.billed == Tokens(30, 6)


def test_zero_retries_means_one_attempt() -> None:
    attempt, calls = scripted_attempts(TransientError("HTTP 503"), Answer("never", Tokens()))
    with pytest.raises(InferenceError, match="gave up after 1 attempt"):
        call_with_retries(attempt, label="p m", max_retries=0, scale=0.0)
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("status", "retried"),
    [(408, True), (429, True), (500, True), (529, True), (400, False), (401, False), (404, False), (422, False)],
)
def test_which_statuses_retry(status: int, retried: bool) -> None:
    failure = status_failure("p m", status, {"retry-after": "3"}, "boom", "set X_API_KEY or api-key", None)
    assert isinstance(failure, TransientError) is retried
    if retried:
        assert failure.retry_after == 3.0
    else:
        assert isinstance(failure, InferenceError) and "HTTP" in str(failure)


def test_bad_wait_scale_is_a_build_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECODE_RETRY_WAIT_SCALE", "fast")
    with pytest.raises(InferenceError, match="RECODE_RETRY_WAIT_SCALE='fast'"):
        build_model(ModelSpec("openai", "gpt-5", api_key="k", base_url="http://127.0.0.1:9/v1"))
