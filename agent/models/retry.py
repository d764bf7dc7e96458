"""When to retry a provider call, how long to wait, and how to word the final error.

Provider adapters turn their SDK's exceptions into the two kinds below (or
into :class:`InferenceError` for what retrying cannot fix: bad key, bad
request); :func:`call_with_retries` owns the whole policy with tenacity, so
SDK-internal retries stay off and every provider behaves the same.
"""
from __future__ import annotations

import email.utils
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import tenacity

from agent.models.types import Answer, InferenceError, Tokens

log = logging.getLogger("agent.inference")

RETRY_AFTER_CAP_SEC = 60.0
BACKOFF_MAX_SEC = 60.0
BAD_ANSWER_RETRIES = 2
WAIT_SCALE_ENV = "RECODE_RETRY_WAIT_SCALE"
RETRYABLE_STATUS = {408, 409, 425, 429}
AUTH_STATUS = {401, 403}


class TransientError(Exception):
    """A failure worth retrying: rate limit, overload, 5xx, timeout, dropped connection."""

    hint = "check the provider's status page, lower concurrency or raise max-retries"

    def __init__(self, reason: str, retry_after: float | None = None, hint: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        if hint is not None:
            self.hint = hint


class BadAnswer(TransientError):
    """The provider answered, but not usably (non-JSON body, empty completion, missing block).

    Retried only :data:`BAD_ANSWER_RETRIES` times: unlike a rate limit, it
    often repeats. ``tokens`` are what the provider billed for it, if known.
    """

    def __init__(self, reason: str, hint: str, tokens: Tokens | None = None) -> None:
        super().__init__(reason)
        self.hint = hint
        self.tokens = tokens


def wait_scale() -> float:
    """Multiplier of every retry wait, from :data:`WAIT_SCALE_ENV` (tests set 0)."""
    raw = os.environ.get(WAIT_SCALE_ENV, "1")
    try:
        scale = float(raw)
    except ValueError:
        scale = -1.0
    if scale < 0:
        raise InferenceError(f"{WAIT_SCALE_ENV}={raw!r} is not a non-negative number; unset it or set e.g. 1")
    return scale


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``retry-after`` seconds or HTTP date), capped."""
    if not headers:
        return None
    millis, value = headers.get("retry-after-ms"), headers.get("retry-after")
    seconds: float | None = None
    if millis is not None:
        seconds = _number(millis)
        seconds = None if seconds is None else seconds / 1000
    if seconds is None and value is not None:
        seconds = _number(value)
        if seconds is None:
            try:
                moment = email.utils.parsedate_to_datetime(value).timestamp()
            except (TypeError, ValueError):
                return None
            seconds = moment - (time.time() if now is None else now)
    return None if seconds is None else min(max(seconds, 0.0), RETRY_AFTER_CAP_SEC)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def redact(text: str, secret: str | None) -> str:
    """One line, at most 300 characters, with ``secret`` (the API key) masked."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= 300 else line[:297] + "..."


def status_failure(
    label: str, status: int, headers: Mapping[str, str] | None, message: str, key_hint: str, secret: str | None
) -> Exception:
    """The exception for an HTTP error status: transient ones retry, the rest name the fix."""
    detail = redact(message, secret)
    if status in RETRYABLE_STATUS or status >= 500:
        return TransientError(f"HTTP {status}: {detail}", parse_retry_after(headers))
    if status in AUTH_STATUS:
        return InferenceError(f"{label}: the API key was rejected (HTTP {status}: {detail}); {key_hint}")
    return InferenceError(
        f"{label}: the provider refused the request (HTTP {status}: {detail}); check the model name and settings"
    )


@dataclass
class _Attempts:
    """Per-call bookkeeping read by the stop rule and the caller."""

    max_retries: int
    bad_answers: int = 0
    billed: Tokens = field(default_factory=Tokens)

    def should_stop(self, state: tenacity.RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, BadAnswer):
            self.bad_answers += 1
            if error.tokens is not None:
                self.billed = self.billed + error.tokens
            if self.bad_answers > min(BAD_ANSWER_RETRIES, self.max_retries):
                return True
        return state.attempt_number > self.max_retries


def _wait(scale: float) -> Callable[[tenacity.RetryCallState], float]:
    backoff = tenacity.wait_random_exponential(multiplier=1, max=BACKOFF_MAX_SEC)

    def wait(state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        asked = getattr(error, "retry_after", None)
        return scale * (asked if asked is not None else backoff(state))

    return wait


def call_with_retries(
    attempt: Callable[[], Answer],
    *,
    label: str,
    max_retries: int,
    scale: float,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Answer, Tokens]:
    """Run ``attempt`` under the policy; returns the answer and the tokens billed by discarded bad answers.

    Raises :class:`InferenceError` (one line) when retries run out; its
    ``usage`` is left for the caller to fill from ``billed``.
    """
    attempts = _Attempts(max_retries=max(0, max_retries))

    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning("%s: %s; retry %d/%d in %.1f s", label, error, state.attempt_number, attempts.max_retries, wait)

    retrying = tenacity.Retrying(
        stop=attempts.should_stop,
        wait=_wait(scale),
        retry=tenacity.retry_if_exception_type(TransientError),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )
    try:
        return retrying(attempt), attempts.billed
    except TransientError as error:
        count = retrying.statistics.get("attempt_number", 1)
        raise GaveUp(label, count, error, attempts.billed) from None


class GaveUp(InferenceError):
    """Retries ran out; ``billed`` = tokens spent on discarded answers."""

    def __init__(self, label: str, attempts: int, last: TransientError, billed: Tokens) -> None:
        super().__init__(f"{label}: gave up after {attempts} attempt(s), last: {last.reason}; {last.hint}")
        self.billed = billed

