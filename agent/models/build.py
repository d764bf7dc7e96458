"""One call interface over every model provider: ``build_model(spec).complete(messages)``.

A built model retries transient failures under one policy
(:mod:`agent.models.retry`), records tokens, latency and dollars for every
call (:mod:`agent.models.pricing`), and with ``cache_path`` answers repeated
requests from a SQLite response cache (:mod:`agent.models.cache`). The
SDK-specific code lives in ``agent/models/openai.py``, ``anthropic.py`` and ``gemini.py``, the offline ``scripted``
model in :mod:`agent.models.scripted`; ``replay`` is the cache alone.
"""
from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path

from agent.models.cache import ResponseCache, request_key
from agent.models.pacing import pacer_for
from agent.models.pricing import DEFAULT_PRICES_PATH, cache_saving, cost_usd, find_price, load_prices
from agent.models.providers import (
    OFFLINE_PROVIDERS,
    PROVIDER_ENV_VARS,
    PROVIDERS,
    Adapter,
    provider_name,
    resolve_key,
)
from agent.models.retry import GaveUp, Outage, call_with_retries, wait_scale
from agent.models.scripted import ScriptedModel
from agent.models.types import (
    Answer,
    ChatModel,
    ChatRequest,
    Completion,
    InferenceError,
    ModelSpec,
    Tokens,
    Usage,
)

__all__ = [
    "ChatModel",
    "Completion",
    "DEFAULT_PRICES_PATH",
    "InferenceError",
    "ModelSpec",
    "PROVIDER_ENV_VARS",
    "Usage",
    "build_model",
    "find_price",
    "load_prices",
]

USAGE_FIELDS = {f.name for f in fields(Usage)}


def build_model(
    spec: ModelSpec, *, prices: dict | None = None, cache_path: str | Path | None = None
) -> ChatModel:
    """A ready ChatModel for ``spec``; every user-fixable problem (unknown provider, missing key,
    bad script, unusable cache) is raised here as a one-line :class:`InferenceError`."""
    if spec.provider not in PROVIDERS and spec.provider not in OFFLINE_PROVIDERS:
        known = ", ".join([*PROVIDERS, *OFFLINE_PROVIDERS])
        raise InferenceError(f"unknown provider {spec.provider!r}; use one of: {known}")
    if spec.timeout_sec <= 0 or spec.max_retries < 0 or spec.retry_window_sec < 0:
        raise InferenceError(f"{spec.provider} model {spec.model}: timeout must be > 0, max-retries >= 0 and "
                             "retry-window-minutes >= 0")
    if spec.provider == "replay":
        if not cache_path:
            raise InferenceError(f"replay model {spec.model}: set cache-path to the response cache to answer from")
        return CachedModel(spec, ResponseCache(cache_path), inner=None)
    model: ChatModel
    if spec.provider == "scripted":
        model = ScriptedModel(spec)
    else:
        table = load_prices() if prices is None else prices
        model = RemoteModel(spec, _adapter(spec, resolve_key(spec)), table, wait_scale())
    return CachedModel(spec, ResponseCache(cache_path), inner=model) if cache_path else model


def _adapter(spec: ModelSpec, key: str | None) -> Adapter:
    """The SDK adapter of ``spec.provider``; SDKs are imported only when used (google-genai is slow to import)."""
    if spec.provider == "anthropic":
        from agent.models.anthropic import AnthropicAdapter

        return AnthropicAdapter(spec, key)
    if spec.provider == "gemini":
        from agent.models.gemini import GeminiAdapter

        return GeminiAdapter(spec, key)
    from agent.models.openai import OpenAIAdapter

    return OpenAIAdapter(spec, key)


class RemoteModel:
    """A provider reached over HTTP: one adapter, the retry policy, usage and cost."""

    def __init__(self, spec: ModelSpec, adapter: Adapter, prices: dict, scale: float) -> None:
        self._spec, self._adapter, self._prices, self._scale = spec, adapter, prices, scale
        self._pacer = pacer_for(spec)

    def _send(self, request: ChatRequest) -> Answer:
        """One attempt, paced under the model's rate limits when it has any."""
        if self._pacer is None:
            return self._adapter.send(request)
        reservation = self._pacer.before(request)
        answer = self._adapter.send(request)
        self._pacer.after(reservation, answer.tokens)
        return answer

    def complete(self, messages: list[dict[str, str]], *, response_schema: dict | None = None) -> Completion:
        request = ChatRequest.build(self._spec, messages, response_schema)
        started = time.monotonic()
        try:
            answer, billed = call_with_retries(
                lambda: self._send(request),
                label=f"{self._spec.provider} {self._spec.model}",
                provider=provider_name(self._spec),
                max_retries=self._spec.max_retries,
                window_sec=self._spec.retry_window_sec,
                scale=self._scale,
            )
        except (GaveUp, Outage) as error:
            error.usage = self._usage(error.billed, time.monotonic() - started)
            raise
        return Completion(answer.text, self._usage(answer.tokens + billed, time.monotonic() - started), answer.stop)

    def _usage(self, tokens: Tokens, latency: float) -> Usage:
        return Usage(
            provider=self._spec.provider,
            model=self._spec.model,
            input_tokens=tokens.input,
            output_tokens=tokens.output,
            cached_tokens=tokens.cached,
            reasoning_tokens=tokens.reasoning,
            latency_sec=latency,
            cost_usd=cost_usd(self._prices, self._spec.model, tokens),
            cache_write_tokens=tokens.cache_write,
            cache_saved_usd=cache_saving(self._prices, self._spec.model, tokens),
        )


class CachedModel:
    """Answers from the response cache first; on a miss asks ``inner`` and stores its answer.

    With ``inner=None`` (the ``replay`` provider) a miss is an error: nothing
    is ever sent to a provider. A hit keeps the original token counts and stop
    reason, costs 0.0 and is marked ``from_cache``.
    """

    def __init__(self, spec: ModelSpec, cache: ResponseCache, inner: ChatModel | None) -> None:
        self._spec, self._cache, self._inner = spec, cache, inner

    def complete(self, messages: list[dict[str, str]], *, response_schema: dict | None = None) -> Completion:
        request = ChatRequest.build(self._spec, messages, response_schema)
        started = time.monotonic()
        hit = self._cache.get(request)
        if hit is not None:
            stored = {k: v for k, v in hit["usage"].items() if k in USAGE_FIELDS}
            stored.update(from_cache=True, cost_usd=0.0, cache_saved_usd=0.0, latency_sec=time.monotonic() - started)
            return Completion(hit["text"], Usage(**stored), hit["stop"])
        if self._inner is None:
            last_user = next((m["content"] for m in reversed(request.messages) if m["role"] == "user"), "")
            raise InferenceError(
                f"replay model {self._spec.model}: no cached answer for request {request_key(request)[:12]} "
                f"(last user message {last_user[:60]!r}) in {self._cache.path}; record it first with a real "
                "provider, the same cache-path, model and sampling settings"
            )
        completion = self._inner.complete(request.messages, response_schema=response_schema)
        self._cache.put(request, completion.text, completion.usage.to_dict(), completion.stop)
        return completion
