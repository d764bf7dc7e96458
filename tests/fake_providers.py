"""Local HTTP servers that speak the wire protocols of the LLM providers, for tests.

Tests drive the REAL provider SDKs against these servers (no SDK mocks), so
what is tested is what users run. One :class:`FakeProvider` speaks one
protocol (``"openai"`` chat completions, ``"anthropic"`` messages, ``"gemini"``
generateContent), answers from a FIFO queue of scripted :class:`Reply`
objects (successes, HTTP errors, hangs, malformed bodies) and logs every
request it receives as a :class:`ReceivedRequest`.

Typical use::

    with FakeProvider("openai") as server:
        server.rate_limited(retry_after="0").reply_text("hello", input_tokens=12)
        spec = ModelSpec("openai", "gpt-5", api_key="test-key", base_url=server.base_url)
        ...
        assert server.requests[-1].body["model"] == "gpt-5"

When the queue is empty the server calls ``responder(request)`` if one was
given (for agent-loop tests that need an endless, request-dependent
conversation), else answers HTTP 500 "no scripted reply left", which makes a
test that under-scripted its server fail loudly.

Also here: builders of each protocol's success body (``openai_completion``,
``anthropic_message``, ``gemini_response``...), and the pytest fixture
``no_provider_env`` that removes real keys and base URLs from the environment
and makes retry waits instant.
"""
from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import pytest

from agent.model_types import ModelSpec
from agent.providers import PROVIDER_ENV_VARS

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

    @property
    def messages(self) -> list[dict[str, str]]:
        """The conversation in the harness's shape (role/content), whatever the protocol."""
        body = self.body or {}
        if self.protocol == "openai":
            return [{"role": m["role"], "content": _flatten(m.get("content"))} for m in body.get("messages", [])]
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


def openai_completion(
    text: str | None,
    *,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    model: str = "fake-model",
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """A chat.completion body; ``text=None`` gives a null content (an empty completion)."""
    usage: dict[str, Any] = {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }


def anthropic_message(
    blocks: list[dict[str, Any]],
    *,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cached_tokens: int | None = None,
    model: str = "fake-model",
    stop_reason: str = "end_turn",
) -> dict[str, Any]:
    """A Message body with the given content blocks; ``cached_tokens`` -> cache_read_input_tokens."""
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cached_tokens is not None:
        usage["cache_read_input_tokens"] = cached_tokens
        usage["cache_creation_input_tokens"] = 0
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def anthropic_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def anthropic_tool_use(tool_input: Any, name: str = "respond") -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_fake", "name": name, "input": tool_input}


def gemini_response(
    text: str | None,
    *,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    model: str = "fake-model",
) -> dict[str, Any]:
    """A generateContent body; ``text=None`` gives a candidate without parts (an empty completion)."""
    usage: dict[str, Any] = {
        "promptTokenCount": input_tokens,
        "candidatesTokenCount": output_tokens,
        "totalTokenCount": input_tokens + output_tokens + (reasoning_tokens or 0),
    }
    if cached_tokens is not None:
        usage["cachedContentTokenCount"] = cached_tokens
    if reasoning_tokens is not None:
        usage["thoughtsTokenCount"] = reasoning_tokens
    content: dict[str, Any] = {"role": "model", "parts": [] if text is None else [{"text": text}]}
    return {
        "candidates": [{"content": content, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage,
        "modelVersion": model,
    }


def success_body(protocol: str, text: str | None, **usage: Any) -> dict[str, Any]:
    """A plain text answer in ``protocol``'s shape (``text=None``: an empty completion)."""
    if protocol == "openai":
        return openai_completion(text, **usage)
    if protocol == "anthropic":
        return anthropic_message([] if text is None else [anthropic_text(text)], **usage)
    return gemini_response(text, **usage)


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

    def reply_text(self, text: str | None, **usage: Any) -> FakeProvider:
        """A success answering ``text`` (None: an empty completion); ``usage``: see the body builders."""
        return self.push(Reply(body=success_body(self.protocol, text, **usage)))

    def reply_json(self, value: Any, **usage: Any) -> FakeProvider:
        """A structured-output success: anthropic answers with a tool_use block, the others with JSON text."""
        if self.protocol == "anthropic":
            return self.push(Reply(body=anthropic_message([anthropic_tool_use(value)], stop_reason="tool_use", **usage)))
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

    def _next_reply(self, request: ReceivedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        if self.responder is not None:
            return self.responder(request)
        return Reply(status=500, body=error_body(self.protocol, 500, "fake server: no scripted reply left"))

    def _route_ok(self, path: str) -> bool:
        route = path.split("?", 1)[0]
        if self.protocol == "openai":
            return route.endswith("/chat/completions")
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
            if not server._route_ok(self.path):
                with server._lock:
                    server.requests.append(request)
                self._send(Reply(status=404, body=error_body(server.protocol, 404, f"no route {self.path}")))
                return
            reply = server._next_reply(request)
            if reply.delay_sec and server._stopping.wait(reply.delay_sec):
                return
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            body = reply.body
            data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()
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
