"""The release's replay (``replay-feedback-level: K``): one new turn from each stored turn of the configured
level's run, its raw feedback shown at level K.

For a job at guidance level L, the stored run is level L's; each of its turns
but the last is restored (file, memory, in every setting, and its test result
shown, as the release does) and continued by ONE new turn whose feedback slot
shows that turn's raw records formatted at level K. The new turn is tested,
not given feedback. Record n of ``task_<id>_result_replay_level<K>.pkl`` (in
level L's folder) continues stored turn n; it is written after each turn, so
a rerun resumes. As in the release, the replay runs with ``resume: true``
(with ``resume: false`` the release returns before replaying anything).

A stored turn without raw records cannot be shown at a level above 0 (the
release crashes there: a level-0 run has none after turn 0): the replay stops
at it, saying so. The ablations take their turns through ``replay_turn``.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from agent.common.tempdirs import private_dir
from agent.feedback.records import FeedbackReply
from agent.job.budget import over_budget
from agent.job.layout import Job, job_key
from agent.job.record import turn_record
from agent.job.results import ResultStore
from agent.job.session import Session
from agent.job.workflow import JobRun, Stopped
from agent.protocols.base import FeedbackShown, TurnInput
from metrics.run_status import BUDGET, FEEDBACK_MISSING

if TYPE_CHECKING:
    from agent.config import RunConfig

NEEDS_RESUME = "replay-feedback-level replays stored turns with resume: true (as the release); set resume: true"


def replay_turn(session: Session, stored: dict, records: list[dict], level: int, source: str,
                report: Path) -> dict:
    """The release's replay of one stored turn: its state restored (file, memory), ``records`` shown at
    ``level`` with its test result, ONE new turn and its tests; the new turn's record. ``source`` names
    where the shown records came from (``feedback_source`` of the record)."""
    session.restore(stored, memory=True)
    shown = TurnInput(stored["turn_number"] + 1, stored["execution_result"], FeedbackShown(records, level),
                      session.meta.test_cases, session.test_path)
    attempt = session.attempt(shown, report)
    protocol = session.protocol
    return turn_record(session.index, attempt, FeedbackReply([], source), level, "", protocol.name,
                       protocol.record_code(attempt.result.code))


def replay_task(cfg: RunConfig, job: Job, *, progress: Callable[[dict], None] | None = None) -> dict:
    """Replay every stored turn of the job's level but the last, at ``replay-feedback-level``."""
    run = JobRun(cfg, job, progress)
    level = cfg.replay_feedback_level
    source = ResultStore(run.store.folder, job.task_index)
    with contextlib.ExitStack() as scope:
        try:
            if not cfg.resume:
                raise Stopped("skipped", NEEDS_RESUME)
            if run.store.state() and run.store.state().get("finished") and not cfg.overwrite:
                run.turns = run.store.load()
                raise Stopped("skipped", None)
            stored = run.parts.load(source, job.level)[:-1]
            if not stored:
                raise FileNotFoundError(f"no stored turn of level {job.level} to replay in {source.result_path}; "
                                        f"run guidance-level {job.level} first")
            run.turns = [] if cfg.overwrite else run.store.load()
            session = run.parts.session(job.model, job.task_index, scope.enter_context(private_dir("replay")), None)
            for turn in stored[len(run.turns):]:
                if level > 0 and not turn["feedback_items"]:
                    raise Stopped("error", f"turn {turn['turn_number']} of level {job.level} has no feedback records "
                                           f"to show at level {level}; replay a run of a level above 0",
                                  FEEDBACK_MISSING)
                if (why := over_budget(cfg, job_key(cfg, job), run.turns)) is not None:
                    raise Stopped("budget", why, BUDGET)
                report = run.store.report_dir / f"task_{job.task_index}_turn_{turn['turn_number'] + 1}.xml"
                run.turns.append(replay_turn(session, turn, turn["feedback_items"] or [], level,
                                             f"replay:L{job.level}", report))
                run.meter.add(run.turns[-1]["code_usage"])
                run.store.save(run.turns, finished=len(run.turns) == len(stored))
                if progress is not None:
                    progress({"cost_usd": run.meter.cost_since_last(), "turn": run.turns[-1]["turn_number"]})
            run.store.mark(finished=True, error=None, turns=run.turns)
            return run.outcome("finished")
        except Stopped as stop:
            return run.stopped(stop)
        except Exception as exc:  # as in a job: the state file keeps why
            return run.failed(exc)
