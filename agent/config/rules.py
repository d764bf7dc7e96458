"""Rules between keys, each a small named function beside the schema: given the checked values (key name ->
value), the one-line message of the broken rule, else None. ``RUN_RULES`` are checked in order on the run
keys, ``MODEL_RULES`` on each model (code or feedback) with its keys named as the user wrote them."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

from agent.config.schema import PROVIDERS

Values = Mapping[str, Any]
OPENAI_PROTOCOL = ("openai", "azure-openai", "together", "deepseek")


def derived_defaults(raw: Values) -> dict[str, Any]:
    """Defaults that depend on another key: interactive feedback reads the terminal, so its jobs run in
    this process unless the file says otherwise."""
    return {"parallel-mode": "none"} if raw.get("feedback-source") == "interactive" else {}


def resume_or_overwrite(v: Values) -> str | None:
    if v["resume"] and v["overwrite"]:
        return "'resume: true' continues stored tasks and 'overwrite: true' recomputes them; set only one"
    return None


def one_replay_kind(v: Values) -> str | None:
    """The release's per-turn replay and our whole-run replay exclude each other."""
    if v["replay-feedback-level"] is not None and v["replay-run-feedback-level"] is not None:
        return ("set either 'replay-feedback-level' (one new turn from each stored turn) or "
                "'replay-run-feedback-level' (a whole run on stored feedback), not both")
    return None


def memory_to_keep_below_threshold(v: Values) -> str | None:
    """Only protocol improved keeps memory-to-keep messages (the release's keeps 5 whatever is set)."""
    if v["protocol"] == "improved" and v["memory-to-keep"] >= v["memory-threshold"]:
        return (f"'memory-to-keep' ({v['memory-to-keep']}) must be smaller than 'memory-threshold' "
                f"({v['memory-threshold']})")
    return None


def edit_action_needs_improved(v: Values) -> str | None:
    if v["edit-action"] and v["protocol"] == "release":
        return ("'edit-action: true' is not part of the release's protocol (its EDIT is disabled); "
                "set 'protocol: improved' to use EDIT")
    return None


def web_feedback_in_process(v: Values) -> str | None:
    """Web feedback serves its page from the run's process, where every local mode runs the jobs (not Ray)."""
    if v["feedback-source"] == "web" and v["parallel-mode"] == "ray":
        return ("'feedback-source: web' serves its form from this process; set 'parallel-mode' to "
                "processes, threads or none")
    return None


def interactive_feedback_in_order(v: Values) -> str | None:
    if v["feedback-source"] == "interactive" and v["parallel-mode"] != "none":
        return "'feedback-source: interactive' reads your terminal; set 'parallel-mode: none'"
    return None


def gpus_once(v: Values) -> str | None:
    if len(set(map(str, v["gpus"]))) < len(v["gpus"]):
        return f"'gpus' lists a device twice: {list(v['gpus'])!r}"
    return None


def gpus_local(v: Values) -> str | None:
    if v["gpus"] and v["parallel-mode"] == "ray":
        return "'gpus' is for the local parallel modes; under ray set 'ray-num-gpus' per job"
    return None


def gpu_slots_fit(v: Values) -> str | None:
    listed, per_gpu = len(v["gpus"]), v["jobs-per-gpu"]
    if v["gpu-slots"] is not None and v["gpu-slots"] > listed * per_gpu:
        return (f"'gpu-slots' ({v['gpu-slots']}) exceeds gpus x jobs-per-gpu ({listed} x {per_gpu}); "
                "list more 'gpus' or raise 'jobs-per-gpu'")
    return None


def feedback_file_exists(v: Values) -> str | None:
    path = v["feedback-file"]
    if v["feedback-source"] == "file" and (path is None or not path.is_file()):
        return (f"'feedback-file' must name an existing file with the feedback records to replay "
                f"(got {f'{str(path)!r}' if path else 'none'})")
    return None


def replay_needs_cache(v: Values, providers: set[str]) -> str | None:
    if v["cache-path"] is None and "replay" in providers:
        return "provider 'replay' answers from the response cache: set 'cache-path'"
    return None


def model_or_models(raw: Values) -> str | None:
    if "models" in raw and "model" in raw:
        return "use either 'model' or 'models', not both"
    return None


def one_folder_per_model(folders: list[str]) -> str | None:
    duplicate = next((folder for folder in folders if folders.count(folder) > 1), None)
    if duplicate is not None:
        return f"model '{duplicate}' appears twice in the sweep; their results would share one folder"
    return None


RUN_RULES: tuple[Callable[[Values], str | None], ...] = (
    resume_or_overwrite, one_replay_kind, memory_to_keep_below_threshold, edit_action_needs_improved,
    web_feedback_in_process, interactive_feedback_in_order, gpus_once, gpus_local, gpu_slots_fit,
    feedback_file_exists,
)


class Model(Protocol):
    """One model's checked values by code-model key, and each key's name as the user wrote it."""

    def value(self, key: str) -> Any: ...

    def name(self, key: str) -> str: ...

    def shown(self, key: str) -> str: ...


def provider_given(m: Model) -> str | None:
    if m.value("api-provider") is None:
        return f"missing '{m.name('api-provider')}'; set it to one of " + ", ".join(PROVIDERS)
    return None


def model_given(m: Model) -> str | None:
    if m.value("model") is None:
        return f"missing '{m.name('model')}'; name the model to run"
    return None


def scripted_needs_script(m: Model) -> str | None:
    script = m.value("script")
    if m.value("api-provider") == "scripted" and (script is None or not script.is_file()):
        return (f"provider 'scripted' needs '{m.name('script')}' naming an existing script file "
                f"(got {m.shown('script') if script else 'none'})")
    return None


def azure_needs_endpoint(m: Model) -> str | None:
    if m.value("api-provider") == "azure-openai" and m.value("endpoint") is None:
        return f"provider 'azure-openai' needs '{m.name('endpoint')}' (your Azure resource URL)"
    return None


def openai_api_for_openai_protocol(m: Model) -> str | None:
    provider = m.value("api-provider")
    if m.value("openai-api") is not None and provider not in OPENAI_PROTOCOL:
        return (f"'{m.name('openai-api')}' applies to providers {', '.join(OPENAI_PROTOCOL)}, not '{provider}'; "
                "remove it")
    return None


MODEL_RULES: tuple[Callable[[Model], str | None], ...] = (
    provider_given, model_given, scripted_needs_script, azure_needs_endpoint, openai_api_for_openai_protocol,
)
