r"""The ``scripted`` provider: deterministic answers from a YAML rule file, no network.

It lets the agent loop, the feedback module and benchmarks run end to end
offline with known outcomes. File format (single
quotes keep YAML from reading backslashes in regular expressions)::

    latency-sec: 0.0                 # optional fixed latency per call (benchmarks)
    rules:                           # the first rule whose `when` matches wins
      - when: 'regex'                # re.search over the LAST user message; omit = always
        index-from: 'Turn (\d+)'     # group 1 (an int) of the LAST match in the whole conversation,
                                     # or `assistant-count`; default: response 0; clamped
        responses: ["text", ...]     # a non-string response (a YAML mapping/list) is sent as JSON
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent.models.types import (
    Completion,
    InferenceError,
    ModelSpec,
    Usage,
    check_messages,
)

ASSISTANT_COUNT = "assistant-count"
RULE_KEYS = {"when", "index-from", "responses"}


@dataclass(frozen=True)
class Rule:
    when: re.Pattern[str] | None
    index_from: re.Pattern[str] | str | None
    responses: tuple[str, ...]

    def pick(self, messages: list[dict[str, str]]) -> str:
        if self.index_from == ASSISTANT_COUNT:
            index = sum(1 for m in messages if m["role"] == "assistant")
        elif isinstance(self.index_from, re.Pattern):
            found = list(self.index_from.finditer("\n".join(m["content"] for m in messages)))
            index = _as_index(self.index_from, found[-1].group(1)) if found else 0
        else:
            index = 0
        return self.responses[min(max(index, 0), len(self.responses) - 1)]


def _as_index(pattern: re.Pattern[str], text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InferenceError(
            f"scripted model: index-from {pattern.pattern!r} captured {text!r}, not an integer"
        ) from None


def load_script(path: str | Path) -> tuple[list[Rule], float]:
    """Parse and check a script file; every problem is a one-line InferenceError naming the rule."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise InferenceError(
            f"scripted model: cannot read script {path}: {error.strerror}; fix the script path"
        ) from None
    except yaml.YAMLError as error:
        raise InferenceError(
            f"scripted model: {path} is not valid YAML ({str(error).splitlines()[0]}); "
            "put regular expressions in 'single quotes'"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list) or not data["rules"]:
        raise InferenceError(f"scripted model: {path} needs a non-empty 'rules' list")
    latency = data.get("latency-sec", 0.0)
    if isinstance(latency, bool) or not isinstance(latency, (int, float)) or latency < 0:
        raise InferenceError(f"scripted model: {path}: latency-sec must be a non-negative number")
    return [_parse_rule(path, i, rule) for i, rule in enumerate(data["rules"])], float(latency)


def _parse_rule(path: str | Path, i: int, rule: Any) -> Rule:
    where = f"scripted model: {path} rule {i}"
    if not isinstance(rule, dict) or not set(rule) <= RULE_KEYS:
        raise InferenceError(f"{where}: a rule is a mapping of {sorted(RULE_KEYS)}")
    responses = rule.get("responses")
    if not isinstance(responses, list) or not responses:
        raise InferenceError(f"{where}: 'responses' must be a non-empty list")
    index_from = rule.get("index-from")
    try:
        when = re.compile(rule["when"]) if rule.get("when") is not None else None
        if index_from is not None and index_from != ASSISTANT_COUNT:
            index_from = re.compile(index_from)
            if index_from.groups < 1:
                raise InferenceError(f"{where}: index-from needs a group capturing the index, e.g. 'Turn (\\d+)'")
    except (re.error, TypeError) as error:
        raise InferenceError(f"{where}: bad regular expression ({error})") from None
    texts = tuple(r if isinstance(r, str) else json.dumps(r) for r in responses)
    return Rule(when=when, index_from=index_from, responses=texts)


class ScriptedModel:
    """A ChatModel answering from rules; usage estimates tokens as characters // 4, cost 0."""

    def __init__(self, spec: ModelSpec) -> None:
        if not spec.script:
            raise InferenceError(f"scripted model {spec.model}: set script to the path of a rules file")
        self._spec = spec
        self._rules, self._latency = load_script(spec.script)

    def complete(self, messages: list[dict[str, str]], *, response_schema: dict | None = None) -> Completion:
        messages = check_messages(messages)
        users = [m["content"] for m in messages if m["role"] == "user"]
        last_user = users[-1] if users else ""
        rule = next((r for r in self._rules if r.when is None or r.when.search(last_user)), None)
        if rule is None:
            raise InferenceError(
                f"scripted model: no rule of {self._spec.script} matches the last user message "
                f"({last_user[:60]!r}...); add a rule without 'when' as the last one"
            )
        text = rule.pick(messages)
        if self._latency:
            time.sleep(self._latency)
        prompt_chars = sum(len(m["content"]) for m in messages)
        usage = Usage(
            provider="scripted",
            model=self._spec.model,
            input_tokens=prompt_chars // 4,
            output_tokens=len(text) // 4,
            cached_tokens=0,
            reasoning_tokens=0,
            latency_sec=self._latency,
            cost_usd=0.0,
        )
        return Completion(text, usage)

