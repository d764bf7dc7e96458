"""Where a run's jobs keep their results, and which stored jobs a run leaves alone.

A job is one (code model, guidance level, task). Its results go to the
release's folder ``<output-dir>/<setting>_<model>_feedback_<type>_guidance_<level>``
(metrics/result_format.py names it); runs whose feedback is not the feedback
model's get a suffix (``_replay<K>`` for ``replay-run-feedback-level``,
``_source_file``, ``_source_interactive``, ...) so they never mix with, or get
skipped because of, the ordinary run of that level. The release's replay
writes its own file name into the ordinary folder.

Stored work is never recomputed unless asked: a task with a result file is
skipped (``resume: false``, the release's default) or continued from its last
turn (``resume: true``); only ``overwrite: true`` starts it again, setting the
old file aside. A job that stopped early (feedback missing, budget) is
continued by any rerun: that stop was not the user's choice. Two stops stand
until the user changes something: a request the provider refused as sent
(resent once ``max-turn`` or where the model is served changed) and a
tampered turn under ``on-tampered: stop`` (docs/failures.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent.job.fingerprint import diff_fingerprints, refusal
from agent.job.record import PENDING, turn_solved
from agent.job.results import ResultError, ResultStore
from agent.models.types import ModelSpec
from metrics.result_format import STOP_KEY, run_folder_name
from metrics.run_status import TAMPERED_STOP

if TYPE_CHECKING:
    from agent.config import RunConfig


SERVING_KEYS = ("base_url", "endpoint", "api_version", "deployment")  # where a model is served
TAKEN_OVER = "taken over"  # its last holder died mid-job: continue its turns whatever ``resume`` says
DONE_ELSEWHERE = "done elsewhere"  # another process ran it while this run was going: its result stands


@dataclass(frozen=True)
class Job:
    """One (code model, guidance level, task); ``handoff`` says how its claim was won (agent/parallel/claims.py)."""

    model: ModelSpec
    level: int
    task_index: int
    handoff: str | None = field(default=None, compare=False)


def result_folder(cfg: RunConfig, model: ModelSpec, level: int) -> Path:
    """The folder of (model, level) results in this run's configuration."""
    suffix = f"_replay{cfg.replay_run_feedback_level}" if cfg.replay_run_feedback_level is not None else ""
    suffix += f"_source_{cfg.feedback_source}" if cfg.feedback_source != "llm" else ""
    return Path(cfg.output_dir) / run_folder_name(cfg.evaluation_setting, model.model, cfg.guidance_type, level,
                                                  suffix)


def job_store(cfg: RunConfig, job: Job, fingerprint: dict | None = None) -> ResultStore:
    """Where the job's records go: the result file, or the release replay file of the folder."""
    return ResultStore(result_folder(cfg, job.model, job.level), job.task_index,
                       replay_level=cfg.replay_feedback_level, fingerprint=fingerprint)


def job_key(cfg: RunConfig, job: Job) -> str:
    """The job's name in the run's cost ledger: its folder and file."""
    store = job_store(cfg, job)
    return f"{store.folder.name}/{store.result_path.name}"


def _store_finished(store: ResultStore, max_turn: int) -> bool:
    """Solved, or every turn of ``max_turn`` taken: a finished job extends when max-turn was raised since.
    Our state file says whether the job ended; a release file (no state) ended when solved or at its last
    turn."""
    state = store.state()
    if state is not None and not state.get("finished"):
        return False
    if state is not None and isinstance(state.get("solved"), bool) and isinstance(state.get("turns"), int):
        return state["solved"] or state["turns"] >= max_turn
    turns = store.load()
    return bool(turns) and (len(turns) >= max_turn or turn_solved(turns[-1].get("execution_result") or {}))


def resend_keys(cfg: RunConfig, job: Job) -> dict:
    """What a request the provider refused as sent (too long, invalid) was made under, beyond the job's
    fingerprint (whose change refuses the stored job anyway): ``max-turn`` and where each model is served
    (another deployment or endpoint may take a longer context). A rerun resends only once one changed."""
    keys: dict = {"max_turn": cfg.max_turn}
    for role, spec in (("code", job.model), ("feedback", cfg.feedback_model)):
        if spec is not None:
            keys.update({f"{role}.{name}": getattr(spec, name) for name in SERVING_KEYS})
    return keys


def _left_stopped(cfg: RunConfig, job: Job, state: dict) -> str | None:
    """Why a job that stopped early stays as it is: a request refused under the same settings would be
    refused again; a tampered turn ends its job while ``on-tampered`` says stop."""
    reason = state.get(STOP_KEY)
    if state.get("refused") is not None and state["refused"] == resend_keys(cfg, job):
        return (f"its request was refused as sent ({reason}); change the model's base-url/endpoint/deployment "
                "or max-turn to send it again")
    if reason == TAMPERED_STOP and cfg.on_tampered == "stop":
        return "stopped at a tampered turn (on-tampered: stop)"
    return None


def skip_reason(cfg: RunConfig, job: Job) -> str | None:
    """Why the job is not run now: stored work is kept unless ``overwrite`` asks to recompute it."""
    store = job_store(cfg, job)
    if job.handoff == DONE_ELSEWHERE:
        return "done by another process during this run"
    if cfg.overwrite:
        return None
    state = store.state() or {}
    if (why := _left_stopped(cfg, job, state)) is not None:
        return why
    if not store.result_path.exists():
        return None
    if _store_finished(store, cfg.max_turn):
        return "finished"
    stopped = state.get(STOP_KEY) is not None  # not the user's choice: it continues
    return None if cfg.resume or stopped or job.handoff == TAKEN_OVER else "partial (set resume: true to continue it)"


def identity_conflict(cfg: RunConfig, job: Job, fingerprint: dict) -> str | None:
    """The one line refusing to resume or skip the job's stored work, made under another fingerprint; None
    when there is none to refuse (nothing stored, ``overwrite``, or a file that has no fingerprint: the
    release's or an older one, adopted)."""
    store = job_store(cfg, job)
    if cfg.overwrite or not store.result_path.exists():
        return None
    stored = (store.state() or {}).get("fingerprint")
    changed = diff_fingerprints(stored, fingerprint) if isinstance(stored, dict) else []
    if not changed or (all(key.startswith("feedback.") for key in changed) and not _feedback_answered(store)):
        return None
    return refusal(str(store.result_path), stored, fingerprint)


def _feedback_answered(store: ResultStore) -> bool:
    """Whether some stored turn holds the feedback model's answer. While none does (its first call was refused:
    a server without the Responses API, a revoked key), the feedback model's settings shaped nothing stored, so
    changing them, as the run's last line says to, does not refuse the job."""
    try:
        turns = store.load()
    except ResultError:
        return True  # the file's own problem is named when the job loads it
    return any(turn.get("feedback_source") not in ("none", PENDING) and not turn.get("feedback_error")
               for turn in turns)


def is_finished(cfg: RunConfig, job: Job) -> bool:
    """True when the job will be skipped (its stored work stands)."""
    return skip_reason(cfg, job) is not None
