"""Plan the (model, level, task) jobs of a run and drive them through an executor.

The only dependency between jobs is the turn-0 seed shared by every level of
one (model, task): it is computed once, in two steps, and each level job is
released as soon as what it reads exists: turn 0 for the levels that do not
show the seed's feedback (level 0), turn 0 and its raw feedback for the
others, so a level-0 job never waits for a feedback call it does not use.
Everything else runs in parallel,
at most ``max_workers`` at a time; their test runs wait for the executor's
test slots (``agent/parallel/slots.py``), which this process serves while the plan
runs. A failing job never stops the others: its exception becomes an outcome
with state "error".

Several runs may share an output folder (a second terminal, a re-submitted
batch job, machines on a shared file system): each level job is claimed
(agent/parallel/claims.py) before it is started and released when it ends, so exactly
one process does it. A job another process holds waits; one whose holder
died is taken over and continued; one another process finished meanwhile is
left as it is. Seeds are computed once under their own lock (agent/job/seeds.py).
"""
from __future__ import annotations

import sys
import time
import traceback
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from agent.config import ConfigError, RunConfig
from agent.job.layout import DONE_ELSEWHERE, TAKEN_OVER, Job, identity_conflict, is_finished, job_key
from agent.job.parts import RunParts
from agent.job.replay import replay_task
from agent.job.seeds import Seeds
from agent.job.workflow import HALTED, refuse_job, run_task
from agent.models.halt import RUN_FATAL_KEY, Gate, RunHalted, run_gate
from agent.models.types import ModelSpec, RequestFatal, RunFatal
from agent.parallel.claims import Claims, Heartbeat, Lease
from agent.parallel.executor import Executor, unwrap_error
from agent.parallel.slots import serving

CLAIMS_FOLDER = ".claims"
HALT_GRACE_SEC = 10.0  # for jobs in flight to reach their next call once the run is halted
SeedKey = tuple[ModelSpec, int]
SeedStep = tuple[SeedKey, bool]  # (seed, with its feedback)


@dataclass(frozen=True)
class Plan:
    """Seeds to compute first and every level job; ``jobs`` whose seed is listed wait for its turn 0, those
    at one of ``feedback_levels`` for its feedback as well."""

    seeds: tuple[SeedKey, ...]
    jobs: tuple[Job, ...]
    feedback_levels: frozenset[int] = frozenset()


@dataclass
class RunStats:
    """What the driver learnt besides the outcomes."""

    seeds_computed: int = 0
    seed_errors: int = 0
    halted: str | None = None  # the run-fatal line that stopped the run (agent/models/halt.py)
    in_flight: int = 0  # jobs still running when the driver returned (a halted run's grace ran out)


def plan_run(cfg: RunConfig, task_indices: list[int]) -> Plan:
    """Every job of the (possibly swept) config; a seed for each (model, task) with an unfinished level."""
    jobs = tuple(Job(model=model, level=level, task_index=task)
                 for model in cfg.models for task in task_indices for level in cfg.guidance_levels)
    parts = RunParts(cfg)
    pending = (job for job in jobs if not is_finished(cfg, job))
    seeds = tuple(dict.fromkeys((job.model, job.task_index) for job in pending)) if parts.setting.shares_seed else ()
    policy = parts.policy
    return Plan(seeds=seeds, jobs=jobs,
                feedback_levels=frozenset(level for level in cfg.guidance_levels if policy.seed_feedback_for(level)))


def check_plan(cfg: RunConfig, plan: Plan) -> None:
    """Refuse, before any model call, a run whose stored jobs or seeds were made under another configuration
    (agent/job/fingerprint.py): one line naming the first such file and its changed keys, and how many others."""
    parts = RunParts(cfg)
    seeds = Seeds(cfg, parts)
    found = [line for job in plan.jobs if (line := identity_conflict(cfg, job, parts.fingerprint(job)))]
    if not cfg.overwrite:
        found += [line for model, task in plan.seeds if (line := seeds.conflict(model, task))]
    if found:
        others = f" ({len(found) - 1} other file(s) too)" if len(found) > 1 else ""
        raise ConfigError(found[0] + others)


def handoff(previous: dict[str, Any], since: float) -> str | None:
    """How a job's claim was won, from the claim it followed: from a holder that died (its turns are continued),
    from one that finished it while this run was going (its result stands), or plainly (None)."""
    if not previous:
        return None
    if not previous.get("released"):
        return TAKEN_OVER
    return DONE_ELSEWHERE if float(previous.get("released_at", 0.0)) >= since else None


def error_outcome(job: Job, exc: BaseException, context: str = "") -> dict[str, Any]:
    """The outcome of a job that raised (or whose seed raised): one-line error, traceback for the error log."""
    exc = unwrap_error(exc)
    first_line = (str(exc).strip().splitlines() or [""])[0]
    message = f"{context}{type(exc).__name__}: {first_line}".rstrip(": ")
    return {
        "task_index": job.task_index, "model": job.model.model, "level": job.level, "state": "error",
        "solved": False, "turns": 0, "best_rate": 0.0, "input_tokens": 0, "output_tokens": 0,
        "cost_usd": None, "api_calls": 0, "error": message, "cached_tokens": 0, "cache_write_tokens": 0,
        "cache_saved_usd": 0.0,
        "traceback": "".join(traceback.format_exception(exc)),
    }


def run_job(cfg: RunConfig, job: Job, report: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Worker side of a level job (module level, so every backend can ship it): the job, or with
    ``replay-feedback-level`` the release's replay of its stored turns."""
    run = replay_task if cfg.replay_feedback_level is not None else run_task
    return run(cfg, job, progress=report)


def ensure_seed(cfg: RunConfig, model: ModelSpec, task: int, *, feedback: bool = True) -> bool:
    """The turn-0 seed of (model, task), computed once (agent/job/seeds.py); True when this call computed it."""
    return Seeds(cfg, RunParts(cfg)).ensure(model, task, feedback=feedback)


def _seed_step(cfg: RunConfig, model: ModelSpec, task: int, with_feedback: bool) -> bool:
    """Worker side of a seed step: turn 0 alone, or (turn 0 and) its feedback."""
    return ensure_seed(cfg, model, task, feedback=with_feedback)


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

    ``on_poll`` is called every ``poll_sec`` at least (a progress display refreshes its counters). Once a
    provider refuses the run (agent/models/halt.py), nothing more starts; the jobs in flight get ``HALT_GRACE_SEC``
    to reach their next (refused) call, and ``stats.halted`` says why the run stopped.
    """
    heartbeat = Heartbeat(Claims(Path(cfg.output_dir) / CLAIMS_FOLDER))
    try:
        with serving(executor.slots), run_gate(cfg.output_dir) as gate:
            driver = _Driver(cfg, plan, executor, heartbeat, gate, on_outcome)
            return driver.drive(on_progress, on_poll, poll_sec)
    finally:
        heartbeat.close()


class _Driver:
    """The state of one run of a plan: what waits, what is ready, what runs, what came back."""

    def __init__(self, cfg: RunConfig, plan: Plan, executor: Executor, heartbeat: Heartbeat, gate: Gate,
                 on_outcome: Callable[[Job, dict], None]) -> None:
        self.cfg, self.plan, self.executor, self.heartbeat, self.gate = cfg, plan, executor, heartbeat, gate
        self.on_outcome = on_outcome
        self.stats = RunStats()
        self.since = time.time()
        self.leases: dict[Job, Lease] = {}
        self.held_elsewhere: deque[Job] = deque()
        self.announced: set[Job] = set()
        self.waiting: dict[SeedKey, list[Job]] = {key: [] for key in plan.seeds}
        self.ready: deque[Job] = deque()
        for job in plan.jobs:
            self.waiting.get((job.model, job.task_index), self.ready).append(job)
        self.steps: deque[SeedStep] = deque((key, False) for key in plan.seeds)
        self.feedback_steps: deque[SeedStep] = deque()  # served first: each releases the jobs waiting for it
        self.in_flight: dict[Future, Job | SeedStep] = {}
        self.outcomes: list[dict] = []
        self.computed: set[SeedKey] = set()

    def drive(self, on_progress: Callable[[Job, dict], None], on_poll: Callable[[], None],
              poll_sec: float) -> tuple[list[dict], RunStats]:
        send, drain = self.executor.channel()
        halted_at: float | None = None
        while self.in_flight or (not self.gate.closed and self.has_work()):
            if self.gate.closed:
                halted_at = halted_at or time.monotonic()
                if time.monotonic() - halted_at > HALT_GRACE_SEC:
                    break  # jobs still in a test run or a call: the caller cancels them
            else:
                self.start(send)
            if self.in_flight:
                done, _ = wait(self.in_flight, timeout=poll_sec, return_when=FIRST_COMPLETED)
            else:
                done = set()
                time.sleep(poll_sec)
            for job, message in drain():
                on_progress(job, message)
            on_poll()
            for future in done:
                self.settle(future)
        for job, message in drain():
            on_progress(job, message)
        self.stats.seeds_computed = len(self.computed)
        self.stats.halted = self.gate.reason
        self.stats.in_flight = len(self.in_flight)
        return self.outcomes, self.stats

    def has_work(self) -> bool:
        return bool(self.feedback_steps or self.steps or self.ready or self.held_elsewhere)

    def start(self, send: Any) -> None:
        """Submit seeds and ready jobs up to ``max_workers``; jobs another process holds are asked again."""
        self.ready.extend(self.held_elsewhere)  # asked again every round: its holder may have ended (or died)
        self.held_elsewhere.clear()
        while (len(self.in_flight) < self.cfg.max_workers and not self.gate.closed
               and (self.feedback_steps or self.steps or self.ready)):
            if self.feedback_steps or self.steps:
                (model, task), with_feedback = step = (self.feedback_steps or self.steps).popleft()
                self.in_flight[self.executor.submit(_seed_step, self.cfg, model, task, with_feedback)] = step
            elif (job := self.claim(self.ready.popleft())) is not None:
                self.in_flight[self.executor.submit(run_job, self.cfg, job, send.tagged(job))] = job

    def settle(self, future: Future) -> None:
        """A job's outcome, or a seed step's result; a run-fatal error (or a job halted by one) closes the gate."""
        item = self.in_flight.pop(future)
        error = future.exception()
        halt = halt_reason(error)
        if isinstance(item, Job):
            outcome = None if halt else error_outcome(item, error) if error else future.result()
            halt = halt or (outcome or {}).get(RUN_FATAL_KEY)
            if halt:
                self.gate.close(halt)
            if outcome is None or outcome["state"] == HALTED:
                self.release(item)  # left as it stands: the next run continues it
            else:
                self.finish(item, outcome)
            return
        key, with_feedback = item
        if halt:
            self.gate.close(halt)
            return
        if error is None and future.result():
            self.computed.add(key)
        self.seed_done(key, with_feedback, error)

    def release(self, job: Job) -> None:
        if job in self.leases:
            self.heartbeat.drop(self.leases.pop(job))

    def finish(self, job: Job, outcome: dict) -> None:
        self.release(job)
        self.outcomes.append(outcome)
        self.on_outcome(job, outcome)

    def claim(self, job: Job) -> Job | None:
        """The job, claimed by this process (None while another holds it: it waits in ``held_elsewhere``)."""
        cfg, claims = self.cfg, self.heartbeat.claims
        lease = claims.claim(job_key(cfg, job))
        if lease is None:
            self.held_elsewhere.append(job)
            if job not in self.announced:
                self.announced.add(job)
                holder = (claims.holder_of(job_key(cfg, job)) or {}).get("holder", {})
                print(f"{job_key(cfg, job)}: run by another process (pid {holder.get('pid')} on "
                      f"{holder.get('host')}); waiting for it", file=sys.stderr)
            return None
        self.heartbeat.hold(lease)
        self.leases[job] = lease
        return replace(job, handoff=handoff(lease.previous, self.since))

    def seed_done(self, key: SeedKey, with_feedback: bool, error: BaseException | None) -> None:
        """Release the jobs this step made ready; the feedback step follows turn 0 if some level shows it."""
        if error is not None:
            self.stats.seed_errors += 1
            refused = unwrap_error(error)
            for job in self.waiting.pop(key):
                self.finish(job, refuse_job(self.cfg, job, refused) if isinstance(refused, RequestFatal)
                            else error_outcome(job, error, context="turn-0 seed failed: "))
            return
        waiting = self.waiting[key]
        later = [] if with_feedback else [job for job in waiting if job.level in self.plan.feedback_levels]
        self.ready.extend(job for job in waiting if job not in later)
        if later:
            self.waiting[key] = later
            self.feedback_steps.append((key, True))
        else:
            del self.waiting[key]


def halt_reason(error: BaseException | None) -> str | None:
    """The run-fatal line a job's or seed's exception carries (None: it is not one)."""
    error = unwrap_error(error) if error is not None else None
    if isinstance(error, RunFatal):
        return str(error)
    if isinstance(error, RunHalted):
        return str(error) or "the run was stopped"
    return None
