"""One RECODE-H job, (code model, guidance level, task), from turn 0 to success or the last turn.

Turn 0 is shared by every level of a (setting, model, task): ``ensure_seed``
computes it once under a cross-process lock (code, test result and the RAW
feedback records) and each level formats those records at its own level.
Later turns: the Session's CodeAgent writes a submission on a private
repository copy, its HumanAgent tests it and, where agent/feedback_policy.py
says the turn gets feedback, asks the feedback source for records; the turn is
written atomically before the next begins, so a killed run resumes from its
last complete turn (agent memory, file, feedback and dynamic level come back
from the stored record). The dataset is only read.

A job stops early at a turn boundary, keeping its turns, when the feedback a
turn needs cannot be produced (outcome ``error``) or a spending cap is reached
(outcome ``budget``, agent/budget.py); metrics/run_status.py names how that is
recorded. The next run continues it: the missing feedback is asked again.

Stored work is never recomputed unless asked: a task with a result file is
skipped (``resume: false``, the release's default) or continued from its last
turn (``resume: true``); only ``overwrite: true`` starts it again, setting the
old file aside. Result files and seeds the release wrote are upgraded on load.

``replay-feedback-level: K`` is the release's replay: from each stored turn of
the level-K run, one new turn with that turn's raw feedback formatted at the
job's level (``replay_task``, one turn by ``replay_turn``). Our whole-run replay, a full run whose feedback
is level K's stored records, is ``replay-run-feedback-level: K``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from filelock import FileLock

from agent.agents import HumanAgent
from agent.budget import Ledger, Spend, job_spend, over_budget, run_over_budget, seed_spend
from agent.feedback import (
    FeedbackReply, FeedbackSource, FileFeedback, InteractiveFeedback, LLMFeedback, ReplayFeedback, format_feedback,
)
from agent.feedback_policy import FeedbackPolicy
from agent.models.build import InferenceError, ModelSpec, build_model
from agent.results import (
    ResultStore, load_seed, make_record, pass_rate, record_token_totals, release_execution,
    release_feedback_history, safe_model_name, save_seed, seed_path, token_lists, turn_solved, upgrade_record,
    usage_totals,
)
from agent.session import Attempt, Session, request_feedback
from metrics.run_status import BUDGET, FEEDBACK_MISSING, STOP_KEY
from agent.tempdirs import private_dir
from agent.web import WebFeedback
from agent.dataset import DatasetManager

if TYPE_CHECKING:
    from agent.config import RunConfig

NO_FEEDBACK = FeedbackReply([], "none")

@dataclass(frozen=True)
class Job:
    model: ModelSpec
    level: int
    task_index: int


def result_folder(cfg: RunConfig, model: ModelSpec, level: int) -> Path:
    """``<output_dir>/<setting>_<model>_feedback_<type>_guidance_<level>`` (the release's layout).

    Runs whose feedback does not come from the feedback model get a suffix
    (``_replay<K>`` for ``replay-run-feedback-level``, ``_source_file``,
    ``_source_interactive``) so they never mix with, or get skipped as finished
    because of, the ordinary run of that level. The release's replay writes its
    own file name into the ordinary folder (see ``replay_task``).
    """
    name = f"{cfg.evaluation_setting}_{safe_model_name(model.model)}_feedback_{cfg.guidance_type}_guidance_{level}"
    if cfg.replay_run_feedback_level is not None:
        name += f"_replay{cfg.replay_run_feedback_level}"
    if cfg.feedback_source != "llm":
        name += f"_source_{cfg.feedback_source}"
    return Path(cfg.output_dir) / name


def job_store(cfg: RunConfig, job: Job) -> ResultStore:
    """Where the job's records go: the result file, or the release replay file of the folder."""
    return ResultStore(result_folder(cfg, job.model, job.level), job.task_index,
                       replay_level=cfg.replay_feedback_level)


def _store_finished(store: ResultStore, max_turn: int) -> bool:
    """Our state file decides; a release file (no state) is finished when solved or at the last turn."""
    state = store.state()
    if state is not None:
        return bool(state.get("finished"))
    turns = store.load()
    return bool(turns) and (len(turns) >= max_turn or turn_solved(turns[-1].get("execution_result") or {}))


def skip_reason(cfg: RunConfig, job: Job) -> str | None:
    """Why the job is not run now: stored work is kept unless ``overwrite`` asks to recompute it."""
    store = job_store(cfg, job)
    if cfg.overwrite or not store.result_path.exists():
        return None
    if _store_finished(store, cfg.max_turn):
        return "finished"
    stopped = (store.state() or {}).get(STOP_KEY) is not None  # not the user's choice: it continues
    return None if cfg.resume or stopped else "partial (set resume: true to continue it)"


def is_finished(cfg: RunConfig, job: Job) -> bool:
    """True when the job will be skipped (its stored work stands)."""
    return skip_reason(cfg, job) is not None


def raise_level(level: int, rate: float, best_before: float, max_level: int) -> int:
    """Dynamic guidance: one level more after a turn that did not beat the best pass rate so far."""
    return max(level, min(level + 1, max_level)) if rate <= best_before else level


class _Meter:
    """Usage of the calls THIS invocation made (a reused seed or resumed turns cost nothing now)."""

    def __init__(self) -> None:
        self.usage: list[dict] = []
        self._reported = 0

    def add(self, usage: list[dict]) -> None:
        self.usage.extend(usage)

    def cost_since_last(self) -> float | None:
        fresh, self._reported = self.usage[self._reported:], len(self.usage)
        return usage_totals(fresh)[2]


def _feedback_fields(reply: FeedbackReply, level: int | None, text: str) -> dict:
    """The feedback part of a turn record: release-typed keys and ours."""
    fb_in, fb_out = token_lists(reply.usage)
    return {"feedback_items": reply.records, "feedback_usage": reply.usage,
            "feedback_interaction_history": release_feedback_history(reply.history, reply.records, reply.source),
            "feedback_conversation": reply.history, "feedback_input_token": fb_in, "feedback_output_token": fb_out,
            "feedback_cost_usd": usage_totals(reply.usage)[2], "feedback_source": reply.source,
            "feedback_error": reply.error, "guidance_level": level, "feedback_text": text,
            STOP_KEY: FEEDBACK_MISSING if reply.error else None}


def _finished_record(fields: dict) -> dict:
    return make_record(**{**fields, "token_totals": record_token_totals(fields)})


def _record(task_index: int, attempt: Attempt, reply: FeedbackReply, level: int | None, text: str) -> dict:
    code_in, code_out = token_lists(attempt.result.usage)
    return _finished_record({
        "task_index": task_index, "turn_number": attempt.turn, "code_input_tokens": code_in,
        "code_output_tokens": code_out, "final_code": attempt.result.code, "agent_memory": attempt.result.memory,
        "code_interaction_history": attempt.result.history,
        "execution_result": release_execution(attempt.execution), "status": attempt.execution.get("status"),
        "test_digest": attempt.digest, "wall_time_sec": round(time.monotonic() - attempt.started, 3),
        "code_usage": attempt.result.usage, "code_cost_usd": usage_totals(attempt.result.usage)[2],
        "actions": attempt.result.actions, **_feedback_fields(reply, level, text),
    })


def _with_feedback(record: dict, reply: FeedbackReply, level: int | None, text: str) -> dict:
    return _finished_record({**record, **_feedback_fields(reply, level, text)})


def _llm_source(cfg: RunConfig) -> LLMFeedback | None:
    if cfg.feedback_model is None:
        return None
    return LLMFeedback(build_model(cfg.feedback_model, prices=cfg.prices, cache_path=cfg.cache_path))


def _source(cfg: RunConfig, job: Job) -> FeedbackSource | None:
    """The run's feedback source: llm (optionally replaying level K's records), file, interactive or web."""
    if cfg.feedback_source == "web":
        return WebFeedback(result_folder(cfg, job.model, job.level).name, job.model.model, cfg.output_dir, cfg.web_port)
    if cfg.feedback_source == "file":
        return FileFeedback(cfg.feedback_file)
    if cfg.feedback_source == "interactive":
        return InteractiveFeedback()
    llm = _llm_source(cfg)
    level = cfg.replay_run_feedback_level
    if level is None:
        return llm
    replay_cfg = replace(cfg, replay_run_feedback_level=None)
    turns = [upgrade_record(t, level=level) for t in
             ResultStore(result_folder(replay_cfg, job.model, level), job.task_index).load()]
    return ReplayFeedback({t["turn_number"]: t["feedback_items"] for t in turns}, level,
                          llm or _missing_feedback_model)


def _missing_feedback_model(request) -> FeedbackReply:
    return FeedbackReply([], "none", error="no feedback model is configured to stand in; set human-api-provider "
                                           "and human-agent-model")


# ---------------------------------------------------------------------- turn-0 seeds

def _seed_ready(seed: dict | None, need_feedback: bool, retry_failed: bool) -> bool:
    """The seed exists with the feedback asked for, or (``retry_failed`` False) its feedback already failed."""
    if seed is None or not need_feedback or seed["record"]["feedback_items"] is not None:
        return seed is not None
    return not retry_failed and seed["record"]["feedback_error"] is not None


def _seed_location(cfg: RunConfig, model: ModelSpec, task_index: int) -> tuple[Path, tuple[str, ...]]:
    """The seed file of (model, task) and the task's test cases (a release seed's digest is rebuilt with them)."""
    path = seed_path(cfg.init_seed_dir, model.model, task_index, cfg.evaluation_setting)
    return path, DatasetManager(cfg.work_dir).get(task_index).test_cases


def _seed(cfg: RunConfig, model: ModelSpec, task_index: int, need_feedback: bool,
          retry_failed: bool) -> tuple[dict, bool]:
    """The seed of (setting, model, task) and whether this call computed (part of) it.

    The check is repeated under the lock, so racing processes compute it once.
    The usage of its calls waits in ``unclaimed_usage`` for the first level job
    that uses the seed, so each call is counted in exactly one outcome. Turn 0
    is saved before its feedback is asked, so a failing feedback model never
    costs the code model's turn again, and the levels that do not show the
    seed's feedback can start from it meanwhile: claiming usage takes a lock of
    its own (``_claim_lock``), not the one held while the feedback model
    answers. Feedback that failed is asked again only with ``retry_failed``
    (the seed job of a run), not once more by every level.
    """
    path, cases = _seed_location(cfg, model, task_index)
    seed = load_seed(path, cfg.evaluation_setting, cases)
    if _seed_ready(seed, need_feedback, retry_failed):
        return seed, False
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_suffix(".lock"))):
        seed = load_seed(path, cfg.evaluation_setting, cases)
        if _seed_ready(seed, need_feedback, retry_failed):
            return seed, False
        if seed is None:
            seed = _new_seed(cfg, model, task_index, path.parent / "reports")
            save_seed(path, seed)
        if need_feedback and seed["record"]["feedback_items"] is None:
            seed, usage = _seed_feedback(cfg, task_index, seed)
            with _claim_lock(path):  # a level may have claimed turn 0's usage while the feedback model answered
                unclaimed = load_seed(path, cfg.evaluation_setting, cases)["unclaimed_usage"]
                seed = {**seed, "unclaimed_usage": unclaimed + usage}
                save_seed(path, seed)
    if cfg.max_cost_usd is not None:
        Ledger(cfg.output_dir).record(_seed_key(path), seed_spend(seed))
    return seed, True


def _claim_lock(path: Path) -> FileLock:
    """Guards the seed's unclaimed usage, held only for a read and a write (never across a model call)."""
    return FileLock(str(path.with_suffix(".claim.lock")))


def _seed_key(path: Path) -> str:
    return f"seed/{path.name}"


def start_ledger(cfg: RunConfig, jobs: tuple[Job, ...] | list[Job]) -> None:
    """With ``max-cost-usd``: the run's cost ledger, from what its jobs and seeds spent in earlier invocations."""
    if cfg.max_cost_usd is None:
        return
    entries: dict[str, Spend] = {}
    for job in jobs:
        path, cases = _seed_location(cfg, job.model, job.task_index)
        turns = [upgrade_record(t, level=job.level, test_cases=cases) for t in job_store(cfg, job).load()]
        entries[_job_key(cfg, job)] = job_spend(turns, without_seed=True)
        seed = load_seed(path, cfg.evaluation_setting, cases)
        if seed is not None:
            entries[_seed_key(path)] = seed_spend(seed)
    Ledger(cfg.output_dir).reset(entries)


def _new_seed(cfg: RunConfig, model: ModelSpec, task_index: int, reports: Path) -> dict:
    """Turn 0 with no feedback yet (``feedback_items`` None marks feedback as not computed)."""
    with private_dir("seed") as tmp:
        session = Session(cfg, _code_model(cfg, model), task_index, tmp, None)
        attempt = session.attempt(0, "", "", reports / f"task_{task_index}_turn_0.xml")
    record = {**_record(task_index, attempt, NO_FEEDBACK, None, ""), "feedback_items": None,
              "feedback_source": "pending"}
    return {"setting": cfg.evaluation_setting, "feedback_model": None, "unclaimed_usage": attempt.result.usage,
            "record": record}


def _seed_feedback(cfg: RunConfig, task_index: int, seed: dict) -> tuple[dict, list[dict]]:
    """The seed with its raw turn-0 feedback (none when turn 0 already solved the task), and the usage of
    the calls made for it (not yet among the seed's unclaimed usage).

    Feedback that could not be produced leaves ``feedback_items`` None (still to
    compute) with the reason in ``feedback_error``; the failed calls stay counted.
    """
    record = seed["record"]
    reply = NO_FEEDBACK
    if not turn_solved(record["execution_result"]):
        human = HumanAgent(DatasetManager(cfg.work_dir), task_index, cfg.runner, _llm_source(cfg))
        reply = request_feedback(human, turn=0, level=max(cfg.guidance_levels), code=record["final_code"],
                                 previous_code="", digest=record["test_digest"])
    failed = record["feedback_usage"] if record["feedback_items"] is None else []
    updated = _with_feedback(record, replace(reply, usage=failed + reply.usage), None, "")
    if reply.error:
        updated = {**updated, "feedback_items": None, "feedback_source": "pending"}
    return {**seed, "feedback_model": cfg.feedback_model.model if cfg.feedback_model else None,
            "record": updated}, reply.usage


def ensure_seed(cfg: RunConfig, model: ModelSpec, task_index: int, *, feedback: bool = True) -> bool:
    """Create the turn-0 seed of (model, task) once; True when this call computed (part of) it.

    ``feedback`` False: turn 0 only, enough for the levels that do not show
    the seed's feedback (the scheduler starts them before the feedback exists).
    Not needed by the release's replay (it starts from stored turns), nor when
    every level of the run continues or keeps stored turns (unless one stopped
    at turn 0 for want of the seed's feedback: this is where it is asked again),
    nor once the run's budget is spent."""
    if cfg.replay_feedback_level is not None or run_over_budget(cfg) is not None:
        return False
    stores = [job_store(cfg, Job(model, level, task_index)) for level in cfg.guidance_levels]
    if not cfg.overwrite and all(store.result_path.exists() and not _stopped_at_turn_zero(store) for store in stores):
        return False
    need_feedback = feedback and FeedbackPolicy.of(cfg).seed_needs_feedback()
    return _seed(cfg, model, task_index, need_feedback, retry_failed=True)[1]


def _stopped_at_turn_zero(store: ResultStore) -> bool:
    state = store.state() or {}
    return state.get(STOP_KEY) == FEEDBACK_MISSING and state.get("turns") == 1


def _claim_seed_usage(cfg: RunConfig, model: ModelSpec, task_index: int, meter: _Meter) -> None:
    """Move the seed's not-yet-counted usage into this job's meter (once, under the seed's lock)."""
    path, cases = _seed_location(cfg, model, task_index)
    with _claim_lock(path):
        seed = load_seed(path, cfg.evaluation_setting, cases)
        if seed is None or not seed["unclaimed_usage"]:
            return
        save_seed(path, {**seed, "unclaimed_usage": []})
    meter.add(seed["unclaimed_usage"])


# ---------------------------------------------------------------------- one level job

def _code_model(cfg: RunConfig, model: ModelSpec):
    return build_model(model, prices=cfg.prices, cache_path=cfg.cache_path)


def _gives_feedback(cfg: RunConfig, level: int, execution: dict, turn: int) -> bool:
    return FeedbackPolicy.of(cfg).gives_feedback(level, turn_solved(execution), turn)


def _done(cfg: RunConfig, turns: list[dict]) -> bool:
    return len(turns) >= cfg.max_turn or turn_solved(turns[-1]["execution_result"])


def _first_turn(cfg: RunConfig, job: Job, session: Session, meter: _Meter) -> dict:
    """Turn 0 from the shared seed, its raw records formatted at this job's level."""
    from_seed = FeedbackPolicy.of(cfg).seed_feedback_for(job.level)
    seed, _ = _seed(cfg, job.model, job.task_index, need_feedback=from_seed, retry_failed=False)
    _claim_seed_usage(cfg, job.model, job.task_index, meter)
    record = seed["record"]
    reply = NO_FEEDBACK
    if _gives_feedback(cfg, job.level, record["execution_result"], 0):
        if from_seed and seed["feedback_model"] in (None, cfg.feedback_model.model):  # None: a release seed
            reply = FeedbackReply(record["feedback_items"] or [], "seed", record["feedback_usage"],
                                  record["feedback_conversation"] or record["feedback_interaction_history"],
                                  record["feedback_error"])
        else:  # file, interactive or replayed feedback, or a seed made with another feedback model
            reply = session.feedback(turn=0, level=job.level, code=record["final_code"], previous_code="",
                                     digest=record["test_digest"])
            meter.add(reply.usage)
    return _with_feedback(record, reply, job.level, format_feedback(reply.records, job.level))


def _next_turn(cfg: RunConfig, job: Job, session: Session, turns: list[dict], reports: Path,
               meter: _Meter) -> dict:
    """One more turn after ``turns[-1]``: attempt, tests, dynamic level, feedback."""
    last = turns[-1]
    session.restore(last)
    attempt = session.attempt(len(turns), last["test_digest"], last["feedback_text"],
                              reports / f"task_{job.task_index}_turn_{len(turns)}.xml")
    meter.add(attempt.result.usage)
    level = last["guidance_level"]
    if cfg.guidance_type == "dynamic":
        n_cases = len(session.meta.test_cases)
        best = max(pass_rate(t["execution_result"], n_cases) for t in turns)
        level = raise_level(level, pass_rate(attempt.execution, n_cases), best, cfg.max_guidance_level)
    reply = NO_FEEDBACK
    if _gives_feedback(cfg, level, attempt.execution, attempt.turn):
        reply = session.feedback_on(attempt, level)
        meter.add(reply.usage)
    return _record(job.task_index, attempt, reply, level, format_feedback(reply.records, level))


def _outcome(cfg: RunConfig, job: Job, turns: list[dict], meter: _Meter, state: str,
             error: str | None = None, stop_reason: str | None = None) -> dict:
    n_cases = len(DatasetManager(cfg.work_dir).get(job.task_index).test_cases) if turns else 0
    tokens_in, tokens_out, cost = usage_totals(meter.usage)
    return {
        "task_index": job.task_index, "model": job.model.model, "level": job.level, "state": state,
        "solved": any(turn_solved(t["execution_result"]) for t in turns), "turns": len(turns),
        "best_rate": max((pass_rate(t["execution_result"], n_cases) for t in turns), default=0.0),
        "input_tokens": tokens_in, "output_tokens": tokens_out, "cost_usd": cost,
        "api_calls": sum(1 for u in meter.usage if not u.get("from_cache")), "error": error,
        STOP_KEY: stop_reason, "unpriced_calls": sum(1 for u in meter.usage if u.get("cost_usd") is None),
    }


def _stored_turns(cfg: RunConfig, store: ResultStore) -> list[dict]:
    """What the job continues from: the stored turns when resuming, else nothing (overwrite sets them aside)."""
    if cfg.overwrite:
        store.set_aside()
        return []
    return store.load()


def run_task(cfg: RunConfig, job: Job, *, progress: Callable[[dict], None] | None = None) -> dict:
    """Run, resume or skip one job; failures end as an "error" outcome (and state), never an exception."""
    if cfg.replay_feedback_level is not None:
        return replay_task(cfg, job, progress=progress)
    store = job_store(cfg, job)
    meter = _Meter()
    turns: list[dict] = []

    def save() -> None:
        store.save(turns, finished=_done(cfg, turns))
        if progress is not None:
            progress({"cost_usd": meter.cost_since_last(), "turn": turns[-1]["turn_number"]})

    try:
        if (why := skip_reason(cfg, job)) is not None:
            return _outcome(cfg, job, store.load(), meter, "skipped", None if why == "finished" else why)
        turns = _stored_turns(cfg, store)
        if (why := over_budget(cfg, _job_key(cfg, job), turns)) is not None:
            return _stopped(cfg, job, store, turns, meter, BUDGET, why)
        with private_dir("task") as tmp:
            session = Session(cfg, _code_model(cfg, job.model), job.task_index, tmp, _source(cfg, job))
            turns = session.upgraded(turns, job.level)
            if turns and turns[-1][STOP_KEY] is not None:
                turns[-1] = _unstopped(cfg, job, session, turns, meter)
                save()
            while not turns or not (_done(cfg, turns) or turns[-1][STOP_KEY]):
                if turns and (why := over_budget(cfg, _job_key(cfg, job), turns)) is not None:
                    turns[-1] = {**turns[-1], STOP_KEY: BUDGET}
                    save()
                    return _stopped(cfg, job, store, turns, meter, BUDGET, why)
                turns.append(_next_turn(cfg, job, session, turns, store.report_dir, meter) if turns
                             else _first_turn(cfg, job, session, meter))
                save()
        if turns[-1][STOP_KEY] == FEEDBACK_MISSING:
            over_budget(cfg, _job_key(cfg, job), turns)  # keeps the run's ledger up to date
            why = f"feedback missing at turn {turns[-1]['turn_number']}: {turns[-1]['feedback_error']}"
            return _stopped(cfg, job, store, turns, meter, FEEDBACK_MISSING, why)
        store.mark(finished=True, error=None, turns=len(turns))
        return _outcome(cfg, job, turns, meter, "finished")
    except Exception as exc:  # a days-long sweep must outlive any one task; the state file keeps why
        return _failed(cfg, job, store, turns, meter, exc)


def _job_key(cfg: RunConfig, job: Job) -> str:
    """The job's entry in the run's cost ledger."""
    store = job_store(cfg, job)
    return f"{store.folder.name}/{store.result_path.name}"


def _unstopped(cfg: RunConfig, job: Job, session: Session, turns: list[dict], meter: _Meter) -> dict:
    """The last stored turn of a job that stopped early, made ready to continue.

    A budget stop only needs its mark cleared. Missing feedback is asked for
    again; the calls that failed before stay counted in ``feedback_usage``.
    """
    last = turns[-1]
    if last[STOP_KEY] != FEEDBACK_MISSING:
        return {**last, STOP_KEY: None}
    if last["turn_number"] == 0:
        return _first_turn(cfg, job, session, meter)
    level = last["guidance_level"]
    reply = session.feedback(turn=last["turn_number"], level=level, code=last["final_code"],
                             previous_code=turns[-2]["final_code"], digest=last["test_digest"])
    meter.add(reply.usage)
    reply = replace(reply, usage=last["feedback_usage"] + reply.usage)
    return _with_feedback(last, reply, level, format_feedback(reply.records, level))


def _stopped(cfg: RunConfig, job: Job, store: ResultStore, turns: list[dict], meter: _Meter, reason: str,
             why: str) -> dict:
    """A job ended early at a turn boundary: saved turns stand, the state says why, a rerun continues it."""
    store.mark(finished=False, error=why, turns=len(turns), stop_reason=reason)
    return _outcome(cfg, job, turns, meter, "budget" if reason == BUDGET else "error", why, reason)


def _failed(cfg: RunConfig, job: Job, store: ResultStore, turns: list[dict], meter: _Meter,
            exc: Exception) -> dict:
    if isinstance(exc, InferenceError) and exc.usage is not None:
        meter.add([exc.usage.to_dict()])
    message = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
    store.mark(finished=False, error=message, turns=len(turns))
    return _outcome(cfg, job, turns, meter, "error", message)


# ---------------------------------------------------------------------- the release's replay

def replay_turn(session: Session, stored: dict, records: list[dict], level: int, source: str,
                report: Path) -> dict:
    """The release's replay of one stored turn: its state restored (file, memory), ``records``
    shown formatted at ``level``, ONE new turn and its tests; the new turn's record.

    ``source`` names where the shown records came from (``feedback_source`` of the
    record). The main job's replay and the ablations take their turns here.
    """
    session.restore(stored)
    turn = stored["turn_number"] + 1
    attempt = session.attempt(turn, stored["test_digest"], format_feedback(records, level), report)
    return _record(session.index, attempt, FeedbackReply([], source), level, "")


def replay_task(cfg: RunConfig, job: Job, *, progress: Callable[[dict], None] | None = None) -> dict:
    """``replay-feedback-level: K``: one new turn from each unsolved stored turn of the level-K run.

    Record n of ``task_<id>_result_replay_level<K>.pkl`` (in this level's folder)
    continues stored turn n; it is written after each turn, so a rerun resumes.
    A turn that got no feedback by design (the last turn of a run) and holds
    none is not replayed: at a level above 0 its replay would be a level-0 turn.
    """
    level = cfg.replay_feedback_level
    store = job_store(cfg, job)
    source = ResultStore(result_folder(replace(cfg, replay_feedback_level=None), job.model, level), job.task_index)
    meter = _Meter()
    records: list[dict] = []
    try:
        if (why := skip_reason(cfg, job)) is not None:
            return _outcome(cfg, job, store.load(), meter, "skipped", None if why == "finished" else why)
        with private_dir("replay") as tmp:
            session = Session(cfg, _code_model(cfg, job.model), job.task_index, tmp, None)
            policy = FeedbackPolicy.of(cfg)
            stored = [t for t in session.upgraded(source.load(), level) if not turn_solved(t["execution_result"])
                      and (job.level == 0 or t["feedback_items"] or t["feedback_error"]
                           or policy.gives_feedback(t["guidance_level"], False, t["turn_number"]))]
            if not stored:
                raise FileNotFoundError(f"no unsolved turn of level {level} to replay in {source.result_path}; "
                                        f"run guidance-level {level} first")
            records = _stored_turns(cfg, store)
            for turn in stored[len(records):]:
                if job.level > 0 and turn["feedback_error"]:
                    why = (f"turn {turn['turn_number']} of level {level} has no feedback to replay "
                           f"({turn['feedback_error']}); run guidance-level {level} again to produce it")
                    return _stopped(cfg, job, store, records, meter, FEEDBACK_MISSING, why)
                if (why := over_budget(cfg, _job_key(cfg, job), records)) is not None:
                    return _stopped(cfg, job, store, records, meter, BUDGET, why)
                report = store.report_dir / f"task_{job.task_index}_turn_{turn['turn_number'] + 1}.xml"
                records.append(replay_turn(session, turn, turn["feedback_items"], job.level,
                                           f"replay:L{level}", report))
                meter.add(records[-1]["code_usage"])
                store.save(records, finished=len(records) == len(stored))
                if progress is not None:
                    progress({"cost_usd": meter.cost_since_last(), "turn": records[-1]["turn_number"]})
        store.mark(finished=True, error=None, turns=len(records))
        return _outcome(cfg, job, records, meter, "finished")
    except Exception as exc:  # as in run_task: the state file keeps why
        return _failed(cfg, job, store, records, meter, exc)
