"""The Gemini generateContent protocol through google-genai.

The ``Client`` is kept on the adapter for its whole life: a temporary client
is closed by garbage collection in the middle of a call. google-genai does
not retry unless asked, which is what we want (the retry policy is ours).
"""
from __future__ import annotations

from typing import Any

from google import genai
from google.genai import errors, types

from agent.models.types import Answer, ChatRequest, ModelSpec, Tokens, add_counts
from agent.models.providers import EMPTY_HINT, SdkErrors, count, guarded_call, inline_refs
from agent.models.retry import BadAnswer

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


def _status_of(error: BaseException) -> tuple[int, Any, str]:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    return error.code, headers, error.message or str(error)  # type: ignore[attr-defined]


SDK_ERRORS = SdkErrors(status_types=(errors.APIError,), status_of=_status_of, transport_types=_transport_errors())


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
            feedback = getattr(response, "prompt_feedback", None)
            reason = getattr(feedback, "block_reason", None)
            raise BadAnswer(f"the answer has no candidates (block reason {reason})", "check the prompt", tokens)
        content = candidates[0].content
        parts = (content.parts if content is not None else None) or []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if not text:
            reason = getattr(candidates[0].finish_reason, "name", candidates[0].finish_reason)
            raise BadAnswer(f"empty completion (finish reason {reason})", EMPTY_HINT, tokens)
        return Answer(text, tokens)


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
