"""One (code model, task) at work: a private repository copy, its CodeAgent and its HumanAgent.

The job (agent/job/workflow.py) drives a Session turn by turn; the release's
replay (agent/job/replay.py) and the ablations use the same Session to take one
more turn from a stored state, so every setting behaves alike in all three.
A test run that cannot happen (``infra_error``) raises :class:`InfraError`;
feedback that cannot be produced comes back as a reply with ``error`` set
(and ``refused`` when the provider refuses the request as sent), never as an
exception, so the turn it belongs to is kept; only a run-fatal error
(agent/models/halt.py) is raised.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from agent.feedback.records import FeedbackReply, FeedbackSource
from agent.job.agents import CodeAgent, HumanAgent
from agent.job.record import Attempt, release_execution
from agent.models.types import ChatModel, InferenceError, RequestFatal, RunFatal
from agent.parallel.lookahead import Lookahead
from agent.parallel.slots import nudge_early_runs, run_early_tests, run_tests
from agent.protocols.base import RunProtocol, TaskBrief, TurnInput
from agent.rcb.snippet import load_snippet_task
from agent.task.action import ACTIONS, RELEASE_ACTIONS
from agent.task.dataset import DatasetManager
from agent.task.workspace import RepoWorkspace, make_workspace
from metrics.run_status import INFRA_ERROR

if TYPE_CHECKING:
    from agent.config import RunConfig


class InfraError(RuntimeError):
    """The tests could not run for reasons that are not the model's fault; the task is retried later."""


class Session:
    """The machinery of one (model, task), built from a run configuration and its protocol."""

    def __init__(self, cfg: RunConfig, model: ChatModel, protocol: RunProtocol, task_index: int, tmp: Path,
                 source: FeedbackSource | None, params: dict | None = None) -> None:
        self.cfg = cfg
        self.index = task_index
        self.protocol = protocol
        self.setting = protocol.settings[cfg.evaluation_setting]
        self.dataset = DatasetManager(cfg.work_dir)
        self.meta = self.dataset.get(task_index)
        self.test_path = protocol.test_path(self.dataset, task_index)
        self.ws = RepoWorkspace(make_workspace(self.dataset, task_index, tmp / "repo"), self.meta.target_file_path)
        latex, instruction = self.dataset.latex(task_index), self.dataset.instruction(task_index)
        snippet = load_snippet_task(self.dataset, task_index) if self.setting.kind == "snippet" else None
        self.agent = CodeAgent(model, protocol, self.setting, TaskBrief(latex, instruction, self.meta.target_file_path),
                               self.ws, max_steps=cfg.max_steps, params=params, snippet=snippet,
                               reindent_snippet=cfg.reindent_snippet,
                               actions=ACTIONS if cfg.edit_action else RELEASE_ACTIONS)
        self.lookahead = self._lookahead(tmp / "early") if cfg.slots.early_tests else None
        self.human = HumanAgent(latex, instruction, self.dataset.canonical(task_index), task_index, self._test, source,
                                lambda execution: protocol.test_info(execution, self.meta.test_cases, self.test_path))
        if self.lookahead is not None:
            self.agent.on_write = self.lookahead.offer

    def _lookahead(self, scratch: Path) -> Lookahead:
        """Early test runs of the files the agent writes (agent/parallel/lookahead.py), on spare test slots."""
        scratch.mkdir(parents=True, exist_ok=True)
        return Lookahead(lambda code, report, withdrawn: run_early_tests(
            self.dataset, self.index, code, self.cfg.runner, report, withdrawn), nudge_early_runs, scratch)

    def _test(self, code: str, report: Path | None) -> dict:
        """The test run of ``code``: the early run's when one of this very text got a slot."""
        early = self.lookahead.take(code, report) if self.lookahead is not None else None
        if early is not None:
            return early
        return run_tests(self.dataset, self.index, code, self.cfg.runner, report_to=report)

    def turn_input(self, turn: int, execution: dict | None, feedback) -> TurnInput:
        """What turn ``turn`` starts from: the last test result when the setting shows it, the feedback."""
        return TurnInput(turn, execution if self.setting.shows_result else None, feedback, self.meta.test_cases,
                         self.test_path)

    def attempt(self, shown: TurnInput, report: Path) -> Attempt:
        """The CodeAgent's turn, then the tests on its submission."""
        started = time.monotonic()
        previous = self.ws.code
        try:
            result = self.agent.run_turn(shown)
            execution = release_execution(evaluate_submission(self.human, result.code,
                                                              f"task {self.index} turn {shown.turn}", report))
        finally:
            if self.lookahead is not None:  # early runs belong to their turn
                self.lookahead.close()
        return Attempt(shown.turn, result, execution,
                       self.protocol.test_info(execution, self.meta.test_cases, self.test_path), previous, started)

    def feedback(self, *, turn: int, level: int, code: str, previous_code: str, execution: dict) -> FeedbackReply:
        return request_feedback(self.human, turn=turn, level=level, code=code, previous_code=previous_code,
                                execution=execution)

    def restore(self, record: dict, *, memory: bool | None = None) -> None:
        """Continue after ``record``: its file, and its memory when memory spans turns (``memory`` forces it)."""
        self.ws.write_code(record["final_code"])
        keep = self.setting.carries_memory if memory is None else memory
        self.agent.memory = list(record["agent_memory"]) if keep else []


def evaluate_submission(human: HumanAgent, code: str, where: str, report: Path) -> dict:
    """The tests on ``code``, the JUnit report kept at ``report``; InfraError naming ``where`` when they
    could not run."""
    execution = human.evaluate(code, report_to=report)
    if execution.get("status") == INFRA_ERROR:
        why = ((execution.get("failure_messages") or [""])[0].strip().splitlines() or [INFRA_ERROR])[0]
        raise InfraError(f"{where}: the tests could not run ({why})")
    return execution


def request_feedback(human: HumanAgent, *, turn: int, level: int, code: str, previous_code: str,
                     execution: dict) -> FeedbackReply:
    """The source's records on one submission; a model that fails for good is a reply with ``error``
    (the billed attempts in its usage), so the turn it belongs to is kept."""
    try:
        return human.feedback(turn=turn, level=level, code=code, previous_code=previous_code, execution=execution)
    except RunFatal:
        raise  # the whole run stops (agent/models/halt.py)
    except InferenceError as exc:
        usage = [exc.usage.to_dict()] if exc.usage is not None else []
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if isinstance(exc, RequestFatal):
            return FeedbackReply([], "llm", usage, error=f"the feedback model's request is refused as sent "
                                                         f"({exc.reason}): {first_line}", refused=exc.reason)
        return FeedbackReply([], "llm", usage, error=f"the feedback model failed: {first_line}")
