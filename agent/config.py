"""Run configuration: one YAML file -> a validated, immutable :class:`RunConfig`.

Keys are the release's hyphenated names plus ours (``config/default.yaml``
documents every one). Any string value may name environment variables as
``${NAME}``. Every mistake a user can make becomes a one-line
:class:`ConfigError` naming the key and the fix, before any money is spent.

The release's own ``config/default.yaml`` runs unchanged: an empty string
means "not set", a key the file leaves out takes the value that file ships
with (``DEFAULTS``), relative paths are relative to the working folder (the
repository root when commands are run as the README shows) and every path
error names the folder it was resolved against.

Sweeps: ``model`` and ``guidance-level`` may be lists. Models of a sweep
share the top-level provider keys; models that need different providers are
written as ``models: [{model: ..., api-provider: ..., ...}, ...]``, each
mapping taking the model keys below and inheriting the top-level ones it omits.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import yaml

from agent.envs.backends import BACKENDS
from agent.parallel.executor import PARALLEL_MODES
from agent.feedback import SOURCES
from agent.feedback.guidance import LEVELS, MAX_LEVEL, FeedbackPolicy
from agent.models.build import DEFAULT_PRICES_PATH, InferenceError, ModelSpec, load_prices
from agent.models.providers import OFFLINE_PROVIDERS, resolve_key
from agent.models.providers import PROVIDERS as REMOTE_PROVIDERS
from agent.protocols import DEFAULT_PROTOCOL, PROTOCOLS, make_protocol
from agent.protocols.base import RunProtocol
from agent.protocols.release_texts import ReleaseTextsError, release_prompts_path
from metrics.result_format import folder_model_name
from agent.runner.options import SANDBOX_MODES, RunnerOptions
from agent.parallel.slots import SlotConfig, cpu_count
from agent.task.dataset import DOWNLOAD_HINT, dataset_in

PROVIDERS = (*REMOTE_PROVIDERS, *OFFLINE_PROVIDERS)
PROVIDER_ALIASES = {"google": "gemini"}  # the release's name for Gemini
SETTINGS = ("baseline", "agent", "memory_agent", "snippet")
GUIDANCE_TYPES = ("fixed", "dynamic")
ON_TAMPERED = ("stop", "continue")  # what a turn graded tampered does to its job (docs/failures.md)
FEEDBACK_SOURCES = tuple(SOURCES)
OPENAI_APIS = ("chat", "responses")
OPENAI_PROTOCOL = ("openai", "azure-openai", "together", "deepseek")

# What a model is sent besides the messages: key -> ModelSpec field. Unset, the protocol's default applies
# (the release sends temperature 0 to most providers, for instance); an explicit null sends nothing.
SAMPLING_KEYS = {
    "temperature": "temperature", "top-p": "top_p", "max-tokens": "max_output_tokens",
    "max-output-tokens": "max_output_tokens", "reasoning-effort": "reasoning_effort",
    "thinking-budget": "thinking_budget",
}
# Keys describing one code model: allowed at the top level (shared by a sweep) and in `models` entries.
MODEL_KEYS = (
    "api-key", "api-provider", "model", "deployment", "endpoint", "api-version", "base-url",
    *SAMPLING_KEYS, "script", "request-timeout-sec", "max-retries", "retry-window-minutes", "openai-api",
    "requests-per-minute", "tokens-per-minute",
)
# The feedback model's keys and the code-model key each one corresponds to.
HUMAN_KEYS = {
    "human-api-key": "api-key", "human-api-provider": "api-provider", "human-agent-model": "model",
    "human-deployment": "deployment", "human-endpoint": "endpoint", "human-api-version": "api-version",
    "human-base-url": "base-url", "human-script": "script",
    "human-request-timeout-sec": "request-timeout-sec", "human-max-retries": "max-retries",
    "human-retry-window-minutes": "retry-window-minutes", "human-openai-api": "openai-api",
    "human-requests-per-minute": "requests-per-minute", "human-tokens-per-minute": "tokens-per-minute",
    **{f"human-{key}": key for key in SAMPLING_KEYS},
}
# The feedback model of the release's file (and the paper), used where the human-* keys leave it out.
FEEDBACK_MODEL_DEFAULTS = {"api-provider": "openai", "model": "o4-mini"}
# Defaults of every key that has one; keys absent here default to None.
DEFAULTS: dict[str, Any] = {
    "api-provider": "openai",
    "guidance-level": 4,
    "guidance-type": "fixed",
    "max-guidance-level": 4,
    "evaluation-setting": "memory_agent",
    "max-turn": 10,
    "max-steps": 3,
    "memory-threshold": 15,
    "memory-to-keep": 10,
    "work-dir": "work_dir",
    "output-dir": "experiment_results",
    "init_seed": "init_seed",
    "resume": False,
    "overwrite": False,
    "feedback-source": "llm",
    "sandbox": "auto",
    "test-timeout-sec": 600,
    "memory-mb": 8192,
    "max-processes": 512,
    "reindent-snippet": False,
    "edit-action": False,
    "max-workers": 4,
    "parallel-mode": "processes",
    "early-tests": True,
    "protocol": DEFAULT_PROTOCOL,
    "ray-num-cpus": 1,
    "ray-num-gpus": 0,
    "web-port": 0,
    "on-tampered": "stop",
    "prompt-caching": True,
}
RUN_KEYS = (
    "guidance-level", "guidance-type", "max-guidance-level", "evaluation-setting", "max-turn", "max-steps",
    "memory-threshold", "memory-to-keep", "work-dir", "output-dir", "init_seed", "resume", "overwrite", "task-ids",
    "replay-feedback-level", "replay-run-feedback-level", "feedback-source", "feedback-file", "prices", "cache-path", "sandbox",
    "test-timeout-sec", "memory-mb", "max-processes", "env-backend", "reindent-snippet", "edit-action", "max-workers",
    "parallel-mode", "ray-address", "ray-num-cpus", "ray-num-gpus", "max-cost-usd", "max-task-cost-usd",
    "test-slots", "gpu-slots", "gpus", "jobs-per-gpu", "early-tests", "protocol", "release-prompts", "web-port",
    "on-tampered",
    "prompt-caching",
)
# Keys where an explicit null means "no limit" (or "send nothing") rather than "use the default".
NULLABLE_KEYS = frozenset({"memory-mb", "max-processes", *SAMPLING_KEYS})
KNOWN_KEYS = frozenset(MODEL_KEYS) | frozenset(HUMAN_KEYS) | frozenset(RUN_KEYS) | {"models"}

KEY_PLACEHOLDER = "YOUR_API_KEY"  # the release file's api-key value: not a key, so the provider's variable is used
_UNSET = object()  # "read the key from the file", as opposed to an explicit None
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigError(Exception):
    """A configuration mistake; the message is one line naming the key and the fix."""


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs, validated; paths are absolute so any worker process can use them."""

    models: tuple[ModelSpec, ...]
    feedback_model: ModelSpec | None
    guidance_levels: tuple[int, ...]
    guidance_type: str
    max_guidance_level: int
    evaluation_setting: str
    max_turn: int
    max_steps: int
    memory_threshold: int
    memory_to_keep: int
    work_dir: Path
    output_dir: Path
    init_seed_dir: Path
    resume: bool
    overwrite: bool
    task_ids: tuple[int, ...] | None
    replay_feedback_level: int | None
    replay_run_feedback_level: int | None
    feedback_source: str
    feedback_file: Path | None
    runner: RunnerOptions
    cache_path: Path | None
    prices: dict
    reindent_snippet: bool
    edit_action: bool
    max_workers: int
    parallel_mode: str
    ray_address: str | None
    ray_num_cpus: float
    ray_num_gpus: float
    slots: SlotConfig = field(default_factory=SlotConfig)
    max_cost_usd: float | None = None
    max_task_cost_usd: float | None = None
    protocol: str = DEFAULT_PROTOCOL
    release_prompts: Path | None = None
    web_port: int = 0  # feedback-source web: the page's port on 127.0.0.1 (0: any free port)
    on_tampered: str = "stop"  # stop: a turn graded tampered ends its job; continue: the job goes on

    @property
    def prompt_caching(self) -> bool:
        """``prompt-caching``, which every model spec carries (docs/caching.md); not in the fingerprint."""
        return all(spec.prompt_caching for spec in (*self.models, self.feedback_model) if spec is not None)

    def public_dict(self) -> dict:
        """The configuration as builtins with every secret removed (for run metadata and logs)."""
        return _redact(dataclasses.asdict(self))


def _redact(value: Any) -> Any:
    """Builtins copy of ``value`` with API keys replaced by whether one was set, URL passwords dropped."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "api_key":
                out["api_key_set"] = bool(item)
            elif key in ("base_url", "endpoint", "ray_address") and isinstance(item, str):
                out[key] = _strip_userinfo(item)
            else:
                out[key] = _redact(item)
        return out
    if isinstance(value, (list, tuple)):
        return [_redact(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _strip_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


class _Reader:
    """Typed access to the raw mapping; every failure names the file and the key."""

    def __init__(self, source: str, raw: dict[str, Any], need_keys: bool = True,
                 flags: frozenset[str] = frozenset()) -> None:
        self.source = source
        self.raw = raw
        self.need_keys = need_keys  # False: API keys are not looked up (--estimate calls no model)
        self.flags = flags  # keys a command-line flag of the same name set: their mistakes are the flag's

    def fail(self, message: str) -> ConfigError:
        """The error, against the flag when it starts by naming a key a flag set (``--max-workers must...``),
        else against the file."""
        key = next((key for key in self.flags if message.startswith(f"'{key}' ")), None)
        if key is not None:
            return ConfigError(f"--{key}{message[len(key) + 2:]}")
        return ConfigError(f"{self.source}: {message}")

    def get(self, key: str) -> Any:
        """The key's value; an absent key, or null where null means nothing, gives the default."""
        value = self.raw.get(key)
        if value is None and not (key in NULLABLE_KEYS and key in self.raw):
            return DEFAULTS.get(key)
        return value

    def typed(self, key: str, check: Callable[[Any], bool], what: str, value: Any = _UNSET) -> Any:
        """``value`` (default: the key's value) if None or passing ``check``; else a ConfigError."""
        value = self.get(key) if value is _UNSET else value
        if value is not None and not check(value):
            raise self.fail(f"'{key}' must be {what}, got {value!r}")
        return value

    def integer(self, key: str, low: int | None = None, high: int | None = None, value: Any = _UNSET) -> int | None:
        what = "an integer" + (f" from {low} to {high}" if high is not None else f" >= {low}" if low is not None else "")
        return self.typed(key, lambda v: _is_int(v) and (low is None or v >= low) and (high is None or v <= high),
                          what, value)

    def number(self, key: str, low: float = 0.0, value: Any = _UNSET) -> float | None:
        value = self.typed(key, lambda v: _is_number(v) and v >= low, f"a number >= {low:g}", value)
        return None if value is None else float(value)

    def choice(self, key: str, options: tuple[str, ...], value: Any = _UNSET) -> str | None:
        return self.typed(key, lambda v: v in options, "one of " + ", ".join(options), value)

    def text(self, key: str, value: Any = _UNSET) -> str | None:
        return self.typed(key, lambda v: isinstance(v, str) and v != "", "a non-empty string", value)

    def flag(self, key: str) -> bool:
        return self.typed(key, lambda v: isinstance(v, bool), "true or false")

    def path(self, key: str, value: Any = _UNSET) -> Path | None:
        text = self.text(key, value)
        return None if text is None else Path(text).expanduser().resolve()

    def shown(self, key: str, value: Any = _UNSET) -> str:
        """How a path key was read, for errors: ``'work_dir' (relative to /cwd)`` or the absolute path."""
        text = str(self.get(key) if value is _UNSET else value)
        if Path(text).expanduser().is_absolute():
            return f"'{text}'"
        return f"'{text}' (relative to the working folder {Path.cwd()})"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _expand_env(value: Any, key: str, source: str) -> Any:
    """Replace ``${NAME}`` in every string of ``value`` by the environment variable's value."""
    if isinstance(value, str):
        def lookup(match: re.Match) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(f"{source}: '{key}' uses ${{{name}}} but the environment variable {name} "
                                  "is not set; export it or write the value in the config")
            return os.environ[name]
        return _ENV_REF.sub(lookup, value)
    if isinstance(value, list):
        return [_expand_env(item, key, source) for item in value]
    if isinstance(value, dict):
        return {k: _expand_env(item, key, source) for k, item in value.items()}
    return value


def _check_keys(keys: Any, allowed: frozenset[str] | tuple[str, ...], where: str, source: str) -> None:
    for key in keys:
        if not isinstance(key, str) or key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else " (config/default.yaml lists every key)"
            raise ConfigError(f"{source}: unknown key '{key}'{where}{hint}")


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}; pass --yaml-location with an existing YAML file")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}; fix the syntax") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values at the top level")
    return raw


def _model_spec(reader: _Reader, values: dict[str, Any], protocol: RunProtocol, role: str,
                labels: dict[str, str] | None = None) -> ModelSpec:
    """One validated ModelSpec from model-key values, sent what ``protocol`` sends a ``role`` model unless the
    user's own sampling keys say otherwise; ``labels`` maps the keys to the user's key names."""
    def name(key: str) -> str:
        return (labels or {}).get(key, key)

    given = values.get("api-provider", DEFAULTS["api-provider"])
    provider = reader.choice(name("api-provider"), PROVIDERS, PROVIDER_ALIASES.get(given, given))
    model = reader.text(name("model"), values.get("model"))
    if provider is None:
        raise reader.fail(f"missing '{name('api-provider')}'; set it to one of " + ", ".join(PROVIDERS))
    if model is None:
        raise reader.fail(f"missing '{name('model')}'; name the model to run")
    base_url = reader.text(name("base-url"), values.get("base-url"))
    script = reader.path(name("script"), values.get("script"))
    api_key = reader.text(name("api-key"), values.get("api-key"))
    api_key = None if api_key == KEY_PLACEHOLDER else api_key
    if provider == "scripted" and (script is None or not script.is_file()):
        got = reader.shown(name("script"), values.get("script")) if script else "none"
        raise reader.fail(f"provider 'scripted' needs '{name('script')}' naming an existing script file "
                          f"(got {got})")
    if provider == "azure-openai" and values.get("endpoint") is None:
        raise reader.fail(f"provider 'azure-openai' needs '{name('endpoint')}' (your Azure resource URL)")
    spec = ModelSpec(
        provider=provider,
        model=model,
        api_key=api_key,
        base_url=base_url,
        endpoint=reader.text(name("endpoint"), values.get("endpoint")),
        api_version=reader.text(name("api-version"), values.get("api-version")),
        deployment=reader.text(name("deployment"), values.get("deployment")),
        script=None if script is None else str(script),
        **{**protocol.sampling(provider, model, role), **_sampling(reader, values, name),
           **_openai_api(reader, values, name, provider)},
        **_call_limits(reader, values, name),
        **_rate_limits(reader, values, name),
        prompt_caching=reader.flag("prompt-caching"),
    )
    if provider not in REMOTE_PROVIDERS or not reader.need_keys:
        return spec
    try:
        # Resolved now so a job shipped to another machine (Ray) carries the key with it.
        return dataclasses.replace(spec, api_key=resolve_key(spec))
    except InferenceError:
        env_vars = " or ".join(REMOTE_PROVIDERS[provider].key_env)
        raise reader.fail(f"no API key for provider '{provider}' (model '{model}'); "
                          f"export {env_vars} or set '{name('api-key')}'") from None


def _sampling(reader: _Reader, values: dict[str, Any], name: Callable[[str], str]) -> dict[str, Any]:
    """The sampling fields the user set (an explicit null included: it sends nothing)."""
    if "max-tokens" in values and "max-output-tokens" in values:
        raise reader.fail(f"set either '{name('max-tokens')}' or '{name('max-output-tokens')}' (the same limit), "
                          "not both")
    checks: dict[str, Callable[[str, Any], Any]] = {
        "temperature": lambda key, value: reader.number(key, value=value),
        "top-p": lambda key, value: reader.number(key, value=value),
        "max-tokens": lambda key, value: reader.integer(key, 1, value=value),
        "max-output-tokens": lambda key, value: reader.integer(key, 1, value=value),
        "reasoning-effort": lambda key, value: reader.text(key, value),
        "thinking-budget": lambda key, value: reader.integer(key, 0, value=value),
    }
    return {SAMPLING_KEYS[key]: check(name(key), values[key]) for key, check in checks.items() if key in values}


def _openai_api(reader: _Reader, values: dict[str, Any], name: Callable[[str], str], provider: str) -> dict[str, Any]:
    """The API an OpenAI-protocol model is asked through, when the user chose it: ``chat`` for servers without
    the Responses API (the release asks its feedback model through Responses)."""
    api = reader.choice(name("openai-api"), OPENAI_APIS, values.get("openai-api"))
    if api is None:
        return {}
    if provider not in OPENAI_PROTOCOL:
        raise reader.fail(f"'{name('openai-api')}' applies to providers {', '.join(OPENAI_PROTOCOL)}, "
                          f"not '{provider}'; remove it")
    return {"openai_api": api}


def _call_limits(reader: _Reader, values: dict[str, Any], name: Callable[[str], str]) -> dict[str, Any]:
    """Per-request timeout and retry budget; unset keys keep ModelSpec's defaults (600 s, 6 retries, a 10-minute
    retry window: transient faults are retried until both are spent)."""
    limits: dict[str, Any] = {}
    timeout = reader.typed(name("request-timeout-sec"), lambda v: _is_number(v) and v > 0, "a number > 0",
                           values.get("request-timeout-sec"))
    if timeout is not None:
        limits["timeout_sec"] = float(timeout)
    retries = reader.integer(name("max-retries"), 0, value=values.get("max-retries"))
    if retries is not None:
        limits["max_retries"] = retries
    window = reader.number(name("retry-window-minutes"), value=values.get("retry-window-minutes"))
    if window is not None:
        limits["retry_window_sec"] = float(window) * 60
    return limits


def _rate_limits(reader: _Reader, values: dict[str, Any], name: Callable[[str], str]) -> dict[str, Any]:
    """The model's pacing limits (agent/models/pacing.py); unset, calls are not paced."""
    limits = {}
    for key in ("requests-per-minute", "tokens-per-minute"):
        value = reader.typed(name(key), lambda v: _is_number(v) and v > 0, "a number > 0", values.get(key))
        if value is not None:
            limits[key.replace("-", "_")] = float(value)
    return limits


def _code_models(reader: _Reader, protocol: RunProtocol) -> tuple[ModelSpec, ...]:
    raw = reader.raw
    shared = {key: raw[key] for key in MODEL_KEYS if key in raw}
    if "models" in raw:
        if "model" in raw:
            raise reader.fail("use either 'model' or 'models', not both")
        entries = raw["models"]
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise reader.fail("'models' must be a non-empty list of mappings like {model: NAME, api-provider: P}")
        for entry in entries:
            _check_keys(entry, MODEL_KEYS, " in a 'models' entry", reader.source)
        merged = [{**shared, **entry} for entry in entries]
    else:
        names = raw.get("model")
        if names is None:
            raise reader.fail("missing 'model'; name the code model to run (or list several under 'models')")
        names = names if isinstance(names, list) else [names]
        if not names:
            raise reader.fail("'model' is an empty list; name at least one model")
        merged = [{**shared, "model": name} for name in names]
    specs = tuple(_model_spec(reader, values, protocol, "code") for values in merged)
    folders = [folder_model_name(spec.model) for spec in specs]
    duplicate = next((f for f in folders if folders.count(f) > 1), None)
    if duplicate is not None:
        raise reader.fail(f"model '{duplicate}' appears twice in the sweep; their results would share one folder")
    return specs


def _guidance_levels(reader: _Reader) -> tuple[int, ...]:
    value = reader.get("guidance-level")
    levels = value if isinstance(value, list) else [value]
    if not levels:
        raise reader.fail(f"'guidance-level' is an empty list; give a level from 0 to {MAX_LEVEL} or a list of them")
    for level in levels:
        if not (_is_int(level) and level in LEVELS):
            raise reader.fail(f"'guidance-level' must be an integer from 0 to {MAX_LEVEL} or a list of them, "
                              f"got {level!r}")
    return tuple(dict.fromkeys(levels))


def _feedback_model(reader: _Reader, needed: bool, protocol: RunProtocol) -> ModelSpec | None:
    values = {**FEEDBACK_MODEL_DEFAULTS,
              **{code_key: reader.raw[human_key] for human_key, code_key in HUMAN_KEYS.items() if human_key in reader.raw}}
    if not needed:
        return None
    return _model_spec(reader, values, protocol, "feedback",
                       {code_key: human_key for human_key, code_key in HUMAN_KEYS.items()})


def _task_ids(reader: _Reader) -> tuple[int, ...] | None:
    value = reader.get("task-ids")
    if value is None:
        return None
    ids = value if isinstance(value, list) else [value]
    for task_id in ids:
        if not _is_int(task_id):
            raise reader.fail(f"'task-ids' must be a task id or a list of task ids, got {task_id!r}")
    return tuple(dict.fromkeys(ids)) or None


def _dataset_dir(reader: _Reader) -> Path:
    """The dataset folder: ``<work-dir>/dataset`` as in the release, or work-dir itself when it holds the meta file."""
    found = dataset_in(reader.path("work-dir"))
    if found is not None:
        return found.resolve()
    raise reader.fail(f"dataset not found: 'work-dir' {reader.shown('work-dir')} holds neither "
                      f"dataset/annotation_meta.jsonl nor annotation_meta.jsonl; {DOWNLOAD_HINT}")


def _init_seed_dir(reader: _Reader, output_dir: Path) -> Path:
    """``<output-dir>/<init_seed>`` as in the release; an absolute ``init_seed`` stands for itself."""
    text = reader.text("init_seed")
    return (output_dir / Path(text).expanduser()).resolve()


def _replay_levels(reader: _Reader) -> tuple[int | None, int | None]:
    """The release's per-turn replay and our whole-run replay exclude each other."""
    per_turn = reader.integer("replay-feedback-level", 0, MAX_LEVEL)
    whole_run = reader.integer("replay-run-feedback-level", 0, MAX_LEVEL)
    if per_turn is not None and whole_run is not None:
        raise reader.fail("set either 'replay-feedback-level' (one new turn from each stored turn) or "
                          "'replay-run-feedback-level' (a whole run on stored feedback), not both")
    return per_turn, whole_run


def _resume_mode(reader: _Reader) -> tuple[bool, bool]:
    """(resume, overwrite): recomputing finished work is asked for explicitly, never implied."""
    resume, overwrite = reader.flag("resume"), reader.flag("overwrite")
    if resume and overwrite:
        raise reader.fail("'resume: true' continues stored tasks and 'overwrite: true' recomputes them; "
                          "set only one")
    return resume, overwrite


def _existing_file(reader: _Reader, key: str, why: str) -> Path:
    path = reader.path(key)
    if path is None or not path.is_file():
        raise reader.fail(f"'{key}' must name an existing file {why} (got {reader.shown(key) if path else 'none'})")
    return path


def _prices(reader: _Reader) -> dict:
    try:
        return load_prices(reader.path("prices") or DEFAULT_PRICES_PATH)
    except InferenceError as exc:
        raise reader.fail(f"'prices': {exc}") from None


def _runner_options(reader: _Reader) -> RunnerOptions:
    return RunnerOptions(
        timeout_sec=float(reader.typed("test-timeout-sec", lambda v: _is_number(v) and v > 0, "a number > 0")),
        sandbox=reader.choice("sandbox", SANDBOX_MODES),
        memory_mb=reader.integer("memory-mb", 64),
        max_processes=reader.integer("max-processes", 1),
        env_backend=reader.choice("env-backend", BACKENDS),
    )


def _parallel_mode(reader: _Reader, feedback_source: str) -> str:
    """Interactive feedback reads the terminal, so it defaults to (and requires) in-process jobs; web
    feedback serves its page from the run's process, where every local mode runs the jobs (not Ray)."""
    if feedback_source == "web" and reader.get("parallel-mode") == "ray":
        raise reader.fail("'feedback-source: web' serves its form from this process; set 'parallel-mode' to "
                          "processes, threads or none")
    if feedback_source != "interactive":
        return reader.choice("parallel-mode", PARALLEL_MODES)
    mode = reader.choice("parallel-mode", PARALLEL_MODES, reader.raw.get("parallel-mode", "none"))
    if mode != "none":
        raise reader.fail("'feedback-source: interactive' reads your terminal; set 'parallel-mode: none'")
    return mode


def _slots(reader: _Reader) -> SlotConfig:
    """Test runs at once: ``test-slots`` on CPUs (default: one per CPU), ``jobs-per-gpu`` on each of ``gpus``."""
    gpus = reader.get("gpus") or []
    if not isinstance(gpus, list) or not all(_is_int(g) or isinstance(g, str) and g for g in gpus):
        raise reader.fail(f"'gpus' must be a list of CUDA device ids like [0, 1], got {gpus!r}")
    if len(set(map(str, gpus))) < len(gpus):
        raise reader.fail(f"'gpus' lists a device twice: {gpus!r}")
    if gpus and reader.get("parallel-mode") == "ray":
        raise reader.fail("'gpus' is for the local parallel modes; under ray set 'ray-num-gpus' per job")
    config = SlotConfig(test_slots=reader.integer("test-slots", 1) or cpu_count(), gpus=tuple(map(str, gpus)),
                        jobs_per_gpu=reader.integer("jobs-per-gpu", 1) or 1,
                        gpu_slots=reader.integer("gpu-slots", 1), early_tests=reader.flag("early-tests"))
    if config.gpu_slots is not None and config.gpu_slots > len(gpus) * config.jobs_per_gpu:
        raise reader.fail(f"'gpu-slots' ({config.gpu_slots}) exceeds gpus x jobs-per-gpu "
                          f"({len(gpus)} x {config.jobs_per_gpu}); list more 'gpus' or raise 'jobs-per-gpu'")
    return config


def _unset_empty(raw: dict[str, Any]) -> dict[str, Any]:
    """Drop keys whose value is an empty string (the release's "not set"), also inside ``models`` entries."""
    clean = {key: value for key, value in raw.items() if value != ""}
    if isinstance(clean.get("models"), list):
        clean["models"] = [_unset_empty(entry) if isinstance(entry, dict) else entry for entry in clean["models"]]
    return clean


def _cap(reader: _Reader, key: str) -> float | None:
    """A spending cap in US dollars (agent/job/budget.py); unset means no cap."""
    value = reader.typed(key, lambda v: _is_number(v) and v > 0, "a number of US dollars > 0")
    return None if value is None else float(value)


def _with_overrides(raw: dict[str, Any], overrides: dict, source: str) -> dict[str, Any]:
    """``raw`` with the set ``overrides`` on top; a ``model`` override of a file that lists ``models`` entries
    picks the entries of those names (each keeps its own provider keys)."""
    given = {key: value for key, value in overrides.items() if value is not None}
    if "model" not in given or "models" not in raw:
        return {**raw, **given}
    names = given.pop("model")
    names = names if isinstance(names, list) else [names]
    entries = [entry for entry in raw["models"] if isinstance(entry, dict)] if isinstance(raw["models"], list) else []
    listed = [entry.get("model") for entry in entries]
    missing = [name for name in names if name not in listed]
    if missing:
        raise ConfigError(f"{source}: model '{missing[0]}' is not among its 'models' entries "
                          f"({', '.join(map(str, listed))}); name one of them")
    return {**raw, **given, "models": [entry for entry in entries if entry.get("model") in names]}


def load_config(path: str | Path, overrides: dict | None = None, *, need_keys: bool = True) -> RunConfig:
    """Read and validate a YAML config; ``overrides`` (same hyphenated keys) win over the file. ``need_keys``
    False leaves API keys unresolved (for ``--estimate``, which calls no model)."""
    path = Path(path)
    source = str(path)
    raw = _with_overrides(_read_yaml(path), overrides or {}, source)
    _check_keys(raw, KNOWN_KEYS, "", source)
    flags = frozenset(key for key, value in (overrides or {}).items() if value is not None)
    reader = _Reader(source, _unset_empty({key: _expand_env(value, key, source) for key, value in raw.items()}),
                     need_keys, flags)

    levels = _guidance_levels(reader)
    guidance_type = reader.choice("guidance-type", GUIDANCE_TYPES)
    feedback_source = reader.choice("feedback-source", FEEDBACK_SOURCES)
    max_turn = reader.integer("max-turn", 1)
    memory_to_keep = reader.integer("memory-to-keep", 0)
    memory_threshold = reader.integer("memory-threshold", 1)
    output_dir = reader.path("output-dir")
    resume, overwrite = _resume_mode(reader)
    replay_level, replay_run_level = _replay_levels(reader)
    protocol_name = reader.choice("protocol", tuple(PROTOCOLS))
    if protocol_name == "improved" and memory_to_keep >= memory_threshold:  # the release's keeps 5 whatever is set
        raise reader.fail(f"'memory-to-keep' ({memory_to_keep}) must be smaller than 'memory-threshold' "
                          f"({memory_threshold})")
    release_prompts = release_prompts_path(reader.path("release-prompts"))
    if reader.flag("edit-action") and protocol_name == "release":
        raise reader.fail("'edit-action: true' is not part of the release's protocol (its EDIT is disabled); "
                          "set 'protocol: improved' to use EDIT")
    try:
        protocol = make_protocol(protocol_name, release_prompts=release_prompts, memory_threshold=memory_threshold,
                                 memory_to_keep=memory_to_keep)
    except ReleaseTextsError as exc:
        raise reader.fail(str(exc)) from None
    models = _code_models(reader, protocol)
    max_guidance_level = reader.integer("max-guidance-level", 0, MAX_LEVEL)
    policy = FeedbackPolicy(levels, guidance_type, max_guidance_level, max_turn, feedback_source)
    feedback_model = _feedback_model(reader, policy.needs_feedback_model(), protocol)
    cache_path = reader.path("cache-path")
    if cache_path is None and "replay" in {m.provider for m in (*models, feedback_model) if m is not None}:
        raise reader.fail("provider 'replay' answers from the response cache: set 'cache-path'")
    return RunConfig(
        models=models,
        feedback_model=feedback_model,
        guidance_levels=levels,
        guidance_type=guidance_type,
        max_guidance_level=max_guidance_level,
        evaluation_setting=reader.choice("evaluation-setting", SETTINGS),
        max_turn=max_turn,
        max_steps=reader.integer("max-steps", 1),
        memory_threshold=memory_threshold,
        memory_to_keep=memory_to_keep,
        work_dir=_dataset_dir(reader),
        output_dir=output_dir,
        init_seed_dir=_init_seed_dir(reader, output_dir),
        resume=resume,
        overwrite=overwrite,
        task_ids=_task_ids(reader),
        replay_feedback_level=replay_level,
        replay_run_feedback_level=replay_run_level,
        feedback_source=feedback_source,
        feedback_file=(_existing_file(reader, "feedback-file", "with the feedback records to replay")
                       if feedback_source == "file" else reader.path("feedback-file")),
        runner=_runner_options(reader),
        cache_path=cache_path,
        prices=_prices(reader),
        reindent_snippet=reader.flag("reindent-snippet"),
        edit_action=reader.flag("edit-action"),
        max_workers=reader.integer("max-workers", 1),
        parallel_mode=_parallel_mode(reader, feedback_source),
        ray_address=reader.text("ray-address"),
        ray_num_cpus=reader.number("ray-num-cpus"),
        ray_num_gpus=reader.number("ray-num-gpus"),
        slots=_slots(reader),
        max_cost_usd=_cap(reader, "max-cost-usd"),
        max_task_cost_usd=_cap(reader, "max-task-cost-usd"),
        protocol=protocol_name,
        release_prompts=release_prompts,
        web_port=reader.integer("web-port", 0, 65535),
        on_tampered=reader.choice("on-tampered", ON_TAMPERED),
    )
