"""The scheduler: each seed once and before the jobs that read it; a failure never stops other jobs."""
from __future__ import annotations

import threading
from dataclasses import replace
from types import SimpleNamespace

import pytest

import agent.scheduler as scheduler
from agent.executor import make_executor
from agent.inference import ModelSpec
from agent.workflow import Job

MODELS = (ModelSpec("scripted", "m1"), ModelSpec("scripted", "m2"))


def outcome(job: Job) -> dict:
    return {"task_index": job.task_index, "model": job.model.model, "level": job.level, "state": "finished",
            "solved": job.level > 1, "turns": 1, "best_rate": 1.0, "input_tokens": 1, "output_tokens": 1,
            "cost_usd": 0.5, "api_calls": 1, "error": None}


@pytest.fixture
def fake_loop(monkeypatch):
    """ensure_seed/run_task stand-ins recording the order of events (threads mode shares them)."""
    events: list[tuple] = []
    lock = threading.Lock()
    seeded: set = set()

    def ensure_seed(cfg, model, task, feedback=True):
        if task == 13:
            raise RuntimeError("seed model refused")
        with lock:
            events.append(("seed", model.model, task, feedback))
            seeded.add((model.model, task, feedback))
        return True

    def run_task(cfg, job, progress=None):
        with lock:
            events.append(("job", job.model.model, job.task_index, job.level,
                           (job.model.model, job.task_index, job.level > 0) in seeded))
        progress({"cost_usd": 0.25, "turn": 0})
        if job.task_index == 7 and job.level == 2:
            raise ValueError("broken job")
        return outcome(job)

    monkeypatch.setattr(scheduler, "ensure_seed", ensure_seed)
    monkeypatch.setattr(scheduler, "run_task", run_task)
    monkeypatch.setattr(scheduler, "is_finished", lambda cfg, job: job.task_index == 5)
    return events


def config(workers: int) -> SimpleNamespace:
    return SimpleNamespace(models=MODELS, guidance_levels=(0, 2, 4), max_workers=workers, guidance_type="static",
                           max_guidance_level=4, max_turn=3, feedback_source="llm", replay_run_feedback_level=None)


@pytest.mark.parametrize("mode", ["none", "threads"])
def test_seeds_once_first_and_failures_contained(fake_loop, mode: str) -> None:
    cfg = config(3)
    plan = scheduler.plan_run(cfg, [5, 7, 13])
    assert plan.seeds == tuple((m, t) for m in MODELS for t in (7, 13))  # task 5 is finished: no seed
    executor = make_executor(mode, 3)
    progress: list = []
    outcomes, stats = scheduler.run_plan(cfg, plan, executor, on_progress=lambda job, msg: progress.append(msg),
                                         poll_sec=0.01)
    executor.shutdown()
    assert stats.seeds_computed == 2 and stats.seed_errors == 2
    assert len(outcomes) == len(plan.jobs) == 18
    jobs = [e for e in fake_loop if e[0] == "job"]
    assert all(seen for *_, seen in jobs if _[2] != 5)  # every unfinished job ran after its seed
    errors = {(o["model"], o["task_index"], o["level"]): o["error"] for o in outcomes if o["state"] == "error"}
    assert errors[("m1", 7, 2)] == "ValueError: broken job"
    assert errors[("m2", 13, 4)] == "turn-0 seed failed: RuntimeError: seed model refused"
    assert len(errors) == 2 + 2 * 3
    assert "Traceback" in next(o for o in outcomes if o["state"] == "error")["traceback"]
    assert len(progress) == 12 and all(m["cost_usd"] == 0.25 for m in progress)


def test_in_flight_never_exceeds_max_workers(fake_loop, monkeypatch) -> None:
    running, peak, lock = [0], [0], threading.Lock()
    release = threading.Event()
    original = scheduler.run_task

    def slow(cfg, job, progress=None):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(0.05)
        with lock:
            running[0] -= 1
        return original(cfg, replace(job, task_index=6), progress)

    monkeypatch.setattr(scheduler, "run_task", slow)
    cfg = config(2)
    executor = make_executor("threads", 8)
    outcomes, _ = scheduler.run_plan(cfg, scheduler.plan_run(cfg, [1, 2, 3]), executor, poll_sec=0.01)
    executor.shutdown()
    assert len(outcomes) == 18 and peak[0] == 2
