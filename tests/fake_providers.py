"""Local HTTP servers that speak the wire protocols of the LLM providers, for tests.

Tests drive the REAL provider SDKs against these servers (no SDK mocks), so
what is tested is what users run. One :class:`FakeProvider` speaks one
protocol (``"openai"`` chat completions, also used for Azure/Together/DeepSeek/
local servers; ``"anthropic"`` messages; ``"gemini"`` generateContent), answers
from a FIFO queue of scripted :class:`Reply` objects (successes, HTTP errors,
hangs, malformed bodies) and logs every request as a :class:`ReceivedRequest`
(``.body`` parsed JSON, ``.headers`` lower-cased, ``.messages`` normalised to
role/content, ``.last_user_text``, ``.route``). The ``"openai"`` protocol also
serves the Responses API (``POST /v1/responses``, what ``client.responses.parse``
calls; its ``input`` list is what ``.messages`` shows); ``openai_response(value)``
builds its answers (``push(Reply(body=...))`` or a responder).

Typical use (the ``no_provider_env`` fixture removes real keys/base URLs and
makes retry waits instant; import it into the test module)::

    from tests.fake_providers import FakeProvider, model_spec, no_provider_env  # noqa: F401

    def test_x(no_provider_env):
        with FakeProvider("openai") as server:
            server.rate_limited(retry_after="0").reply_text("hello", input_tokens=12)
            model = build_model(model_spec(server))       # or ModelSpec(..., base_url=server.base_url)
            assert model.complete([{"role": "user", "content": "hi"}]).text == "hello"
            assert server.requests[-1].body["model"] == "gpt-5-mini"

Scripting methods (all chain): ``reply_text(text, **FakeUsage fields)``,
``reply_json(value)``, ``rate_limited(retry_after)``, ``server_error(status)``,
``overloaded()`` (529), ``unauthorized()``, ``fail(status, message)``,
``hang(seconds)``, ``malformed()``, ``push(Reply(...))``; the providers' real failures: ``fault(case)``
(``quota``, ``revoked_key``, ``permission``, ``context_length``, ``model_not_found``, ``rate_limit``,
``overloaded``, each with the protocol's real status and error body), ``storm(seconds, case, retry_after,
retry_after_ms)`` (a fault answered to every request for a duration), ``without_responses_api()`` (a chat-only
server: ``/v1/responses`` answers 404), and answers that ended early in each API's shape: ``reply_truncated``,
``reply_refused``, ``reply_filtered`` (chat or Responses by the route they answer), ``reply_finished(text,
"RECITATION")`` and ``prompt_blocked(reason)`` for Gemini.
When the queue is empty the server calls ``responder(request) -> Reply`` if
one was given (for agent-loop tests that need an endless, request-dependent
conversation), else answers HTTP 500 "no scripted reply left", which makes a
test that under-scripted its server fail loudly. ``success_body`` and the
per-protocol builders make reply bodies for a responder.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent.models.types import ModelSpec
from agent.models.providers import PROVIDER_ENV_VARS

PROTOCOLS = ("openai", "anthropic", "gemini")
# A model name per protocol that the price table knows, so costs are checkable.
DEFAULT_MODELS = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-4-20250514", "gemini": "gemini-2.5-pro"}
TEST_KEY = "test-key-not-secret"


@dataclass
class Reply:
    """One scripted answer. ``body``: dict/list -> JSON; str/bytes -> sent as is (malformed bodies); a callable
    -> called with the :class:`ReceivedRequest` (so one reply can take the shape of the route it answers:
    chat completions or Responses).

    ``delay_sec`` makes the server wait before answering: longer than the
    client's timeout, it is a hang (the wait ends early when the server stops).
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_sec: float = 0.0


@dataclass
class ReceivedRequest:
    """A request as the server saw it. ``body`` is the parsed JSON (None if not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    protocol: str
    received_at: float = field(default_factory=time.monotonic)  # orders requests across servers

    @property
    def route(self) -> str:
        """The path without its query string."""
        return self.path.split("?", 1)[0]

    @property
    def messages(self) -> list[dict[str, str]]:
        """The conversation in the harness's shape (role/content), whatever the protocol.

        For a Responses-API request these are the ``input`` items (a plain-string input is one user message).
        """
        body = self.body or {}
        if self.protocol == "openai":
            items = body.get("messages", body.get("input", []))
            if isinstance(items, str):
                items = [{"role": "user", "content": items}]
            return [{"role": m["role"], "content": _flatten(m.get("content"))} for m in items if "role" in m]
        if self.protocol == "anthropic":
            system = [{"role": "system", "content": _flatten(body["system"])}] if body.get("system") else []
            return system + [{"role": m["role"], "content": _flatten(m["content"])} for m in body.get("messages", [])]
        system_parts = (body.get("systemInstruction") or {}).get("parts", [])
        system = [{"role": "system", "content": _flatten(system_parts)}] if system_parts else []
        roles = {"model": "assistant", "user": "user"}
        return system + [
            {"role": roles.get(c.get("role", "user"), "user"), "content": _flatten(c.get("parts", []))}
            for c in body.get("contents", [])
        ]

    @property
    def last_user_text(self) -> str:
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""


def _flatten(content: Any) -> str:
    """Text of a message content that may be a string or a list of text parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return "" if content is None else str(content)


CACHE_FIELDS = ("prompt_cache_key",)  # OpenAI's request field of prompt caching


def strip_cache_markers(body: Any) -> Any:
    """A request body without its prompt-caching markers: no ``prompt_cache_key``, and every Anthropic list of
    text blocks (where ``cache_control`` breakpoints sit) joined back into the one string it splits."""
    if isinstance(body, list):
        if body and all(isinstance(b, dict) and b.get("type") == "text" and set(b) <= {"type", "text",
                                                                                    "cache_control"} for b in body):
            return "".join(b["text"] for b in body)
        return [strip_cache_markers(item) for item in body]
    if isinstance(body, dict):
        return {k: strip_cache_markers(v) for k, v in body.items() if k not in CACHE_FIELDS}
    return body


# ---------------------------------------------------------------- success bodies


@dataclass(frozen=True)
class FakeUsage:
    """Token counts a fake answer reports; None leaves the optional field out, as many servers do."""

    input_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None  # Anthropic's cache_creation_input_tokens (the others bill no writes)


def openai_completion(text: str | None, usage: FakeUsage = FakeUsage(), finish_reason: str = "stop") -> dict[str, Any]:
    """A chat.completion body; ``text=None`` gives a null content (an empty completion)."""
    counts: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.cached_tokens is not None:
        counts["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    if usage.reasoning_tokens is not None:
        counts["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [choice],
        "usage": counts,
    }


def openai_response(value: Any, usage: FakeUsage = FakeUsage()) -> dict[str, Any]:
    """A Responses-API body (``POST /v1/responses``) with one assistant message holding ``value``.

    ``value`` is sent as the ``output_text`` (a str as is, anything else as JSON), so
    ``client.responses.parse(text_format=Model)`` gives ``output_parsed`` when the JSON fits
    ``Model``, and ``response.output_text`` is the text. ``usage`` fills ``input_tokens`` /
    ``output_tokens`` (and their cached/reasoning details when set).
    """
    text = value if isinstance(value, str) else json.dumps(value)
    counts: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens or 0},
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
    }
    message = {
        "type": "message",
        "id": "msg_fake",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": "fake-model",
        "output": [message],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": counts,
    }


def anthropic_message(
    blocks: list[dict[str, Any]], usage: FakeUsage = FakeUsage(), stop_reason: str = "end_turn"
) -> dict[str, Any]:
    """A Message body with the given content blocks; cached tokens are reported as cache reads, cache-write
    tokens as cache creation.

    Anthropic has no reasoning-token count: ``usage.reasoning_tokens`` is ignored.
    """
    counts: dict[str, Any] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if usage.cached_tokens is not None or usage.cache_write_tokens is not None:
        counts["cache_read_input_tokens"] = usage.cached_tokens or 0
        counts["cache_creation_input_tokens"] = usage.cache_write_tokens or 0
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": counts,
    }


def anthropic_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def anthropic_tool_use(tool_input: Any, name: str = "respond") -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_fake", "name": name, "input": tool_input}


def gemini_response(text: str | None, usage: FakeUsage = FakeUsage()) -> dict[str, Any]:
    """A generateContent body; ``text=None`` gives a candidate without parts (an empty completion)."""
    counts: dict[str, Any] = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": usage.output_tokens,
        "totalTokenCount": usage.input_tokens + usage.output_tokens + (usage.reasoning_tokens or 0),
    }
    if usage.cached_tokens is not None:
        counts["cachedContentTokenCount"] = usage.cached_tokens
    if usage.reasoning_tokens is not None:
        counts["thoughtsTokenCount"] = usage.reasoning_tokens
    content: dict[str, Any] = {"role": "model", "parts": [] if text is None else [{"text": text}]}
    return {
        "candidates": [{"content": content, "finishReason": "STOP", "index": 0}],
        "usageMetadata": counts,
        "modelVersion": "fake-model",
    }


def success_body(protocol: str, text: str | None, **usage: int | None) -> dict[str, Any]:
    """A plain text answer in ``protocol``'s shape (``text=None``: an empty completion); ``usage``: FakeUsage fields."""
    counts = FakeUsage(**usage)
    if protocol == "openai":
        return openai_completion(text, counts)
    if protocol == "anthropic":
        return anthropic_message([] if text is None else [anthropic_text(text)], counts)
    return gemini_response(text, counts)


def error_body(protocol: str, status: int, message: str) -> dict[str, Any]:
    """An error body in the provider's shape, so the SDK builds its usual exception."""
    if protocol == "openai":
        return {"error": {"message": message, "type": "fake_error", "code": status}}
    if protocol == "anthropic":
        return anthropic_error(ANTHROPIC_ERROR_TYPES.get(status, "api_error"), message)
    return gemini_error(status, GEMINI_STATUS.get(status, "FAKE_ERROR"), message)


# ---------------------------------------------------------------- the providers' real error bodies
# Shapes as the providers document and send them: OpenAI {"error": {message, type, param, code}}; Anthropic
# {"type": "error", "error": {type, message}}; Gemini (google.rpc.Status) {"error": {code, message, status,
# details}}. The messages are our own wording of the same facts.

ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                         403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                         429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}
GEMINI_STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
QUOTA_WORDS = "You exceeded your current quota, please check your plan and billing details."


def openai_error(message: str, kind: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}


def gemini_error(code: int, status: str, message: str, details: list[dict] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return {"error": error}


def gemini_quota_details(quota_id: str, value: str | None, retry_delay: str | None = None) -> list[dict]:
    """QuotaFailure (and RetryInfo) details of a Gemini 429; ``value`` "0" is a model with no quota on this tier."""
    violation: dict[str, Any] = {"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                                 "quotaId": quota_id, "quotaDimensions": {"location": "global", "model": "m"}}
    if value is not None:
        violation["quotaValue"] = value
    details = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]}]
    if retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay})
    return details


def _fault(protocol: str, case: str, model: str) -> Reply:
    """The reply of a named provider fault (see :data:`FAULTS`) in ``protocol``'s real status and body."""
    table: dict[str, dict[str, tuple[int, Any]]] = {
        "quota": {
            "openai": (429, openai_error(QUOTA_WORDS, "insufficient_quota", "insufficient_quota")),
            "anthropic": (400, anthropic_error("invalid_request_error", "Your credit balance is too low to access "
                                               "the Anthropic API. Please go to Plans & Billing to add credits.")),
            "gemini": (429, gemini_error(429, "RESOURCE_EXHAUSTED", QUOTA_WORDS, gemini_quota_details(
                "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "0", "20s"))),
        },
        "revoked_key": {
            "openai": (401, openai_error("Incorrect API key provided: sk-fake. You can find your API key in your "
                                         "account settings.", "invalid_request_error", "invalid_api_key")),
            "anthropic": (401, anthropic_error("authentication_error", "invalid x-api-key")),
            "gemini": (400, gemini_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                                         [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                           "reason": "API_KEY_INVALID", "domain": "googleapis.com"}])),
        },
        "permission": {
            "openai": (403, openai_error("Project does not have access to this model.", "invalid_request_error",
                                         "model_not_available")),
            "anthropic": (403, anthropic_error("permission_error", "Your API key does not have permission to use "
                                               "the specified resource.")),
            "gemini": (403, gemini_error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers.")),
        },
        "context_length": {
            "openai": (400, openai_error("This model's maximum context length is 128000 tokens. However, your "
                                         "messages resulted in 130512 tokens. Please reduce the length of the "
                                         "messages.", "invalid_request_error", "context_length_exceeded",
                                         "messages")),
            "anthropic": (400, anthropic_error("invalid_request_error", "prompt is too long: 208656 tokens > 200000 "
                                               "maximum")),
            "gemini": (400, gemini_error(400, "INVALID_ARGUMENT", "The input token count (1200293) exceeds the "
                                         "maximum number of tokens allowed (1048576).")),
        },
        "model_not_found": {
            "openai": (404, openai_error(f"The model `{model}` does not exist or you do not have access to it.",
                                         "invalid_request_error", "model_not_found")),
            "anthropic": (404, anthropic_error("not_found_error", f"model: {model}")),
            "gemini": (404, gemini_error(404, "NOT_FOUND", f"models/{model} is not found for API version v1beta, "
                                         "or is not supported for generateContent.")),
        },
        "rate_limit": {
            "openai": (429, openai_error("Rate limit reached for requests per min (RPM): Limit 500, Used 500.",
                                         "requests", "rate_limit_exceeded")),
            "anthropic": (429, anthropic_error("rate_limit_error", "Number of requests has exceeded your per-minute "
                                               "rate limit.")),
            "gemini": (429, gemini_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check "
                                         "quota).")),
        },
        "prompt_filtered": {  # Azure OpenAI's content filter refusing the prompt itself
            "openai": (400, {"error": {"message": "The response was filtered due to the prompt triggering Azure "
                                       "OpenAI's content management policy.", "type": None, "param": "prompt",
                                       "code": "content_filter", "status": 400,
                                       "innererror": {"code": "ResponsibleAIPolicyViolation"}}}),
        },
        "deployment_not_found": {  # Azure OpenAI: no deployment of that name on the resource
            "openai": (404, {"error": {"code": "DeploymentNotFound", "message": "The API deployment for this "
                                       "resource does not exist."}}),
        },
        "overloaded": {
            "openai": (503, openai_error("The engine is currently overloaded, please try again later.",
                                         "server_error", None)),
            "anthropic": (529, anthropic_error("overloaded_error", "Overloaded")),
            "gemini": (503, gemini_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")),
        },
    }
    if protocol not in table[case]:
        raise ValueError(f"fault {case!r} has no {protocol} form (only {', '.join(table[case])})")
    status, body = table[case][protocol]
    return Reply(status=status, body=body)


FAULTS = ("quota", "revoked_key", "permission", "context_length", "model_not_found", "rate_limit", "overloaded")
AZURE_FAULTS = ("prompt_filtered", "deployment_not_found")  # the openai protocol only


# ---------------------------------------------------------------- answers that ended early


def openai_response_refusal(text: str, usage: FakeUsage = FakeUsage()) -> dict[str, Any]:
    """A Responses-API body whose message holds a refusal content item instead of output text."""
    body = openai_response("", usage)
    body["output"][0]["content"] = [{"type": "refusal", "refusal": text}]
    return body


def openai_response_incomplete(text: str, reason: str, usage: FakeUsage = FakeUsage()) -> dict[str, Any]:
    """A Responses-API body with ``status: "incomplete"`` and ``incomplete_details.reason`` (max_output_tokens,
    content_filter); the partial ``text`` stays in its message."""
    body = openai_response(text, usage)
    body.update(status="incomplete", incomplete_details={"reason": reason})
    body["output"][0]["status"] = "incomplete"
    return body


def gemini_finished(text: str | None, finish_reason: str, usage: FakeUsage = FakeUsage()) -> dict[str, Any]:
    """A generateContent body whose candidate ended with ``finish_reason`` (MAX_TOKENS, SAFETY, RECITATION...)."""
    body = gemini_response(text, usage)
    body["candidates"][0]["finishReason"] = finish_reason
    if finish_reason == "SAFETY":
        body["candidates"][0]["safetyRatings"] = [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]
    return body


def gemini_prompt_blocked(reason: str = "SAFETY", usage: FakeUsage = FakeUsage()) -> dict[str, Any]:
    """A generateContent body with no candidate: the prompt was blocked (``promptFeedback.blockReason``)."""
    body = gemini_response(None, usage)
    del body["candidates"]
    body["promptFeedback"] = {"blockReason": reason}
    return body


def _ended(protocol: str, how: str, text: str, usage: FakeUsage, route: str) -> dict[str, Any]:
    """An answer that ended as ``how`` (truncated, refused, filtered) in the shape of ``protocol`` and ``route``."""
    responses = route.endswith("/responses")
    if protocol == "openai" and responses:
        if how == "refused":
            return openai_response_refusal(text, usage)
        return openai_response_incomplete(text, "max_output_tokens" if how == "truncated" else "content_filter",
                                          usage)
    if protocol == "openai":
        if how == "refused":
            body = openai_completion(None, usage)
            body["choices"][0]["message"]["refusal"] = text
            return body
        return openai_completion(text, usage, "length" if how == "truncated" else "content_filter")
    if protocol == "anthropic":
        stop = {"truncated": "max_tokens", "refused": "refusal", "filtered": "refusal"}[how]
        return anthropic_message([anthropic_text(text)] if text else [], usage, stop_reason=stop)
    return gemini_finished(text or None, {"truncated": "MAX_TOKENS", "refused": "SAFETY", "filtered": "SAFETY"}[how],
                           usage)


# ---------------------------------------------------------------- the server


class FakeProvider:
    """A loopback server speaking one provider protocol; a context manager.

    ``base_url`` is what to put in ``ModelSpec.base_url`` (for Azure use
    ``url`` as the endpoint). All scripting methods return ``self`` so calls
    chain: ``server.server_error(500).reply_text("ok")``.
    """

    def __init__(self, protocol: str, responder: Callable[[ReceivedRequest], Reply] | None = None) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, not {protocol!r}")
        self.protocol = protocol
        self.responder = responder
        self.requests: list[ReceivedRequest] = []
        self._replies: deque[Reply | Storm] = deque()
        self.responses_api = True  # False: POST .../responses answers 404 like a chat-only server
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a hung handler must not delay stop()
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1" if self.protocol == "openai" else self.url

    def start(self) -> FakeProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -------------------------------------------------- scripting

    def push(self, *replies: Reply | Storm) -> FakeProvider:
        with self._lock:
            self._replies.extend(replies)
        return self

    def reply_text(self, text: str | None, **usage: int | None) -> FakeProvider:
        """A success answering ``text`` (None: an empty completion); ``usage``: FakeUsage fields."""
        return self.push(Reply(body=success_body(self.protocol, text, **usage)))

    def reply_json(self, value: Any, **usage: int | None) -> FakeProvider:
        """A structured-output success: anthropic answers with a tool_use block, the others with JSON text."""
        if self.protocol == "anthropic":
            body = anthropic_message([anthropic_tool_use(value)], FakeUsage(**usage), stop_reason="tool_use")
            return self.push(Reply(body=body))
        return self.reply_text(json.dumps(value), **usage)

    def fail(self, status: int, message: str = "fake failure", headers: dict[str, str] | None = None) -> FakeProvider:
        return self.push(Reply(status=status, body=error_body(self.protocol, status, message), headers=headers or {}))

    def rate_limited(self, retry_after: str | None = "0") -> FakeProvider:
        """HTTP 429, with a ``retry-after`` header (seconds or an HTTP date) unless None."""
        return self.fail(429, "rate limited", {"retry-after": retry_after} if retry_after is not None else None)

    def server_error(self, status: int = 500) -> FakeProvider:
        return self.fail(status, "internal error")

    def overloaded(self) -> FakeProvider:
        """HTTP 529, Anthropic's 'overloaded' status."""
        return self.fail(529, "overloaded")

    def unauthorized(self, message: str = "invalid api key") -> FakeProvider:
        return self.fail(401, message)

    def hang(self, seconds: float = 30.0) -> FakeProvider:
        """Answer nothing for ``seconds`` (then a 500); put the client's timeout well below it."""
        return self.push(Reply(status=500, body=error_body(self.protocol, 500, "late"), delay_sec=seconds))

    def malformed(self, raw: str = "<html>this is not json") -> FakeProvider:
        """A 200 whose body is not JSON though it claims to be."""
        return self.push(Reply(body=raw))

    def fault(self, case: str, model: str | None = None) -> FakeProvider:
        """One of :data:`FAULTS` with the provider's real status and error body: ``quota`` (OpenAI 429
        insufficient_quota, Anthropic 400 credit balance too low, Gemini 429 RESOURCE_EXHAUSTED with a zero
        daily limit), ``revoked_key`` (401 invalid_api_key / authentication_error, Gemini 400 API_KEY_INVALID),
        ``permission`` (403), ``context_length`` (400 context_length_exceeded / "prompt is too long" / input token
        count), ``model_not_found`` (404), ``rate_limit`` (429 without retry-after), ``overloaded`` (OpenAI and
        Gemini 503, Anthropic 529); for the openai protocol also Azure's ``prompt_filtered`` (400 content_filter)
        and ``deployment_not_found`` (404 DeploymentNotFound)."""
        return self.push(_fault(self.protocol, case, model or DEFAULT_MODELS[self.protocol]))

    def storm(self, seconds: float, case: str = "overloaded", retry_after: str | None = None,
              retry_after_ms: str | None = None) -> FakeProvider:
        """Answer every request with fault ``case`` (see :meth:`fault`) for ``seconds`` from the first request
        the storm meets, optionally with ``retry-after`` / ``retry-after-ms`` headers; then go on with the queue."""
        reply = _fault(self.protocol, case, DEFAULT_MODELS[self.protocol])
        headers = {name: value for name, value in (("retry-after", retry_after), ("retry-after-ms", retry_after_ms))
                   if value is not None}
        return self.push(Storm(seconds, Reply(reply.status, reply.body, headers)))

    def without_responses_api(self) -> FakeProvider:
        """Answer ``POST /v1/responses`` with 404 ``{"detail": "Not Found"}``, as chat-only servers (vLLM, Ollama,
        llama.cpp) do; chat completions are served as before."""
        self.responses_api = False
        return self

    def reply_truncated(self, text: str, **usage: int | None) -> FakeProvider:
        """An answer cut off at the output limit: chat ``finish_reason: "length"``, Responses ``status:
        "incomplete"`` (max_output_tokens), Anthropic ``stop_reason: "max_tokens"``, Gemini ``MAX_TOKENS``."""
        return self._ended("truncated", text, usage)

    def reply_refused(self, text: str = "I can't help with that.", **usage: int | None) -> FakeProvider:
        """A refusal: chat ``message.refusal``, a Responses refusal content item, Anthropic ``stop_reason:
        "refusal"``; Gemini has no refusal field, so it ends with ``finishReason: SAFETY``."""
        return self._ended("refused", text, usage)

    def reply_filtered(self, text: str = "", **usage: int | None) -> FakeProvider:
        """Stopped by the provider's safety system: chat ``finish_reason: "content_filter"``, Responses
        incomplete (content_filter), Gemini ``SAFETY`` (Anthropic: ``stop_reason: "refusal"``)."""
        return self._ended("filtered", text, usage)

    def reply_finished(self, text: str | None, finish_reason: str, **usage: int | None) -> FakeProvider:
        """Gemini: a candidate ending with ``finish_reason`` (RECITATION, PROHIBITED_CONTENT, BLOCKLIST, SPII...)."""
        return self.push(Reply(body=gemini_finished(text, finish_reason, FakeUsage(**usage))))

    def prompt_blocked(self, reason: str = "SAFETY") -> FakeProvider:
        """Gemini: no candidate, ``promptFeedback.blockReason`` = ``reason``."""
        return self.push(Reply(body=gemini_prompt_blocked(reason)))

    def _ended(self, how: str, text: str, usage: dict[str, int | None]) -> FakeProvider:
        counts, protocol = FakeUsage(**usage), self.protocol
        return self.push(Reply(body=lambda request: _ended(protocol, how, text, counts, request.route)))

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._replies)

    # -------------------------------------------------- serving

    def answer(self, request: ReceivedRequest) -> Reply:
        """Log ``request`` and pick its reply: 404 off the protocol's route, else the queue, the responder, a 500."""
        with self._lock:
            self.requests.append(request)
            if not self.responses_api and request.route.endswith("/responses"):
                return Reply(status=404, body={"detail": "Not Found"})
            if not self._serves(request.path):
                return Reply(status=404, body=error_body(self.protocol, 404, f"no route {request.path}"))
            while self._replies:
                head = self._replies[0]
                if not isinstance(head, Storm):
                    return self._replies.popleft()
                if head.raging(request.received_at):
                    return head.reply
                self._replies.popleft()
        if self.responder is not None:
            return self.responder(request)
        return Reply(status=500, body=error_body(self.protocol, 500, "fake server: no scripted reply left"))

    def stopped_during(self, seconds: float) -> bool:
        """Wait ``seconds``; True if the server was stopped meanwhile."""
        return self._stopping.wait(seconds)

    def _serves(self, path: str) -> bool:
        route = path.split("?", 1)[0]
        if self.protocol == "openai":
            return route.endswith(("/chat/completions", "/responses"))
        if self.protocol == "anthropic":
            return route.endswith("/v1/messages")
        return route.endswith(":generateContent")


@dataclass
class Storm:
    """A fault answered to every request for ``seconds`` from the first request it meets (then it is spent)."""

    seconds: float
    reply: Reply
    began: float | None = None

    def raging(self, now: float) -> bool:
        if self.began is None:
            self.began = now
        return now - self.began < self.seconds


def _make_handler(server: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = ReceivedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                raw=raw,
                body=body,
                protocol=server.protocol,
            )
            reply = server.answer(request)
            if callable(reply.body):
                reply = Reply(reply.status, reply.body(request), reply.headers, reply.delay_sec)
            if reply.delay_sec and server.stopped_during(reply.delay_sec):
                return
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            body = reply.body
            if isinstance(body, str):
                body = body.encode()
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout): nothing to tell it any more

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (signature of the base class)
            """Silence the default per-request stderr line."""

    return Handler


def model_spec(server: FakeProvider, **overrides: Any) -> ModelSpec:
    """A ModelSpec pointing the protocol's provider at ``server`` (dummy key, short timeout, few retries)."""
    fields: dict[str, Any] = {
        "provider": server.protocol,
        "model": DEFAULT_MODELS[server.protocol],
        "api_key": TEST_KEY,
        "base_url": server.base_url,
        "timeout_sec": 5.0,
        "max_retries": 3,
    }
    fields.update(overrides)
    return ModelSpec(**fields)


@pytest.fixture
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove real keys/base URLs (so a mis-wired test cannot reach a paid API) and make retry waits instant."""
    for name in PROVIDER_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RECODE_RETRY_WAIT_SCALE", "0")
