"""The OpenAI chat-completions protocol: OpenAI, Azure OpenAI, Together, DeepSeek and local servers.

Reasoning models (o-series, gpt-5) reject ``temperature`` and ``max_tokens``;
they take ``max_completion_tokens`` and ``reasoning_effort`` instead.
DeepSeek has no JSON-schema mode, only JSON-object mode, so there the schema
travels in a system message. :func:`classify` is the one place where this
protocol's HTTP errors get their meaning.
"""
from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

import openai

from agent.models.pacing import rate_hooks
from agent.models.prompt_cache import openai_cache_key
from agent.models.providers import (
    EMPTY_HINT,
    PROVIDERS,
    RERUN,
    HttpFailure,
    SdkErrors,
    by_status,
    count,
    error_object,
    guarded_call,
    invalid_request,
    key_rejected,
    quota_spent,
    run_fatal,
    sdk_failure,
    stop_of,
    too_long,
    transient,
    unknown_model,
)
from agent.models.retry import BadAnswer, redact
from agent.models.types import Answer, ChatRequest, InferenceError, ModelSpec, Stop, Tokens

log = logging.getLogger("agent.inference")

REASONING_MODEL = re.compile(r"^(o\d|gpt-5)(?!.*-chat)")
SCHEMA_NAME = "response"
# error.code of a 429 (error.type insufficient_quota) that waiting does not fix, and what does.
QUOTA_FIXES = {
    "insufficient_quota": "add credits",
    "credit_balance_exhausted": "add credits",
    "organization_spend_limit_exceeded": "raise the organization's spend limit (or wait for its monthly reset)",
    "project_spend_limit_exceeded": "raise the project's spend limit (or wait for its monthly reset)",
    "organization_usage_limit_exceeded": "ask OpenAI for a higher usage limit",
}
TOO_WORDS = ("maximum context length", "context window", "too many tokens", "prompt is too long")
CHAT_STOPS = {"stop": "stop", "length": "length", "content_filter": "content_filter", "tool_calls": "tool_call",
              "function_call": "tool_call"}
INCOMPLETE_STOPS = {"max_output_tokens": "length", "content_filter": "content_filter"}
API_KEYS = "set human-openai-api: chat (openai-api: chat for a code model) to ask through chat completions"


def read_failure(error: BaseException, secret: str | None) -> HttpFailure:
    """An openai APIStatusError as plain data (the SDK parses ``error.type`` and ``error.code`` of the body)."""
    return sdk_failure(error, secret, getattr(error, "type", None), getattr(error, "code", None),
                       error_object(error).get("message"))


def classify(failure: HttpFailure, spec: ModelSpec) -> Exception:
    """What an HTTP error of the OpenAI protocol (OpenAI, Azure, Together, DeepSeek, local servers) means."""
    code, words = failure.code or "", failure.message.lower()
    if failure.status == 429 and (code in QUOTA_FIXES or failure.kind == "insufficient_quota"):
        return quota_spent(spec, code or "insufficient_quota", QUOTA_FIXES.get(code, "add credits"))
    if failure.status == 401:
        return key_rejected(spec, code)
    if failure.status == 404 and failure.route.endswith("/responses") and not code:
        return run_fatal(spec, "responses_unsupported", f"the server at {spec.base_url or 'its base-url'} has no "
                         f"Responses API (POST {failure.route} answered 404)", f"{API_KEYS}, {RERUN}")
    if failure.status == 404:
        return unknown_model(spec, failure)
    if failure.status in (400, 413) and (code == "context_length_exceeded" or any(w in words for w in TOO_WORDS)):
        return too_long(spec, failure)
    if failure.status == 400 and code == "content_filter":
        return invalid_request(spec, failure, "content_filter")
    if failure.status == 429:
        return transient(failure)
    return by_status(failure, spec)


SDK_ERRORS = SdkErrors(
    status_types=(openai.APIStatusError,),
    read=read_failure,
    classify=classify,
    transport_types=(openai.APIConnectionError,),
)


def is_reasoning_model(model: str) -> bool:
    return bool(REASONING_MODEL.match(model.rsplit("/", 1)[-1].lower()))


def is_strict_schema(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts ``schema``: every object closed and all its properties required."""
    if isinstance(schema, list):
        return all(is_strict_schema(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or set(schema.get("required", [])) != set(properties):
            return False
    return all(is_strict_schema(value) for value in schema.values())


class OpenAIAdapter:
    def __init__(self, spec: ModelSpec, key: str | None) -> None:
        common: dict[str, Any] = {"api_key": key or "no-key", "max_retries": 0, "timeout": spec.timeout_sec,
                                  **rate_hooks(spec, openai.DefaultHttpxClient)}
        self._spec, self._key = spec, key
        self._model = spec.model
        if spec.provider == "azure-openai":
            endpoint = spec.endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
            version = spec.api_version or os.environ.get("OPENAI_API_VERSION")
            if not endpoint or not version:
                raise InferenceError(
                    f"azure-openai model {spec.model}: set endpoint and api-version "
                    "(or AZURE_OPENAI_ENDPOINT and OPENAI_API_VERSION)"
                )
            self._model = spec.deployment or spec.model
            self._client: openai.OpenAI = openai.AzureOpenAI(
                azure_endpoint=endpoint, api_version=version, azure_deployment=self._model, **common
            )
        else:
            base_url = spec.base_url or PROVIDERS[spec.provider].default_base_url
            self._client = openai.OpenAI(base_url=base_url, **common)
        self._reasoning = spec.provider in ("openai", "azure-openai") and is_reasoning_model(spec.model)
        if self._reasoning and spec.temperature is not None:
            log.warning("%s is a reasoning model: temperature %s is not sent", spec.model, spec.temperature)

    def send(self, request: ChatRequest) -> Answer:
        if request.openai_api == "responses":
            return self._send_responses(request)
        response = guarded_call(
            lambda: self._client.chat.completions.create(**self.request_body(request)),
            SDK_ERRORS,
            self._spec,
            self._key,
        )
        choices = getattr(response, "choices", None)
        if not choices:
            raise BadAnswer("the answer has no choices", hint="check that base-url points at a chat-completions API")
        tokens = usage_tokens(getattr(response, "usage", None))
        message = choices[0].message
        refusal = getattr(message, "refusal", None)
        stop = Stop("refusal", redact(f"refusal: {refusal}", None)) if refusal else stop_of(
            CHAT_STOPS, "finish_reason", choices[0].finish_reason)
        return _answer(message.content or "", tokens, stop)

    def _send_responses(self, request: ChatRequest) -> Answer:
        """One call of the Responses API (the release asks its feedback model this way)."""
        response = guarded_call(lambda: self._client.responses.create(**self.responses_body(request)), SDK_ERRORS,
                                self._spec, self._key)
        usage = getattr(response, "usage", None)
        tokens = Tokens(input=count(usage, "input_tokens"), output=count(usage, "output_tokens"),
                        cached=count(usage, "input_tokens_details.cached_tokens"),
                        reasoning=count(usage, "output_tokens_details.reasoning_tokens"),
                        cache_write=count(usage, "input_tokens_details.cache_write_tokens"))
        return _answer(getattr(response, "output_text", None) or "", tokens, responses_stop(response))

    def _cache_key(self, request: ChatRequest) -> dict[str, str]:
        """OpenAI's ``prompt_cache_key`` (other servers of this protocol may refuse unknown fields)."""
        if self._spec.provider != "openai" or not self._spec.prompt_caching:
            return {}
        return {"prompt_cache_key": openai_cache_key(self._model, request.messages)}

    def responses_body(self, request: ChatRequest) -> dict[str, Any]:
        """The responses.create arguments for ``request``: the messages as input, the schema as a text format."""
        body: dict[str, Any] = {"model": self._model, "input": request.messages, **self._cache_key(request)}
        if request.temperature is not None and not self._reasoning:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.max_output_tokens is not None:
            body["max_output_tokens"] = request.max_output_tokens
        if request.reasoning_effort is not None:
            body["reasoning"] = {"effort": request.reasoning_effort}
        schema = request.response_schema
        if schema is not None:
            body["text"] = {"format": {"type": "json_schema", "strict": is_strict_schema(schema),
                                       "name": schema.get("title", SCHEMA_NAME), "schema": schema}}
        return body

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The chat.completions arguments for ``request`` on this provider and model."""
        body: dict[str, Any] = {"model": self._model, "messages": request.messages, **self._cache_key(request)}
        if self._reasoning:
            if request.max_output_tokens is not None:
                body["max_completion_tokens"] = request.max_output_tokens
        else:
            if request.temperature is not None:
                body["temperature"] = request.temperature
            if request.max_output_tokens is not None:
                body["max_tokens"] = request.max_output_tokens
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        schema = request.response_schema
        if schema is not None and self._spec.provider == "deepseek":
            body["response_format"] = {"type": "json_object"}
            body["messages"] = with_schema_instruction(request.messages, schema)
        elif schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.get("title", SCHEMA_NAME), "schema": schema,
                                "strict": is_strict_schema(schema)},
            }
        return body


def _answer(text: str, tokens: Tokens, stop: Stop) -> Answer:
    """The answer; an empty text that claims an ordinary end is malformed (retried as a bad answer)."""
    if stop.usable and not text:
        raise BadAnswer(f"empty completion ({stop.provider_words or 'no finish reason'})", EMPTY_HINT, tokens)
    return Answer(text, tokens, stop)


def responses_stop(response: Any) -> Stop:
    """Why a Responses-API answer ended: a refusal content item, ``status: "incomplete"`` with
    ``incomplete_details.reason``, or an ordinary completion."""
    for item in getattr(response, "output", None) or []:
        for part in getattr(item, "content", None) or []:
            if getattr(part, "type", None) == "refusal":
                return Stop("refusal", redact(f"refusal: {getattr(part, 'refusal', '')}", None))
    status = getattr(response, "status", None)
    if status == "incomplete":
        reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
        return Stop(INCOMPLETE_STOPS.get(reason or "", "unknown"), f"incomplete_details.reason={reason}")
    return Stop() if status in (None, "completed") else Stop("unknown", f"status={status}")


def with_schema_instruction(messages: list[dict[str, str]], schema: dict) -> list[dict[str, str]]:
    """``messages`` plus a system message stating the schema, placed after the leading system messages."""
    instruction = {
        "role": "system",
        "content": "Answer with one JSON object that validates against this JSON schema:\n" + json.dumps(schema),
    }
    lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    return messages[:lead] + [instruction] + messages[lead:]


def usage_tokens(usage: Any) -> Tokens:
    """Token counts of a chat.completions usage block (DeepSeek reports cache hits under its own name)."""
    cached = count(usage, "prompt_tokens_details.cached_tokens")
    return Tokens(
        input=count(usage, "prompt_tokens"),
        output=count(usage, "completion_tokens"),
        cached=cached if cached is not None else count(usage, "prompt_cache_hit_tokens"),
        reasoning=count(usage, "completion_tokens_details.reasoning_tokens"),
        cache_write=count(usage, "prompt_tokens_details.cache_write_tokens"),
    )
