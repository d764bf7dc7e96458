"""Every key of a run configuration, declared once: its name as the release spells it, what it may be, its
default, what it means, and whether it enters a job's fingerprint (agent/job/fingerprint.py: a stored result made
under another value is refused). The validator (agent/config/reader.py), the key table of
docs/configuration.md and the comments of config/default.yaml all come from this table
(scripts/config_docs.py writes the two files; tests/test_config_schema.py fails when they differ).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from agent.config.kinds import Choice, Devices, Entries, FilePath, Flag, Integer, Kind, Number, OneOrList, Text
from agent.envs.backends import BACKENDS
from agent.parallel.executor import PARALLEL_MODES
from agent.feedback import SOURCES as FEEDBACK_SOURCES
from agent.feedback.guidance import MAX_LEVEL
from agent.models.providers import OFFLINE_PROVIDERS
from agent.models.providers import PROVIDERS as REMOTE_PROVIDERS
from agent.protocols import DEFAULT_PROTOCOL, PROTOCOLS
from agent.runner.options import SANDBOX_MODES

PROVIDERS = (*REMOTE_PROVIDERS, *OFFLINE_PROVIDERS)
SETTINGS = ("baseline", "agent", "memory_agent", "snippet")
GUIDANCE_TYPES = ("fixed", "dynamic")
OPENAI_APIS = ("chat", "responses")


@dataclass(frozen=True)
class Key:
    """One YAML key. ``scope``: ``model`` (a code model's key: top level, shared by a sweep, or in a ``models``
    entry), ``feedback`` (the feedback model's spelling of the model key ``of``), ``sweep`` (``models``) or
    ``run``. ``nullable``: an explicit null means "no limit" or "send nothing" instead of the default.
    ``also``: another spelling of the same setting (one of the two may be set). ``file_value``: what
    config/default.yaml sets a key that has no default to (the paper's code model)."""

    name: str
    kind: Kind
    default: Any
    means: str
    fingerprint: bool = False
    nullable: bool = False
    scope: str = "run"
    also: tuple[str, ...] = ()
    of: str = ""
    example: tuple[str, ...] = ()  # lines config/default.yaml shows under the key
    file_value: Any = None


@dataclass(frozen=True)
class Section:
    title: str
    intro: str
    keys: tuple[Key, ...]


def _model(name: str, kind: Kind, means: str, default: Any = None, **more: Any) -> Key:
    return Key(name, kind, default, means, scope="model", **more)


def _sampling(name: str, kind: Kind, means: str, also: tuple[str, ...] = ()) -> Key:
    return _model(name, kind, means, fingerprint=True, nullable=True, also=also)


def _feedback(code: Key, means: str = "", default: Any = None, name: str = "") -> Key:
    """The feedback model's key for the code-model key ``code``: same kind, its own name and default."""
    return replace(code, name=name or f"human-{code.name}", default=default, scope="feedback", of=code.name,
                   means=means or f"as {code.name}, for the feedback model", example=(), file_value=None,
                   also=tuple(f"human-{spelling}" for spelling in code.also))


LEVEL = Integer(0, MAX_LEVEL)
MODEL_KEYS_DECLARED = (
    _model("api-provider", Choice(PROVIDERS, {"google": "gemini"}), "openai | azure-openai | anthropic | gemini "
           "(or google, the release's name) | together | deepseek | scripted | replay", "openai", fingerprint=True),
    _model("model", Text("a model name"), "model name; a list sweeps several models sharing these provider keys, e.g. "
           "[gpt-5, gpt-5-mini]", fingerprint=True, file_value="gpt-4o"),
    _model("api-key", Text(), "null, \"\" or \"YOUR_API_KEY\": read the provider's variable (OPENAI_API_KEY, "
           "AZURE_OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, TOGETHER_API_KEY, DEEPSEEK_API_KEY); or e.g. "
           "${MY_KEY}; never logged"),
    _model("base-url", Text(), "OpenAI-compatible server (vLLM, Ollama, llama.cpp...), e.g. "
           "http://127.0.0.1:8000/v1, no key needed; null: the SDK's own variable (OPENAI_BASE_URL, "
           "ANTHROPIC_BASE_URL), else the provider"),
    _model("deployment", Text(), "azure-openai: deployment name (defaults to the model name)", fingerprint=True),
    _model("endpoint", Text(), "azure-openai: resource URL, e.g. https://NAME.openai.azure.com"),
    _model("api-version", Text(), "azure-openai: API version, e.g. 2024-10-21"),
    _model("script", FilePath(), "scripted provider: YAML script of canned answers (see config/offline.yaml); "
           "its content enters the fingerprint", fingerprint=True),
    _model("request-timeout-sec", Number(0, above=True), "seconds one API request may take before it is "
           "retried; null = 600"),
    _model("max-retries", Integer(0), "retries of a failed request (429, 5xx, 529, timeouts, connection "
           "errors); null = 6"),
    _model("retry-window-minutes", Number(0), "such faults are retried until max-retries AND this window are "
           "spent, then the run stops (resumable); null = 10"),
    _model("openai-api", Choice(OPENAI_APIS), "chat | responses: the API an OpenAI-protocol model is asked "
           "through; null = the protocol's (chat)", fingerprint=True),
    _model("requests-per-minute", Number(0, above=True), "pace this model's calls under its provider limit, "
           "before sending (docs/caching.md); null = no pacing"),
    _model("tokens-per-minute", Number(0, above=True), "the same for tokens (prompt + answer); the provider's "
           "x-ratelimit-* / anthropic-ratelimit-* headers lower it"),
)
SAMPLING_KEYS_DECLARED = (
    _sampling("temperature", Number(), "sampling temperature (some reasoning models accept no other than their "
              "default)"),
    _sampling("top-p", Number(), "nucleus sampling"),
    _sampling("max-tokens", Integer(1), "cap on tokens per answer", also=("max-output-tokens",)),
    _sampling("reasoning-effort", Text(), "reasoning models: minimal | low | medium | high"),
    _sampling("thinking-budget", Integer(0), "Gemini: thinking tokens per answer"),
)
_CODE = {key.name: key for key in (*MODEL_KEYS_DECLARED, *SAMPLING_KEYS_DECLARED)}

SECTIONS = (
    Section("Code model (the CodeAgent)", "", (
        *MODEL_KEYS_DECLARED[:2],
        Key("models", Entries(), None, "instead of model, when the models of a sweep need different providers: "
            "each entry takes the keys of this section and inherits those it omits", scope="sweep",
            example=("models:", "  - {model: gpt-5, api-provider: openai}",
                     "  - {model: claude-sonnet-4-20250514, api-provider: anthropic}")),
        *MODEL_KEYS_DECLARED[2:],
    )),
    Section("Sampling", "\"\" (or the key left out) sends what the protocol sends (protocol: release sends the "
            "release's values: top_p 1 to OpenAI; temperature 0 and top_p 1 to Anthropic with max tokens 4096, "
            "Together, DeepSeek and Azure; temperature 0, top_p 1 and a thinking budget (1000 for "
            "gemini-2.5-pro, else 0) to Gemini); null sends nothing (the provider's default); a value is sent "
            "instead of the protocol's. human-<key> does the same for the feedback model.", SAMPLING_KEYS_DECLARED),
    Section("Feedback model (the simulated researcher, HumanAgent); needed when a level above 0 runs", "", (
        _feedback(_CODE["api-provider"], "same choices as api-provider", "openai"),
        _feedback(_CODE["model"], "the paper's feedback model", "o4-mini", "human-agent-model"),
        _feedback(_CODE["api-key"], "null: the provider's environment variable, as above"),
        _feedback(_CODE["base-url"], "OpenAI-compatible server for the feedback model"),
        _feedback(_CODE["deployment"], "azure-openai: deployment name"),
        _feedback(_CODE["endpoint"], "azure-openai: resource URL"),
        _feedback(_CODE["api-version"], "azure-openai: API version"),
        _feedback(_CODE["script"], "scripted provider: the feedback model's script"),
        *(_feedback(_CODE[name]) for name in ("request-timeout-sec", "max-retries", "retry-window-minutes")),
        _feedback(_CODE["openai-api"], "as openai-api; the release asks an OpenAI feedback model through "
                  "Responses: set chat for servers without it"),
        *(_feedback(_CODE[name]) for name in ("requests-per-minute", "tokens-per-minute")),
        _feedback(_CODE["temperature"], "sampling of the feedback model, as above (\"\": the protocol's; null: "
                  "nothing)"),
        *(_feedback(key) for key in SAMPLING_KEYS_DECLARED[1:]),
    )),
    Section("Protocol", "", (
        Key("protocol", Choice(tuple(PROTOCOLS)), DEFAULT_PROTOCOL, "release: what the authors' harness shows its "
            "models, call by call (comparable with the paper) | improved: ours (bounded memory notes, the step "
            "budget told, a test digest); docs/protocols.md lists every difference", fingerprint=True),
        Key("release-prompts", FilePath(), None, "a checkout of the authors' release: protocol release then reads "
            "its prompt texts from it (parsed, never run; file hashes in the run metadata); null = "
            "$RECODE_RELEASE_PROMPTS, else our own wording of the same slots", fingerprint=True),
        Key("evaluation-setting", Choice(SETTINGS), "memory_agent", "baseline | agent | memory_agent (the paper's "
            "main setting) | snippet (ResearchCodeBench blocks)", fingerprint=True),
        Key("guidance-level", OneOrList(LEVEL, f"an integer from 0 to {MAX_LEVEL} or a list of them"), 4,
            "0-4, or a list sweeping levels, e.g. [0, 1, 2, 3, 4]", fingerprint=True),
        Key("guidance-type", Choice(GUIDANCE_TYPES), "fixed", "fixed: one level all run | dynamic: start at "
            "guidance-level, +1 after each turn that does not raise the pass rate", fingerprint=True),
        Key("max-guidance-level", LEVEL, MAX_LEVEL, "dynamic only: the highest level reached", fingerprint=True),
        Key("max-turn", Integer(1), 10, "turns per task (turn 0 = first attempt, no feedback); not in the "
            "fingerprint: more turns extend a stored trajectory"),
        Key("max-steps", Integer(1), 3, "actions per turn before the current file is submitted", fingerprint=True),
        Key("memory-threshold", Integer(1), 15, "messages in memory before it is summarised", fingerprint=True),
        Key("memory-to-keep", Integer(0), 10, "protocol improved: most recent messages kept verbatim by a summary "
            "(the release keeps 5)", fingerprint=True),
        Key("reindent-snippet", Flag(), False, "snippet setting: re-indent the answered block (false = the "
            "release's faithful verbatim insert)", fingerprint=True),
        Key("edit-action", Flag(), False, "true: the agent may also use EDIT <N> <M> (replace a line range; "
            "protocol improved only); the release ships it disabled", fingerprint=True),
    )),
    Section("Feedback source", "", (
        Key("feedback-source", Choice(FEEDBACK_SOURCES), "llm", "llm: the feedback model | file: replay records "
            "from feedback-file | interactive: you type it | web: a form in your browser per turn (the URL is "
            "printed; several people may answer at once)", fingerprint=True),
        Key("feedback-file", FilePath(), None, "feedback-source file: the records to replay"),
        Key("web-port", Integer(0, 65535), 0, "feedback-source web: port of the page on 127.0.0.1 (0: any free "
            "port)"),
        Key("prompt-caching", Flag(), True, "provider prompt caching (Anthropic cache_control breakpoints, an "
            "OpenAI prompt_cache_key) on the stable prefix of each call; changes no text the model sees, so it is "
            "kept out of the results' fingerprint; false sends the requests exactly as the release does "
            "(docs/caching.md)"),
        Key("replay-feedback-level", LEVEL, None, "K (0-4), the release's replay: one new turn from each stored "
            "turn (but the last) of the guidance-level run, its raw feedback shown at level K; into that run's "
            "folder as task_<id>_result_replay_level<K>.pkl; needs resume: true, as in the release"),
        Key("replay-run-feedback-level", LEVEL, None, "K (0-4): a whole run whose feedback is the stored records "
            "of level K (folder suffix _replay<K>)", fingerprint=True),
    )),
    Section("Data and results", "", (
        Key("work-dir", FilePath(), "work_dir", "the folder holding dataset/ (dataset/annotation_meta.jsonl, "
            "dataset/annotations/); a folder holding annotation_meta.jsonl itself is accepted too; each task's "
            "files enter the fingerprint", fingerprint=True),
        Key("output-dir", FilePath(), "experiment_results", "results root: "
            "<setting>_<model>_feedback_<type>_guidance_<level>/task_<id>_result.pkl"),
        Key("init_seed", Text(), "init_seed", "turn-0 seeds shared by all levels: "
            "<output-dir>/<init_seed>/<model>_task<id>_init.pkl"),
        Key("task-ids", OneOrList(Integer(), "a task id or a list of task ids", empty_ok=True), None,
            "null = every runnable task; or an id or a list of ids, e.g. [1, 5, 9]"),
        Key("resume", Flag(), False, "false: skip every task that has a result file | true: also continue "
            "partial ones"),
        Key("overwrite", Flag(), False, "true: recompute stored tasks (the old result file is kept as .bak); "
            "exclusive with resume"),
        Key("cache-path", FilePath(), None, "sqlite response cache (needed by the replay provider); null = no "
            "cache"),
        Key("prices", FilePath(), None, "price table (YAML) for the dollar figures; null = the harness's "
            "config/prices.yaml"),
    )),
    Section("Test runner", "", (
        Key("sandbox", Choice(SANDBOX_MODES), "auto", "auto: sandbox when available, warn otherwise | off | "
            "required: refuse to run without one"),
        Key("on-tampered", Choice(("stop", "continue")), "stop", "stop: a turn graded tampered ends its job "
            "(recorded, counted apart; later turns not paid for) | continue: the job goes on (docs/failures.md)"),
        Key("test-timeout-sec", Number(0, above=True), 600, "wall-clock limit of one test run"),
        Key("memory-mb", Integer(64), 8192, "memory limit of the tests; null = none", nullable=True),
        Key("max-processes", Integer(1), 512, "process limit of the tests; null = none", nullable=True),
        Key("env-backend", Choice(BACKENDS), None, "conda | uv | venv | current; null = $RECODE_ENV_BACKEND, "
            "else conda when installed, else uv"),
    )),
    Section("Parallelism", "", (
        Key("max-workers", Integer(1), 4, "jobs (task x level x model) in flight at once, mostly waiting on "
            "models; --max-workers overrides"),
        Key("parallel-mode", Choice(PARALLEL_MODES), "processes", "processes | threads | none (in order, one at "
            "a time) | ray; --parallel-mode overrides; feedback-source interactive defaults to none"),
        Key("test-slots", Integer(1), None, "test runs at once on CPUs; null = one per CPU available to this "
            "process"),
        Key("gpus", Devices(), [], "CUDA device ids ([0, 1, ...]) shared out to test runs; [] = devices left as "
            "they are"),
        Key("jobs-per-gpu", Integer(1), 1, "test runs at once on each listed GPU (a task with needs_gpu: false "
            "takes a CPU slot)"),
        Key("gpu-slots", Integer(1), None, "cap on GPU test runs at once over all listed GPUs; null = len(gpus) x "
            "jobs-per-gpu"),
        Key("early-tests", Flag(), True, "a slot nobody waits for tests a written file before it is submitted "
            "(same results)"),
        Key("ray-address", Text(), None, "ray: address of an existing cluster (e.g. ray://head:10001 or auto); "
            "null = a local Ray"),
        Key("ray-num-cpus", Number(), 1, "ray: CPUs reserved per job"),
        Key("ray-num-gpus", Number(), 0, "ray: GPUs reserved per job"),
    )),
    Section("Budget (agent/job/budget.py)", "", (
        Key("max-cost-usd", Number(0, above=True, unit=" of US dollars"), None, "stop the run's jobs at a turn "
            "boundary once the run spent this many dollars (null: no cap)"),
        Key("max-task-cost-usd", Number(0, above=True, unit=" of US dollars"), None, "the same per job (task x "
            "level x model); rerun with a higher cap to continue"),
    )),
)

KEYS: dict[str, Key] = {key.name: key for section in SECTIONS for key in section.keys}
KNOWN_KEYS = frozenset(spelling for key in KEYS.values() for spelling in (key.name, *key.also))
MODEL_KEYS = tuple(spelling for key in KEYS.values() if key.scope == "model" for spelling in (key.name, *key.also))
FEEDBACK_KEYS = {key.of: key for key in KEYS.values() if key.scope == "feedback"}  # code-model key -> its human-*
RUN_KEYS = tuple(key for key in KEYS.values() if key.scope == "run")  # read by load_config, in this order
DEFAULTS: dict[str, Any] = {key.name: key.default for key in KEYS.values() if key.default is not None}
