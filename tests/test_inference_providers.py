"""Each provider through its REAL SDK against a local server: faults, retries, usage, request shapes."""
from __future__ import annotations

import json
import logging
import traceback

import pytest

from agent.protocols.improved import FEEDBACK_SCHEMA
from agent.models.build import InferenceError, build_model
from agent.models.types import RequestFatal, RunFatal
from tests.fake_providers import (
    PROTOCOLS,
    FakeProvider,
    Reply,
    model_spec,
    no_provider_env,  # noqa: F401 (fixture)
    success_body,
)

pytestmark = pytest.mark.usefixtures("no_provider_env")

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
SENTINEL = "sk-SENTINEL-7d1e0c55b2"
SCHEMA = FEEDBACK_SCHEMA  # the schema the feedback module really sends


@pytest.fixture(params=PROTOCOLS)
def server(request: pytest.FixtureRequest):
    with FakeProvider(request.param) as fake:
        yield fake


def test_success_records_usage_and_cost(server: FakeProvider) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 200, "cached_tokens": 400}
    if server.protocol != "anthropic":
        usage["reasoning_tokens"] = 50
    server.reply_text("hello", **usage)
    completion = build_model(model_spec(server)).complete(HELLO)
    assert completion.text == "hello"
    got = completion.usage
    assert (got.provider, got.from_cache) == (server.protocol, False)
    assert got.cached_tokens == 400
    assert got.latency_sec > 0
    if server.protocol == "openai":  # gpt-5-mini: $0.25 in, $0.025 cached, $2 out per 1M
        assert (got.input_tokens, got.output_tokens, got.reasoning_tokens) == (1000, 200, 50)
        assert got.cost_usd == pytest.approx((600 * 0.25 + 400 * 0.025 + 200 * 2.0) / 1e6)
    elif server.protocol == "anthropic":  # input_tokens excludes cache reads: the prompt is 1400
        assert (got.input_tokens, got.output_tokens, got.reasoning_tokens) == (1400, 200, None)
        assert got.cost_usd == pytest.approx((1000 * 3.0 + 400 * 0.30 + 200 * 15.0) / 1e6)
    else:  # thoughts are billed as output; cached tokens at the implicit cache's price
        assert (got.input_tokens, got.output_tokens, got.reasoning_tokens) == (1000, 250, 50)
        assert got.cost_usd == pytest.approx((600 * 1.25 + 400 * 0.125 + 250 * 10.0) / 1e6)
    assert json.dumps(got.to_dict())


@pytest.mark.parametrize(
    "fault",
    ["rate_limited", "server_error", "overloaded", "hang", "malformed", "bad_gateway"],
)
def test_transient_fault_then_success(server: FakeProvider, fault: str, caplog: pytest.LogCaptureFixture) -> None:
    {
        "rate_limited": lambda: server.rate_limited(retry_after="0"),
        "server_error": lambda: server.server_error(500),
        "bad_gateway": lambda: server.server_error(503),
        "overloaded": server.overloaded,
        "hang": lambda: server.hang(30),
        "malformed": server.malformed,
    }[fault]()
    server.reply_text("recovered")
    with caplog.at_level(logging.WARNING, logger="agent.inference"):
        completion = build_model(model_spec(server, timeout_sec=0.3)).complete(HELLO)
    assert completion.text == "recovered"
    assert len(server.requests) == 2
    assert "retry 1/3" in caplog.text


def test_retries_are_bounded(server: FakeProvider) -> None:
    for _ in range(5):
        server.server_error(500)
    with pytest.raises(RunFatal, match=r"unavailable after 3 attempt\(s\) over 0 s \(last: HTTP 500") as raised:
        build_model(model_spec(server, max_retries=2)).complete(HELLO)
    assert len(server.requests) == 3
    assert "\n" not in str(raised.value)


def test_empty_completion_is_retried_a_few_times_then_fails_with_its_cost(server: FakeProvider) -> None:
    for _ in range(5):
        server.reply_text(None, input_tokens=100, output_tokens=7)
    with pytest.raises(InferenceError, match="max-output-tokens") as raised:
        build_model(model_spec(server, max_retries=6)).complete(HELLO)
    assert len(server.requests) == 3  # one try + 2 retries for bad answers, though max_retries is 6
    assert raised.value.usage is not None
    assert (raised.value.usage.input_tokens, raised.value.usage.output_tokens) == (300, 21)
    assert raised.value.usage.cost_usd is not None and raised.value.usage.cost_usd > 0


def test_empty_then_success_bills_both_attempts(server: FakeProvider) -> None:
    server.reply_text(None, input_tokens=100, output_tokens=7).reply_text("ok", input_tokens=100, output_tokens=3)
    usage = build_model(model_spec(server)).complete(HELLO).usage
    assert (usage.input_tokens, usage.output_tokens) == (200, 10)


def test_malformed_body_repeated_fails_with_one_line(server: FakeProvider) -> None:
    for _ in range(3):
        server.malformed()
    with pytest.raises(InferenceError, match="not JSON; check that base-url") as raised:
        build_model(model_spec(server)).complete(HELLO)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_is_not_retried_and_names_the_fix(server: FakeProvider, status: int) -> None:
    server.fail(status, f"Incorrect API key provided: {SENTINEL}").reply_text("never reached")
    with pytest.raises(InferenceError) as raised:
        build_model(model_spec(server, api_key=SENTINEL)).complete(HELLO)
    message = str(raised.value)
    assert len(server.requests) == 1
    assert isinstance(raised.value, RunFatal)
    assert ("API key is invalid or revoked" if status == 401 else "may not use") in message
    assert message.endswith("then run the same command again")
    assert SENTINEL not in message and "\n" not in message
    assert SENTINEL not in "".join(traceback.format_exception(raised.value))


@pytest.mark.parametrize("status", [400, 422])
def test_bad_request_is_not_retried(server: FakeProvider, status: int) -> None:
    server.fail(status, "unknown parameter").reply_text("never reached")
    with pytest.raises(RequestFatal, match=f"refused the request \\(HTTP {status}: unknown parameter\\)") as raised:
        build_model(model_spec(server)).complete(HELLO)
    assert raised.value.reason == "invalid_request"
    assert len(server.requests) == 1


def test_connection_refused_is_retried_then_reported() -> None:
    with FakeProvider("openai") as fake:
        spec = model_spec(fake, max_retries=1)
    with pytest.raises(RunFatal, match=r"after 2 attempt\(s\) over 0 s \(last: connection refused at http://127\.0\.0\.1:\d+/v1\) "
                       r"\(unreachable\): check base-url and that the server is running") as raised:
        build_model(spec).complete(HELLO)
    assert raised.value.code == "unreachable"


def test_key_never_leaks_into_logs(server: FakeProvider, caplog: pytest.LogCaptureFixture) -> None:
    server.fail(500, f"upstream said {SENTINEL}").reply_text("ok")
    with caplog.at_level(logging.DEBUG):
        build_model(model_spec(server, api_key=SENTINEL)).complete(HELLO)
    assert "upstream said ***" in caplog.text
    assert SENTINEL not in caplog.text


def test_structured_output_request_shape(server: FakeProvider) -> None:
    record = {"interface": "f()", "category": "T2", "description": "d", "analysis": "a"}
    value = {"feedback": [{**record, "actionable_feedback": "x", "direct_code_feedback": "y"}]}
    server.reply_json(value)
    completion = build_model(model_spec(server)).complete(HELLO, response_schema=SCHEMA)
    assert json.loads(completion.text) == value
    body = server.requests[0].body
    if server.protocol == "openai":
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": SCHEMA, "strict": True},
        }
    elif server.protocol == "anthropic":
        assert body["tools"][0]["input_schema"] == SCHEMA
        assert body["tool_choice"] == {"type": "tool", "name": body["tools"][0]["name"]}
    else:
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert config["responseJsonSchema"] == SCHEMA


def test_anthropic_structured_answer_without_tool_block_is_bad() -> None:
    with FakeProvider("anthropic") as fake:
        for _ in range(3):
            fake.reply_text("I will not use the tool")
        with pytest.raises(InferenceError, match="no respond tool block"):
            build_model(model_spec(fake)).complete(HELLO, response_schema=SCHEMA)


def test_messages_reach_each_protocol_in_its_shape(server: FakeProvider) -> None:
    conversation = HELLO + [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Again."}]
    server.reply_text("Hello again.")
    build_model(model_spec(server, temperature=0.2, max_output_tokens=300)).complete(conversation)
    received = server.requests[0]
    assert received.messages == conversation
    body = received.body
    if server.protocol == "openai":  # gpt-5-mini is a reasoning model
        assert body["max_completion_tokens"] == 300 and "temperature" not in body
    elif server.protocol == "anthropic":
        assert (body["max_tokens"], body["temperature"], body["system"]) == (300, 0.2, "Be brief.")
    else:
        assert body["generationConfig"] == {"temperature": 0.2, "maxOutputTokens": 300}


def test_responder_answers_when_the_queue_is_empty() -> None:
    def echo(request):
        return Reply(body=success_body("openai", request.last_user_text.upper()))

    with FakeProvider("openai", responder=echo) as fake:
        model = build_model(model_spec(fake))
        assert [model.complete([{"role": "user", "content": w}]).text for w in ("a", "b")] == ["A", "B"]


def test_unscripted_server_fails_loudly() -> None:
    with FakeProvider("gemini") as fake:
        with pytest.raises(InferenceError, match="no scripted reply left"):
            build_model(model_spec(fake, max_retries=0)).complete(HELLO)

