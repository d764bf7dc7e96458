"""The Anthropic messages protocol.

Structured output is a forced tool call: the tool's ``input_schema`` is the
response schema and the tool input, dumped as JSON, is the answer's text.
System messages travel in the separate ``system`` field. ``temperature`` and
the effort setting go through ``extra_body``: SDK releases differ in which of
them they accept as typed arguments, the API takes both. :func:`classify` is
the one place where Anthropic's HTTP errors get their meaning.
"""
from __future__ import annotations

import json
from typing import Any

import anthropic

from agent.models.pacing import rate_hooks
from agent.models.prompt_cache import PrefixTracker, anthropic_blocks, tracker_for
from agent.models.providers import (
    EMPTY_HINT,
    HttpFailure,
    SdkErrors,
    by_status,
    count,
    error_object,
    guarded_call,
    inline_refs,
    quota_spent,
    sdk_failure,
    stop_of,
    too_long,
)
from agent.models.retry import BadAnswer
from agent.models.types import Answer, ChatRequest, ModelSpec, Stop, Tokens, add_counts

DEFAULT_MAX_TOKENS = 16384  # the API requires a value; a whole research file fits in it
TOOL_NAME = "respond"
# stop_reason -> Stop reason. The forced respond tool is how structured output travels, so its tool_use is an
# ordinary end; model_context_window_exceeded cut the answer off like max_tokens.
STOPS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length",
         "model_context_window_exceeded": "length", "refusal": "refusal"}
BILLING_FIX = "add credits in the Anthropic Console's Plans & Billing"


def read_failure(error: BaseException, secret: str | None) -> HttpFailure:
    """An anthropic APIStatusError as plain data: ``error.type``, ``error.details.error_code`` and the message."""
    inner = error_object(error)
    details = inner.get("details")
    code = details.get("error_code") if isinstance(details, dict) else None
    return sdk_failure(error, secret, inner.get("type"), code if isinstance(code, str) else None,
                       inner.get("message"))


def classify(failure: HttpFailure, spec: ModelSpec) -> Exception:
    """What an Anthropic Messages HTTP error means (https://docs.claude.com/en/api/errors lists the types)."""
    words = failure.message.lower()
    if "credit balance" in words:
        return quota_spent(spec, "credit_balance_too_low", BILLING_FIX, "the credit balance is too low")
    if failure.kind == "billing_error" or failure.status == 402:
        return quota_spent(spec, "billing", BILLING_FIX, f"billing stops the calls ({failure.message:.120})")
    if "spend_limit" in (failure.code or "") or "spend limit" in words:
        return quota_spent(spec, failure.code or "spend_limit", "raise the spend limit in the Anthropic Console")
    if failure.status in (400, 413) and ("prompt is too long" in words or failure.kind == "request_too_large"):
        return too_long(spec, failure)
    return by_status(failure, spec)


SDK_ERRORS = SdkErrors(
    status_types=(anthropic.APIStatusError,),
    read=read_failure,
    classify=classify,
    transport_types=(anthropic.APIConnectionError,),
)


class AnthropicAdapter:
    def __init__(self, spec: ModelSpec, key: str | None) -> None:
        self._spec, self._key = spec, key
        self._client = anthropic.Anthropic(
            api_key=key, base_url=spec.base_url, max_retries=0, timeout=spec.timeout_sec,
            **rate_hooks(spec, anthropic.DefaultHttpxClient),
        )
        self._prefixes = tracker_for(spec.provider, spec.model) if spec.prompt_caching else None

    def send(self, request: ChatRequest) -> Answer:
        body = request_body(request, self._prefixes)
        response = guarded_call(lambda: self._client.messages.create(**body), SDK_ERRORS, self._spec, self._key)
        blocks = getattr(response, "content", None)
        if not isinstance(blocks, list):
            raise BadAnswer("the answer is not a message", hint="check that base-url points at the messages API")
        tokens = usage_tokens(getattr(response, "usage", None))
        stop = stop_of(STOPS, "stop_reason", getattr(response, "stop_reason", None))
        text = "".join(b.text for b in blocks if b.type == "text")
        if request.response_schema is not None:
            tool = next((b for b in blocks if b.type == "tool_use" and b.name == TOOL_NAME), None)
            if tool is not None:
                return Answer(json.dumps(tool.input), tokens, stop)
            if stop.usable:
                raise BadAnswer(f"the answer has no {TOOL_NAME} tool block ({stop.provider_words})", EMPTY_HINT,
                                tokens)
        if stop.usable and not text:
            raise BadAnswer(f"the answer has no text block ({stop.provider_words})", EMPTY_HINT, tokens)
        return Answer(text, tokens, stop)


def request_body(request: ChatRequest, prefixes: PrefixTracker | None = None) -> dict[str, Any]:
    """The messages.create arguments for ``request``; with ``prefixes``, cache breakpoints on its stable prefix."""
    system: Any = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
    messages = [m for m in request.messages if m["role"] != "system"]
    if prefixes is not None:
        system, messages = anthropic_blocks(request.model, system, messages, prefixes)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_output_tokens or DEFAULT_MAX_TOKENS,
        "messages": messages,
    }
    if system:
        body["system"] = system
    extra: dict[str, Any] = {}
    if request.temperature is not None:
        extra["temperature"] = request.temperature
    if request.top_p is not None:
        extra["top_p"] = request.top_p
    if request.reasoning_effort is not None:
        extra["output_config"] = {"effort": request.reasoning_effort}
    if extra:
        body["extra_body"] = extra
    if request.response_schema is not None:
        body["tools"] = [
            {
                "name": TOOL_NAME,
                "description": "Give the answer as data matching the input schema.",
                "input_schema": inline_refs(request.response_schema),
            }
        ]
        body["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
    return body


def usage_tokens(usage: Any) -> Tokens:
    """Anthropic's input_tokens excludes cache reads and writes; we report the whole prompt."""
    base, read = count(usage, "input_tokens"), count(usage, "cache_read_input_tokens")
    written = count(usage, "cache_creation_input_tokens")
    total = None if base is None else add_counts(base, read, written)
    return Tokens(input=total, output=count(usage, "output_tokens"), cached=read, cache_write=written)
