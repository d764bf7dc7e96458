"""The OpenAI chat-completions protocol: OpenAI, Azure OpenAI, Together, DeepSeek and local servers.

Reasoning models (o-series, gpt-5) reject ``temperature`` and ``max_tokens``;
they take ``max_completion_tokens`` and ``reasoning_effort`` instead.
DeepSeek has no JSON-schema mode, only JSON-object mode, so there the schema
travels in a system message.
"""
from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

import openai

from agent.models.types import Answer, ChatRequest, InferenceError, ModelSpec, Tokens
from agent.models.providers import (
    EMPTY_HINT,
    PROVIDERS,
    SdkErrors,
    count,
    guarded_call,
    http_error_parts,
)
from agent.models.retry import BadAnswer

log = logging.getLogger("agent.inference")

REASONING_MODEL = re.compile(r"^(o\d|gpt-5)(?!.*-chat)")
SCHEMA_NAME = "response"
SDK_ERRORS = SdkErrors(
    status_types=(openai.APIStatusError,),
    status_of=http_error_parts,
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
        common: dict[str, Any] = {"api_key": key or "no-key", "max_retries": 0, "timeout": spec.timeout_sec}
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
        if getattr(message, "refusal", None):
            raise BadAnswer(f"the model refused: {message.refusal:.200}", hint="check the prompt", tokens=tokens)
        if not message.content:
            raise BadAnswer(f"empty completion (finish reason {choices[0].finish_reason})", EMPTY_HINT, tokens)
        return Answer(message.content, tokens)

    def _send_responses(self, request: ChatRequest) -> Answer:
        """One call of the Responses API (the release asks its feedback model this way)."""
        response = guarded_call(lambda: self._client.responses.create(**self.responses_body(request)), SDK_ERRORS,
                                self._spec, self._key)
        usage = getattr(response, "usage", None)
        tokens = Tokens(input=count(usage, "input_tokens"), output=count(usage, "output_tokens"),
                        cached=count(usage, "input_tokens_details.cached_tokens"),
                        reasoning=count(usage, "output_tokens_details.reasoning_tokens"))
        text = getattr(response, "output_text", None)
        if not text:
            raise BadAnswer(f"empty response (status {getattr(response, 'status', None)})", EMPTY_HINT, tokens)
        return Answer(text, tokens)

    def responses_body(self, request: ChatRequest) -> dict[str, Any]:
        """The responses.create arguments for ``request``: the messages as input, the schema as a text format."""
        body: dict[str, Any] = {"model": self._model, "input": request.messages}
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
        body: dict[str, Any] = {"model": self._model, "messages": request.messages}
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
    )
