"""What the jobs of one run configuration share: its protocol and the setting it runs, the guidance policy,
and how models, feedback sources, sessions and record upgrades are built.

Built per job from the RunConfig (cheap: a release checkout's texts are parsed
once per process), so nothing here has to cross a process boundary.
"""
from __future__ import annotations

from dataclasses import asdict, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from agent.common.version import harness_version
from agent.feedback import (
    FeedbackReply, FeedbackRequest, FeedbackSource, FileFeedback, InteractiveFeedback, LLMFeedback, ReplayFeedback,
)
from agent.feedback.guidance import FeedbackPolicy
from agent.job.agents import HumanAgent
from agent.job.fingerprint import job_fingerprint
from agent.job.layout import Job, result_folder
from agent.job.record import Upgrade
from agent.job.results import ResultStore
from agent.job.session import Session
from agent.models.build import build_model
from agent.models.halt import gated
from agent.models.types import ChatModel, ModelSpec
from agent.parallel.slots import run_tests
from agent.protocols import make_protocol
from agent.task.dataset import DatasetManager
from agent.web import WebFeedback

if TYPE_CHECKING:
    from agent.config import RunConfig

SEED_BLIND_KEYS = frozenset({"level", "guidance_type", "max_guidance_level", "replayed_level", "feedback_source"})


class RunParts:
    """The protocol, setting and policy of a run, and builders for its models, sources and sessions."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.protocol = make_protocol(cfg.protocol, release_prompts=cfg.release_prompts,
                                      memory_threshold=cfg.memory_threshold, memory_to_keep=cfg.memory_to_keep)
        self.setting = self.protocol.settings[cfg.evaluation_setting]
        self.policy = FeedbackPolicy(cfg.guidance_levels, cfg.guidance_type, cfg.max_guidance_level, cfg.max_turn,
                                     cfg.feedback_source, cfg.replay_run_feedback_level is not None,
                                     self.protocol.copies_seed_feedback and self.setting.shares_seed)
        self._task_fingerprints: dict[int, str] = {}
        self._seed_fingerprints: dict[tuple[ModelSpec, int], dict[str, Any]] = {}

    @cached_property
    def dataset(self) -> DatasetManager:
        return DatasetManager(self.cfg.work_dir)

    def fingerprint(self, job: Job) -> dict[str, Any]:
        """Everything that shapes the job's trajectory, named (agent/job/fingerprint.py). ``max-turn`` is left out:
        raising it extends a trajectory whose prefix stays valid."""
        cfg, setting = self.cfg, self.setting
        models = {"code": _settings(job.model)}
        if cfg.feedback_model is not None and self.policy.highest_level(job.level) > 0:
            models["feedback"] = _settings(cfg.feedback_model)
        guidance = {"guidance_type": cfg.guidance_type}
        if cfg.guidance_type == "dynamic":
            guidance["max_guidance_level"] = cfg.max_guidance_level
        # Re-indenting changes the file an answered block makes; named only when on, so runs made before it
        # entered (verbatim inserts, the default) are still accepted.
        by_kind = {"tools": {"max_steps": cfg.max_steps, "edit_action": cfg.edit_action},
                   "snippet": {"reindent_snippet": True} if cfg.reindent_snippet else {}}
        memory = {"threshold": cfg.memory_threshold, "to_keep": cfg.memory_to_keep} if setting.carries_memory else {}
        return job_fingerprint(
            models=models, prompts=self.protocol.prompts(), memory=memory, protocol=self.protocol.name,
            setting=cfg.evaluation_setting, level=job.level, **guidance, **by_kind.get(setting.kind, {}),
            feedback_source=cfg.feedback_source,
            replayed_level=cfg.replay_run_feedback_level, dataset=self.task_fingerprint(job.task_index),
            harness=harness_version())

    def seed_fingerprint(self, model: ModelSpec, task_index: int) -> dict[str, Any]:
        """What shapes a turn-0 seed: a job's fingerprint without what only later turns depend on (levels, the
        feedback's source and model; the model that gave the seed's feedback is kept in its meta file). Made once
        per seed: every load of the seed checks it."""
        key = (model, task_index)
        if key not in self._seed_fingerprints:
            self._seed_fingerprints[key] = {
                name: value for name, value in self.fingerprint(Job(model, 0, task_index)).items()
                if name not in SEED_BLIND_KEYS and not name.startswith("feedback.")}
        return self._seed_fingerprints[key]

    def task_fingerprint(self, task_index: int) -> str:
        if task_index not in self._task_fingerprints:
            self._task_fingerprints[task_index] = self.dataset.task_fingerprint(task_index)
        return self._task_fingerprints[task_index]

    def model(self, spec: ModelSpec) -> ChatModel:
        """The model behind the run's gate (agent/models/halt.py): no call leaves once a provider refused the run."""
        return gated(build_model(spec, prices=self.cfg.prices, cache_path=self.cfg.cache_path), self.cfg.output_dir)

    def session(self, model: ModelSpec, task_index: int, tmp: Path, source: FeedbackSource | None) -> Session:
        return Session(self.cfg, self.model(model), self.protocol, task_index, tmp, source, params=sampling(model))

    def human(self, task_index: int, source: FeedbackSource | None) -> HumanAgent:
        """A researcher without a repository copy: enough to ask for feedback on a stored turn."""
        dataset, cases = self.dataset, self.dataset.get(task_index).test_cases
        path = self.protocol.test_path(dataset, task_index)
        return HumanAgent(dataset.latex(task_index), dataset.instruction(task_index), dataset.canonical(task_index),
                          task_index, lambda code, report: run_tests(dataset, task_index, code, self.cfg.runner,
                                                                     report_to=report),
                          source, lambda execution: self.protocol.test_info(execution, cases, path))

    def upgrade(self, level: int | None, task_index: int) -> Upgrade:
        """How stored records of ``task_index`` at ``level`` are made whole, in this run's protocol."""
        cases = self.dataset.get(task_index).test_cases
        path = self.protocol.test_path(self.dataset, task_index)
        return Upgrade(level, lambda execution: self.protocol.test_info(execution, cases, path),
                       self.protocol.feedback_text)

    def load(self, store: ResultStore, level: int | None) -> list[dict]:
        """A store's records, made whole."""
        upgrade = self.upgrade(level, store.task_index)
        return [upgrade(turn) for turn in store.load()]

    def llm_source(self) -> LLMFeedback | None:
        if self.cfg.feedback_model is None:
            return None
        return LLMFeedback(self.model(self.cfg.feedback_model), self.protocol.feedback_style())

    def source(self, job: Job) -> FeedbackSource | None:
        """The job's feedback source: ``feedback-source`` (llm, file, interactive, web), or with
        ``replay-run-feedback-level: K`` the records level K's run received, turn by turn."""
        source = MAKERS[self.cfg.feedback_source](self, job)
        level = self.cfg.replay_run_feedback_level
        if level is None:
            return source
        stored = ResultStore(result_folder(replace(self.cfg, replay_run_feedback_level=None), job.model, level),
                             job.task_index)
        turns = self.load(stored, level)
        return ReplayFeedback({t["turn_number"]: t["feedback_items"] for t in turns}, level,
                              source or _missing_feedback_model)


def _settings(spec: ModelSpec) -> dict[str, Any]:
    """A model spec as plain data, its key left out; a scripted model's answers by their content, so a run
    folder moved elsewhere keeps its identity."""
    settings = {key: value for key, value in asdict(spec).items() if key != "api_key"}
    if spec.script:
        try:
            settings["script"] = Path(spec.script).read_text(encoding="utf-8")
        except OSError:
            pass  # a script that cannot be read fails the run with its own message
    return settings


def sampling(spec: ModelSpec) -> dict:
    """The request parameters a model spec sends (what a record's ``code_calls`` keep with each call)."""
    keys = ("temperature", "top_p", "max_output_tokens", "reasoning_effort", "thinking_budget", "fold_system",
            "openai_api")
    return {key: getattr(spec, key) for key in keys if getattr(spec, key) not in (None, False, "chat")}


def _missing_feedback_model(request: FeedbackRequest) -> FeedbackReply:
    return FeedbackReply([], "none", error="no feedback model is configured to stand in; set human-api-provider "
                                           "and human-agent-model")


# One maker per value of ``feedback-source`` (agent/feedback/__init__.py, SOURCES: what the configuration accepts).
MAKERS: dict[str, Callable[[RunParts, Job], FeedbackSource | None]] = {
    "llm": lambda parts, job: parts.llm_source(),
    "file": lambda parts, job: FileFeedback(parts.cfg.feedback_file),
    "interactive": lambda parts, job: InteractiveFeedback(),
    "web": lambda parts, job: WebFeedback(result_folder(parts.cfg, job.model, job.level).name, job.model.model,
                                          parts.cfg.output_dir, parts.cfg.web_port),
}
