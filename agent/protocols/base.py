"""What a protocol is: how the code model is shown a task, its history and its results, how its answers are
read, and how the feedback model is asked. The agent loop only talks to this interface.

Two protocols implement it (agent/protocols/release.py, agent/protocols/improved.py),
chosen by name through ``agent.protocols.PROTOCOLS``. Each also names how it
runs the evaluation settings (``Setting``): whether the agent uses tools or
answers once per turn, whether its memory spans turns, whether it is shown
the last test result, whether turn 0 is shared by the levels.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Protocol

from agent.feedback.llm import FeedbackStyle
from agent.task.workspace import RepoWorkspace

if TYPE_CHECKING:
    from agent.task.dataset import DatasetManager

Ask = Callable[[list[dict], str], str]  # (messages, purpose) -> the model's answer; purpose: step/summary


@dataclass(frozen=True)
class TaskBrief:
    """The fixed part of every prompt: the paper excerpt, the task and the target file's path."""

    latex: str
    instruction: str
    target: str


@dataclass(frozen=True)
class FeedbackShown:
    """Feedback a turn starts with: the raw records of the last turn's feedback and the level to show them at."""

    records: list[dict]
    level: int


@dataclass(frozen=True)
class TurnInput:
    """What a turn starts from besides the file and the agent's memory: ``execution`` is the last submission's
    test result when the setting shows it (else None), ``feedback`` None when no feedback was given."""

    turn: int
    execution: dict | None = None
    feedback: FeedbackShown | None = None
    test_cases: tuple[str, ...] = ()
    test_path: str = "test.py"  # the test module's name in tracebacks, as the protocol shows it (test_path())


@dataclass(frozen=True)
class Opening:
    """How a turn's start is shown: the test information and the feedback, as the protocol words them."""

    result: str
    feedback: str


@dataclass(frozen=True)
class Acted:
    """One answer read and carried out: the record's ``actions`` entry (with a ``label`` for prompts), the raw
    result, what the next step is shown of it, and what memory keeps of the answer."""

    action: dict
    observation: str
    shown: str
    remembered: str
    submitted: bool = False
    wrote_code: bool = False


@dataclass(frozen=True)
class StepView:
    """Everything one step's request is built from; ``last`` is the previous step's action (None at the first)."""

    brief: TaskBrief
    system: str
    code: str
    memory: list[dict]
    turn: TurnInput
    opening: Opening
    last: Acted | None
    step: int
    max_steps: int


@dataclass(frozen=True)
class Exchange:
    """One step done: its view, the model's answer and what came of it."""

    view: StepView
    answer: str
    acted: Acted


@dataclass(frozen=True)
class Setting:
    """How a protocol runs one evaluation setting."""

    kind: str  # "tools": steps with actions; "one_call": one answer per turn is the file; "snippet": RCB blocks
    carries_memory: bool = True
    shows_result: bool = True
    shares_seed: bool = True


class CodeProtocol(Protocol):
    """How the code model is talked to."""

    name: str
    settings: dict[str, Setting]
    step_attempts: int
    applies_unusable: bool  # an answer cut off, refused or filtered is carried out as it came (the release)

    def prompts(self) -> dict[str, object]:
        """The texts the protocol sends, by name (a job's fingerprint holds their hashes)."""

    def system(self, actions: tuple[str, ...], max_steps: int) -> str:
        """The system prompt of a tool-using agent."""

    def opening(self, turn: TurnInput) -> Opening:
        """How the turn's start (last test result, feedback) is shown."""

    def messages(self, view: StepView) -> list[dict]:
        """The request of one step."""

    def before_step(self, memory: list[dict], ask: Ask) -> list[dict]:
        """Memory as the next step sees it (the release summarises here)."""

    def after_step(self, memory: list[dict], exchange: Exchange, ask: Ask) -> list[dict]:
        """Memory after a step (our protocol summarises here)."""

    def end_turn(self, memory: list[dict]) -> list[dict]:
        """Memory as a turn leaves it (what the record's ``agent_memory`` holds)."""

    def recover(self, memory: list[dict], ask: Ask, error: Exception) -> list[dict]:
        """Memory to retry a failed step call with (at most ``step_attempts`` calls in all); raises ``error``
        when the protocol does not retry."""

    def act(self, answer: str, workspace: RepoWorkspace, actions: tuple[str, ...], step: int) -> Acted:
        """Read one answer and carry it out on the workspace (never raises for what the answer says)."""

    def invalid(self, answer: str, problem: str, actions: tuple[str, ...], step: int) -> Acted:
        """An answer that is not carried out (it could not be read, or ``problem`` withholds it), as the step's
        action and as the next step is shown it."""

    def one_call(self, brief: TaskBrief, code: str, turn: TurnInput) -> list[dict]:
        """The request of a one-call (baseline) turn."""

    def one_call_code(self, answer: str) -> str | None:
        """The file a one-call answer gives (None: the answer has no code)."""


class ResearcherProtocol(Protocol):
    """How results and feedback are worded for the code model, and how the feedback model is asked."""

    copies_seed_feedback: bool

    def test_info(self, execution: dict, test_cases: tuple[str, ...], test_path: str = "test.py") -> str:
        """A test result as the code model and the feedback model read it; ``test_path`` names the test module
        in its tracebacks (pytest's ``test.py:131:`` lines)."""

    def test_path(self, dataset: DatasetManager, index: int) -> str:
        """How the test module of task ``index`` is named in the tracebacks this protocol shows."""

    def feedback_text(self, records: list[dict], level: int) -> str:
        """Raw feedback records as the code model reads them at ``level``."""

    def feedback_style(self) -> FeedbackStyle:
        """How the feedback model is asked."""

    def record_code(self, code: str) -> str:
        """The target file as a record keeps it and the feedback model reads it."""

    def sampling(self, provider: str, model: str, role: str) -> dict:
        """What this protocol sends by default to ``provider``'s ``model`` as the ``role`` ("code" or "feedback")
        model: ModelSpec fields (temperature, top_p, ...); the user's own settings override them."""


class RunProtocol(CodeProtocol, ResearcherProtocol, Protocol):
    """A whole protocol: both sides."""


def prompt_texts(module: ModuleType) -> dict[str, Any]:
    """A prompts module's texts: its upper-case constants that are strings or mappings of them (what
    :meth:`CodeProtocol.prompts` returns for a protocol whose texts are a module's)."""
    return {name: value for name, value in sorted(vars(module).items())
            if name.isupper() and isinstance(value, (str, Mapping))}
