"""The validated configuration of a run: plain, immutable data every worker process can use."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agent.models.types import ModelSpec
from agent.protocols import DEFAULT_PROTOCOL
from agent.runner.options import RunnerOptions
from agent.parallel.slots import SlotConfig


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
