"""build_model: keys, provider-specific wiring of the OpenAI protocol family, and build-time errors."""
from __future__ import annotations

import json
import traceback

import pytest

from agent.models.build import InferenceError, ModelSpec, build_model
from agent.models.openai import is_reasoning_model, is_strict_schema
from agent.models.providers import PROVIDERS
from tests.fake_providers import FakeProvider, model_spec, no_provider_env  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("no_provider_env")

ASK = [{"role": "user", "content": "Answer."}]
SENTINEL = "sk-SENTINEL-b41f29aa07"


@pytest.fixture
def openai_server():
    with FakeProvider("openai") as fake:
        yield fake


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_missing_key_fails_at_build_time_naming_the_variable(provider: str) -> None:
    spec = ModelSpec(provider, "some-model", endpoint="https://x.invalid", api_version="2024-10-21")
    with pytest.raises(InferenceError) as raised:
        build_model(spec)
    message = str(raised.value)
    assert PROVIDERS[provider].key_env[0] in message and "api-key" in message and "\n" not in message


def test_key_comes_from_the_standard_env_var(openai_server: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "env-key-123")
    openai_server.reply_text("ok")
    build_model(ModelSpec("deepseek", "deepseek-chat", base_url=openai_server.base_url)).complete(ASK)
    assert openai_server.requests[0].headers["authorization"] == "Bearer env-key-123"


def test_google_api_key_is_accepted_for_gemini(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key-1")
    with FakeProvider("gemini") as fake:
        fake.reply_text("ok")
        build_model(ModelSpec("gemini", "gemini-2.5-pro", base_url=fake.base_url)).complete(ASK)
        assert fake.requests[0].headers["x-goog-api-key"] == "google-key-1"


def test_openai_compatible_local_server_needs_no_key(openai_server: FakeProvider) -> None:
    openai_server.reply_text("local answer", input_tokens=3, output_tokens=2)
    completion = build_model(ModelSpec("openai", "llama3.1:8b", base_url=openai_server.base_url)).complete(ASK)
    assert completion.text == "local answer"
    assert (completion.usage.input_tokens, completion.usage.cost_usd) == (3, None)  # unknown price: None


def test_unknown_provider_and_bad_numbers() -> None:
    with pytest.raises(InferenceError, match="unknown provider 'opeani'; use one of: openai"):
        build_model(ModelSpec("opeani", "gpt-5"))
    with pytest.raises(InferenceError, match="timeout must be > 0"):
        build_model(ModelSpec("openai", "gpt-5", api_key="k", timeout_sec=0))


def test_azure_routes_to_the_deployment(openai_server: FakeProvider) -> None:
    openai_server.reply_text("from azure")
    spec = ModelSpec(
        "azure-openai",
        "gpt-5",
        api_key="azure-key",
        endpoint=openai_server.url,
        api_version="2024-10-21",
        deployment="my-gpt5",
    )
    assert build_model(spec).complete(ASK).text == "from azure"
    request = openai_server.requests[0]
    assert request.path.startswith("/openai/deployments/my-gpt5/chat/completions")
    assert "api-version=2024-10-21" in request.path
    assert request.headers["api-key"] == "azure-key"


def test_azure_without_endpoint_names_the_fix() -> None:
    with pytest.raises(InferenceError, match="set endpoint and api-version"):
        build_model(ModelSpec("azure-openai", "gpt-5", api_key="k"))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-5", {"max_completion_tokens": 99, "reasoning_effort": "high"}),
        ("o4-mini-2025-04-16", {"max_completion_tokens": 99, "reasoning_effort": "high"}),
        ("gpt-4.1", {"max_tokens": 99, "temperature": 0.3, "reasoning_effort": "high"}),
        ("gpt-5-chat-latest", {"max_tokens": 99, "temperature": 0.3, "reasoning_effort": "high"}),
    ],
)
def test_reasoning_models_get_their_parameters(openai_server: FakeProvider, model: str, expected: dict) -> None:
    openai_server.reply_text("ok")
    spec = model_spec(openai_server, model=model, temperature=0.3, max_output_tokens=99, reasoning_effort="high")
    build_model(spec).complete(ASK)
    body = openai_server.requests[0].body
    assert {k: v for k, v in body.items() if k not in ("model", "messages", "prompt_cache_key")} == expected


def test_reasoning_model_names() -> None:
    assert is_reasoning_model("o3") and is_reasoning_model("gpt-5-mini") and is_reasoning_model("openai/gpt-5")
    assert not is_reasoning_model("gpt-4o") and not is_reasoning_model("omni-moderation")


def test_deepseek_uses_json_object_mode_with_the_schema_in_a_system_message(openai_server: FakeProvider) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    openai_server.reply_json({"ok": True})
    messages = [{"role": "system", "content": "You review code."}, {"role": "user", "content": "Review."}]
    spec = ModelSpec("deepseek", "deepseek-chat", api_key="k", base_url=openai_server.base_url)
    assert json.loads(build_model(spec).complete(messages, response_schema=schema).text) == {"ok": True}
    body = openai_server.requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "system", "user"]
    assert json.dumps(schema) in body["messages"][1]["content"]


def test_strict_mode_only_for_closed_schemas(openai_server: FakeProvider) -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}
    assert not is_strict_schema(loose)
    closed = {**loose, "required": ["a", "b"], "additionalProperties": False}
    assert is_strict_schema(closed)
    assert not is_strict_schema({"type": "array", "items": loose})
    openai_server.reply_json({"a": "x"})
    build_model(model_spec(openai_server)).complete(ASK, response_schema=loose)
    assert openai_server.requests[0].body["response_format"]["json_schema"]["strict"] is False


def test_together_speaks_the_openai_protocol(openai_server: FakeProvider) -> None:
    openai_server.reply_text("together answer", cached_tokens=0)
    spec = ModelSpec("together", "deepseek-ai/DeepSeek-V3.1", api_key="k", base_url=openai_server.base_url)
    completion = build_model(spec).complete(ASK)
    usage = completion.usage
    assert (completion.text, usage.provider, usage.cost_usd) == ("together answer", "together", None)


def test_spec_repr_and_errors_never_show_the_key(openai_server: FakeProvider) -> None:
    spec = model_spec(openai_server, api_key=SENTINEL, max_retries=0)
    assert SENTINEL not in repr(spec) and "api_key='***'" in repr(spec)
    openai_server.fail(500, f"echo {SENTINEL}")
    with pytest.raises(InferenceError) as raised:
        build_model(spec).complete(ASK)
    assert SENTINEL not in "".join(traceback.format_exception(raised.value))
