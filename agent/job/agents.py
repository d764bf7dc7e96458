"""The two agents of RECODE-H: the CodeAgent that writes the file, the HumanAgent that judges it.

A CodeAgent turn is taken the way its evaluation setting says (``Setting.kind``
of its protocol, agent/protocols/base.py):

* ``tools`` (``agent``, ``memory_agent``): up to ``max_steps`` steps. In each,
  the protocol prepares the memory, builds the request, the model answers (a
  failed call is retried as the protocol says), the protocol reads the answer
  and carries it out on the private repository copy, and memory keeps the
  exchange. SUBMIT ends the turn; so does the step budget (the file is then
  submitted as it is).
* ``one_call`` (``baseline``): one request per turn; the code of the answer is
  the new file.
* ``snippet`` (ResearchCodeBench): one request per turn; the answer is the
  missing block, put into the file.

Every call is recorded: ``calls`` (each request's messages, the answer, usage)
and, for step calls, the release's ``history`` (the user message and the answer).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.feedback.records import FeedbackReply, FeedbackRequest, FeedbackSource
from agent.models.stops import WITHHELD, stop_entry, withheld_problem
from agent.models.types import ChatModel, InferenceError, RequestFatal, RunFatal, Stop
from agent.protocols.base import Exchange, RunProtocol, Setting, StepView, TaskBrief, TurnInput
from agent.protocols.prompts import SECTION_SNIPPET_PREVIOUS
from agent.rcb.snippet import SnippetTask, build_prompt, complete_file, extract_last_python_block
from agent.task.workspace import RepoWorkspace

__all__ = ["CodeAgent", "HumanAgent", "TaskBrief", "TurnResult"]


@dataclass
class TurnResult:
    """What one CodeAgent turn produced; everything is builtins, ready for a turn record."""

    code: str
    actions: list[dict] = field(default_factory=list)
    usage: list[dict] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    unusable: list[dict] = field(default_factory=list)  # answers that ended short of complete (stop_entry)


class CodeAgent:
    """Writes the target file turn by turn with the model, acting on a private repository copy."""

    def __init__(self, model: ChatModel, protocol: RunProtocol, setting: Setting, brief: TaskBrief,
                 workspace: RepoWorkspace, *, max_steps: int, actions: tuple[str, ...], params: dict | None = None,
                 snippet: SnippetTask | None = None, reindent_snippet: bool = False) -> None:
        if (setting.kind == "snippet") != (snippet is not None):
            raise ValueError("the snippet setting needs a snippet task, and only it takes one")
        self.model = model
        self.protocol = protocol
        self.setting = setting
        self.brief = brief
        self.ws = workspace
        self.max_steps = max(1, max_steps)
        self.actions = actions
        self.params = params or {}
        self.snippet = snippet
        self.reindent_snippet = reindent_snippet
        self.memory: list[dict] = []  # a resumed run restores it from the last turn record
        self.on_write: Callable[[str], None] = lambda code: None  # a step left this file (not yet submitted)

    def run_turn(self, turn: TurnInput) -> TurnResult:
        """One turn: returns the submitted file and the turn's actions, usage, calls and memory."""
        if not self.setting.carries_memory:
            self.memory = []
        result = TurnResult(code="")
        _TURNS[self.setting.kind](self, turn, result)
        result.code = self.ws.code
        self.memory = self.protocol.end_turn(self.memory)
        result.memory = [dict(m) for m in self.memory]
        return result

    # ------------------------------------------------------------ the three kinds of turn

    def _tool_turn(self, turn: TurnInput, result: TurnResult) -> None:
        protocol = self.protocol
        system = protocol.system(self.actions, self.max_steps)
        opening = protocol.opening(turn)
        last = None
        for step in range(1, self.max_steps + 1):
            ask = self._asker(result, step)
            self.memory = protocol.before_step(self.memory, ask)
            view, answer = self._step_call(StepView(self.brief, system, self.ws.code, self.memory, turn, opening, last,
                                                    step, self.max_steps), ask, result)
            problem = self._withheld(result)
            acted = (protocol.act(answer, self.ws, self.actions, step) if problem is None
                     else protocol.invalid(answer, problem, self.actions, step))
            result.actions.append({key: value for key, value in acted.action.items() if key != "label"})
            self.memory = protocol.after_step(self.memory, Exchange(view, answer, acted), ask)
            if acted.submitted:
                return
            if acted.wrote_code:
                self.on_write(self.ws.code)
            last = acted
        result.actions.append({"step": self.max_steps + 1, "action": "SUBMIT", "argument": "auto: step budget spent",
                               "ok": True})

    def _one_call_turn(self, turn: TurnInput, result: TurnResult) -> None:
        answer = self._ask(self.protocol.one_call(self.brief, self.ws.code, turn), "step", 1, result)
        problem = self._withheld(result)
        code = self.protocol.one_call_code(answer) if problem is None else None
        if code is not None:
            self.ws.write_code(code)
        self._one_call_actions(result, code is not None, problem or "no closed python block in the answer")

    def _snippet_turn(self, turn: TurnInput, result: TurnResult) -> None:
        """Turn 0 is RCB's request exactly (one user message, no system prompt); later turns add the previous
        attempt, its test result and the feedback, for the feedback-loop variant."""
        parts = [build_prompt(self.snippet)]
        if turn.turn > 0:
            opening = self.protocol.opening(turn)
            parts += [SECTION_SNIPPET_PREVIOUS.format(path=self.brief.target, code=self.ws.code.rstrip("\n"))]
            parts += [part for part in (opening.result, opening.feedback) if part]
        answer = self._ask([{"role": "user", "content": "\n\n".join(parts)}], "step", 1, result)
        problem = self._withheld(result)
        if problem is not None:
            self._one_call_actions(result, False, problem)
            return
        self.ws.write_code(complete_file(self.snippet, answer, reindent=self.reindent_snippet))
        found = extract_last_python_block(answer) is not None
        self._one_call_actions(result, found, "no python block in the answer: the block is empty")

    @staticmethod
    def _one_call_actions(result: TurnResult, ok: bool, problem: str) -> None:
        """The actions of a one-call turn: the file written from the answer, then submitted."""
        result.actions += [{"step": 1, "action": "REPLACE", "argument": "" if ok else problem, "ok": ok},
                           {"step": 1, "action": "SUBMIT", "argument": "", "ok": True}]

    def _withheld(self, result: TurnResult) -> str | None:
        """Why the last answer is not carried out (a protocol that does not apply answers that ended short of
        complete: truncated, refused, filtered), else None. The answer's raw text stays in the record."""
        call = result.calls[-1]
        stop = Stop(call["stop"]["reason"], call["stop"]["provider_words"])
        if self.protocol.applies_unusable or stop.reason not in WITHHELD:
            return None
        result.unusable[-1]["applied"] = False
        return withheld_problem(stop)

    # ------------------------------------------------------------ model calls

    def _step_call(self, view: StepView, ask: Callable, result: TurnResult) -> tuple[StepView, str]:
        """The step's request and answer; a failed call is retried on the memory the protocol's ``recover``
        gives, ``step_attempts`` calls in all (the release's path); the failed calls' usage is kept."""
        failures = 0
        while True:
            try:
                return view, self._ask(self.protocol.messages(view), "step", view.step, result)
            except RunFatal:
                raise  # the whole run stops (agent/models/halt.py)
            except InferenceError as error:
                failures += 1
                if failures >= self.protocol.step_attempts:
                    raise
                if error.usage is not None:
                    result.usage.append({**error.usage.to_dict(), "purpose": "failed"})
                sent = self.protocol.messages(view)
                self.memory = self.protocol.recover(self.memory, ask, error)
                view = StepView(view.brief, view.system, self.ws.code, self.memory, view.turn, view.opening,
                                view.last, view.step, view.max_steps)
                if isinstance(error, RequestFatal) and self.protocol.messages(view) == sent:
                    raise  # refused as sent: never resent unchanged

    def _asker(self, result: TurnResult, step: int) -> Callable[[list[dict], str], str]:
        return lambda messages, purpose: self._ask(messages, purpose, step, result)

    def _ask(self, messages: list[dict], purpose: str, step: int, result: TurnResult) -> str:
        completion = self.model.complete(messages)
        usage = {**completion.usage.to_dict(), "purpose": purpose}
        result.usage.append(usage)
        stop = {"reason": completion.stop.reason, "provider_words": completion.stop.provider_words}
        result.calls.append({"purpose": purpose, "step": step, "messages": messages, "answer": completion.text,
                             "usage": usage, "params": self.params, "stop": stop})
        if not completion.stop.usable:
            result.unusable.append(stop_entry("code", purpose, step, completion.stop, completion.text))
        if purpose == "step":
            result.history += [{"role": "user", "content": messages[-1]["content"]},
                               {"role": "assistant", "content": completion.text}]
        return completion.text


_TURNS: dict[str, Callable[[CodeAgent, TurnInput, TurnResult], None]] = {
    "tools": CodeAgent._tool_turn, "one_call": CodeAgent._one_call_turn, "snippet": CodeAgent._snippet_turn,
}


class HumanAgent:
    """The simulated researcher: tests a submission and asks its source for feedback on it.

    ``test(code, report_to)`` is the test run (the Session gives the executor's,
    with early runs); ``test_info`` words a result for the feedback request.
    """

    def __init__(self, latex: str, instruction: str, canonical: str, index: int,
                 test: Callable[[str, Path | None], dict], source: FeedbackSource | None,
                 test_info: Callable[[dict], str]) -> None:
        self.latex, self.instruction, self.canonical = latex, instruction, canonical
        self.index = index
        self.test = test
        self.source = source
        self.test_info = test_info

    def evaluate(self, code: str, report_to: Path | None = None) -> dict:
        """The runner's execution result for ``code`` (the whole target file), its JUnit report at ``report_to``."""
        return self.test(code, report_to)

    def feedback(self, *, turn: int, level: int, code: str, previous_code: str, execution: dict) -> FeedbackReply:
        if self.source is None:
            raise ValueError("feedback is needed but no feedback source is configured (set the human-* keys)")
        request = FeedbackRequest(task_index=self.index, turn=turn, level=level, latex=self.latex,
                                  instruction=self.instruction, canonical=self.canonical, code=code,
                                  previous_code=previous_code, digest=self.test_info(execution))
        return self.source(request)
