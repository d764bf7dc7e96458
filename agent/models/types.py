"""Plain data of the model layer: what a caller asks for and what a call returns.

Kept apart from the provider code so that providers, the cache and the
scripted model share these types without importing each other. The public
names are re-exported by :mod:`agent.models.build`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

ROLES = ("system", "user", "assistant")


class InferenceError(Exception):
    """A model call that cannot succeed without the user's help; the message is one line naming the fix.

    ``usage`` carries the tokens already billed by failed attempts (e.g. empty
    completions), so a caller can still account for their cost.
    """

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage


class RunFatal(InferenceError):
    """The provider will refuse every further call of this run until the user acts.

    Quota or credit exhausted, an invalid or revoked key, no permission, an
    unknown model, or a transient outage that outlasted the retry window. The
    run stops at once (no further calls), leaving jobs in flight resumable;
    ``str(error)`` is the last line the user reads: provider, cause, fix.
    ``code`` is a short stable name of the cause (``insufficient_quota``,
    ``invalid_api_key``, ``permission``, ``model_not_found``, ``outage``, ...).
    """

    def __init__(self, provider: str, code: str, cause: str, fix: str, usage: Usage | None = None) -> None:
        super().__init__(f"{provider} says {cause} ({code}): {fix}", usage)
        self.provider, self.code, self.cause, self.fix = provider, code, cause, fix


class RequestFatal(InferenceError):
    """This request can never succeed as sent; resending it unchanged would be refused again.

    ``reason`` is the short code recorded in the job (``context_length``,
    ``invalid_request``, ``content_filter``: the provider's safety system refused
    the prompt itself, as Azure OpenAI answers 400 ``content_filter``); the job
    ends with it and a rerun does not resend it unless the configuration changed.
    (A server without the Responses API is a :class:`RunFatal`
    ``responses_unsupported``: every feedback call of the run would be refused.)
    """

    def __init__(self, reason: str, message: str, usage: Usage | None = None) -> None:
        super().__init__(message, usage)
        self.reason = reason


STOP_REASONS = ("stop", "length", "refusal", "content_filter", "tool_call", "unknown")


@dataclass(frozen=True)
class Stop:
    """Why the provider ended an answer: one of :data:`STOP_REASONS`, and the provider's own words for it.

    ``length`` means the answer was cut off (truncated); ``refusal`` and
    ``content_filter`` mean the model or the provider's safety system declined.
    """

    reason: str = "stop"
    provider_words: str | None = None

    @property
    def usable(self) -> bool:
        """Whether the text is a complete answer the caller may act on as such."""
        return self.reason in ("stop", "tool_call")


@dataclass(frozen=True)
class ModelSpec:
    """Which model to call and how. Keys may be left None: they then come from the provider's env var."""

    provider: str
    model: str
    api_key: str | None = None
    base_url: str | None = None
    endpoint: str | None = None
    api_version: str | None = None
    deployment: str | None = None
    temperature: float | None = None
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    top_p: float | None = None
    thinking_budget: int | None = None
    fold_system: bool = False  # the system prompt joined to the first user message (the release's o1-mini, Gemini)
    openai_api: str = "chat"  # "responses": structured output through OpenAI's Responses API (the release's feedback)
    timeout_sec: float = 600.0
    max_retries: int = 6
    retry_window_sec: float = 600.0  # transient faults are retried this long (and max_retries times) before outage
    script: str | None = None
    prompt_caching: bool = True  # cache markers / key on each request (agent/models/prompt_cache.py); no text changes
    requests_per_minute: float | None = None  # pacing limits of this model (agent/models/pacing.py); None: none
    tokens_per_minute: float | None = None

    def __repr__(self) -> str:
        """Like the dataclass repr, with the key masked: specs end up in logs and tracebacks."""
        shown = {k: ("***" if k == "api_key" and v else v) for k, v in asdict(self).items()}
        return "ModelSpec(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


@dataclass
class Usage:
    """What one ``complete`` call consumed. Tokens are None when the provider did not report them.

    ``input_tokens`` counts the whole prompt (``cached_tokens`` is the part of
    it read from the provider's prompt cache, ``cache_write_tokens`` the part
    written to it, which Anthropic bills above the input price); ``output_tokens`` counts
    everything billed as output (``reasoning_tokens`` is the hidden part).
    ``cost_usd`` is None when the price of the model is unknown.
    """

    provider: str
    model: str
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    reasoning_tokens: int | None
    latency_sec: float
    cost_usd: float | None
    from_cache: bool = False
    cache_write_tokens: int | None = None
    cache_saved_usd: float | None = None  # what the prompt cache saved at list prices (cost without it - cost_usd)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Completion:
    """The answer's text, what it cost, and why it ended (a truncated or refused answer keeps its raw text)."""

    text: str
    usage: Usage
    stop: Stop = Stop()


class ChatModel(Protocol):
    """The one call interface every provider implements."""

    def complete(self, messages: list[dict[str, str]], *, response_schema: dict | None = None) -> Completion:
        """Answer ``messages``; with ``response_schema`` the text is a JSON string the caller validates."""
        ...


@dataclass(frozen=True)
class Tokens:
    """Token counts of one provider answer (None = not reported)."""

    input: int | None = None
    output: int | None = None
    cached: int | None = None
    reasoning: int | None = None
    cache_write: int | None = None  # prompt tokens written to the provider's cache (part of ``input``)

    def __add__(self, other: Tokens) -> Tokens:
        """Sum counts of several billed attempts."""
        return Tokens(
            add_counts(self.input, other.input),
            add_counts(self.output, other.output),
            add_counts(self.cached, other.cached),
            add_counts(self.reasoning, other.reasoning),
            add_counts(self.cache_write, other.cache_write),
        )


def add_counts(*counts: int | None) -> int | None:
    """Sum of the known counts; None when none is known (unknown is not zero)."""
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


@dataclass(frozen=True)
class Answer:
    """One provider attempt that answered: the text, what it cost in tokens, and why it ended."""

    text: str
    tokens: Tokens
    stop: Stop = Stop()


@dataclass(frozen=True)
class ChatRequest:
    """A provider-independent request: the cache key is made from exactly these fields.

    A ``response_schema`` is named by its ``title`` (default "response").
    """

    model: str
    messages: list[dict[str, str]]
    response_schema: dict | None
    temperature: float | None
    max_output_tokens: int | None
    reasoning_effort: str | None
    top_p: float | None = None
    thinking_budget: int | None = None
    openai_api: str = "chat"

    @classmethod
    def build(cls, spec: ModelSpec, messages: list[dict[str, str]], response_schema: dict | None) -> ChatRequest:
        checked = check_messages(messages)
        return cls(
            model=spec.model,
            messages=fold_system(checked) if spec.fold_system else checked,
            response_schema=response_schema,
            temperature=spec.temperature,
            max_output_tokens=spec.max_output_tokens,
            reasoning_effort=spec.reasoning_effort,
            top_p=spec.top_p,
            thinking_budget=spec.thinking_budget,
            openai_api=spec.openai_api,
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields, the newer ones left out at their defaults (so older cache keys stay valid)."""
        fields = asdict(self)
        return {key: value for key, value in fields.items() if key not in _NEWER or value != _NEWER[key]}


_NEWER = {"top_p": None, "thinking_budget": None, "openai_api": "chat"}


def fold_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The system messages joined to the first user message with a newline, as the release sends models that
    take no system prompt (o1-mini, Gemini): ``system + "\n" + user``."""
    system = [m["content"] for m in messages if m["role"] == "system"]
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = "\n".join(system) + "\n" + rest[0]["content"]
        return rest
    return messages


def check_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Copy ``messages`` keeping only role/content, refusing shapes no provider accepts (a caller bug)."""
    if not messages:
        raise ValueError("messages must not be empty")
    checked = []
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ROLES or not isinstance(content, str):
            raise ValueError(f"message {i} must be {{'role': one of {ROLES}, 'content': str}}, got {message!r:.120}")
        checked.append({"role": role, "content": content})
    return checked
