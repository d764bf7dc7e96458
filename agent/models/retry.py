"""When to retry a provider call, how long to wait, and how to word the final error.

Provider adapters turn their SDK's exceptions into the two kinds below, or into
:class:`RunFatal` / :class:`RequestFatal` for what retrying cannot fix (each
adapter classifies its SDK's errors in one place); :func:`call_with_retries`
owns the whole policy with tenacity, so SDK-internal retries stay off and every
provider behaves the same.

A transient fault (rate limit, overload, 5xx, timeout, dropped connection) is
retried with jittered exponential backoff, or after the server's retry-after,
until BOTH ``max_retries`` retries were made AND ``retry_window_sec`` has passed
since the call's first attempt: the count is a floor for short blips, the window
lets a storm of any length up to it pass without the caller noticing (so it never
changes a trajectory). Past both, the call raises :class:`Outage`, a
:class:`RunFatal`: the provider is down and every further call would fail too.
A refused connection (nothing listens at the URL) is bounded by the count alone:
it is almost always a wrong base-url, which waiting does not fix.
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

from agent.models.types import Answer, InferenceError, RunFatal, Tokens

log = logging.getLogger("agent.inference")

RETRY_AFTER_CAP_SEC = 60.0
BACKOFF_MAX_SEC = 60.0
BAD_ANSWER_RETRIES = 2
WAIT_SCALE_ENV = "RECODE_RETRY_WAIT_SCALE"
OUTAGE_HINT = "run the same command again once it answers (retry-window-minutes sets how long a run waits)"


class TransientError(Exception):
    """A failure worth retrying: rate limit, overload, 5xx, timeout, dropped connection.

    ``windowed`` False bounds the retries by the count alone (a refused
    connection); ``code`` names the cause if retries run out.
    """

    hint = OUTAGE_HINT

    def __init__(self, reason: str, retry_after: float | None = None, hint: str | None = None,
                 windowed: bool = True, code: str = "outage") -> None:
        super().__init__(reason)
        self.reason, self.retry_after, self.windowed, self.code = reason, retry_after, windowed, code
        if hint is not None:
            self.hint = hint


class BadAnswer(TransientError):
    """The provider answered, but not usably: a malformed answer (non-JSON body, no choices, an empty completion
    that says it ended normally, a missing tool block). Answers that ended early (truncated, refused,
    filtered) are not bad answers: they are returned with their :class:`Stop`.

    Retried only :data:`BAD_ANSWER_RETRIES` times: unlike a rate limit, it
    often repeats. ``tokens`` are what the provider billed for it, if known.
    """

    def __init__(self, reason: str, hint: str, tokens: Tokens | None = None) -> None:
        super().__init__(reason, windowed=False)
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


@dataclass
class _Attempts:
    """Per-call bookkeeping read by the stop rule and the caller."""

    max_retries: int
    window_sec: float
    clock: Callable[[], float]
    started: float = 0.0
    bad_answers: int = 0
    billed: Tokens = field(default_factory=Tokens)

    def left(self) -> float:
        """Seconds of the retry window still ahead."""
        return self.window_sec - (self.clock() - self.started)

    def should_stop(self, state: tenacity.RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, BadAnswer):
            self.bad_answers += 1
            if error.tokens is not None:
                self.billed = self.billed + error.tokens
            if self.bad_answers > min(BAD_ANSWER_RETRIES, self.max_retries):
                return True
        if state.attempt_number <= self.max_retries:
            return False
        return not (isinstance(error, TransientError) and error.windowed and self.left() > 0)


def _wait(scale: float, attempts: _Attempts) -> Callable[[tenacity.RetryCallState], float]:
    backoff = tenacity.wait_random_exponential(multiplier=1, max=BACKOFF_MAX_SEC)

    def wait(state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        asked = getattr(error, "retry_after", None)
        seconds = scale * (asked if asked is not None else backoff(state))
        if state.attempt_number > attempts.max_retries:  # within the window only: its end is the last attempt
            seconds = min(seconds, max(attempts.left(), 0.0))
        return seconds

    return wait


def call_with_retries(
    attempt: Callable[[], Answer],
    *,
    label: str,
    provider: str,
    max_retries: int,
    window_sec: float,
    scale: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Answer, Tokens]:
    """Run ``attempt`` under the policy; returns the answer and the tokens billed by discarded bad answers.

    ``window_sec`` is multiplied by ``scale`` like every wait (tests compress time with
    :data:`WAIT_SCALE_ENV`; 0 leaves the count alone). Raises :class:`GaveUp` when bad answers
    repeat, :class:`Outage` when transient faults outlast the policy, and lets the adapters'
    :class:`RunFatal` / :class:`RequestFatal` through at once (one attempt, no retry).
    """
    attempts = _Attempts(max_retries=max(0, max_retries), window_sec=window_sec * scale, clock=clock,
                         started=clock())

    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        if state.attempt_number <= attempts.max_retries:
            log.warning("%s: %s; retry %d/%d in %.1f s", label, error, state.attempt_number, attempts.max_retries,
                        wait)
        else:
            log.warning("%s: %s; retry %d in %.1f s (%.0f s of the retry window left)", label, error,
                        state.attempt_number, wait, attempts.left())

    retrying = tenacity.Retrying(
        stop=attempts.should_stop,
        wait=_wait(scale, attempts),
        retry=tenacity.retry_if_exception_type(TransientError),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )
    try:
        return retrying(attempt), attempts.billed
    except BadAnswer as error:
        count = retrying.statistics.get("attempt_number", 1)
        raise GaveUp(label, count, error, attempts.billed) from None
    except TransientError as error:
        count = retrying.statistics.get("attempt_number", 1)
        raise Outage(provider, count, clock() - attempts.started, error, attempts.billed) from None


class GaveUp(InferenceError):
    """Bad answers repeated; ``billed`` = tokens spent on discarded answers."""

    def __init__(self, label: str, attempts: int, last: TransientError, billed: Tokens) -> None:
        super().__init__(f"{label}: gave up after {attempts} attempt(s), last: {last.reason}; {last.hint}")
        self.billed = billed


class Outage(RunFatal):
    """Transient faults outlasted the retry policy: the provider (or the server at base-url) is down for now."""

    def __init__(self, provider: str, attempts: int, seconds: float, last: TransientError, billed: Tokens) -> None:
        cause = f"it is unavailable after {attempts} attempt(s) over {seconds:.0f} s (last: {last.reason})"
        super().__init__(provider, last.code, cause, last.hint)
        self.billed = billed
