"""Plan the (model, level, task) jobs of a run and drive them through an executor.

The only dependency between jobs is the turn-0 seed shared by every level of
one (model, task): it is computed once, by a seed job, and the level jobs that
read it are released as soon as it exists. Everything else runs in parallel,
at most ``max_workers`` at a time; their test runs wait for the executor's
test slots (``agent/slots.py``), which this process serves while the plan
runs. A failing job never stops the others: its exception becomes an outcome
with state "error".
"""
from __future__ import annotations

import traceback
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, Callable

from agent.config import RunConfig
from agent.executor import Executor, unwrap_error
from agent.slots import serving
from agent.inference import ModelSpec
from agent.workflow import Job, ensure_seed, is_finished, run_task

SeedKey = tuple[ModelSpec, int]


@dataclass(frozen=True)
class Plan:
    """Seeds to compute first and every level job; ``jobs`` whose seed is listed wait for it."""

    seeds: tuple[SeedKey, ...]
    jobs: tuple[Job, ...]


@dataclass
class RunStats:
    """What the driver learnt besides the outcomes."""

    seeds_computed: int = 0
    seed_errors: int = 0


def plan_run(cfg: RunConfig, task_indices: list[int]) -> Plan:
    """Every job of the (possibly swept) config; a seed for each (model, task) with an unfinished level."""
    jobs = tuple(Job(model=model, level=level, task_index=task)
                 for model in cfg.models for task in task_indices for level in cfg.guidance_levels)
    pending = (job for job in jobs if not is_finished(cfg, job))
    seeds = tuple(dict.fromkeys((job.model, job.task_index) for job in pending))
    return Plan(seeds=seeds, jobs=jobs)


def error_outcome(job: Job, exc: BaseException, context: str = "") -> dict[str, Any]:
    """The outcome of a job that raised (or whose seed raised): one-line error, traceback for the error log."""
    exc = unwrap_error(exc)
    first_line = (str(exc).strip().splitlines() or [""])[0]
    message = f"{context}{type(exc).__name__}: {first_line}".rstrip(": ")
    return {
        "task_index": job.task_index, "model": job.model.model, "level": job.level, "state": "error",
        "solved": False, "turns": 0, "best_rate": 0.0, "input_tokens": 0, "output_tokens": 0,
        "cost_usd": None, "api_calls": 0, "error": message,
        "traceback": "".join(traceback.format_exception(exc)),
    }


def _run_job(cfg: RunConfig, job: Job, report: Callable[[dict], None]) -> dict[str, Any]:
    """Worker side of a level job (module level, so every backend can ship it)."""
    return run_task(cfg, job, progress=report)


def run_plan(
    cfg: RunConfig,
    plan: Plan,
    executor: Executor,
    *,
    on_outcome: Callable[[Job, dict], None] = lambda job, outcome: None,
    on_progress: Callable[[Job, dict], None] = lambda job, message: None,
    on_poll: Callable[[], None] = lambda: None,
    poll_sec: float = 0.5,
) -> tuple[list[dict], RunStats]:
    """Run seeds, then each level job once its seed exists; returns outcomes in completion order.

    ``on_poll`` is called every ``poll_sec`` at least (a progress display refreshes its counters).
    """
    with serving(executor.slots):
        return _drive(cfg, plan, executor, on_outcome, on_progress, on_poll, poll_sec)


def _drive(cfg: RunConfig, plan: Plan, executor: Executor, on_outcome: Callable[[Job, dict], None],
           on_progress: Callable[[Job, dict], None], on_poll: Callable[[], None],
           poll_sec: float) -> tuple[list[dict], RunStats]:
    stats = RunStats()
    seed_of = {key: [] for key in plan.seeds}
    ready: deque[Job] = deque()
    for job in plan.jobs:
        seed_of.get((job.model, job.task_index), ready).append(job)
    seeds = deque(plan.seeds)
    send, drain = executor.channel()
    in_flight: dict[Future, Job | SeedKey] = {}
    outcomes: list[dict] = []

    def finish(job: Job, outcome: dict) -> None:
        outcomes.append(outcome)
        on_outcome(job, outcome)

    while seeds or ready or in_flight:
        while len(in_flight) < cfg.max_workers and (seeds or ready):
            if seeds:
                model, task = key = seeds.popleft()
                in_flight[executor.submit(ensure_seed, cfg, model, task)] = key
            else:
                job = ready.popleft()
                in_flight[executor.submit(_run_job, cfg, job, send.tagged(job))] = job
        done, _ = wait(in_flight, timeout=poll_sec, return_when=FIRST_COMPLETED)
        for job, message in drain():
            on_progress(job, message)
        on_poll()
        for future in done:
            item = in_flight.pop(future)
            error = future.exception()
            if isinstance(item, Job):
                finish(item, error_outcome(item, error) if error else future.result())
                continue
            waiting = seed_of.pop(item)
            if error is None:
                stats.seeds_computed += bool(future.result())
                ready.extend(waiting)
                continue
            stats.seed_errors += 1
            for job in waiting:
                finish(job, error_outcome(job, error, context="turn-0 seed failed: "))
    for job, message in drain():
        on_progress(job, message)
    return outcomes, stats
