"""The scheduler: each seed once and before the jobs that read it; a failure never stops other jobs."""
from __future__ import annotations

import threading
from dataclasses import replace
from types import SimpleNamespace

import pytest

import agent.run.scheduler as scheduler
from filelock import FileLock

from agent.parallel.executor import make_executor
from agent.models.build import ModelSpec
from agent.job.layout import Job, result_folder
from agent.job.results import ResultStore
from agent.run.scheduler import ensure_seed
from agent.job.seeds import seed_path
from agent.job.workflow import run_task
from tests.loop_config import comparable, make_config

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


def config(workers: int, output_dir) -> SimpleNamespace:
    return SimpleNamespace(output_dir=output_dir, models=MODELS, guidance_levels=(0, 2, 4), max_workers=workers, guidance_type="static",
                           max_guidance_level=4, max_turn=3, feedback_source="llm", replay_run_feedback_level=None,
                           replay_feedback_level=None, protocol="improved", release_prompts=None,
                           evaluation_setting="memory_agent", memory_threshold=15, memory_to_keep=10)


@pytest.mark.parametrize("mode", ["none", "threads"])
def test_seeds_once_first_and_failures_contained(fake_loop, mode: str, tmp_path) -> None:
    cfg = config(3, tmp_path)
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


def test_in_flight_never_exceeds_max_workers(fake_loop, monkeypatch, tmp_path) -> None:
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
    cfg = config(2, tmp_path)
    executor = make_executor("threads", 8)
    outcomes, _ = scheduler.run_plan(cfg, scheduler.plan_run(cfg, [1, 2, 3]), executor, poll_sec=0.01)
    executor.shutdown()
    assert len(outcomes) == 18 and peak[0] == 2


def test_levels_without_seed_feedback_start_before_it_exists(fake_loop, monkeypatch, tmp_path) -> None:
    """Level 0 runs while the seed's feedback step is still going; levels 2 and 4 wait for that step."""
    level0_ran = threading.Event()
    seed, task = scheduler.ensure_seed, scheduler.run_task
    overlapped: list[bool] = []

    def slow_feedback(cfg, model, task_index, feedback=True):
        if feedback:
            overlapped.append(level0_ran.wait(10))
        return seed(cfg, model, task_index, feedback)

    def job(cfg, job, progress=None):
        if job.level == 0:
            level0_ran.set()
        return task(cfg, job, progress)

    monkeypatch.setattr(scheduler, "ensure_seed", slow_feedback)
    monkeypatch.setattr(scheduler, "run_task", job)
    cfg = config(8, tmp_path)
    plan = scheduler.plan_run(cfg, [7])
    assert plan.feedback_levels == {2, 4}
    executor = make_executor("threads", 8)
    outcomes, stats = scheduler.run_plan(cfg, plan, executor, poll_sec=0.01)
    executor.shutdown()
    assert overlapped == [True, True] and stats.seeds_computed == 2 and len(outcomes) == 6
    for model in ("m1", "m2"):
        order = [e[:4] for e in fake_loop if e[1] == model]
        assert order.index(("seed", model, 7, False)) < order.index(("job", model, 7, 0))
        assert order.index(("seed", model, 7, True)) < min(order.index(("job", model, 7, level)) for level in (2, 4))
    assert all(seen for *_, seen in fake_loop if _[0] == "job")


def test_sequential_order_is_turn_zero_then_feedback_then_jobs(fake_loop, tmp_path) -> None:
    cfg = config(1, tmp_path)
    executor = make_executor("none", 1)
    scheduler.run_plan(cfg, scheduler.plan_run(cfg, [7]), executor, poll_sec=0.01)
    assert [e[:4] for e in fake_loop] == [
        ("seed", "m1", 7, False), ("seed", "m1", 7, True), ("seed", "m2", 7, False), ("seed", "m2", 7, True),
        *[("job", m, 7, level) for m in ("m1", "m2") for level in (0, 2, 4)]]


@pytest.mark.slow
def test_a_level_0_job_runs_while_the_seed_feedback_is_asked_and_every_call_counts_once(tmp_path) -> None:
    """Turn 0 alone, then a level-0 job while the seed's lock is held (as by its feedback step waiting on the
    feedback model), then the feedback and a level-2 job: what a sequential run writes and calls (our protocol:
    the release's copies the seed's feedback into every level's turn 0, so every level waits for it)."""
    calls, written = {}, {}
    for how in ("sequential", "overlapped"):
        (tmp_path / how).mkdir()
        cfg = make_config(tmp_path / how, guidance_level=[0, 2], max_turn=2, protocol="improved")
        model = cfg.models[0]
        if how == "sequential":
            assert ensure_seed(cfg, model, 3)
            outcomes = [run_task(cfg, Job(model, level, 3)) for level in (0, 2)]
        else:
            assert ensure_seed(cfg, model, 3, feedback=False)
            path = seed_path(cfg.init_seed_dir, model.model, 3, cfg.evaluation_setting)
            outcomes = []
            worker = threading.Thread(target=lambda: outcomes.append(run_task(cfg, Job(model, 0, 3))))
            with FileLock(str(path.with_suffix(".lock"))):
                worker.start()
                worker.join(60)
                ran_under_the_lock = not worker.is_alive()
            worker.join()
            assert ran_under_the_lock
            assert ensure_seed(cfg, model, 3)  # the feedback step
            outcomes.append(run_task(cfg, Job(model, 2, 3)))
        assert [o["state"] for o in outcomes] == ["finished", "finished"]
        calls[how] = sum(o["api_calls"] for o in outcomes)
        written[how] = [comparable(ResultStore(result_folder(cfg, model, level), 3).load()) for level in (0, 2)]
    assert calls["overlapped"] == calls["sequential"] > 0
    assert written["overlapped"] == written["sequential"]
