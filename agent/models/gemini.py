"""The Gemini generateContent protocol through google-genai.

The ``Client`` is kept on the adapter for its whole life: a temporary client
is closed by garbage collection in the middle of a call. google-genai does
not retry unless asked, which is what we want (the retry policy is ours).
:func:`classify` is the one place where Gemini's HTTP errors get their meaning.
"""
from __future__ import annotations

import re
from typing import Any

from google import genai
from google.genai import errors, types

from agent.models.providers import (
    EMPTY_HINT,
    HttpFailure,
    SdkErrors,
    by_status,
    count,
    guarded_call,
    inline_refs,
    key_rejected,
    no_permission,
    quota_spent,
    stop_of,
    too_long,
    transient,
)
from agent.models.retry import BadAnswer, redact
from agent.models.types import Answer, ChatRequest, ModelSpec, Stop, Tokens, add_counts

ROLES = {"user": "user", "assistant": "model"}
# Newer google-genai releases take a plain JSON schema; older ones only their OpenAPI-subset field.
SCHEMA_FIELD = (
    "response_json_schema" if "response_json_schema" in types.GenerateContentConfig.model_fields else "response_schema"
)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Timeout/connection errors of whichever httpx flavour this google-genai uses."""
    found: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        found.append(module.TransportError)
    return tuple(found)


# finishReason -> Stop reason: the safety system's reasons are content_filter (RECITATION: the answer quoted
# its training data too closely and was stopped).
FILTERED = ("SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION")
STOPS = {"STOP": "stop", "MAX_TOKENS": "length", **{name: "content_filter" for name in FILTERED}}
TOKEN_LIMIT = re.compile(r"token count.*exceeds|exceeds the maximum number of tokens|too many tokens", re.I)
QUOTA_WORDS = "exceeded your current quota"


def read_failure(error: BaseException, secret: str | None) -> HttpFailure:
    """A google-genai APIError as plain data: ``code``, ``status``, the message and the google.rpc details."""
    body = getattr(error, "details", None)
    inner = body.get("error", body) if isinstance(body, dict) else {}
    details = tuple(d for d in (inner.get("details") or []) if isinstance(d, dict))
    reason = next((d.get("reason") for d in details if str(d.get("@type", "")).endswith("ErrorInfo")), None)
    response = getattr(error, "response", None)
    return HttpFailure(error.code, getattr(error, "status", None), reason,  # type: ignore[attr-defined]
                       redact(getattr(error, "message", None) or str(error), secret),
                       getattr(response, "headers", None), details=details)


def classify(failure: HttpFailure, spec: ModelSpec) -> Exception:
    """What a Gemini (google.rpc.Status) HTTP error means."""
    if failure.code == "API_KEY_INVALID" or "api key not valid" in failure.message.lower():
        return key_rejected(spec, "invalid_api_key")
    if failure.status == 429:
        return _exhausted(failure, spec)
    if failure.status == 400 and TOKEN_LIMIT.search(failure.message):
        return too_long(spec, failure)
    if failure.kind == "FAILED_PRECONDITION":  # e.g. the free tier is not offered where the caller is
        return no_permission(spec, failure)
    return by_status(failure, spec)


def _exhausted(failure: HttpFailure, spec: ModelSpec) -> Exception:
    """A 429 RESOURCE_EXHAUSTED: a spent quota stops the run, a per-minute limit is waited out.

    Spent: a quota of zero (the model has no quota on this tier), a daily quota, or the quota wording with no
    per-minute limit to wait for; otherwise transient, after the server's RetryInfo delay.
    """
    violations = [v for d in failure.details if str(d.get("@type", "")).endswith("QuotaFailure")
                  for v in d.get("violations", []) if isinstance(v, dict)]
    quota_ids = " ".join(str(v.get("quotaId", "")) for v in violations)
    if any(str(v.get("quotaValue")) == "0" for v in violations) or "limit: 0" in failure.message:
        return quota_spent(spec, "resource_exhausted", f"use a paid tier or another model ({spec.model} has no "
                           "quota on this key's tier)")
    if "PerDay" in quota_ids or (QUOTA_WORDS in failure.message.lower() and "PerMinute" not in quota_ids):
        return quota_spent(spec, "resource_exhausted", "wait for the quota to reset or raise it in Google AI "
                           "Studio (billing)")
    return transient(failure, _retry_delay(failure.details))


def _retry_delay(details: tuple[dict, ...]) -> float | None:
    """Seconds of a google.rpc.RetryInfo ``retryDelay`` ("20s"), if any."""
    delay = next((d.get("retryDelay") for d in details if str(d.get("@type", "")).endswith("RetryInfo")), None)
    try:
        return float(str(delay).rstrip("s")) if delay is not None else None
    except ValueError:
        return None


SDK_ERRORS = SdkErrors(status_types=(errors.APIError,), read=read_failure, classify=classify,
                       transport_types=_transport_errors())


class GeminiAdapter:
    def __init__(self, spec: ModelSpec, key: str | None) -> None:
        self._spec, self._key = spec, key
        http = types.HttpOptions(
            base_url=spec.base_url, api_version=spec.api_version, timeout=max(1, round(spec.timeout_sec * 1000))
        )
        self._client = genai.Client(api_key=key, vertexai=False, http_options=http)

    def send(self, request: ChatRequest) -> Answer:
        config, contents = request_parts(request)
        response = guarded_call(
            lambda: self._client.models.generate_content(model=request.model, contents=contents, config=config),
            SDK_ERRORS,
            self._spec,
            self._key,
        )
        tokens = usage_tokens(getattr(response, "usage_metadata", None))
        candidates = getattr(response, "candidates", None)
        if not candidates:
            blocked = _name(getattr(getattr(response, "prompt_feedback", None), "block_reason", None))
            if blocked is None:
                raise BadAnswer("the answer has no candidates", "check that base-url points at the Gemini API",
                                tokens)
            return Answer("", tokens, Stop("content_filter", f"promptFeedback.blockReason={blocked}"))
        content = candidates[0].content
        parts = (content.parts if content is not None else None) or []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        stop = stop_of(STOPS, "finishReason", _name(candidates[0].finish_reason))
        if stop.usable and not text:
            raise BadAnswer(f"empty completion ({stop.provider_words or 'no finish reason'})", EMPTY_HINT, tokens)
        return Answer(text, tokens, stop)


def _name(value: Any) -> str | None:
    """An SDK enum's name (a plain string as it is); None and the unspecified value as None."""
    name = getattr(value, "name", value)
    return None if name in (None, "FINISH_REASON_UNSPECIFIED", "BLOCKED_REASON_UNSPECIFIED") else str(name)


def request_parts(request: ChatRequest) -> tuple[types.GenerateContentConfig, list[types.Content]]:
    """The generation config and the contents for ``request``."""
    system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
    config = types.GenerateContentConfig(
        system_instruction=system or None,
        temperature=request.temperature,
        top_p=request.top_p,
        max_output_tokens=request.max_output_tokens,
    )
    if request.reasoning_effort is not None:
        config.thinking_config = types.ThinkingConfig(thinking_level=request.reasoning_effort.upper())
    elif request.thinking_budget is not None:
        config.thinking_config = types.ThinkingConfig(thinking_budget=request.thinking_budget)
    if request.response_schema is not None:
        config.response_mime_type = "application/json"
        setattr(config, SCHEMA_FIELD, inline_refs(request.response_schema))
    contents = [
        types.Content(role=ROLES[m["role"]], parts=[types.Part(text=m["content"])])
        for m in request.messages
        if m["role"] != "system"
    ]
    return config, contents


def usage_tokens(meta: Any) -> Tokens:
    """Gemini bills thinking as output: output = candidates + thoughts, reasoning = thoughts."""
    thoughts = count(meta, "thoughts_token_count")
    return Tokens(
        input=count(meta, "prompt_token_count"),
        output=add_counts(count(meta, "candidates_token_count"), thoughts),
        cached=count(meta, "cached_content_token_count"),
        reasoning=thoughts,
    )
