"""The offline `scripted` provider: rule matching, response picking, usage, and script errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.models.build import InferenceError, ModelSpec, build_model

SCRIPT = r"""
rules:
  - when: '(?i)give feedback'
    responses:
      - {feedback: [{interface: "f()", category: "T2"}]}
  - when: 'Turn \d+'
    index-from: 'Turn (\d+)'
    responses: ["turn zero", "turn one", "turn two"]
  - when: "count"
    index-from: assistant-count
    responses: ["first", "second"]
  - responses: ["fallback"]
"""


def scripted(tmp_path: Path, text: str = SCRIPT, **spec: object):
    path = tmp_path / "script.yaml"
    path.write_text(text)
    return build_model(ModelSpec("scripted", "scripted-model", script=str(path), **spec))


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_first_matching_rule_wins_and_index_from_picks_the_response(tmp_path: Path) -> None:
    model = scripted(tmp_path)
    assert model.complete([user("hello")]).text == "fallback"
    assert model.complete([user("Turn 1 now")]).text == "turn one"
    history = [user("Turn 0"), {"role": "assistant", "content": "ok"}, user("Turn 2, and Turn 1 was mentioned")]
    assert model.complete(history).text == "turn one"  # the LAST match in the conversation
    assert model.complete([user("Turn 9")]).text == "turn two"  # clamped to the last response


def test_when_looks_at_the_last_user_message_only(tmp_path: Path) -> None:
    model = scripted(tmp_path)
    assert model.complete([user("Turn 1"), {"role": "assistant", "content": "a"}, user("hi")]).text == "fallback"


def test_assistant_count_index(tmp_path: Path) -> None:
    model = scripted(tmp_path)
    assert model.complete([user("count")]).text == "first"
    reply = {"role": "assistant", "content": "x"}
    conversation = [user("a"), reply, user("count"), reply]
    assert model.complete(conversation + [user("count")]).text == "second"


def test_structured_response_is_json_text(tmp_path: Path) -> None:
    completion = scripted(tmp_path).complete([user("Please give feedback")], response_schema={"type": "object"})
    assert json.loads(completion.text) == {"feedback": [{"interface": "f()", "category": "T2"}]}


def test_usage_estimates_tokens_and_costs_nothing(tmp_path: Path) -> None:
    messages = [{"role": "system", "content": "s" * 40}, user("x" * 60)]
    usage = scripted(tmp_path).complete(messages).usage
    assert (usage.input_tokens, usage.output_tokens) == (25, len("fallback") // 4)
    assert (usage.cached_tokens, usage.reasoning_tokens, usage.cost_usd, usage.latency_sec) == (0, 0, 0.0, 0)
    assert (usage.provider, usage.model, usage.from_cache) == ("scripted", "scripted-model", False)


def test_fixed_latency_for_benchmarks(tmp_path: Path) -> None:
    model = scripted(tmp_path, 'latency-sec: 0.01\nrules:\n  - responses: ["x"]\n')
    assert model.complete([user("q")]).usage.latency_sec == 0.01


def test_no_matching_rule_names_the_fix(tmp_path: Path) -> None:
    model = scripted(tmp_path, 'rules:\n  - when: "^only this$"\n    responses: ["x"]\n')
    with pytest.raises(InferenceError, match="no rule of .* matches the last user message .*add a rule without 'when'"):
        model.complete([user("something else")])


def test_non_integer_capture_is_reported(tmp_path: Path) -> None:
    model = scripted(tmp_path, 'rules:\n  - index-from: "Turn (\\\\w+)"\n    responses: ["a", "b"]\n')
    with pytest.raises(InferenceError, match="captured 'two', not an integer"):
        model.complete([user("Turn two")])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: []\n", "needs a non-empty 'rules' list"),
        ("rules: [\n", "not valid YAML"),
        ('rules:\n  - when: "\\d"\n    responses: ["x"]\n', "put regular expressions in 'single quotes'"),
        ('rules:\n  - when: "("\n    responses: ["x"]\n', "rule 0: bad regular expression"),
        ('rules:\n  - index-from: "Turn \\\\d+"\n    responses: ["x"]\n', "index-from needs a group"),
        ('rules:\n  - responses: []\n', "'responses' must be a non-empty list"),
        ('rules:\n  - respones: ["x"]\n', "a rule is a mapping of"),
        ('latency-sec: -1\nrules:\n  - responses: ["x"]\n', "latency-sec must be a non-negative number"),
    ],
)
def test_bad_scripts_fail_at_build_time(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InferenceError, match=message) as raised:
        scripted(tmp_path, text)
    assert "\n" not in str(raised.value)


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(InferenceError, match="cannot read script"):
        build_model(ModelSpec("scripted", "m", script=str(tmp_path / "absent.yaml")))
    with pytest.raises(InferenceError, match="set script"):
        build_model(ModelSpec("scripted", "m"))
