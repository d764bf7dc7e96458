"""One (code model, task) at work: a private repository copy, its CodeAgent and its HumanAgent.

The workflow drives a Session turn by turn; the ablations use the same Session
to take one more turn from a stored state, so every setting (snippet included)
behaves alike in both. A test run that cannot happen (``infra_error``) raises
:class:`InfraError`; feedback that cannot be produced comes back as a reply
with ``error`` set, never as an exception, so the turn it belongs to is kept.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.action import ACTIONS, RELEASE_ACTIONS
from agent.agents import CodeAgent, HumanAgent, TaskBrief, TurnResult
from agent.digest import format_test_digest
from agent.executor import nudge_early_runs, run_early_tests
from agent.feedback import FeedbackReply, FeedbackSource
from agent.models.build import ChatModel, InferenceError
from agent.lookahead import Lookahead
from agent.rcb.snippet import load_snippet_task
from agent.results import upgrade_record
from agent.dataset import DatasetManager
from agent.workspace import RepoWorkspace, make_workspace
from metrics.run_status import INFRA_ERROR

if TYPE_CHECKING:
    from agent.config import RunConfig


class InfraError(RuntimeError):
    """The tests could not run for reasons that are not the model's fault; the task is retried later."""


@dataclass
class Attempt:
    """One CodeAgent turn and the test result of its submission."""

    turn: int
    result: TurnResult
    execution: dict
    digest: str
    previous_code: str
    started: float


class Session:
    """The machinery of one (model, task), built from a run configuration."""

    def __init__(self, cfg: RunConfig, model: ChatModel, task_index: int, tmp: Path,
                 source: FeedbackSource | None) -> None:
        self.cfg = cfg
        self.index = task_index
        self.dataset = DatasetManager(cfg.work_dir)
        self.meta = self.dataset.get(task_index)
        self.ws = RepoWorkspace(make_workspace(self.dataset, task_index, tmp / "repo"), self.meta.target_file_path)
        brief = TaskBrief(self.dataset.latex(task_index), self.dataset.instruction(task_index),
                          self.meta.target_file_path)
        snippet = load_snippet_task(self.dataset, task_index) if cfg.evaluation_setting == "snippet" else None
        self.agent = CodeAgent(model, brief, self.ws, setting=cfg.evaluation_setting, max_steps=cfg.max_steps,
                               memory_threshold=cfg.memory_threshold, memory_to_keep=cfg.memory_to_keep,
                               snippet=snippet, reindent_snippet=cfg.reindent_snippet,
                               actions=ACTIONS if cfg.edit_action else RELEASE_ACTIONS)
        self.lookahead = self._lookahead(tmp / "early") if cfg.slots.early_tests else None
        self.human = HumanAgent(self.dataset, task_index, cfg.runner, source, self.lookahead)
        if self.lookahead is not None:
            self.agent.on_write = self.lookahead.offer

    def _lookahead(self, scratch: Path) -> Lookahead:
        """Early test runs of the files the agent writes (agent/lookahead.py), on spare test slots."""
        scratch.mkdir(parents=True, exist_ok=True)
        return Lookahead(lambda code, report, withdrawn: run_early_tests(
            self.dataset, self.index, code, self.cfg.runner, report, withdrawn), nudge_early_runs, scratch)

    def attempt(self, turn: int, digest: str, feedback: str, report: Path) -> Attempt:
        """The CodeAgent's turn, then the tests on its submission."""
        started = time.monotonic()
        previous = self.ws.code
        try:
            result = self.agent.run_turn(turn, digest=digest, feedback=feedback)
            execution = evaluate_submission(self.human, result.code, f"task {self.index} turn {turn}", report)
        finally:
            if self.lookahead is not None:  # early runs belong to their turn
                self.lookahead.close()
        return Attempt(turn, result, execution, format_test_digest(execution, self.meta.test_cases), previous, started)

    def feedback(self, *, turn: int, level: int, code: str, previous_code: str, digest: str) -> FeedbackReply:
        return request_feedback(self.human, turn=turn, level=level, code=code, previous_code=previous_code,
                                digest=digest)

    def feedback_on(self, attempt: Attempt, level: int) -> FeedbackReply:
        return self.feedback(turn=attempt.turn, level=level, code=attempt.result.code,
                             previous_code=attempt.previous_code, digest=attempt.digest)

    def upgraded(self, turns: list[dict], level: int | None) -> list[dict]:
        """Stored turns with every key of ours (records written by the release lack them)."""
        return [upgrade_record(turn, level=level, test_cases=self.meta.test_cases) for turn in turns]

    def restore(self, record: dict) -> None:
        """Continue after ``record``: its file, and its memory when memory spans turns."""
        self.ws.write_code(record["final_code"])
        self.agent.memory = list(record["agent_memory"]) if self.cfg.evaluation_setting == "memory_agent" else []


def evaluate_submission(human: HumanAgent, code: str, where: str, report: Path) -> dict:
    """The tests on ``code``, the JUnit report kept at ``report``; InfraError naming ``where`` when they
    could not run."""
    execution = human.evaluate(code, report_to=report)
    if execution.get("status") == INFRA_ERROR:
        why = ((execution.get("failure_messages") or [""])[0].strip().splitlines() or [INFRA_ERROR])[0]
        raise InfraError(f"{where}: the tests could not run ({why})")
    return execution


def request_feedback(human: HumanAgent, *, turn: int, level: int, code: str, previous_code: str,
                     digest: str) -> FeedbackReply:
    """The source's records on one submission; a model that fails for good is a reply with ``error``
    (the billed attempts in its usage), so the turn it belongs to is kept."""
    try:
        return human.feedback(turn=turn, level=level, code=code, previous_code=previous_code, digest=digest)
    except InferenceError as exc:
        usage = [exc.usage.to_dict()] if exc.usage is not None else []
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return FeedbackReply([], "llm", usage, error=f"the feedback model failed: {first_line}")
