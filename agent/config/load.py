"""``load_config``: one YAML file, and the flags over it, to a validated :class:`RunConfig`. Every key is
checked by its declaration (agent/config/schema.py), then the rules between keys (agent/config/rules.py);
every mistake is one line naming the key as written, before any money is spent."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.config.models import code_models, feedback_model
from agent.config.raw import open_config
from agent.config.reader import Reader
from agent.config.rules import RUN_RULES, derived_defaults, replay_needs_cache
from agent.config.run_config import RunConfig
from agent.config.schema import RUN_KEYS
from agent.task.dataset import DOWNLOAD_HINT, dataset_in
from agent.feedback.guidance import FeedbackPolicy
from agent.models.build import DEFAULT_PRICES_PATH, InferenceError, load_prices
from agent.models.types import ModelSpec
from agent.protocols import make_protocol
from agent.protocols.base import RunProtocol
from agent.protocols.release_texts import ReleaseTextsError, release_prompts_path
from agent.runner.options import RunnerOptions
from agent.parallel.slots import SlotConfig, cpu_count


def load_config(path: str | Path, overrides: dict | None = None, *, need_keys: bool = True) -> RunConfig:
    """Read and validate a YAML config; ``overrides`` (same hyphenated keys) win over the file. ``need_keys``
    False leaves API keys unresolved (for ``--estimate``, which calls no model)."""
    reader = open_config(Path(path), overrides or {}, need_keys)
    values = run_values(reader)
    reader.check(*(rule(values) for rule in RUN_RULES))
    values["release-prompts"] = release_prompts_path(values["release-prompts"])
    protocol = _protocol(reader, values)
    models = code_models(reader, protocol)
    policy = FeedbackPolicy(values["guidance-level"], values["guidance-type"], values["max-guidance-level"],
                            values["max-turn"], values["feedback-source"])
    feedback = feedback_model(reader, protocol) if policy.needs_feedback_model() else None
    reader.check(replay_needs_cache(values, {spec.provider for spec in (*models, feedback) if spec is not None}))
    return _run_config(reader, values, models, feedback)


def run_values(reader: Reader) -> dict[str, Any]:
    """Every run key's checked value (its default where the file leaves it out)."""
    derived = {name: value for name, value in derived_defaults(reader.raw).items() if name not in reader.raw}
    return {key.name: reader.read(key, derived[key.name]) if key.name in derived else reader.read(key)
            for key in RUN_KEYS}


def _protocol(reader: Reader, values: dict[str, Any]) -> RunProtocol:
    try:
        return make_protocol(values["protocol"], release_prompts=values["release-prompts"],
                             memory_threshold=values["memory-threshold"], memory_to_keep=values["memory-to-keep"])
    except ReleaseTextsError as exc:
        raise reader.fail(str(exc)) from None


def _run_config(reader: Reader, v: dict[str, Any], models: tuple[ModelSpec, ...],
                feedback: ModelSpec | None) -> RunConfig:
    output_dir = v["output-dir"]
    return RunConfig(
        models=models, feedback_model=feedback,
        guidance_levels=v["guidance-level"], guidance_type=v["guidance-type"],
        max_guidance_level=v["max-guidance-level"], evaluation_setting=v["evaluation-setting"],
        max_turn=v["max-turn"], max_steps=v["max-steps"],
        memory_threshold=v["memory-threshold"], memory_to_keep=v["memory-to-keep"],
        work_dir=_dataset_dir(reader, v["work-dir"]), output_dir=output_dir,
        init_seed_dir=(output_dir / Path(v["init_seed"]).expanduser()).resolve(),
        resume=v["resume"], overwrite=v["overwrite"], task_ids=v["task-ids"],
        replay_feedback_level=v["replay-feedback-level"], replay_run_feedback_level=v["replay-run-feedback-level"],
        feedback_source=v["feedback-source"], feedback_file=v["feedback-file"],
        runner=RunnerOptions(timeout_sec=v["test-timeout-sec"], sandbox=v["sandbox"], memory_mb=v["memory-mb"],
                             max_processes=v["max-processes"], env_backend=v["env-backend"]),
        cache_path=v["cache-path"], prices=_prices(reader, v["prices"]),
        reindent_snippet=v["reindent-snippet"], edit_action=v["edit-action"],
        max_workers=v["max-workers"], parallel_mode=v["parallel-mode"],
        ray_address=v["ray-address"], ray_num_cpus=v["ray-num-cpus"], ray_num_gpus=v["ray-num-gpus"],
        slots=SlotConfig(test_slots=v["test-slots"] or cpu_count(), gpus=tuple(map(str, v["gpus"])),
                         jobs_per_gpu=v["jobs-per-gpu"], gpu_slots=v["gpu-slots"], early_tests=v["early-tests"]),
        max_cost_usd=v["max-cost-usd"], max_task_cost_usd=v["max-task-cost-usd"],
        protocol=v["protocol"], release_prompts=v["release-prompts"],
        web_port=v["web-port"], on_tampered=v["on-tampered"],
    )


def _dataset_dir(reader: Reader, work_dir: Path) -> Path:
    """The dataset folder: ``<work-dir>/dataset`` as in the release, or work-dir itself when it holds the meta file."""
    found = dataset_in(work_dir)
    if found is not None:
        return found.resolve()
    raise reader.fail(f"dataset not found: 'work-dir' {reader.shown('work-dir')} holds neither "
                      f"dataset/annotation_meta.jsonl nor annotation_meta.jsonl; {DOWNLOAD_HINT}")


def _prices(reader: Reader, path: Path | None) -> dict:
    try:
        return load_prices(path or DEFAULT_PRICES_PATH)
    except InferenceError as exc:
        raise reader.fail(f"'prices': {exc}") from None
