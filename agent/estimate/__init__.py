"""``--estimate``: what a run will cost before any model is called.

The run's jobs are walked with the real agent and prompt builders, the
models replaced by stand-ins answering with texts of an assumed size
(agent/estimate/walk.py); the calls are summed per model and priced at list
prices, with and without prompt caching (agent/estimate/tally.py), and
printed (agent/estimate/report.py). docs/estimate.md says how to read it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from agent.estimate.tally import Estimate, model_totals, price_lines, walk_jobs
from agent.estimate.walk import Assumptions, JobShape, TaskText
from agent.job.layout import Job, is_finished
from agent.job.parts import RunParts
from agent.job.seeds import Seeds
from agent.rcb.snippet import load_snippet_task
from agent.task.dataset import DatasetManager

if TYPE_CHECKING:
    from agent.config import RunConfig

__all__ = ["Assumptions", "Estimate", "TaskText", "estimate_run", "estimate_tasks", "job_shape"]


def task_texts(cfg: RunConfig, task_ids: list[int], snippets: bool) -> list[TaskText]:
    """The dataset's texts of each task, as the run's prompts are built from them."""
    dataset = DatasetManager(cfg.work_dir)
    texts = []
    for index in task_ids:
        meta = dataset.get(index)
        texts.append(TaskText(index, dataset.latex(index), dataset.instruction(index), dataset.canonical(index),
                              meta.target_file_path, meta.init_content, tuple(meta.test_cases),
                              load_snippet_task(dataset, index) if snippets else None))
    return texts


def job_shape(cfg: RunConfig) -> JobShape:
    """The run settings a job's calls follow (its protocol, setting and feedback policy)."""
    parts = RunParts(cfg)
    asks = cfg.feedback_source == "llm" and cfg.replay_run_feedback_level is None
    return JobShape(parts.protocol, parts.setting, parts.policy, cfg.max_turn, cfg.max_steps, cfg.edit_action, asks)


def estimate_run(cfg: RunConfig, task_ids: list[int], assumptions: Assumptions = Assumptions()) -> Estimate:
    """The estimate of the run ``cfg`` on ``task_ids``: its jobs not yet finished, the seeds they need that are
    not stored yet, their calls."""
    shape = job_shape(cfg)
    tasks = task_texts(cfg, task_ids, shape.setting.kind == "snippet")
    pending = {model.model: [(task, level) for task in task_ids for level in cfg.guidance_levels
                             if not is_finished(cfg, Job(model, level, task))] for model in cfg.models}
    stored = Seeds(cfg, RunParts(cfg))
    seeds = {model.model: sorted({task for task, _ in pending[model.model]
                                  if not stored.path(model, task).exists()}) for model in cfg.models}
    return estimate_tasks(cfg, tasks, shape, pending, seeds, assumptions)


def estimate_tasks(cfg: RunConfig, tasks: list[TaskText], shape: JobShape, pending: dict[str, list[tuple[int, int]]],
                   seeds: dict[str, list[int]], assumptions: Assumptions) -> Estimate:
    """The estimate for ``tasks`` (the dataset's, or stand-ins of a meta file's sizes), the jobs ``pending`` and
    the turn-0 ``seeds`` to compute, per code model."""
    levels = tuple(cfg.guidance_levels)
    walks = walk_jobs(tasks, shape, levels, assumptions)
    shares = shape.setting.shares_seed
    per_model = {model: model_totals(walks, jobs, seeds[model], shares, shape.policy.seed_needs_feedback(),
                                     assumptions) for model, jobs in pending.items()}
    feedback = cfg.feedback_model.model if cfg.feedback_model is not None and shape.asks_feedback_model else None
    all_jobs = len(cfg.models) * len(tasks) * len(levels)
    return Estimate(
        jobs=all_jobs, finished_jobs=all_jobs - sum(len(jobs) for jobs in pending.values()), tasks=len(tasks),
        levels=levels, seeds=sum(len(s) for s in seeds.values()) if shares else 0,
        settings={"protocol": shape.protocol.name, "evaluation_setting": cfg.evaluation_setting,
                  "max_turn": cfg.max_turn, "max_steps": cfg.max_steps, "guidance_type": cfg.guidance_type},
        lines=price_lines(per_model, feedback, cfg.prices), assumptions=assumptions)
