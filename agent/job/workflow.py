"""One RECODE-H job, (code model, guidance level, task), from turn 0 to success or the last turn.

``JobRun.run`` is the whole story: resume, then while the job is not done:
check the budget, attempt a turn, pick its level, get its feedback, record
it, save. Turn 0 comes from the shared seed where the setting shares it
(agent/job/seeds.py). A turn is written atomically before the next begins, so a
killed run resumes from its last complete turn. The dataset is only read.

A job stops early at a turn boundary, keeping its turns, when the feedback a
turn needs cannot be produced (``feedback_missing``) or a spending cap is
reached (``budget``, agent/job/budget.py); metrics/run_status.py names how that is
recorded, and the next run continues it. Stops are exceptions caught in one
place. Which stored jobs a run leaves alone is agent/job/layout.py; the release's
replay (``replay-feedback-level``) is agent/job/replay.py.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from agent.common.tempdirs import private_dir
from agent.feedback.guidance import raise_level
from agent.feedback.records import NO_FEEDBACK, FeedbackReply
from agent.job.budget import Ledger, job_spend, over_budget, seed_spend
from agent.job.layout import Job, identity_conflict, job_key, job_store, resend_keys, skip_reason
from agent.job.parts import RunParts
from agent.job.record import PENDING, cache_totals, pass_rate, turn_record, turn_solved, usage_totals, with_feedback
from agent.job.results import ResultError
from agent.job.seeds import Seeds, seed_key
from agent.models.halt import RUN_FATAL_KEY, RunHalted
from agent.models.types import InferenceError, RequestFatal, RunFatal
from agent.protocols.base import FeedbackShown, TurnInput
from metrics.result_format import STOP_KEY
from metrics.run_status import BUDGET, FEEDBACK_MISSING, TAMPERED, TAMPERED_STOP

if TYPE_CHECKING:
    from agent.config import RunConfig

__all__ = ["HALTED", "REFUSED", "Job", "JobRun", "run_task", "start_ledger"]

HALTED = "halted"  # outcome state of a job the run stopped under (agent/models/halt.py): resumable, not failed
REFUSED = "refused"  # outcome state of a job whose request the provider refuses as sent (RequestFatal)


class Stopped(Exception):
    """A job ends here on purpose: skipped (stored work stands) or stopped early (feedback, budget)."""

    def __init__(self, state: str, why: str | None, reason: str | None = None) -> None:
        super().__init__(why)
        self.state, self.why, self.reason = state, why, reason


@dataclass
class TurnState:
    """Where the job stands: its turns, and what the next turn starts from."""

    turns: list[dict]
    level: int
    shown: TurnInput
    max_turn: int

    @property
    def turn(self) -> int:
        return len(self.turns)

    @property
    def done(self) -> bool:
        return finished(self.turns, self.max_turn)


def finished(turns: list[dict], max_turn: int) -> bool:
    """A job is done once a turn solved the task or every turn has been taken."""
    return bool(turns) and (len(turns) >= max_turn or turn_solved(turns[-1]["execution_result"]))


@dataclass
class Meter:
    """Usage of the calls THIS invocation made (a reused seed or resumed turns cost nothing now)."""

    usage: list[dict] = field(default_factory=list)
    reported: int = 0

    def add(self, usage: list[dict]) -> None:
        self.usage.extend(usage)

    def cost_since_last(self) -> float | None:
        fresh, self.reported = self.usage[self.reported:], len(self.usage)
        return usage_totals(fresh)[2]


class JobRun:
    """One job of a run configuration."""

    def __init__(self, cfg: RunConfig, job: Job, progress: Callable[[dict], None] | None = None) -> None:
        self.cfg, self.job, self.progress = cfg, job, progress
        self.parts = RunParts(cfg)
        self.seeds = Seeds(cfg, self.parts)
        self.fingerprint = self.parts.fingerprint(job)
        self.store = job_store(cfg, job, self.fingerprint)
        self.meter = Meter()
        self.turns: list[dict] = []
        self.seed_model: str | None = None  # the feedback model of the seed this job's turn 0 came from
        self.n_cases = len(self.parts.dataset.get(job.task_index).test_cases)

    def run(self) -> dict:
        """Resume, then turn after turn until solved or out of turns; every stop is one exception."""
        if (refused := identity_conflict(self.cfg, self.job, self.fingerprint)) is not None:
            return self.outcome("error", f"{ResultError.__name__}: {refused}")  # its files stay as they are
        with contextlib.ExitStack() as scope:
            try:
                state = self.resume(scope)
                while not state.done:
                    self.check_budget()
                    turn = self.attempt(state)
                    level = self.level(state, turn)
                    reply = NO_FEEDBACK if self.ends_job(turn) else self.feedback(state, turn, level)
                    state = self.save(state, self.record(turn, reply, level))
                    self.check_turn(reply)
                self.store.mark(finished=True, error=None, turns=self.turns)
                return self.outcome("finished")
            except Stopped as stop:
                return self.stopped(stop)
            except RequestFatal as exc:
                return self.stopped(refusal(exc, "code model"))
            except (RunFatal, RunHalted) as exc:
                return self.halted(exc)
            except Exception as exc:  # a days-long sweep must outlive any one task; the state file keeps why
                return self.failed(exc)

    # ------------------------------------------------------------ the steps of the story

    def resume(self, scope: contextlib.ExitStack) -> TurnState:
        """The stored turns this job continues from (none when it starts, or with ``overwrite``); a turn that
        stopped for want of feedback gets it now."""
        if (why := skip_reason(self.cfg, self.job)) is not None:
            self.turns = self.store.load()
            raise Stopped("skipped", None if why == "finished" else why)
        if self.cfg.overwrite:
            self.store.set_aside()
        else:
            self.turns = self.parts.load(self.store, self.job.level)
        tmp = scope.enter_context(private_dir("task"))
        self.session = self.parts.session(self.job.model, self.job.task_index, tmp, self.parts.source(self.job))
        if self.turns:
            self.session.restore(self.turns[-1])
        if self.turns and self.stopped_short(self.turns[-1]):
            self.turns[-1] = self.unstop(self.turns[-1])
            self._save_turns()
            last = self.turns[-1]
            if last["feedback_error"]:
                self.check_turn(FeedbackReply([], last["feedback_source"], error=last["feedback_error"],
                                              refused=refused_reason(last)))
        return self.state_of(self.turns)

    def check_turn(self, reply: FeedbackReply) -> None:
        """Stop after a saved turn whose feedback could not be produced (or was refused as sent), or whose
        verdict is ``tampered`` under ``on-tampered: stop`` (no later turn is paid for)."""
        last = self.turns[-1]
        if reply.error:
            if reply.refused:
                raise Stopped(REFUSED, f"feedback refused at turn {last['turn_number']}: {reply.error}",
                              reply.refused)
            raise Stopped("error", f"feedback missing at turn {last['turn_number']}: {reply.error}",
                          FEEDBACK_MISSING)
        if self.ends_job(last):
            self.turns[-1] = {**last, STOP_KEY: TAMPERED_STOP}
            self._save_turns()
            raise Stopped(TAMPERED, f"tampered at turn {last['turn_number']}: {tamper_line(last)}", TAMPERED_STOP)

    def ends_job(self, turn: dict) -> bool:
        """A turn graded tampered ends its job under ``on-tampered: stop``; its feedback is not asked."""
        return turn["status"] == TAMPERED and self.cfg.on_tampered == "stop"

    def check_budget(self) -> None:
        if (why := over_budget(self.cfg, job_key(self.cfg, self.job), self.turns)) is not None:
            if self.turns:
                self.turns[-1] = {**self.turns[-1], STOP_KEY: BUDGET}
                self._save_turns()
            raise Stopped("budget", why, BUDGET)

    def attempt(self, state: TurnState) -> dict:
        """The turn's record before its feedback: the shared seed's turn 0, or a new attempt."""
        if state.turn == 0 and self.parts.setting.shares_seed:
            record = self.seed()
            self.session.restore(record)
            return record
        report = self.store.report_dir / f"task_{self.job.task_index}_turn_{state.turn}.xml"
        attempt = self.session.attempt(state.shown, report)
        self.meter.add(attempt.result.usage)
        return turn_record(self.job.task_index, attempt, NO_FEEDBACK, None, "", self.parts.protocol.name,
                           self.parts.protocol.record_code(attempt.result.code))

    def level(self, state: TurnState, turn: dict) -> int:
        """The level the turn's feedback is shown at; dynamic guidance raises it after a turn that did not beat
        the best pass rate so far."""
        if self.cfg.guidance_type != "dynamic" or not state.turns:
            return state.level
        best = max(pass_rate(t["execution_result"], self.n_cases) for t in state.turns)
        return raise_level(state.level, pass_rate(turn["execution_result"], self.n_cases), best,
                           self.cfg.max_guidance_level)

    def feedback(self, state: TurnState, turn: dict, level: int) -> FeedbackReply:
        """The turn's raw feedback: the seed's where turn 0 takes it from the seed, none where the policy gives
        none, else the source's answer. A seed's failed feedback stops a level that shows it (the seed job of the
        next run asks again), never a level that only copies it."""
        number, solved = turn["turn_number"], turn_solved(turn["execution_result"])
        gives = self.parts.policy.gives_feedback(level, solved, number)
        if number == 0 and self.parts.setting.shares_seed and self.parts.policy.seed_feedback_for(level) \
                and self._seed_made_by_this_feedback_model():
            reply = FeedbackReply(turn["feedback_items"] or [], "seed", turn["feedback_usage"],
                                  turn["feedback_conversation"] or turn["feedback_interaction_history"],
                                  turn["feedback_error"], refused=refused_reason(turn),
                                  unusable=[entry for entry in turn["answer_stops"] if entry["role"] == "feedback"])
            return reply if gives or not reply.error else NO_FEEDBACK
        if not gives:
            return NO_FEEDBACK
        self._save_turns(state.turns + [{**turn, "feedback_source": PENDING, "guidance_level": level}])
        previous = state.turns[-1]["final_code"] if state.turns else ""
        reply = self.session.feedback(turn=number, level=level, code=turn["final_code"], previous_code=previous,
                                      execution=turn["execution_result"])
        self.meter.add(reply.usage)
        return reply

    def record(self, turn: dict, reply: FeedbackReply, level: int) -> dict:
        text = self.parts.protocol.feedback_text(reply.records, level) if reply.source != "none" else ""
        return with_feedback(turn, reply, level, text)

    def save(self, state: TurnState, record: dict) -> TurnState:
        self.turns = state.turns + [record]
        self._save_turns()
        if self.progress is not None:
            self.progress({"cost_usd": self.meter.cost_since_last(), "turn": record["turn_number"]})
        return self.state_of(self.turns)

    # ------------------------------------------------------------ parts

    def state_of(self, turns: list[dict]) -> TurnState:
        """What the turn after ``turns`` starts from, from their data (never from their texts)."""
        last = turns[-1] if turns else None
        shown = None
        if last is not None and last["feedback_source"] not in ("none", PENDING) and not last["feedback_error"]:
            shown = FeedbackShown(last["feedback_items"] or [], last["guidance_level"])
        level = last["guidance_level"] if last is not None and last["guidance_level"] is not None else self.job.level
        execution = last["execution_result"] if last is not None else None
        return TurnState(list(turns), level, self.session.turn_input(len(turns), execution, shown),
                         self.cfg.max_turn)

    def seed(self) -> dict:
        """The seed this job's turn 0 comes from; its not-yet-counted usage is claimed by this job."""
        seed, _ = self.seeds.get(self.job.model, self.job.task_index,
                                 self.parts.policy.seed_feedback_for(self.job.level), retry_failed=False)
        self.meter.add(self.seeds.claim_usage(self.job.model, self.job.task_index))
        self.seed_model = seed["feedback_model"]
        return seed["record"]

    def _seed_made_by_this_feedback_model(self) -> bool:
        """The seed's records were made by this run's feedback model (None: a release seed)."""
        model = self.cfg.feedback_model.model if self.cfg.feedback_model else None
        return self.seed_model in (None, model)

    def stopped_short(self, last: dict) -> bool:
        """The last stored turn stopped the job early, or lacks feedback it needs now: it was the last turn
        before max-turn was raised."""
        return last[STOP_KEY] is not None or last["feedback_source"] == PENDING or self.lacks_feedback(last)

    def lacks_feedback(self, turn: dict) -> bool:
        """The turn got no feedback though the policy gives it now: it was the last turn before max-turn was
        raised, or a tampered turn that ended its job (``on-tampered: stop``) before its feedback was asked."""
        level = turn["guidance_level"] if turn["guidance_level"] is not None else self.job.level
        return turn["feedback_source"] == "none" and self.parts.policy.gives_feedback(
            level, turn_solved(turn["execution_result"]), turn["turn_number"])

    def unstop(self, last: dict) -> dict:
        """The last stored turn of a job that stopped short, made ready to continue: a budget stop only needs
        its mark cleared; missing feedback (still pending when the run was killed, or not given because the
        turn was the last one then) is asked for (the calls that failed before stay counted). A seeded turn 0
        is taken from the seed again: its feedback may exist by now."""
        if last[STOP_KEY] is not None and not last["feedback_error"] and not self.lacks_feedback(last):
            return {**last, STOP_KEY: None}
        earlier = self.state_of(self.turns[:-1])
        turn = self.attempt(earlier) if last["turn_number"] == 0 and self.parts.setting.shares_seed else last
        level = last["guidance_level"] if last["guidance_level"] is not None else earlier.level
        reply = self.feedback(earlier, turn, level)
        if turn is last:
            reply = replace(reply, usage=last["feedback_usage"] + reply.usage)
        return self.record(turn, reply, level)

    def _save_turns(self, turns: list[dict] | None = None) -> None:
        """Save the job's turns (or ``turns``: them and a turn whose feedback is being asked)."""
        turns = self.turns if turns is None else turns
        self.store.save(turns, finished=finished(turns, self.cfg.max_turn))

    def outcome(self, state: str, error: str | None = None, stop_reason: str | None = None) -> dict:
        tokens_in, tokens_out, cost = usage_totals(self.meter.usage)
        usage = self.meter.usage
        return {
            "task_index": self.job.task_index, "model": self.job.model.model, "level": self.job.level,
            "state": state, "solved": any(turn_solved(t["execution_result"]) for t in self.turns),
            "turns": len(self.turns),
            "best_rate": max((pass_rate(t["execution_result"], self.n_cases) for t in self.turns), default=0.0),
            "input_tokens": tokens_in, "output_tokens": tokens_out, "cost_usd": cost,
            "api_calls": sum(1 for u in usage if not u.get("from_cache")), "error": error, STOP_KEY: stop_reason,
            "unpriced_calls": sum(1 for u in usage if u.get("cost_usd") is None), **cache_totals(usage),
            "answer_stops": stop_tally(self.turns),
        }

    def stopped(self, stop: Stopped) -> dict:
        """A job that ended on purpose: skipped, or stopped early with its saved turns standing. A refused
        job's last turn carries the reason, and its state the settings it was refused under."""
        if stop.state == "skipped":
            return self.outcome("skipped", stop.why, (self.store.state() or {}).get(STOP_KEY) if stop.why else None)
        if stop.reason == FEEDBACK_MISSING:
            over_budget(self.cfg, job_key(self.cfg, self.job), self.turns)  # keeps the run's ledger up to date
        under = None
        if stop.state == REFUSED:
            under = resend_keys(self.cfg, self.job)
            if self.turns and self.turns[-1][STOP_KEY] is None:
                self.turns[-1] = {**self.turns[-1], STOP_KEY: stop.reason}
                self._save_turns()
        self.store.mark(finished=False, error=stop.why, turns=self.turns, stop_reason=stop.reason, refused=under)
        return self.outcome(stop.state, stop.why, stop.reason)

    def halted(self, exc: Exception) -> dict:
        """The run is stopping (a provider refused it): the saved turns stand and the state is left as a
        killed run leaves it, so the next run continues this job."""
        if isinstance(exc, InferenceError) and exc.usage is not None:
            self.meter.add([exc.usage.to_dict()])
        return {**self.outcome(HALTED, str(exc)), RUN_FATAL_KEY: str(exc) if isinstance(exc, RunFatal) else None}

    def failed(self, exc: Exception) -> dict:
        if isinstance(exc, InferenceError) and exc.usage is not None:
            self.meter.add([exc.usage.to_dict()])
        message = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
        self.store.mark(finished=False, error=message, turns=self.turns)
        return self.outcome("error", message)


def refuse_job(cfg: RunConfig, job: Job, exc: RequestFatal) -> dict:
    """The outcome of a job whose shared turn-0 seed the provider refuses as sent: stopped with the reason, its
    state saying under which settings, so no rerun resends the seed's request unchanged."""
    return JobRun(cfg, job).stopped(refusal(exc, "code model"))


def stop_tally(turns: list[dict]) -> dict[str, int]:
    """How many answers of the job's turns ended short of complete, by stop reason (``length``...)."""
    tally: dict[str, int] = {}
    for turn in turns:
        for entry in turn.get("answer_stops") or []:
            tally[entry["reason"]] = tally.get(entry["reason"], 0) + 1
    return tally


def refusal(exc: RequestFatal, who: str) -> Stopped:
    """The stop of a job whose request the provider refuses as sent."""
    first_line = (str(exc).strip().splitlines() or [exc.reason])[0]
    return Stopped(REFUSED, f"the {who}'s request is refused as sent ({exc.reason}): {first_line}", exc.reason)


def refused_reason(turn: dict) -> str | None:
    """The request-refused reason a turn's missing feedback stopped with (None: another stop, or none)."""
    reason = turn[STOP_KEY]
    return reason if turn["feedback_error"] and reason not in (None, FEEDBACK_MISSING) else None


def tamper_line(turn: dict) -> str:
    """The tampered verdict's one line of evidence."""
    messages = turn["execution_result"].get("failure_messages") or [""]
    return (str(messages[0]).strip().splitlines() or [TAMPERED])[0].removeprefix("ERROR in session: ")


def run_task(cfg: RunConfig, job: Job, *, progress: Callable[[dict], None] | None = None) -> dict:
    """Run, resume or skip one job; failures end as an "error" outcome (and state), never an exception."""
    return JobRun(cfg, job, progress).run()


def start_ledger(cfg: RunConfig, jobs: tuple[Job, ...] | list[Job]) -> None:
    """With ``max-cost-usd``: the run's cost ledger, from what its jobs and seeds spent in earlier invocations."""
    if cfg.max_cost_usd is None:
        return
    parts = RunParts(cfg)
    seeds = Seeds(cfg, parts)
    entries = {}
    for job in jobs:
        entries[job_key(cfg, job)] = job_spend(parts.load(job_store(cfg, job), job.level), without_seed=True)
        seed = seeds.load(job.model, job.task_index)
        if seed is not None:
            entries[seed_key(seeds.path(job.model, job.task_index))] = seed_spend(seed)
    Ledger(cfg.output_dir).reset(entries)
