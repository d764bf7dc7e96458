"""Local provider servers that APPLY the providers' prompt-caching rules and report cached tokens as the real APIs
do, answering like the scripted demo models (config/scripted/*.yaml) over each real wire protocol.

The rules, as the providers document them (docs/caching.md cites them), with a token counted as 4 characters:

* OpenAI: automatic; a prompt whose first 1024+ tokens agree with a prompt seen within the TTL under the same
  ``prompt_cache_key`` (none is a key too) reads the agreeing part, in steps of 128 tokens;
  ``usage.prompt_tokens`` (Responses: ``input_tokens``) is the whole prompt and
  ``prompt_tokens_details.cached_tokens`` (``input_tokens_details.cached_tokens``) the part read.
* Anthropic: only up to ``cache_control`` breakpoints (at most 4); a breakpoint's prefix of at least the model's
  minimum (1024 tokens for Sonnet) is written (``cache_creation_input_tokens``) unless it was cached within the
  TTL; a read (``cache_read_input_tokens``) is the longest cached prefix ending at a breakpoint or at one of the
  20 blocks before it; ``input_tokens`` is what is left after the last breakpoint.
* Gemini 2.5: implicit; the prefix shared with a prompt seen within the TTL, from 2048 tokens (2.5 Pro), is
  reported as ``cachedContentTokenCount`` (part of ``promptTokenCount``).
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.models.prompt_cache import common_prefix
from agent.models.scripted import ScriptedModel
from agent.models.types import ModelSpec
from tests.fake_providers import (
    FakeProvider, FakeUsage, ReceivedRequest, Reply, anthropic_message, anthropic_text, anthropic_tool_use,
    gemini_response, openai_completion, openai_response, strip_cache_markers,
)
from tests.run_support import ADDRESS, TMP_PATH

CHARS_PER_TOKEN = 4
TTL_SEC = 300.0
LOOKBACK_BLOCKS = 20
OPENAI_MINIMUM, OPENAI_STEP = 1024, 128
ANTHROPIC_MINIMUM = 1024
GEMINI_MINIMUM = 2048
SCRIPTS = Path(__file__).resolve().parents[1] / "config" / "scripted"


def tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


@dataclass
class Counts:
    """What the server reports of one prompt: all its tokens, the part read from the cache, the part written."""

    prompt: int
    read: int = 0
    written: int = 0


class PromptCache:
    """One provider's prompt cache, as its rules say (thread-safe; entries live ``ttl`` seconds after last use)."""

    def __init__(self, protocol: str, ttl: float = TTL_SEC, clock: Callable[[], float] = time.monotonic) -> None:
        self.protocol, self.ttl, self.clock = protocol, ttl, clock
        self.entries: dict[str, float] = {}  # digest of (scope, prefix) -> expiry
        self.prompts: list[tuple[str, str, float]] = []  # (scope, text, expiry): OpenAI's and Gemini's prefixes
        self.lock = threading.Lock()

    def counts(self, body: dict) -> Counts:
        with self.lock:
            now = self.clock()
            if self.protocol == "anthropic":
                return self._breakpoints(body, now)
            scope = f"{body.get('model')}\x1e{body.get('prompt_cache_key')}" if self.protocol == "openai" else ""
            return self._implicit(scope, "\x1e".join(_texts(self.protocol, body)), now)

    def _implicit(self, scope: str, text: str, now: float) -> Counts:
        """OpenAI's and Gemini's rule: the longest prefix shared with a live prompt of the same scope."""
        self.prompts = [(s, t, end) for s, t, end in self.prompts if end > now]
        shared = max((common_prefix(text, t) for s, t, _ in self.prompts if s == scope), default=0)
        self.prompts.append((scope, text, now + self.ttl))
        read = tokens(shared) if shared < len(text) else tokens(shared) - 1  # the last token is always computed
        if self.protocol == "openai":
            steps = (read - OPENAI_MINIMUM) // OPENAI_STEP
            read = OPENAI_MINIMUM + steps * OPENAI_STEP if read >= OPENAI_MINIMUM else 0
        elif read < GEMINI_MINIMUM:
            read = 0
        return Counts(tokens(len(text)), read)

    def _breakpoints(self, body: dict, now: float) -> Counts:
        """Anthropic's rule: reads at (or up to 20 blocks before) a breakpoint, writes up to the last breakpoint."""
        blocks = _anthropic_blocks(body)
        ends, size = [], 0
        for block in blocks:
            size += len(block["text"])
            ends.append(size)
        flat = "".join(block["text"] for block in blocks)
        marked = [i for i, block in enumerate(blocks) if block.get("cache_control")]
        digest = [_digest(str(body.get("model")), flat[:end]) for end in ends]
        live = {key for key, end in self.entries.items() if end > now}
        read_at = max((j for i in marked for j in range(max(0, i - LOOKBACK_BLOCKS), i + 1) if digest[j] in live),
                      default=None)
        read = tokens(ends[read_at]) if read_at is not None else 0
        if read_at is not None:
            self.entries[digest[read_at]] = now + self.ttl
        written = 0
        for i in marked:
            if tokens(ends[i]) >= ANTHROPIC_MINIMUM and (read_at is None or i > read_at):
                self.entries[digest[i]] = now + self.ttl
                written = tokens(ends[i]) - read
        return Counts(tokens(len(flat)), read, written)


def _digest(model: str, prefix: str) -> str:
    return hashlib.sha256(f"{model}\x1e{prefix}".encode()).hexdigest()


def _anthropic_blocks(body: dict) -> list[dict]:
    """The prompt's text blocks in Anthropic's order (system, then each message's content)."""
    def blocks(content: Any) -> list[dict]:
        return [{"text": content}] if isinstance(content, str) else [b for b in content if b.get("type") == "text"]

    found = blocks(body.get("system") or [])
    for message in body.get("messages", []):
        found += blocks(message["content"])
    return found


def _texts(protocol: str, body: dict) -> list[str]:
    """The prompt's texts in order (OpenAI chat or Responses, Gemini)."""
    if protocol == "openai":
        items = body.get("messages", body.get("input", []))
        return [f"{m['role']}\x1f{m['content']}" for m in items]
    system = [p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts", [])]
    return system + [p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", [])]


def usage_of(protocol: str, counts: Counts, output: int) -> FakeUsage:
    """The counts in the fields each API reports (Anthropic's input_tokens leaves out reads and writes)."""
    if protocol == "anthropic":
        return FakeUsage(counts.prompt - counts.read - counts.written, output, counts.read, None, counts.written)
    return FakeUsage(counts.prompt, output, counts.read)


def caching_responder(protocol: str, cache: PromptCache,
                      answer: Callable[[ReceivedRequest], str]) -> Callable[[ReceivedRequest], Reply]:
    """Answers ``answer(request)`` in ``protocol``'s shape (structured output where the request asks for it),
    with usage counted under ``cache``'s rules."""
    def respond(request: ReceivedRequest) -> Reply:
        text = answer(request)
        usage = usage_of(protocol, cache.counts(request.body), tokens(len(text)))
        return Reply(body=_answer(protocol, request, text, usage))

    return respond


def scripted(script: Path) -> Callable[[ReceivedRequest], str]:
    """What the scripted model ``script`` answers to a request."""
    model = ScriptedModel(ModelSpec("scripted", "responder", script=str(script)))
    return lambda request: model.complete(request.messages).text


def _answer(protocol: str, request: ReceivedRequest, text: str, usage: FakeUsage) -> dict:
    if protocol == "anthropic":
        block = anthropic_tool_use(json.loads(text)) if request.body.get("tools") else anthropic_text(text)
        return anthropic_message([block], usage, stop_reason="tool_use" if request.body.get("tools") else "end_turn")
    if protocol == "gemini":
        return gemini_response(text, usage)
    if request.route.endswith("/responses"):
        return openai_response(json.loads(text), usage)
    return openai_completion(text, usage)


class CachingServers:
    """A code-model and a feedback-model server of one protocol sharing nothing but their rules."""

    def __init__(self, protocol: str, ttl: float = TTL_SEC) -> None:
        self.protocol = protocol
        self.code = FakeProvider(protocol, caching_responder(protocol, PromptCache(protocol, ttl),
                                                             scripted(SCRIPTS / "code_model.yaml")))
        self.feedback = FakeProvider(protocol, caching_responder(protocol, PromptCache(protocol, ttl),
                                                                 scripted(SCRIPTS / "feedback_model.yaml")))

    def __enter__(self) -> CachingServers:
        self.code.start()
        self.feedback.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.code.stop()
        self.feedback.stop()

    def requests(self) -> list[ReceivedRequest]:
        """Every request of both servers in the order they arrived."""
        return sorted([*self.code.requests, *self.feedback.requests], key=lambda r: r.received_at)


def seen_text(request: ReceivedRequest, output: Path | None = None) -> str:
    """A request as the model sees it: cache markers stripped, and what differs between any two runs masked in
    test output: the run's ``output`` folder, temporary folders and object addresses."""
    def masked(value: Any) -> Any:
        if isinstance(value, str):
            value = value.replace(str(output), "<output>") if output is not None else value
            return ADDRESS.sub("0x?", TMP_PATH.sub("<tmp>", value))
        if isinstance(value, list):
            return [masked(item) for item in value]
        return {key: masked(item) for key, item in value.items()} if isinstance(value, dict) else value

    return json.dumps(masked(strip_cache_markers(request.body)), sort_keys=True)


@dataclass
class Sweep:
    """One run of the main command against caching servers: what was sent and what the run recorded."""

    requests: list[ReceivedRequest]
    record: dict
    returncode: int
    output: str
    folder: Path

    def seen(self) -> list[str]:
        """Every request as the model saw it (:func:`seen_text`), sorted: two runs may take their jobs in another
        order, each job's calls are the same."""
        return sorted(seen_text(request, self.folder) for request in self.requests)


def run_sweep(protocol: str, caching: bool, root: Path, **keys: Any) -> Sweep:
    """The real main command, release protocol, the sample tasks, one job at a time (a fixed call order), against
    fresh caching servers of ``protocol``; ``keys`` are config keys on top."""
    import subprocess
    import sys

    import yaml

    from tests.fake_providers import DEFAULT_MODELS, TEST_KEY
    from tests.run_support import CLI, DATASET, REPO, cli_env, run_record

    output = root / f"{protocol}-{'on' if caching else 'off'}"
    with CachingServers(protocol) as servers:
        config = {
            "api-provider": protocol, "model": DEFAULT_MODELS[protocol], "base-url": servers.code.base_url,
            "api-key": TEST_KEY, "human-api-provider": protocol, "human-agent-model": DEFAULT_MODELS[protocol],
            "human-base-url": servers.feedback.base_url, "human-api-key": TEST_KEY, "work-dir": str(DATASET),
            "output-dir": str(output), "env-backend": "current", "parallel-mode": "none", "resume": True,
            "prompt-caching": caching, **keys}
        path = root / f"{protocol}-{'on' if caching else 'off'}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        done = subprocess.run([sys.executable, str(CLI), "--yaml-location", str(path)], cwd=REPO, env=cli_env(),
                              capture_output=True, text=True, timeout=900)
        return Sweep(servers.requests(), run_record(output) if done.returncode == 0 else {}, done.returncode,
                     done.stdout + done.stderr, output)
