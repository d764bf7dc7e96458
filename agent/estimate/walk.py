"""One job walked through without a model: the real agent and protocol, answered by stand-ins of assumed size.

The CodeAgent, the protocol's prompt builders, its memory (summaries
included) and the feedback request are the run's own; only the answers are
made up (:class:`Assumptions` says how big). So the requests measured here
are the requests the run would send, call by call, for two courses of a job:
``solved`` (the first submission passes) and ``unsolved`` (every turn fails
and uses every step). Nothing touches a file, an environment or a network.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from agent.feedback.guidance import FeedbackPolicy, raise_level
from agent.feedback.llm import LLMFeedback
from agent.feedback.records import FIELDS, FeedbackReply, FeedbackRequest
from agent.job.agents import CodeAgent
from agent.models.prompt_cache import common_prefix
from agent.models.types import Completion, Usage
from agent.protocols.base import FeedbackShown, RunProtocol, Setting, TaskBrief, TurnInput
from agent.rcb.snippet import SnippetTask
from agent.task.action import ACTIONS, RELEASE_ACTIONS

SOLVED, UNSOLVED = "solved", "unsolved"
COURSES = (SOLVED, UNSOLVED)
_FILLER = "the method updates each parameter from its gradient as the paper states "


@dataclass(frozen=True)
class Assumptions:
    """What cannot be known before the run, each a number the estimate prints."""

    chars_per_token: float = 3.5  # between English prose (~4) and code or LaTeX (~3)
    feedback_records: int = 3  # records per feedback answer
    feedback_field_chars: int = 400  # each text field of a record (interface: 80)
    failure_chars: int = 1500  # the failure message of one failing test (pytest's long traceback)
    summary_chars: int = 1200  # a memory summary the code model writes
    min_cached_tokens: int = 1024  # shortest prefix the providers cache (OpenAI, Anthropic's Sonnet)

    def tokens(self, chars: int) -> int:
        return round(chars / self.chars_per_token)


@dataclass(frozen=True)
class TaskText:
    """What a task's prompts are built from: the dataset's texts (or stand-ins of their size)."""

    index: int
    latex: str
    instruction: str
    canonical: str  # the reference file: a code answer is assumed to be this big
    target: str
    init_content: str
    test_cases: tuple[str, ...]
    snippet: SnippetTask | None = None


@dataclass
class CallSize:
    """One request, in characters: all of it, the part read from the cache, the part written to it."""

    role: str  # "code" or "feedback"
    turn: int
    prompt: int
    answer: int
    read: int = 0
    written: int = 0


@dataclass(frozen=True)
class JobShape:
    """The run settings a job's calls depend on."""

    protocol: RunProtocol
    setting: Setting
    policy: FeedbackPolicy
    max_turn: int
    max_steps: int
    edit_action: bool
    asks_feedback_model: bool  # feedback comes from the feedback model (else from a person or a file: no call)


def filler(chars: int) -> str:
    """Plain text of exactly ``chars`` characters."""
    return (_FILLER * (chars // len(_FILLER) + 1))[:chars]


def code_answer(code: str) -> str:
    return f"reflect: I write the whole file.\naction: REPLACE\n```python\n{code.strip()}\n```"


SUBMIT_ANSWER = "reflect: The file is complete; I submit it.\naction: SUBMIT"


def failing_execution(task: TaskText, assumptions: Assumptions) -> dict:
    """A test run where every test of the task failed, each with a traceback of the assumed size."""
    names = task.test_cases or ("test_task",)
    return {"tests": len(names), "errors": 0, "failures": len(names), "skipped": 0, "status": "failed",
            "failure_messages": [f"FAILURE in {name}: " + filler(assumptions.failure_chars) for name in names],
            "test_summary": {f"test.py::{name}": False for name in names}}


def feedback_records(assumptions: Assumptions, categories: tuple[str, ...] | None) -> list[dict]:
    size = assumptions.feedback_field_chars
    record = {name: filler(size) for name in FIELDS}
    record.update(interface=filler(min(80, size)), category=(categories or ("T1",))[0])
    return [dict(record) for _ in range(assumptions.feedback_records)]


class _Tape:
    """Calls in order, each chain's previous prompt kept to measure the prefix the next one shares."""

    def __init__(self) -> None:
        self.calls: list[CallSize] = []
        self.turn = 0
        self._last: dict[str, tuple[str, CallSize]] = {}

    def add(self, chain: str, role: str, messages: list[dict], answer: str) -> None:
        prompt = "\n".join(message["content"] for message in messages)
        call = CallSize(role, self.turn, len(prompt), len(answer))
        if chain in self._last:
            before, previous = self._last[chain]
            shared = common_prefix(before, prompt)
            call.read = shared
            previous.written = max(0, shared - previous.read)
        self._last[chain] = (prompt, call)
        self.calls.append(call)


class _Draft:
    """The target file in memory: all a CodeAgent's REPLACE and SUBMIT need of a workspace."""

    def __init__(self, code: str) -> None:
        self.code = code

    def write_code(self, content: str) -> None:
        self.code = content


class _StandIn:
    """A model that answers from ``answer(messages)`` and hands every request to ``seen``."""

    def __init__(self, answer: Callable[[list[dict]], str], seen: Callable[[list[dict], str], None]) -> None:
        self.answer, self.seen = answer, seen

    def complete(self, messages: list[dict], *, response_schema: dict | None = None) -> Completion:
        text = self.answer(messages)
        self.seen(messages, text)
        return Completion(text, Usage("estimate", "stand-in", None, None, None, None, 0.0, None))


@dataclass
class _Turns:
    """The code model's answers for the turn under way, in order."""

    answers: list[str] = field(default_factory=list)

    def next(self) -> str:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def walk_job(task: TaskText, shape: JobShape, level: int, course: str, assumptions: Assumptions) -> list[CallSize]:
    """Every call of one job starting at ``level`` and following ``course``, turn 0 included."""
    tape, turns = _Tape(), _Turns()
    agent = _agent(task, shape, assumptions, tape, turns)
    style = shape.protocol.feedback_style()
    records = json.dumps({style.key: feedback_records(assumptions, style.categories)})
    researcher = LLMFeedback(_StandIn(lambda messages: records,
                                      lambda messages, text: tape.add("feedback", "feedback", messages, text)), style)
    execution, shown = failing_execution(task, assumptions), None
    for turn in range(1 if course == SOLVED else shape.max_turn):
        tape.turn = turn
        if turn and shape.policy.guidance_type == "dynamic":  # no turn beats the last: each raises the level
            level = raise_level(level, 0.0, 0.0, shape.policy.max_guidance_level)
        turns.answers = _turn_answers(task, shape, course)
        agent.run_turn(TurnInput(turn, execution if turn and shape.setting.shows_result else None, shown,
                                 task.test_cases))
        shown = None
        if shape.policy.gives_feedback(level, course == SOLVED, turn):
            reply = _feedback(researcher, task, turn, level, execution, shape, assumptions, style.categories)
            shown = FeedbackShown(reply.records, level)
    return tape.calls


def _agent(task: TaskText, shape: JobShape, assumptions: Assumptions, tape: _Tape, turns: _Turns) -> CodeAgent:
    """The run's CodeAgent on an in-memory file, its model a stand-in telling steps from summaries by the system
    prompt every step sends."""
    actions = ACTIONS if shape.edit_action else RELEASE_ACTIONS
    step_system = shape.protocol.system(actions, shape.max_steps)
    summary = filler(assumptions.summary_chars)

    def answer(messages: list[dict]) -> str:
        is_step = shape.setting.kind != "tools" or messages[0]["content"] == step_system
        return turns.next() if is_step else summary

    def seen(messages: list[dict], text: str) -> None:
        tape.add("summary" if text is summary else "step", "code", messages, text)

    return CodeAgent(_StandIn(answer, seen), shape.protocol, shape.setting,
                     TaskBrief(task.latex, task.instruction, task.target), _Draft(task.init_content),
                     max_steps=shape.max_steps, actions=actions, snippet=task.snippet)


def _turn_answers(task: TaskText, shape: JobShape, course: str) -> list[str]:
    """A turn's answers: the whole file then SUBMIT when solved; the whole file at every step otherwise."""
    if shape.setting.kind == "snippet":
        block = max(len(task.canonical) - len(task.init_content), 200)
        return [f"```python\n{filler(block)}\n```"]
    if shape.setting.kind == "one_call":
        return [f"```python\n{task.canonical.strip()}\n```"]
    if course == SOLVED and shape.max_steps > 1:
        return [code_answer(task.canonical), SUBMIT_ANSWER]
    return [code_answer(task.canonical)]


def _feedback(researcher: LLMFeedback, task: TaskText, turn: int, level: int, execution: dict, shape: JobShape,
              assumptions: Assumptions, categories: tuple[str, ...] | None) -> FeedbackReply:
    """The turn's feedback: the feedback model asked as the protocol asks it, else records of the same size
    typed or replayed without a call."""
    if not shape.asks_feedback_model:
        return FeedbackReply(feedback_records(assumptions, categories), "file")
    digest = shape.protocol.test_info(execution, task.test_cases)
    return researcher(FeedbackRequest(task_index=task.index, turn=turn, level=level, latex=task.latex,
                                      instruction=task.instruction, canonical=task.canonical,
                                      code=shape.protocol.record_code(task.canonical), previous_code="",
                                      digest=digest))
