"""What every provider adapter shares: the provider table, API-key lookup and SDK error translation.

An adapter (``agent/models/openai.py``, ``anthropic.py``, ``gemini.py``) wraps one SDK and makes exactly one
attempt per ``send``; it turns the SDK's exceptions into the retry policy's
kinds through :func:`guarded_call`, so the policy itself knows no SDK.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from agent.models.types import Answer, ChatRequest, InferenceError, ModelSpec
from agent.models.retry import BadAnswer, TransientError, redact, status_failure


@dataclass(frozen=True)
class ProviderInfo:
    """Facts about one provider name of ``ModelSpec.provider``."""

    key_env: tuple[str, ...]
    default_base_url: str | None = None


PROVIDERS: dict[str, ProviderInfo] = {
    "openai": ProviderInfo(("OPENAI_API_KEY",)),
    "azure-openai": ProviderInfo(("AZURE_OPENAI_API_KEY",)),
    "anthropic": ProviderInfo(("ANTHROPIC_API_KEY",)),
    "gemini": ProviderInfo(("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    "together": ProviderInfo(("TOGETHER_API_KEY",), "https://api.together.xyz/v1"),
    "deepseek": ProviderInfo(("DEEPSEEK_API_KEY",), "https://api.deepseek.com"),
}
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
class SdkErrors:
    """How to read one SDK's exceptions: HTTP status errors and transport (timeout/connection) errors."""

    status_types: tuple[type[BaseException], ...]
    status_of: Callable[[BaseException], tuple[int, Mapping[str, str] | None, str]]
    transport_types: tuple[type[BaseException], ...]


T = TypeVar("T")


def count(obj: Any, path: str) -> int | None:
    """The integer at dotted attribute ``path`` of an SDK usage object, None where any step is missing."""
    for name in path.split("."):
        obj = getattr(obj, name, None)
    return obj if isinstance(obj, int) and not isinstance(obj, bool) else None


def http_error_parts(error: BaseException) -> tuple[int, Mapping[str, str] | None, str]:
    """Status, headers and the server's own message of an openai/anthropic APIStatusError."""
    body = getattr(error, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    message = inner.get("message") if isinstance(inner, dict) else None
    return error.status_code, error.response.headers, message or str(error)  # type: ignore[attr-defined]


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
    label = f"{spec.provider} {spec.model}"
    try:
        return call()
    except errors.status_types as error:
        status, headers, message = errors.status_of(error)
        raise status_failure(label, status, headers, message, key_hint(spec.provider), secret) from None
    except errors.transport_types as error:
        if _refused(error):
            where = spec.base_url or _origin(error)
            raise TransientError(f"connection refused at {where}", hint=f"nothing answers at base-url {where}: "
                                 "check base-url and that the server is running") from None
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
