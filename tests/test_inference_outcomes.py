"""Issue 30 at the model layer: each provider's real failures and early endings through its REAL SDK.

A run-fatal or request-fatal error is raised after exactly one call with its one-line message; an answer that was
cut off, refused or filtered comes back with its Stop and raw text; a storm shorter than the retry window leaves
the answer as an uninterrupted call's, a longer one is an outage; a server without the Responses API is named
with the setting that avoids it.
"""
from __future__ import annotations

import json
import logging
import re
import sqlite3
from pathlib import Path

import pytest
import yaml

from agent.config import ConfigError, load_config
from agent.job.fingerprint import diff_fingerprints, job_fingerprint
from agent.models.build import build_model
from agent.models.cache import ResponseCache
from agent.models.types import ChatRequest, RequestFatal, RunFatal, Stop
from tests.fake_providers import (
    FakeProvider,
    model_spec,
    no_provider_env,  # noqa: F401 (fixture)
)

pytestmark = pytest.mark.usefixtures("no_provider_env")

ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Write the function."}]
RERUN = "then run the same command again"

NAMES = {"openai": ("OpenAI", "gpt-5-mini", "OPENAI_API_KEY"),
         "anthropic": ("Anthropic", "claude-sonnet-4-20250514", "ANTHROPIC_API_KEY"),
         "gemini": ("Gemini", "gemini-2.5-pro", "GEMINI_API_KEY or GOOGLE_API_KEY")}
# What each provider's own words are in the fake's permission and model-not-found bodies.
DENIED = {"openai": "Project does not have access to this model.",
          "anthropic": "Your API key does not have permission to use the specified resource.",
          "gemini": "Method doesn't allow unregistered callers."}
UNKNOWN = {"openai": "The model `gpt-5-mini` does not exist or you do not have access to it.",
           "anthropic": "model: claude-sonnet-4-20250514",
           "gemini": "models/gemini-2.5-pro is not found for API version v1beta, or is not supported for "
                     "generateContent."}


def account_faults() -> dict:
    """The run-fatal lines every provider words the same way: revoked key, permission, unknown model."""
    table = {}
    for protocol, (name, model, keys) in NAMES.items():
        table[protocol, "revoked_key"] = (RunFatal, "invalid_api_key", f"{name} says the API key is invalid or "
                                          f"revoked (invalid_api_key): set {keys} or api-key, {RERUN}")
        table[protocol, "permission"] = (RunFatal, "permission", f"{name} says this key may not use {model} "
                                         f"({DENIED[protocol]}) (permission): use a key or project with access to "
                                         f"it, or another model, {RERUN}")
        table[protocol, "model_not_found"] = (RunFatal, "model_not_found", f"{name} says there is no model {model} "
                                              f"for this key ({UNKNOWN[protocol]}) (model_not_found): check model "
                                              f"(and deployment, base-url), {RERUN}")
    return table


# (protocol, fault) -> (exception type, code or reason, the whole one-line message)
FATAL = {
    **account_faults(),
    ("openai", "quota"): (RunFatal, "insufficient_quota",
                          f"OpenAI says the quota is exhausted (insufficient_quota): add credits, {RERUN}"),
    ("anthropic", "quota"): (RunFatal, "credit_balance_too_low",
                             "Anthropic says the credit balance is too low (credit_balance_too_low): add credits in "
                             f"the Anthropic Console's Plans & Billing, {RERUN}"),
    ("gemini", "quota"): (RunFatal, "resource_exhausted",
                          "Gemini says the quota is exhausted (resource_exhausted): use a paid tier or another model "
                          f"(gemini-2.5-pro has no quota on this key's tier), {RERUN}"),
    ("openai", "context_length"): (RequestFatal, "context_length", "OpenAI gpt-5-mini: the prompt is longer than "
                                   "the model's context window (This model's maximum context length is 128000 "
                                   "tokens. However, your messages resulted in 130512 tokens. Please reduce the "
                                   "length of the messages.); use a model with a longer context or a lower "
                                   "max-turn"),
    ("anthropic", "context_length"): (RequestFatal, "context_length", "Anthropic claude-sonnet-4-20250514: the "
                                      "prompt is longer than the model's context window (prompt is too long: 208656 "
                                      "tokens > 200000 maximum); use a model with a longer context or a lower "
                                      "max-turn"),
    ("gemini", "context_length"): (RequestFatal, "context_length", "Gemini gemini-2.5-pro: the prompt is longer "
                                   "than the model's context window (The input token count (1200293) exceeds the "
                                   "maximum number of tokens allowed (1048576).); use a model with a longer context "
                                   "or a lower max-turn"),
}


@pytest.mark.parametrize(("protocol", "fault"), sorted(FATAL))
def test_a_fatal_error_is_named_in_one_line_after_one_call(protocol: str, fault: str) -> None:
    kind, code, line = FATAL[protocol, fault]
    with FakeProvider(protocol) as server:
        server.fault(fault).reply_text("never reached")
        with pytest.raises(kind) as raised:
            build_model(model_spec(server, max_retries=6)).complete(ASK)
        assert len(server.requests) == 1 and server.pending == 1
    assert str(raised.value) == line
    assert (raised.value.code if kind is RunFatal else raised.value.reason) == code


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("fault", ["rate_limit", "overloaded"])
def test_a_transient_fault_is_retried_to_the_same_answer(protocol: str, fault: str) -> None:
    with FakeProvider(protocol) as server:
        server.fault(fault).fault(fault).reply_text("def f(): pass")
        completion = build_model(model_spec(server)).complete(ASK)
        assert len(server.requests) == 3
    assert (completion.text, completion.stop.reason) == ("def f(): pass", "stop")


@pytest.mark.parametrize(("quota_id", "value", "words", "fatal"), [
    ("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "250", "You exceeded your current quota.", True),
    ("GenerateRequestsPerMinutePerProjectPerModel", "0", "Quota exceeded.", True),
    ("GenerateRequestsPerMinutePerProjectPerModel", "60", "You exceeded your current quota.", False),
    (None, None, "You exceeded your current quota, please check your plan and billing details.", True),
    (None, None, "Resource has been exhausted (e.g. check quota).", False),
])
def test_gemini_tells_a_spent_quota_from_a_rate_limit(quota_id: str | None, value: str | None, words: str,
                                                      fatal: bool) -> None:
    from tests.fake_providers import Reply, gemini_error, gemini_quota_details

    details = gemini_quota_details(quota_id, value) if quota_id else None
    with FakeProvider("gemini") as server:
        server.push(Reply(429, gemini_error(429, "RESOURCE_EXHAUSTED", words, details))).reply_text("ok")
        model = build_model(model_spec(server))
        if fatal:
            with pytest.raises(RunFatal, match=r"^Gemini says the quota is exhausted \(resource_exhausted\)"):
                model.complete(ASK)
        else:
            assert model.complete(ASK).text == "ok"
        assert len(server.requests) == (1 if fatal else 2)


@pytest.mark.parametrize(("code", "fix"), [
    ("credit_balance_exhausted", "add credits"),
    ("project_spend_limit_exceeded", "raise the project's spend limit (or wait for its monthly reset)"),
    ("organization_usage_limit_exceeded", "ask OpenAI for a higher usage limit"),
])
def test_openai_billing_codes_stop_the_run(code: str, fix: str) -> None:
    from tests.fake_providers import QUOTA_WORDS, Reply, openai_error

    with FakeProvider("openai") as server:
        server.push(Reply(429, openai_error(QUOTA_WORDS, "insufficient_quota", code))).reply_text("never reached")
        with pytest.raises(RunFatal) as raised:
            build_model(model_spec(server)).complete(ASK)
        assert len(server.requests) == 1
    assert str(raised.value) == f"OpenAI says the quota is exhausted ({code}): {fix}, {RERUN}"


def test_a_gemini_per_minute_limit_waits_its_retry_delay(monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    from tests.fake_providers import QUOTA_WORDS, Reply, gemini_error, gemini_quota_details

    monkeypatch.setenv("RECODE_RETRY_WAIT_SCALE", "0.01")
    body = gemini_error(429, "RESOURCE_EXHAUSTED", QUOTA_WORDS, gemini_quota_details(
        "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "5", "20s"))
    with FakeProvider("gemini") as server:
        server.push(Reply(429, body)).reply_text("ok")
        with caplog.at_level(logging.WARNING, logger="agent.inference"):
            assert build_model(model_spec(server)).complete(ASK).text == "ok"
    assert "retry 1/3 in 0.2 s" in caplog.text  # RetryInfo 20s, times the scale


def azure_spec(server: FakeProvider, **overrides) -> object:
    return model_spec(server, provider="azure-openai", model="gpt-4o", base_url=None, endpoint=server.url,
                      api_version="2024-10-21", deployment="my-gpt4o", **overrides)


def test_azure_faults_are_classified_like_openai_s() -> None:
    with FakeProvider("openai") as server:
        server.fault("prompt_filtered").fault("deployment_not_found").fault("quota").reply_truncated("def f(")
        model = build_model(azure_spec(server))
        with pytest.raises(RequestFatal) as filtered:
            model.complete(ASK)
        with pytest.raises(RunFatal) as missing:
            model.complete(ASK)
        with pytest.raises(RunFatal) as quota:
            model.complete(ASK)
        truncated = model.complete(ASK)
        assert len(server.requests) == 4
    assert filtered.value.reason == "content_filter"
    assert str(filtered.value).startswith("Azure OpenAI gpt-4o: the provider refused the request (HTTP 400: The "
                                          "response was filtered")
    assert missing.value.code == "model_not_found" and "The API deployment for this resource does not exist." in str(
        missing.value)
    assert str(quota.value) == f"Azure OpenAI says the quota is exhausted (insufficient_quota): add credits, {RERUN}"
    assert truncated.stop == Stop("length", "finish_reason=length")


# ---------------------------------------------------------------- answers that ended early

ENDED = {
    ("openai", "truncated"): Stop("length", "finish_reason=length"),
    ("openai", "refused"): Stop("refusal", "refusal: I can't help with that."),
    ("openai", "filtered"): Stop("content_filter", "finish_reason=content_filter"),
    ("anthropic", "truncated"): Stop("length", "stop_reason=max_tokens"),
    ("anthropic", "refused"): Stop("refusal", "stop_reason=refusal"),
    ("gemini", "truncated"): Stop("length", "finishReason=MAX_TOKENS"),
    ("gemini", "refused"): Stop("content_filter", "finishReason=SAFETY"),
    ("gemini", "filtered"): Stop("content_filter", "finishReason=SAFETY"),
}


@pytest.mark.parametrize(("protocol", "how"), sorted(ENDED))
def test_an_answer_that_ended_early_is_returned_with_its_stop(protocol: str, how: str) -> None:
    # the raw text: the cut-off code; the refusal's words where the API puts them in the text; else nothing
    words = {"truncated": "def f(x):\n    return x +", "refused": "I can't help with that.", "filtered": ""}[how]
    with FakeProvider(protocol) as server:
        {"truncated": server.reply_truncated, "refused": server.reply_refused,
         "filtered": server.reply_filtered}[how](words, input_tokens=40, output_tokens=30)
        completion = build_model(model_spec(server)).complete(ASK)
        assert len(server.requests) == 1  # not retried as a bad answer
    assert completion.stop == ENDED[protocol, how] and not completion.stop.usable
    raw = "" if (protocol, how) == ("openai", "refused") else words  # chat puts a refusal in message.refusal
    assert completion.text == raw and completion.usage.output_tokens == 30


@pytest.mark.parametrize(("how", "stop"), [
    ("truncated", Stop("length", "incomplete_details.reason=max_output_tokens")),
    ("refused", Stop("refusal", "refusal: I can't help with that.")),
    ("filtered", Stop("content_filter", "incomplete_details.reason=content_filter")),
])
def test_a_responses_answer_that_ended_early_is_returned_with_its_stop(how: str, stop: Stop) -> None:
    partial = '{"feedback": [{"interface": "f(' if how == "truncated" else ""
    with FakeProvider("openai") as server:
        {"truncated": lambda: server.reply_truncated(partial), "refused": server.reply_refused,
         "filtered": lambda: server.reply_filtered(partial)}[how]()
        completion = build_model(model_spec(server, openai_api="responses")).complete(ASK, response_schema={
            "type": "object"})
        assert [r.route for r in server.requests] == ["/v1/responses"]
    assert (completion.stop, completion.text) == (stop, partial)


@pytest.mark.parametrize("reason", ["RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"])
def test_gemini_safety_finish_reasons_are_content_filter(reason: str) -> None:
    with FakeProvider("gemini") as server:
        server.reply_finished("partial", reason)
        completion = build_model(model_spec(server)).complete(ASK)
    assert (completion.stop, completion.text) == (Stop("content_filter", f"finishReason={reason}"), "partial")


def test_a_gemini_blocked_prompt_is_filtered_not_retried() -> None:
    with FakeProvider("gemini") as server:
        server.prompt_blocked("PROHIBITED_CONTENT").reply_text("never reached")
        completion = build_model(model_spec(server)).complete(ASK)
        assert len(server.requests) == 1
    assert (completion.stop, completion.text) == (Stop("content_filter", "promptFeedback.blockReason="
                                                        "PROHIBITED_CONTENT"), "")


def test_an_anthropic_structured_answer_cut_off_in_its_tool_call_keeps_the_partial_input() -> None:
    from tests.fake_providers import Reply, anthropic_message, anthropic_tool_use

    with FakeProvider("anthropic") as server:
        server.push(Reply(body=anthropic_message([anthropic_tool_use({"feedback": []})], stop_reason="max_tokens")))
        completion = build_model(model_spec(server)).complete(ASK, response_schema={"type": "object"})
    assert (completion.stop, json.loads(completion.text)) == (Stop("length", "stop_reason=max_tokens"),
                                                              {"feedback": []})


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
def test_an_ordinary_answer_says_stop(protocol: str) -> None:
    with FakeProvider(protocol) as server:
        server.reply_text("done").reply_json({"a": 1})
        model = build_model(model_spec(server))
        plain, structured = model.complete(ASK), model.complete(ASK, response_schema={"type": "object"})
    words = {"openai": "finish_reason=stop", "anthropic": "stop_reason=end_turn", "gemini": "finishReason=STOP"}
    assert plain.stop == Stop("stop", words[protocol]) and plain.stop.usable
    assert structured.stop.reason == "stop" and json.loads(structured.text) == {"a": 1}


# ---------------------------------------------------------------- storms and the retry window


def answered(server: FakeProvider, spec_overrides: dict):
    completion = build_model(model_spec(server, **spec_overrides)).complete(ASK)
    return completion.text, completion.stop, completion.usage.input_tokens, completion.usage.output_tokens


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("headers", [{}, {"retry_after_ms": "150"}, {"retry_after": "0.15"}])
def test_a_storm_shorter_than_the_window_leaves_the_answer_unchanged(protocol: str, headers: dict,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECODE_RETRY_WAIT_SCALE", "1")
    settings = {"max_retries": 0, "retry_window_sec": 5.0}
    with FakeProvider(protocol) as calm:
        calm.reply_text("def f(): pass", input_tokens=70, output_tokens=9)
        uninterrupted = answered(calm, settings)
    with FakeProvider(protocol) as stormy:
        stormy.storm(0.6, **headers).reply_text("def f(): pass", input_tokens=70, output_tokens=9)
        after_storm = answered(stormy, settings)
        times = [r.received_at for r in stormy.requests]
    assert after_storm == uninterrupted
    assert len(times) >= 2 and times[-1] - times[0] >= 0.6  # retried through the storm, past max-retries 0
    assert stormy.requests[-1].body == calm.requests[0].body
    if headers:  # the server's retry-after is honoured: no retry sooner than it asked
        assert min(b - a for a, b in zip(times, times[1:])) >= 0.14


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
def test_a_storm_longer_than_the_window_is_an_outage(protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECODE_RETRY_WAIT_SCALE", "1")
    with FakeProvider(protocol) as server:
        server.storm(30, retry_after_ms="100").reply_text("never reached")
        with pytest.raises(RunFatal) as raised:
            build_model(model_spec(server, max_retries=1, retry_window_sec=0.8)).complete(ASK)
        calls = len(server.requests)
    name = {"openai": "OpenAI", "anthropic": "Anthropic", "gemini": "Gemini"}[protocol]
    status = 529 if protocol == "anthropic" else 503
    assert raised.value.code == "outage" and 3 <= calls <= 10  # about one per retry-after (0.1 s) for 0.8 s
    assert re.match(rf"{name} says it is unavailable after {calls} attempt\(s\) over [12] s \(last: HTTP {status}: ",
                    str(raised.value)), str(raised.value)
    assert str(raised.value).endswith("(outage): run the same command again once it answers (retry-window-minutes "
                                      "sets how long a run waits)")


# ---------------------------------------------------------------- a server without the Responses API


def test_a_server_without_the_responses_api_is_named_with_the_setting_that_avoids_it() -> None:
    with FakeProvider("openai") as server:
        server.without_responses_api().reply_text("never reached")
        with pytest.raises(RunFatal) as raised:
            build_model(model_spec(server, model="local-llama", openai_api="responses", max_retries=6)).complete(ASK)
        assert len(server.requests) == 1
        assert build_model(model_spec(server, model="local-llama")).complete(ASK).text == "never reached"
    assert raised.value.code == "responses_unsupported"
    assert str(raised.value) == (
        f"OpenAI says the server at {server.base_url} has no Responses API (POST /v1/responses answered 404) "
        "(responses_unsupported): set human-openai-api: chat (openai-api: chat for a code model) to ask through "
        f"chat completions, {RERUN}")


def test_a_responses_404_with_openai_s_model_code_is_an_unknown_model() -> None:
    with FakeProvider("openai") as server:
        server.fault("model_not_found")
        with pytest.raises(RunFatal) as raised:
            build_model(model_spec(server, openai_api="responses")).complete(ASK)
    assert raised.value.code == "model_not_found"


# ---------------------------------------------------------------- the cache and the config


def test_the_cache_keeps_the_stop_and_old_rows_read_as_an_ordinary_end(tmp_path: Path) -> None:
    path = tmp_path / "with spaces" / "cache.sqlite"
    with FakeProvider("anthropic") as server:
        server.reply_truncated("def f(")
        model = build_model(model_spec(server), cache_path=path)
        first, again = model.complete(ASK), model.complete(ASK)
        assert len(server.requests) == 1
    assert again.usage.from_cache and (again.text, again.stop) == (first.text, Stop("length", "stop_reason=max_tokens"))
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as db:
        db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, request TEXT NOT NULL, text TEXT NOT NULL, "
                   "usage TEXT NOT NULL, created REAL NOT NULL)")
    request = ChatRequest("m", [{"role": "user", "content": "q"}], None, None, None, None)
    from agent.models.cache import request_key

    with sqlite3.connect(old) as db:
        db.execute("INSERT INTO responses VALUES (?, '{}', 'old answer', '{}', 0)", (request_key(request),))
    hit = ResponseCache(old).get(request)
    assert hit is not None and (hit["text"], hit["stop"]) == ("old answer", Stop())


def _config(tmp_path: Path, values: dict):
    script = tmp_path / "script.yaml"
    script.write_text("rules:\n  - responses: ['action: SUBMIT']\n")
    dataset = tmp_path / "dataset"
    dataset.mkdir(exist_ok=True)
    (dataset / "annotation_meta.jsonl").write_text("")
    raw = {"api-provider": "scripted", "model": "coder", "script": str(script), "work-dir": str(dataset),
           "output-dir": str(tmp_path / "out"), "guidance-level": 2, "protocol": "release",
           "human-api-provider": "openai", "human-agent-model": "o4-mini", "human-api-key": "sk-test",
           "human-base-url": "http://127.0.0.1:9/v1", **values}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def test_the_feedback_api_and_the_retry_window_are_settings(tmp_path: Path) -> None:
    release = _config(tmp_path, {}).feedback_model
    chat = _config(tmp_path, {"human-openai-api": "chat", "human-retry-window-minutes": 0.5,
                              "retry-window-minutes": 30}).feedback_model
    assert (release.openai_api, release.retry_window_sec) == ("responses", 600.0)
    assert (chat.openai_api, chat.retry_window_sec) == ("chat", 30.0)
    assert _config(tmp_path, {"retry-window-minutes": 30}).models[0].retry_window_sec == 1800.0

    def fingerprint(spec) -> dict:
        settings = {k: getattr(spec, k) for k in ("provider", "model", "openai_api", "retry_window_sec")}
        return job_fingerprint(models={"feedback": settings}, prompts={}, memory={})

    assert diff_fingerprints(fingerprint(release), fingerprint(chat)) == ["feedback.openai_api"]


@pytest.mark.parametrize(("values", "words"), [
    ({"human-openai-api": "grpc"}, "'human-openai-api' must be one of chat, responses, got 'grpc'"),
    ({"human-api-provider": "anthropic", "human-agent-model": "claude", "human-openai-api": "chat"},
     "'human-openai-api' applies to providers openai, azure-openai, together, deepseek, not 'anthropic'"),
    ({"retry-window-minutes": -1}, "'retry-window-minutes' must be a number >= 0, got -1"),
])
def test_bad_settings_are_one_line(tmp_path: Path, values: dict, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _config(tmp_path, values)
    assert words in str(raised.value) and "\n" not in str(raised.value)
