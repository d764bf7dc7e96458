"""What every provider adapter shares: the provider table, API-key lookup and SDK error translation.

An adapter (``agent/models/openai.py``, ``anthropic.py``, ``gemini.py``) wraps one SDK and makes exactly one
attempt per ``send``. Its SDK's HTTP errors are read into a plain :class:`HttpFailure` and classified in
one place per provider (the adapter's ``classify``): the special cases it knows (a 429 that is a spent
quota, a 400 that is a too-long prompt...) first, then :func:`by_status` for the rest. The builders below
word each outcome the same way for every provider; :func:`guarded_call` runs one SDK call under this, so
the retry policy itself knows no SDK.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from agent.models.retry import BadAnswer, TransientError, parse_retry_after, redact
from agent.models.types import Answer, ChatRequest, InferenceError, ModelSpec, RequestFatal, RunFatal, Stop


@dataclass(frozen=True)
class ProviderInfo:
    """Facts about one provider name of ``ModelSpec.provider``; ``name`` is how messages call it."""

    key_env: tuple[str, ...]
    name: str
    default_base_url: str | None = None


PROVIDERS: dict[str, ProviderInfo] = {
    "openai": ProviderInfo(("OPENAI_API_KEY",), "OpenAI"),
    "azure-openai": ProviderInfo(("AZURE_OPENAI_API_KEY",), "Azure OpenAI"),
    "anthropic": ProviderInfo(("ANTHROPIC_API_KEY",), "Anthropic"),
    "gemini": ProviderInfo(("GEMINI_API_KEY", "GOOGLE_API_KEY"), "Gemini"),
    "together": ProviderInfo(("TOGETHER_API_KEY",), "Together", "https://api.together.xyz/v1"),
    "deepseek": ProviderInfo(("DEEPSEEK_API_KEY",), "DeepSeek", "https://api.deepseek.com"),
}
RERUN = "then run the same command again"
RETRYABLE_STATUS = {408, 409, 425, 429}
OFFLINE_PROVIDERS = ("scripted", "replay")
EMPTY_HINT = "raise max-output-tokens if the answer was cut, else check the prompt"

# Every variable through which an SDK may pick up a key, an endpoint or a backend
# on its own. Tests remove them all so that no test can reach a real service.
PROVIDER_ENV_VARS: tuple[str, ...] = tuple(
    sorted(
        {name for info in PROVIDERS.values() for name in info.key_env}
        | {
            "OPENAI_BASE_URL",
            "OPENAI_ORG_ID",
            "OPENAI_PROJECT_ID",
            "OPENAI_API_VERSION",
            "AZURE_OPENAI_ENDPOINT",
            "AZURE_OPENAI_AD_TOKEN",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_APPLICATION_CREDENTIALS",
        }
    )
)


def key_hint(provider: str) -> str:
    """The fix to name when a key is missing or rejected."""
    names = " or ".join(PROVIDERS[provider].key_env)
    return f"set {names} or api-key"


def resolve_key(spec: ModelSpec) -> str | None:
    """The API key from the spec, else the provider's env var; None only where a key is optional.

    A key is optional for ``openai`` pointed at another server (``base_url``):
    local vLLM, Ollama or llama.cpp servers usually take none.
    """
    info = PROVIDERS[spec.provider]
    key = spec.api_key or next((os.environ[n] for n in info.key_env if os.environ.get(n)), None)
    if key:
        return key
    if spec.provider == "openai" and (spec.base_url or os.environ.get("OPENAI_BASE_URL")):
        return None
    raise InferenceError(f"{spec.provider} model {spec.model}: no API key; {key_hint(spec.provider)}")


class Adapter(Protocol):
    """One SDK client; ``send`` makes exactly one attempt."""

    def send(self, request: ChatRequest) -> Answer: ...


@dataclass(frozen=True)
class HttpFailure:
    """An SDK's HTTP error as plain data: what a provider's ``classify`` reads.

    ``kind`` is the error's type (OpenAI/Anthropic ``error.type``, Gemini ``status``), ``code`` its finer code
    (OpenAI ``error.code``, Anthropic ``error.details.error_code``, Gemini ``ErrorInfo.reason``), ``message``
    the server's words (one line, key masked), ``route`` the request's path.
    """

    status: int
    kind: str | None
    code: str | None
    message: str
    headers: Mapping[str, str] | None = None
    route: str = ""
    details: tuple[dict, ...] = ()


@dataclass(frozen=True)
class SdkErrors:
    """How to read one SDK's exceptions and classify its HTTP failures (the provider's one place for that)."""

    status_types: tuple[type[BaseException], ...]
    read: Callable[[BaseException, str | None], HttpFailure]
    classify: Callable[[HttpFailure, ModelSpec], Exception]
    transport_types: tuple[type[BaseException], ...]


def provider_name(spec: ModelSpec) -> str:
    return PROVIDERS[spec.provider].name


def run_fatal(spec: ModelSpec, code: str, cause: str, fix: str) -> RunFatal:
    return RunFatal(provider_name(spec), code, cause, fix)


def key_rejected(spec: ModelSpec, code: str | None) -> RunFatal:
    return run_fatal(spec, code or "invalid_api_key", "the API key is invalid or revoked",
                     f"{key_hint(spec.provider)}, {RERUN}")


def no_permission(spec: ModelSpec, failure: HttpFailure) -> RunFatal:
    return run_fatal(spec, "permission", f"this key may not use {spec.model} ({failure.message:.160})",
                     f"use a key or project with access to it, or another model, {RERUN}")


def unknown_model(spec: ModelSpec, failure: HttpFailure) -> RunFatal:
    return run_fatal(spec, "model_not_found", f"there is no model {spec.model} for this key "
                     f"({failure.message:.160})", f"check model (and deployment, base-url), {RERUN}")


def quota_spent(spec: ModelSpec, code: str, fix: str = "add credits", cause: str = "the quota is exhausted") -> RunFatal:
    return run_fatal(spec, code, cause, f"{fix}, {RERUN}")


def too_long(spec: ModelSpec, failure: HttpFailure) -> RequestFatal:
    return RequestFatal("context_length", f"{provider_name(spec)} {spec.model}: the prompt is longer than the "
                        f"model's context window ({failure.message:.200}); use a model with a longer context or "
                        "a lower max-turn")


def invalid_request(spec: ModelSpec, failure: HttpFailure, reason: str = "invalid_request") -> RequestFatal:
    return RequestFatal(reason, f"{provider_name(spec)} {spec.model}: the provider refused the request (HTTP "
                        f"{failure.status}: {failure.message}); check the model name and settings")


def transient(failure: HttpFailure, retry_after: float | None = None) -> TransientError:
    asked = parse_retry_after(failure.headers) if retry_after is None else retry_after
    return TransientError(f"HTTP {failure.status}: {failure.message}", asked)


def by_status(failure: HttpFailure, spec: ModelSpec) -> Exception:
    """The outcome of a status no provider rule claimed: 408/409/425/429/5xx retry, 401 a bad key, 403 no
    permission, 404 an unknown model, 413 a too-long prompt, any other 4xx an invalid request."""
    status = failure.status
    if status in RETRYABLE_STATUS or status >= 500:
        return transient(failure)
    if status == 401:
        return key_rejected(spec, None)
    if status == 403:
        return no_permission(spec, failure)
    if status == 404:
        return unknown_model(spec, failure)
    if status == 413:
        return too_long(spec, failure)
    return invalid_request(spec, failure)


def sdk_failure(error: BaseException, secret: str | None, kind: str | None, code: str | None,
                message: str | None) -> HttpFailure:
    """The common fields of an openai/anthropic APIStatusError (status, headers, route) with the given parts."""
    request = getattr(error, "request", None)
    url = getattr(request, "url", None)
    return HttpFailure(error.status_code, kind, code, redact(message or str(error), secret),  # type: ignore[attr-defined]
                       error.response.headers, str(getattr(url, "path", "") or ""))  # type: ignore[attr-defined]


T = TypeVar("T")


def count(obj: Any, path: str) -> int | None:
    """The integer at dotted attribute ``path`` of an SDK usage object, None where any step is missing."""
    for name in path.split("."):
        obj = getattr(obj, name, None)
    return obj if isinstance(obj, int) and not isinstance(obj, bool) else None


def stop_of(table: Mapping[str, str], field: str, raw: str | None) -> Stop:
    """The :class:`Stop` for the provider's value ``raw`` of ``field`` (say ``finish_reason``): mapped by
    ``table``, ``unknown`` when the value is not in it, an ordinary end when the provider gave none (some
    OpenAI-compatible servers leave it out); the provider's words are kept as ``field=value``."""
    if raw is None:
        return Stop()
    return Stop(table.get(raw, "unknown"), f"{field}={raw}")


def error_object(error: BaseException) -> dict:
    """The ``error`` object of an openai/anthropic error body (the body itself when it has none)."""
    body = getattr(error, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    return inner if isinstance(inner, dict) else {}


def _refused(error: BaseException) -> bool:
    """The SDK's transport error was a refused connection (nothing listens there)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _origin(error: BaseException) -> str:
    """Scheme, host and port the failed request went to (the provider's default URL when no base-url is set)."""
    url = str(getattr(getattr(error, "request", None), "url", "") or "")
    return "/".join(url.split("/")[:3]) or "the provider's default URL"


def guarded_call(call: Callable[[], T], errors: SdkErrors, spec: ModelSpec, secret: str | None) -> T:
    """Run one SDK call, translating its failures; the key never reaches a message or a traceback."""
    try:
        return call()
    except errors.status_types as error:
        raise errors.classify(errors.read(error, secret), spec) from None
    except errors.transport_types as error:
        if _refused(error):
            where = spec.base_url or _origin(error)
            raise TransientError(f"connection refused at {where}", windowed=False, code="unreachable",
                                 hint=f"check base-url and that the server is running, {RERUN}") from None
        raise TransientError(f"{type(error).__name__}: {redact(str(error), secret)}") from None
    except json.JSONDecodeError:
        raise BadAnswer(
            "the response body is not JSON", hint="check that base-url points at the provider's API"
        ) from None


def inline_refs(schema: Any, defs: dict | None = None) -> Any:
    """``schema`` with every local ``$ref`` replaced by its definition and ``$defs`` dropped, for providers whose
    structured output takes no references (the release's feedback schema has one)."""
    if isinstance(schema, list):
        return [inline_refs(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    defs = {**(defs or {}), **schema.get("$defs", {})}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return inline_refs(defs[ref.rsplit("/", 1)[1]], defs)
    return {key: inline_refs(value, defs) for key, value in schema.items() if key != "$defs"}
