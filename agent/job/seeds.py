"""Turn-0 seeds: the first attempt of a (setting, model, task), computed once and shared by every level.

Where the protocol's setting shares turn 0 (``Setting.shares_seed``), all
levels start from the identical attempt: the seed holds turn 0's code, its
test result and the RAW feedback records, and each level shows them at its
own level. A seed is computed once under a cross-process lock, in two steps:
turn 0 first (saved before its feedback is asked, so a failing feedback model
never costs the code model's turn again), then its raw feedback when some
level uses it. The usage of its calls waits in ``unclaimed_usage`` until the
first level job that uses the seed claims it, so each call is counted in
exactly one outcome.

Storage is the release's: ``<init_seed_dir>/<model>_task<id>_init.pkl``, a
pickle of a LIST holding the one turn-0 record. What only we need (setting,
protocol, feedback model, whether the raw feedback was computed, usage not yet
counted) is in a sibling ``..._init.meta.json``; a seed without one was written
by the release.
"""
from __future__ import annotations

import json
import os
import pickle
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock

from agent.common.atomic_file import atomic_write_bytes
from agent.common.tempdirs import private_dir
from agent.feedback.records import NO_FEEDBACK
from agent.job.budget import Ledger, run_over_budget, seed_spend
from agent.job.fingerprint import diff_fingerprints, refusal
from agent.job.layout import Job, job_store
from agent.job.record import PENDING, Upgrade, check_builtins, turn_record, turn_solved, with_feedback
from agent.job.results import ResultError, ResultStore, load_pickle
from agent.job.session import request_feedback
from agent.models.types import ModelSpec
from metrics.result_format import STOP_KEY, seed_file_name
from metrics.run_status import FEEDBACK_MISSING

if TYPE_CHECKING:
    from agent.config import RunConfig
    from agent.job.parts import RunParts

SEED_FORMAT = 3
RECOMPUTE = "move it away (or set overwrite: true) to recompute the seed"


# ---------------------------------------------------------------------- storage

def seed_path(init_seed_dir: Path, model_name: str, task_index: int, setting: str | None = None) -> Path:
    """``<init_seed_dir>/<model>_task<id>_init.pkl``: the release's turn-0 seed of (model, task).

    The release's name has no evaluation setting. When that file is ours and of
    another setting than ``setting``, this setting's seed is
    ``<model>_task<id>_<setting>_init.pkl`` beside it, so two settings sharing an
    output folder never reuse each other's turn 0. A seed the release wrote
    (no meta file) is taken as the current setting's, as the release takes it.
    """
    release = Path(init_seed_dir) / seed_file_name(model_name, task_index)
    if setting is None or _meta(release).get("setting") in (None, setting):
        return release
    return Path(init_seed_dir) / seed_file_name(model_name, task_index, setting)


def _meta_path(path: Path) -> Path:
    return path.with_name(path.stem + ".meta.json")


def _meta(path: Path) -> dict:
    try:
        meta = json.loads(_meta_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def load_seed(path: Path, setting: str, protocol: str, upgrade: Upgrade) -> dict | None:
    """The seed at ``path`` as ``{"record", "setting", "protocol", "feedback_model", "unclaimed_usage"}``, or None.

    ``record["feedback_items"]`` is None while the raw turn-0 feedback is not computed.
    A release seed (no meta file) counts as computed when it holds feedback or
    turn 0 solved the task. A seed of another setting or protocol is refused.
    """
    if not path.exists():
        return None
    turns = load_pickle(path, RECOMPUTE)
    if not isinstance(turns, list) or len(turns) != 1 or not isinstance(turns[0], dict):
        raise ResultError(f"{path} is not a turn-0 seed (a list holding one turn record); {RECOMPUTE}")
    meta_path = _meta_path(path)
    meta = _meta(path)
    if meta_path.exists() and not meta:
        raise ResultError(f"{meta_path} is corrupt; move it and {path.name} away to recompute the seed")
    if meta.get("setting", setting) != setting:
        raise ResultError(f"{path} is the turn 0 of evaluation-setting '{meta['setting']}', not '{setting}'; "
                          "give this setting an init_seed folder of its own")
    if meta.get("protocol", protocol) != protocol:
        raise ResultError(f"{path} is the turn 0 of protocol '{meta['protocol']}', not '{protocol}'; give this "
                          "protocol an output-dir of its own")
    record = upgrade(turns[0])
    done = meta.get("feedback_done", bool(record["feedback_interaction_history"])
                    or turn_solved(record["execution_result"]))
    return {"setting": setting, "protocol": protocol, "feedback_model": meta.get("feedback_model"),
            "unclaimed_usage": list(meta.get("unclaimed_usage", [])), "fingerprint": meta.get("fingerprint"),
            "record": record if done else {**record, "feedback_items": None}}


def save_seed(path: Path, seed: dict) -> None:
    """The record (release shape) first, then our meta file: a crash in between only recomputes feedback."""
    record = seed["record"]
    pending = record["feedback_items"] is None
    turns = [{**record, "feedback_items": [] if pending else record["feedback_items"]}]
    check_builtins(turns, str(path))
    meta = {"format": SEED_FORMAT, "setting": seed["setting"], "protocol": seed["protocol"],
            "feedback_model": seed["feedback_model"], "feedback_done": not pending,
            "unclaimed_usage": seed["unclaimed_usage"], "fingerprint": seed.get("fingerprint")}
    check_builtins(meta, str(_meta_path(path)))
    atomic_write_bytes(path, pickle.dumps(turns, protocol=4))
    atomic_write_bytes(_meta_path(path), (json.dumps(meta, indent=1) + "\n").encode())


def seed_conflict(path: Path, fingerprint: dict, feedback_model: str | None) -> str | None:
    """The one line refusing to reuse the seed at ``path``, made under another configuration (its fingerprint,
    or the model that gave its feedback); None for a seed that agrees, is missing, or has no fingerprint (the
    release's, or an older one: adopted)."""
    meta = _meta(path)
    stored = meta.get("fingerprint")
    if not isinstance(stored, dict):
        return None
    made_by = meta.get("feedback_model") if meta.get("feedback_done") else None
    old = {**stored, "feedback.model": made_by} if made_by and feedback_model else stored
    new = {**fingerprint, "feedback.model": feedback_model} if made_by and feedback_model else fingerprint
    return refusal(str(path), old, new) if diff_fingerprints(old, new) else None


def set_aside(path: Path) -> None:
    """Move a seed (and its meta file) out of the way, so nothing computed is lost when it is recomputed."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for file in (path, _meta_path(path)):
        if file.exists():
            os.replace(file, file.with_name(f"{file.name}.{stamp}.bak"))


def _claim_lock(path: Path) -> FileLock:
    """Guards the seed's unclaimed usage, held only for a read and a write (never across a model call)."""
    return FileLock(str(path.with_suffix(".claim.lock")))


def seed_key(path: Path) -> str:
    """The seed's name in the run's cost ledger."""
    return f"seed/{path.name}"


# ---------------------------------------------------------------------- computing a seed

class Seeds:
    """The seeds of one run configuration (what the scheduler computes first and the jobs read)."""

    def __init__(self, cfg: RunConfig, parts: RunParts) -> None:
        self.cfg = cfg
        self.parts = parts

    def path(self, model: ModelSpec, task_index: int) -> Path:
        return seed_path(self.cfg.init_seed_dir, model.model, task_index, self.cfg.evaluation_setting)

    def conflict(self, model: ModelSpec, task_index: int) -> str | None:
        """Why the stored seed of (model, task) may not be reused by this run (agent/job/fingerprint.py), or None."""
        feedback_model = self.cfg.feedback_model.model if self.cfg.feedback_model else None
        return seed_conflict(self.path(model, task_index), self.parts.seed_fingerprint(model, task_index),
                             feedback_model)

    def load(self, model: ModelSpec, task_index: int) -> dict | None:
        """The stored seed, refused (ResultError) when made under another configuration."""
        if (refused := self.conflict(model, task_index)) is not None:
            raise ResultError(refused)
        return load_seed(self.path(model, task_index), self.cfg.evaluation_setting, self.parts.protocol.name,
                         self.parts.upgrade(None, task_index))

    def ensure(self, model: ModelSpec, task_index: int, *, feedback: bool = True) -> bool:
        """Create the seed of (model, task) once; True when this call computed (part of) it.

        ``feedback`` False: turn 0 only, enough for the levels that do not wait
        for the seed's feedback (the scheduler starts them meanwhile). Not needed
        when the setting does not share turn 0, by the release's replay (it starts
        from stored turns), when every level of the run keeps stored turns (unless
        one stopped at turn 0 for want of the seed's feedback: this is where it is
        asked again), nor once the run's budget is spent.
        """
        cfg = self.cfg
        if not self.parts.setting.shares_seed or cfg.replay_feedback_level is not None or run_over_budget(cfg):
            return False
        stores = [job_store(cfg, Job(model, level, task_index)) for level in cfg.guidance_levels]
        if not cfg.overwrite and all(s.result_path.exists() and not _stopped_at_turn_zero(s) for s in stores):
            return False
        need = feedback and self.parts.policy.seed_needs_feedback()
        return self.get(model, task_index, need, retry_failed=True)[1]

    def get(self, model: ModelSpec, task_index: int, need_feedback: bool, retry_failed: bool) -> tuple[dict, bool]:
        """The seed of (model, task), computed where missing (the check is repeated under the lock, so racing
        processes compute it once), and whether this call computed (part of) it. Feedback that failed is asked
        again only with ``retry_failed`` (the seed job of a run), not once more by every level."""
        path = self.path(model, task_index)
        if not (self.cfg.overwrite and self.conflict(model, task_index)):
            seed = self.load(model, task_index)
            if _ready(seed, need_feedback, retry_failed):
                return seed, False
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path.with_suffix(".lock"))):
            if self.cfg.overwrite and self.conflict(model, task_index):
                set_aside(path)
            seed = self.load(model, task_index)
            if _ready(seed, need_feedback, retry_failed):
                return seed, False
            if seed is None:
                seed = self._turn_zero(model, task_index, path.parent / "reports")
                save_seed(path, seed)
            if need_feedback and seed["record"]["feedback_items"] is None:
                seed, usage = self._feedback(model, task_index, seed)
                with _claim_lock(path):  # a level may have claimed turn 0's usage while the feedback model answered
                    unclaimed = self.load(model, task_index)["unclaimed_usage"]
                    seed = {**seed, "unclaimed_usage": unclaimed + usage}
                    save_seed(path, seed)
        if self.cfg.max_cost_usd is not None:
            Ledger(self.cfg.output_dir).record(seed_key(path), seed_spend(seed))
        return seed, True

    def claim_usage(self, model: ModelSpec, task_index: int) -> list[dict]:
        """The seed's not-yet-counted usage, taken (once, under the seed's lock) by the job that counts it."""
        path = self.path(model, task_index)
        with _claim_lock(path):
            seed = self.load(model, task_index)
            if seed is None or not seed["unclaimed_usage"]:
                return []
            save_seed(path, {**seed, "unclaimed_usage": []})
        return seed["unclaimed_usage"]

    def _turn_zero(self, model: ModelSpec, task_index: int, reports: Path) -> dict:
        """Turn 0 with no feedback yet (``feedback_items`` None marks feedback as not computed)."""
        with private_dir("seed") as tmp:
            session = self.parts.session(model, task_index, tmp, None)
            attempt = session.attempt(session.turn_input(0, None, None), reports / f"task_{task_index}_turn_0.xml")
        record = turn_record(task_index, attempt, NO_FEEDBACK, None, "", self.parts.protocol.name,
                             self.parts.protocol.record_code(attempt.result.code))
        return {"setting": self.cfg.evaluation_setting, "protocol": self.parts.protocol.name, "feedback_model": None,
                "unclaimed_usage": attempt.result.usage, "fingerprint": self.parts.seed_fingerprint(model, task_index),
                "record": {**record, "feedback_items": None, "feedback_source": PENDING}}

    def _feedback(self, model: ModelSpec, task_index: int, seed: dict) -> tuple[dict, list[dict]]:
        """The seed with its raw turn-0 feedback (none when turn 0 already solved the task), and the usage of
        the calls made for it (not yet among the seed's unclaimed usage).

        Feedback that could not be produced leaves ``feedback_items`` None (still to
        compute) with the reason in ``feedback_error``; the failed calls stay counted.
        """
        record = seed["record"]
        reply = NO_FEEDBACK
        if not turn_solved(record["execution_result"]):
            reply = request_feedback(self.parts.human(task_index, self.parts.llm_source()), turn=0,
                                     level=max(self.cfg.guidance_levels), code=record["final_code"],
                                     previous_code="", execution=record["execution_result"])
        failed = record["feedback_usage"] if record["feedback_items"] is None else []
        updated = with_feedback(record, replace(reply, usage=failed + reply.usage), None, "")
        if reply.error:
            updated = {**updated, "feedback_items": None, "feedback_source": PENDING}
        feedback_model = self.cfg.feedback_model.model if self.cfg.feedback_model else None
        return {**seed, "feedback_model": feedback_model, "record": updated}, reply.usage


def _ready(seed: dict | None, need_feedback: bool, retry_failed: bool) -> bool:
    """The seed exists with the feedback asked for, or (``retry_failed`` False) its feedback already failed."""
    if seed is None or not need_feedback or seed["record"]["feedback_items"] is not None:
        return seed is not None
    return not retry_failed and seed["record"]["feedback_error"] is not None


def _stopped_at_turn_zero(store: ResultStore) -> bool:
    state = store.state() or {}
    return state.get(STOP_KEY) == FEEDBACK_MISSING and state.get("turns") == 1
