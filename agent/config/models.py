"""The models of a run as ModelSpecs: the code models (one, a sweep sharing the top-level keys, or ``models``
entries inheriting them) and the feedback model (the ``human-*`` keys), each key read by its declaration."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from agent.config.reader import Reader
from agent.config.rules import MODEL_RULES, model_or_models, one_folder_per_model
from agent.config.schema import FEEDBACK_KEYS, KEYS, MODEL_KEYS, Key
from agent.models.build import InferenceError, ModelSpec
from agent.models.providers import PROVIDERS as REMOTE_PROVIDERS
from agent.models.providers import resolve_key
from agent.protocols.base import RunProtocol
from metrics.result_format import folder_model_name

KEY_PLACEHOLDER = "YOUR_API_KEY"  # the release file's api-key value: not a key, so the provider's variable is used
CODE_KEYS = {key.name: key for key in KEYS.values() if key.scope == "model"}
# What a model is sent besides the messages: key -> ModelSpec field. Unset, the protocol's default applies
# (the release sends temperature 0 to most providers, for instance); an explicit null sends nothing.
SAMPLING_FIELDS = {"temperature": "temperature", "top-p": "top_p", "max-tokens": "max_output_tokens",
                   "reasoning-effort": "reasoning_effort", "thinking-budget": "thinking_budget"}
LIMIT_FIELDS = {"request-timeout-sec": "timeout_sec", "max-retries": "max_retries",
                "requests-per-minute": "requests_per_minute", "tokens-per-minute": "tokens_per_minute"}


class ModelValues:
    """One model's values, read through ``keys`` (code-model key -> the declaration the user's spelling has)."""

    def __init__(self, reader: Reader, values: Mapping[str, Any], keys: Mapping[str, Key]) -> None:
        self.reader, self.values, self.keys = reader, values, keys
        self.checked = {code: self._check(key) for code, key in keys.items()}

    def _check(self, key: Key) -> Any:
        name = self.reader.spelling(key, self.values) or key.name
        return self.reader.read(key, self.values.get(name, key.default), name)

    def value(self, key: str) -> Any:
        return self.checked[key]

    def given(self, key: str) -> bool:
        """Whether the user set the key (an explicit null included: for sampling it sends nothing)."""
        return self.reader.spelling(self.keys[key], self.values) is not None

    def name(self, key: str) -> str:
        """The key as the user wrote it (its declared name where it is not set)."""
        return self.reader.spelling(self.keys[key], self.values) or self.keys[key].name

    def shown(self, key: str) -> str:
        return self.reader.shown(self.name(key), self.values.get(self.name(key)))


def model_spec(reader: Reader, m: ModelValues, protocol: RunProtocol, role: str) -> ModelSpec:
    """One validated ModelSpec, sent what ``protocol`` sends a ``role`` model unless the user's own sampling
    keys say otherwise; its API key resolved now so a job shipped to another machine (Ray) carries it."""
    reader.check(*(rule(m) for rule in MODEL_RULES))
    provider, model, script = m.value("api-provider"), m.value("model"), m.value("script")
    api_key = m.value("api-key")
    sampling = {field: m.value(key) for key, field in SAMPLING_FIELDS.items() if m.given(key)}
    limits = {field: m.value(key) for key, field in LIMIT_FIELDS.items() if m.value(key) is not None}
    if m.value("retry-window-minutes") is not None:
        limits["retry_window_sec"] = m.value("retry-window-minutes") * 60
    if m.value("openai-api") is not None:
        sampling["openai_api"] = m.value("openai-api")
    spec = ModelSpec(
        provider=provider, model=model, api_key=None if api_key == KEY_PLACEHOLDER else api_key,
        base_url=m.value("base-url"), endpoint=m.value("endpoint"), api_version=m.value("api-version"),
        deployment=m.value("deployment"), script=None if script is None else str(script),
        **{**protocol.sampling(provider, model, role), **sampling}, **limits,
        prompt_caching=reader.read(KEYS["prompt-caching"]),
    )
    if provider not in REMOTE_PROVIDERS or not reader.need_keys:
        return spec
    try:
        return dataclasses.replace(spec, api_key=resolve_key(spec))
    except InferenceError:
        env_vars = " or ".join(REMOTE_PROVIDERS[provider].key_env)
        raise reader.fail(f"no API key for provider '{provider}' (model '{model}'); "
                          f"export {env_vars} or set '{m.name('api-key')}'") from None


def code_models(reader: Reader, protocol: RunProtocol) -> tuple[ModelSpec, ...]:
    raw = reader.raw
    reader.check(model_or_models(raw))
    shared = {key: raw[key] for key in MODEL_KEYS if key in raw}
    if "models" in raw:
        merged = [{**shared, **entry} for entry in reader.read(KEYS["models"], raw["models"] or [])]
    else:
        names = raw.get("model")
        if names is None:
            raise reader.fail("missing 'model'; name the code model to run (or list several under 'models')")
        names = names if isinstance(names, list) else [names]
        if not names:
            raise reader.fail("'model' is an empty list; name at least one model")
        merged = [{**shared, "model": name} for name in names]
    specs = tuple(model_spec(reader, ModelValues(reader, values, CODE_KEYS), protocol, "code") for values in merged)
    reader.check(one_folder_per_model([folder_model_name(spec.model) for spec in specs]))
    return specs


def feedback_model(reader: Reader, protocol: RunProtocol) -> ModelSpec:
    """The feedback model from the ``human-*`` keys (the paper's o4-mini on openai where they are left out)."""
    return model_spec(reader, ModelValues(reader, reader.raw, FEEDBACK_KEYS), protocol, "feedback")
