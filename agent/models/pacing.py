"""Rate-limit-aware pacing: a model's calls wait BEFORE sending for room under its requests and tokens per minute,
rather than meeting the provider's limit as 429s.

One :class:`Pacer` per (provider, server, model) in this process, shared by every job that calls the model
(jobs run as threads of the driver in every local parallel mode; each Ray worker paces alone). Each limit is a
token bucket holding up to one minute's worth and refilled continuously, as the providers meter theirs, paced
to :data:`HEADROOM` of the limit. A call reserves its estimated tokens (its text at :data:`CHARS_PER_TOKEN`
characters a token, plus an answer one standard deviation above the mean seen so far) and waits while the
bucket is in debt; its usage then corrects the reservation. The provider's rate-limit headers, where present
(OpenAI ``x-ratelimit-*``, Anthropic ``anthropic-ratelimit-*``), lower the buckets to what the provider says is
left. :data:`MINUTE_ENV` shortens the minute for benchmarks.
"""
from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent.models.types import ChatRequest, InferenceError, ModelSpec, Tokens

CHARS_PER_TOKEN = 4
FIRST_ANSWER_TOKENS = 1000  # the answer size assumed before any answer was seen
HEADROOM = 0.95  # the share of a limit paced to: answers longer than reserved and clocks that differ need room
MINUTE_ENV = "RECODE_RATE_MINUTE_SEC"
# Header names per kind of limit: (remaining, reset), OpenAI's then Anthropic's.
HEADERS = {
    "tokens": (("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
               ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset")),
    "requests": (("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
                 ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset")),
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SEC = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def minute_sec() -> float:
    """Seconds in a rate limit's minute: 60, or :data:`MINUTE_ENV` (a benchmark's scaled-down minute)."""
    raw = os.environ.get(MINUTE_ENV, "60")
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise InferenceError(f"{MINUTE_ENV}={raw!r} is not a number of seconds > 0; unset it")
    return value


class TokenBucket:
    """Up to ``capacity`` units, refilled at ``per_sec``; a take may leave it in debt, which is the wait."""

    def __init__(self, capacity: float, per_sec: float, now: float) -> None:
        self.capacity, self.per_sec = capacity, per_sec
        self.level, self.updated = capacity, now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.per_sec)
        self.updated = max(self.updated, now)

    def take(self, units: float, now: float) -> float:
        """Reserve ``units``; the seconds until the bucket is out of debt (0: send now). A reservation larger
        than the bucket is charged as a full bucket: it could never be sent otherwise."""
        self.refill(now)
        self.level -= min(units, self.capacity)
        return max(0.0, -self.level / self.per_sec)

    def adjust(self, units: float, now: float) -> None:
        """Charge ``units`` more (less, when negative) than was reserved."""
        self.refill(now)
        self.level = min(self.capacity, self.level - units)

    def clamp(self, remaining: float, now: float) -> None:
        """The provider says only ``remaining`` is left: never hold more than that."""
        self.refill(now)
        self.level = min(self.level, remaining)


@dataclass(frozen=True)
class Reservation:
    tokens: float
    waited_sec: float


class Pacer:
    """The buckets of one model's limits in this process; ``clock`` and ``sleep`` are injectable for tests."""

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None, minute: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 headroom: float = HEADROOM) -> None:
        now = clock()
        self.buckets = {kind: TokenBucket(limit * headroom, limit * headroom / minute, now) for kind, limit in
                        (("requests", requests_per_minute), ("tokens", tokens_per_minute)) if limit}
        self.clock, self.sleep = clock, sleep
        self.answers, self.answer_tokens, self.answer_squares = 0, 0, 0
        self._lock = threading.Lock()
        self._heard = threading.local()  # the last response headers of this thread's call, not yet applied

    def estimate(self, request: ChatRequest) -> float:
        """Tokens a request is expected to count: its text, and an answer one standard deviation above the mean so
        far (at most its cap): answers longer than reserved would let the provider's count run ahead of ours."""
        prompt = sum(len(m["content"]) for m in request.messages) / CHARS_PER_TOKEN
        answer = FIRST_ANSWER_TOKENS
        if self.answers:
            mean = self.answer_tokens / self.answers
            answer = mean + math.sqrt(max(0.0, self.answer_squares / self.answers - mean * mean))
        if request.max_output_tokens:
            answer = min(answer, request.max_output_tokens)
        return prompt + answer

    def before(self, request: ChatRequest) -> Reservation:
        """Reserve room for ``request`` and wait until there is; the same order for every job (first come)."""
        tokens = self.estimate(request)
        self._apply_heard()  # a refused attempt's headers
        with self._lock:
            now = self.clock()
            waits = [bucket.take(tokens if kind == "tokens" else 1, now) for kind, bucket in self.buckets.items()]
        wait = max(waits, default=0.0)
        if wait > 0:
            self.sleep(wait)
        return Reservation(tokens, wait)

    def after(self, reservation: Reservation, tokens: Tokens) -> None:
        """Correct the reservation with what the call counted (input and output; unknown: the estimate)."""
        if tokens.input is not None and tokens.output is not None:
            with self._lock:
                self.answers += 1
                self.answer_tokens += tokens.output
                self.answer_squares += tokens.output * tokens.output
                if "tokens" in self.buckets:
                    self.buckets["tokens"].adjust(tokens.input + tokens.output - reservation.tokens, self.clock())
        self._apply_heard()

    def hear(self, headers: Mapping[str, str]) -> None:
        """Keep a response's headers (the httpx hook runs in the calling thread) for after the call's correction:
        they already count the call at its real size."""
        self._heard.headers = headers

    def _apply_heard(self) -> None:
        headers = getattr(self._heard, "headers", None)
        self._heard.headers = None
        if headers is not None:
            self.observe(headers)

    def observe(self, headers: Mapping[str, str]) -> None:
        """Lower each bucket to what the provider's rate-limit headers say is left of it."""
        with self._lock:
            now = self.clock()
            for kind, bucket in self.buckets.items():
                left = provider_remaining(headers, kind, bucket.per_sec, bucket.capacity, now_epoch=time.time())
                if left is not None:
                    bucket.clamp(left, now)


def provider_remaining(headers: Mapping[str, str], kind: str, per_sec: float, capacity: float,
                       now_epoch: float) -> float | None:
    """What is left of a ``kind`` limit by the headers: the remaining count, and no more than a bucket refilling
    at ``per_sec`` can hold when it is to be full again at the reset time. None without such headers."""
    for remaining_name, reset_name in HEADERS[kind]:
        remaining = _number(headers.get(remaining_name))
        if remaining is None:
            continue
        reset = reset_seconds(headers.get(reset_name), now_epoch)
        if reset is not None:
            remaining = min(remaining, capacity - reset * per_sec)
        return remaining
    return None


def reset_seconds(value: str | None, now_epoch: float) -> float | None:
    """Seconds until a reset: OpenAI's durations (``20ms``, ``1.5s``, ``6m0s``), Anthropic's RFC 3339 times."""
    if not value:
        return None
    parts = _DURATION.findall(value)
    if parts and "".join(f"{n}{u}" for n, u in parts) == value.strip():
        return sum(float(n) * _UNIT_SEC[u] for n, u in parts)
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, moment.timestamp() - now_epoch)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


_PACERS: dict[tuple[str, str | None, str], Pacer] = {}
_PACERS_LOCK = threading.Lock()


def pacer_for(spec: ModelSpec) -> Pacer | None:
    """The process's pacer of ``spec``'s model (the first spec's limits win), None when it has no limit."""
    if not spec.requests_per_minute and not spec.tokens_per_minute:
        return None
    with _PACERS_LOCK:
        key = (spec.provider, spec.base_url, spec.model)
        if key not in _PACERS:
            _PACERS[key] = Pacer(spec.requests_per_minute, spec.tokens_per_minute, minute_sec())
        return _PACERS[key]


def rate_hooks(spec: ModelSpec, client_type: Callable[..., Any]) -> dict[str, Any]:
    """SDK client arguments that show every response's headers to the model's pacer: an ``http_client`` of the
    SDK's default kind (``client_type``) with an httpx response hook; none without a limit."""
    pacer = pacer_for(spec)
    if pacer is None:
        return {}
    return {"http_client": client_type(event_hooks={"response": [lambda response: pacer.hear(response.headers)]})}
