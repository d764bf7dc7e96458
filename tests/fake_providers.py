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
``hang(seconds)``, ``malformed()``, ``push(Reply(...))``.
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
    """One scripted answer. ``body``: dict/list -> JSON; str/bytes -> sent as is (malformed bodies).

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
        kind = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"code": status, "message": message, "status": "FAKE_ERROR"}}


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
        self._replies: deque[Reply] = deque()
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

    def push(self, *replies: Reply) -> FakeProvider:
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
            if not self._serves(request.path):
                return Reply(status=404, body=error_body(self.protocol, 404, f"no route {request.path}"))
            if self._replies:
                return self._replies.popleft()
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
