"""The two agents of RECODE-H: the CodeAgent that writes the file, the HumanAgent that judges it.

A CodeAgent turn reads like this: build the step prompt (paper, task, the file
with line numbers, the last test digest and feedback, the result of the last
action), ask the model, remember the exchange, parse the answer into an action
and execute it on the private repository copy; stop at SUBMIT or when the step
budget is spent (then the file is submitted as it is). ``baseline`` asks once per
turn and takes the python blocks of the answer, joined, as the new file (the
release's rule). The agent may use the release's actions; EDIT is opt-in.

Memory: ``agent`` keeps the history of the current turn only; ``memory_agent``
carries it across turns and condenses it with an LLM summary once it holds more
than ``memory_threshold`` messages, keeping the last ``memory_to_keep`` verbatim.
What a step leaves in memory is compact (agent/memory.py): the digest and the
feedback in brief (the prompt shows them in full every step), and once the turn
is over each answer's rationale and code change and each observation's first line.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from agent.action import (
    CODE_ACTIONS, RELEASE_ACTIONS, ActionFormatError, Observation, execute, numbered, parse_answer, python_blocks,
)
from agent.config import SETTINGS
from agent.executor import run_tests
from agent.prompts import (
    ACTION_HELP, AGENT_SYSTEM, BASELINE_SYSTEM, FORMAT_ERROR, MEMORY_DIGEST, MEMORY_FEEDBACK, MEMORY_RESULT, MEMORY_STEP,
    SECTION_BASELINE_ASK, SECTION_DIGEST, SECTION_FEEDBACK, SECTION_FILE, SECTION_FILE_EMPTY, SECTION_FILE_PLAIN,
    SECTION_LAST_ACTION, SECTION_PAPER, SECTION_SNIPPET_PREVIOUS, SECTION_STEP, SECTION_TASK, SUMMARY_MEMORY,
    SUMMARY_REQUEST, SUMMARY_SYSTEM,
)
from agent.digest import digest_brief
from agent.feedback import FeedbackReply, FeedbackRequest, FeedbackSource, feedback_brief
from agent.lookahead import Lookahead
from agent.memory import SUMMARY_WORDS, answer_note, bounded_summary, invalid_note, observation_note, settle
from agent.rcb.snippet import SnippetTask, build_prompt, complete_file, extract_last_python_block
from agent.runner.options import RunnerOptions
from agent.dataset import DatasetManager
from agent.workspace import RepoWorkspace

if TYPE_CHECKING:
    from agent.models.build import ChatModel


@dataclass(frozen=True)
class TaskBrief:
    """The fixed part of every prompt: the paper excerpt, the task and the target file's path."""

    latex: str
    instruction: str
    target: str


@dataclass
class TurnResult:
    """What one CodeAgent turn produced; everything is builtins, ready for a turn record."""

    code: str
    actions: list[dict] = field(default_factory=list)
    usage: list[dict] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)


def merge_roles(messages: list[dict]) -> list[dict]:
    """Join consecutive messages of one role: some providers require strict alternation."""
    merged: list[dict] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": merged[-1]["content"] + "\n\n" + message["content"]}
        else:
            merged.append({"role": message["role"], "content": message["content"]})
    return merged


class CodeAgent:
    """Writes the target file turn by turn with the model, acting on a private repository copy."""

    def __init__(self, model: ChatModel, brief: TaskBrief, workspace: RepoWorkspace, *, setting: str,
                 max_steps: int, memory_threshold: int, memory_to_keep: int,
                 snippet: SnippetTask | None = None, reindent_snippet: bool = False,
                 actions: tuple[str, ...] = RELEASE_ACTIONS) -> None:
        if setting not in SETTINGS:
            raise ValueError(f"evaluation-setting '{setting}' is not one of {', '.join(SETTINGS)}")
        if (setting == "snippet") != (snippet is not None):
            raise ValueError("the snippet setting needs a snippet task, and only it takes one")
        self.model = model
        self.brief = brief
        self.ws = workspace
        self.setting = setting
        self.max_steps = max(1, max_steps)
        self.memory_threshold = memory_threshold
        self.memory_to_keep = memory_to_keep
        self.memory: list[dict] = []  # a resumed run restores it from the last turn record
        self.snippet = snippet
        self.reindent_snippet = reindent_snippet
        self.actions = actions
        self.on_write: Callable[[str], None] = lambda code: None  # a step left this file (not yet submitted)

    def run_turn(self, turn: int, *, digest: str = "", feedback: str = "") -> TurnResult:
        """One turn: returns the submitted file and the turn's actions, usage, transcript and memory."""
        result = TurnResult(code="")
        if self.setting == "baseline":
            self._baseline_turn(turn, digest, feedback, result)
        elif self.setting == "snippet":
            self._snippet_turn(turn, digest, feedback, result)
        else:
            self._agent_turn(turn, digest, feedback, result)
        result.code = self.ws.code
        self.memory = settle(self.memory)
        result.memory = [dict(m) for m in self.memory]
        return result

    # ------------------------------------------------------------ the tool-using agent

    def _agent_turn(self, turn: int, digest: str, feedback: str, result: TurnResult) -> None:
        if self.setting == "agent":
            self.memory = []
        system = AGENT_SYSTEM.format(max_steps=self.max_steps, actions="\n".join(
            f"  {ACTION_HELP[name][0]:<17}  {ACTION_HELP[name][1]}" for name in self.actions))
        opening = self._opening(digest, feedback)
        last: tuple[str, str] | None = None  # the previous step's action and its result
        for step in range(1, self.max_steps + 1):
            outcome = [SECTION_LAST_ACTION.format(action=last[0], result=last[1])] if last else []
            header = [SECTION_STEP.format(turn=turn, step=step, max_steps=self.max_steps)]
            prompt = "\n\n".join(self._context(numbered_file=True) + opening + outcome + header)
            answer = self._ask(system, self.memory, prompt, result)
            observation, label, kept = self._act(answer, step, result)
            # the full digest and feedback are in every prompt of the turn: memory holds their briefs
            briefs = self._briefs(digest, feedback) if step == 1 else []
            notes = [MEMORY_STEP.format(turn=turn, step=step)] + briefs
            notes += [MEMORY_RESULT.format(action=last[0], note=observation_note(last[1]))] if last else []
            self._remember({"role": "user", "content": "\n\n".join(briefs + outcome + header),
                            "note": "\n".join(notes)},
                           {"role": "assistant", "content": answer, "note": kept}, result)
            if observation.submitted:
                return
            if result.actions[-1]["action"] in CODE_ACTIONS and observation.ok:
                self.on_write(self.ws.code)
            last = (label, observation.text)
        result.actions.append({"step": self.max_steps + 1, "action": "SUBMIT", "argument": "auto: step budget spent",
                               "ok": True})

    def _act(self, answer: str, step: int, result: TurnResult) -> tuple[Observation, str, str]:
        """Parse and execute one answer: its observation, its label for the next prompt, its memory note."""
        before = self.ws.code
        try:
            action = parse_answer(answer, self.actions)
        except ActionFormatError as exc:
            result.actions.append({"step": step, "action": "INVALID", "argument": str(exc), "ok": False})
            code_actions = " and ".join(name for name in self.actions if name in CODE_ACTIONS)
            usage = " | ".join(ACTION_HELP[name][0] for name in self.actions)
            return (Observation(False, FORMAT_ERROR.format(problem=exc, usage=usage, code_actions=code_actions)),
                    "invalid answer",
                    invalid_note(str(exc), answer))
        observation = execute(action, self.ws)
        argument = f"{action.start} {action.end}" if action.name == "EDIT" else action.argument
        result.actions.append({"step": step, "action": action.name, "argument": argument, "ok": observation.ok})
        label = f"{action.name} {argument}".strip()
        return observation, label, answer_note(action, label, before, self.ws.code)

    def _context(self, numbered_file: bool) -> list[str]:
        """Paper, task and the current target file: the part of the prompt that memory never stores."""
        code = self.ws.code
        count = len(code.splitlines())
        if not code.strip():
            file_section = SECTION_FILE_EMPTY.format(path=self.brief.target)
        elif numbered_file:
            file_section = SECTION_FILE.format(path=self.brief.target, count=count, numbered=numbered(code))
        else:
            file_section = SECTION_FILE_PLAIN.format(path=self.brief.target, count=count, code=code.rstrip("\n"))
        return [SECTION_PAPER.format(latex=self.brief.latex.strip()),
                SECTION_TASK.format(instruction=self.brief.instruction.strip()), file_section]

    @staticmethod
    def _opening(digest: str, feedback: str) -> list[str]:
        """What the previous submission taught: its test digest and the researcher's feedback."""
        parts = [SECTION_DIGEST.format(digest=digest)] if digest else []
        return parts + ([SECTION_FEEDBACK.format(feedback=feedback)] if feedback else [])

    @staticmethod
    def _briefs(digest: str, feedback: str) -> list[str]:
        """The opening as memory keeps it: the digest and the feedback in brief."""
        parts = [MEMORY_DIGEST.format(brief=digest_brief(digest))] if digest else []
        return parts + ([MEMORY_FEEDBACK.format(brief=feedback_brief(feedback))] if feedback else [])

    # ------------------------------------------------------------ the one-call baseline

    def _baseline_turn(self, turn: int, digest: str, feedback: str, result: TurnResult) -> None:
        prompt = "\n\n".join(self._context(numbered_file=False) + self._opening(digest, feedback)
                             + [SECTION_BASELINE_ASK.format(turn=turn, path=self.brief.target)])
        answer = self._ask(BASELINE_SYSTEM, [], prompt, result)
        code = python_blocks(answer)
        if code is not None:
            self.ws.write_code(code)
        self._one_call_actions(result, code is not None, "no closed python block in the answer")

    # ------------------------------------------------------------ ResearchCodeBench's block completion

    def _snippet_turn(self, turn: int, digest: str, feedback: str, result: TurnResult) -> None:
        """Turn 0 is RCB's request exactly (one user message, no system prompt); later turns add
        the previous attempt, its digest and the feedback, for the feedback-loop variant."""
        parts = [build_prompt(self.snippet)]
        if turn > 0:
            parts += [SECTION_SNIPPET_PREVIOUS.format(path=self.brief.target, code=self.ws.code.rstrip("\n"))]
            parts += self._opening(digest, feedback)
        answer = self._ask("", [], "\n\n".join(parts), result)
        self.ws.write_code(complete_file(self.snippet, answer, reindent=self.reindent_snippet))
        found = extract_last_python_block(answer) is not None
        self._one_call_actions(result, found, "no python block in the answer: the block is empty")

    @staticmethod
    def _one_call_actions(result: TurnResult, ok: bool, problem: str) -> None:
        """The actions of a one-call turn: the file written from the answer, then submitted."""
        result.actions += [{"step": 1, "action": "REPLACE", "argument": "" if ok else problem, "ok": ok},
                           {"step": 1, "action": "SUBMIT", "argument": "", "ok": True}]

    # ------------------------------------------------------------ model calls and memory

    def _ask(self, system: str, memory: list[dict], prompt: str, result: TurnResult, kind: str = "step") -> str:
        head = [{"role": "system", "content": system}] if system else []
        messages = head + merge_roles(memory + [{"role": "user", "content": prompt}])
        completion = self.model.complete(messages)
        result.usage.append({**completion.usage.to_dict(), "purpose": kind})
        result.history.append({"role": "user", "content": prompt, "kind": kind})
        result.history.append({"role": "assistant", "content": completion.text, "kind": kind})
        return completion.text

    def _remember(self, news: dict, answer: dict, result: TurnResult) -> None:
        """Add one step's exchange (each message with its lasting ``note``); summarise past the threshold."""
        self.memory += [news, answer]
        if self.setting == "memory_agent" and len(self.memory) > self.memory_threshold:
            self._summarise(result)

    def _summarise(self, result: TurnResult) -> None:
        """Replace all but the last ``memory_to_keep`` messages by one bounded LLM-written summary of their notes."""
        keep = max(0, self.memory_to_keep)
        old = self.memory[:-keep] if keep else self.memory
        if not old:
            return
        kept = self.memory[len(old):]
        history = "\n\n".join(f"[{m['role'].upper()}]\n{m['content']}" for m in settle(old))
        request = SUMMARY_REQUEST.format(max_words=SUMMARY_WORDS, history=history)
        summary = self._ask(SUMMARY_SYSTEM, [], request, result, kind="summary")
        self.memory = [{"role": "user", "content": SUMMARY_MEMORY.format(summary=bounded_summary(summary))}] + kept


class HumanAgent:
    """The simulated researcher: runs the tests on a submission and asks its source for feedback."""

    def __init__(self, dataset: DatasetManager, index: int, runner: RunnerOptions,
                 source: FeedbackSource | None, lookahead: Lookahead | None = None) -> None:
        self.dataset = dataset
        self.index = index
        self.runner = runner
        self.source = source
        self.lookahead = lookahead

    def evaluate(self, code: str, report_to: Path | None = None) -> dict:
        """The runner's execution result for ``code`` (full text of the target file), its JUnit report at
        ``report_to``: the early run's when one of this very text got a slot (agent/lookahead.py)."""
        early = self.lookahead.take(code, report_to) if self.lookahead is not None else None
        if early is not None:
            return early
        return run_tests(self.dataset, self.index, code, self.runner, report_to=report_to)

    def feedback(self, *, turn: int, level: int, code: str, previous_code: str, digest: str) -> FeedbackReply:
        if self.source is None:
            raise ValueError("feedback is needed but no feedback source is configured (set the human-* keys)")
        request = FeedbackRequest(
            task_index=self.index, turn=turn, level=level, latex=self.dataset.latex(self.index),
            instruction=self.dataset.instruction(self.index), canonical=self.dataset.canonical(self.index),
            code=code, previous_code=previous_code, digest=digest)
        return self.source(request)
