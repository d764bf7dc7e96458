"""What a model spec's request parameters put on the wire, through each provider's real SDK: top_p, the
Responses API with a named schema, the system prompt folded into the user message, Gemini's thinking budget,
and a schema with references inlined for providers that take none; and how a config fills them in."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from agent.models.build import build_model
from agent.protocols.release import FEEDBACKS_SCHEMA
from tests.fake_providers import (
    FakeProvider, FakeUsage, Reply, anthropic_message, anthropic_tool_use, model_spec, openai_response,
    strip_cache_markers,
)
from tests.fake_providers import no_provider_env  # noqa: F401 (fixture)
from tests.loop_config import make_config

pytestmark = pytest.mark.usefixtures("no_provider_env")
ASK = [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "USER"}]
RECORDS = {"feedbacks": [{"interface": "f", "category": "any words", "description": "d", "analysis": "a",
                          "actionable_feedback": "x", "direct_code_feedback": "y"}]}


def test_the_responses_api_with_the_release_s_named_schema() -> None:
    with FakeProvider("openai") as server:
        server.push(Reply(body=openai_response(RECORDS, FakeUsage(input_tokens=321, output_tokens=45))))
        spec = replace(model_spec(server, model="o4-mini"), top_p=1.0, openai_api="responses")
        completion = build_model(spec).complete(ASK, response_schema=FEEDBACKS_SCHEMA)
    request = server.requests[-1]
    assert request.route == "/v1/responses" and set(strip_cache_markers(request.body)) == {"model", "input", "text",
                                                                                           "top_p"}
    assert request.body["input"] == ASK and request.body["top_p"] == 1.0
    assert request.body["text"]["format"] == {"type": "json_schema", "strict": True, "name": "Feedbacks",
                                              "schema": FEEDBACKS_SCHEMA}
    assert json.loads(completion.text) == RECORDS
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (321, 45)


def test_chat_sends_top_p_and_folds_the_system_prompt_when_asked() -> None:
    with FakeProvider("openai") as server:
        server.reply_text("ok").reply_text("ok")
        build_model(replace(model_spec(server, model="gpt-4o"), top_p=1.0)).complete(ASK)
        build_model(replace(model_spec(server, model="o1-mini"), top_p=1.0, fold_system=True)).complete(ASK)
    plain, folded = server.requests
    assert set(strip_cache_markers(plain.body)) == {"model", "messages", "top_p"} and plain.body["messages"] == ASK
    assert folded.body["messages"] == [{"role": "user", "content": "SYSTEM\nUSER"}]


def test_anthropic_gets_temperature_top_p_max_tokens_and_an_inlined_schema() -> None:
    with FakeProvider("anthropic") as server:
        server.push(Reply(body=anthropic_message([anthropic_tool_use(RECORDS)], stop_reason="tool_use")))
        spec = replace(model_spec(server), temperature=0.0, top_p=1.0, max_output_tokens=4096)
        completion = build_model(spec).complete(ASK, response_schema=FEEDBACKS_SCHEMA)
    body = server.requests[-1].body
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.0, 1.0, 4096)
    schema = body["tools"][0]["input_schema"]
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert schema["properties"]["feedbacks"]["items"]["required"][0] == "interface"
    assert json.loads(completion.text) == RECORDS


def test_gemini_gets_one_user_text_temperature_top_p_and_a_thinking_budget() -> None:
    with FakeProvider("gemini") as server:
        server.reply_text("ok")
        spec = replace(model_spec(server), temperature=0.0, top_p=1.0, thinking_budget=1000, fold_system=True)
        build_model(spec).complete(ASK)
    body = server.requests[-1].body
    assert "systemInstruction" not in body and "system_instruction" not in body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "SYSTEM\nUSER"}]}]
    config = body["generationConfig"]
    assert (config["temperature"], config["topP"]) == (0.0, 1.0)
    assert config["thinkingConfig"] == {"thinking_budget": 1000}  # as the SDK spells it, and the release


def test_a_release_config_sends_the_release_s_parameters_and_the_user_s_own_win(tmp_path: Path) -> None:
    common = {"api_provider": "anthropic", "model": "claude-sonnet-4-20250514", "api_key": "k",
              "human_api_provider": "openai", "human_agent_model": "o4-mini", "human_api_key": "k",
              "guidance_level": 2}
    cfg = make_config(tmp_path, **common)
    code, feedback = cfg.models[0], cfg.feedback_model
    assert (code.temperature, code.top_p, code.max_output_tokens) == (0.0, 1.0, 4096)
    assert (feedback.top_p, feedback.openai_api, feedback.temperature) == (1.0, "responses", None)
    own = make_config(tmp_path, **common, temperature=0.7, top_p=None, human_top_p=0.5)
    assert (own.models[0].temperature, own.models[0].top_p, own.models[0].max_output_tokens) == (0.7, None, 4096)
    assert own.feedback_model.top_p == 0.5
    google = make_config(tmp_path, **{**common, "api_provider": "google", "model": "gemini-2.5-pro"})
    assert google.models[0].provider == "gemini" and google.models[0].thinking_budget == 1000
    improved = make_config(tmp_path, **common, protocol="improved")
    assert (improved.models[0].temperature, improved.models[0].top_p) == (None, None)
    assert improved.feedback_model.openai_api == "chat"
