"""Our improved protocol (``protocol: improved``): a chat-shaped history of compact notes, the step budget told,
the configured memory keep honoured, a bounded test digest, feedback asked with a category enum and re-asked
with the problem when an answer does not parse.

A tool turn: every step's request is the system prompt, the memory (past steps
as notes, agent/protocols/notes.py) and one user message with the paper, the
task, the current file with line numbers, the turn's test digest and feedback,
the last action's result and the step header. Memory keeps the digest and the
feedback in brief (made from the result and the records, not from their texts)
and, once a turn is over, each answer's rationale and code change and each
observation's first line; past ``memory_threshold`` messages, an LLM summary
replaces all but the last ``memory_to_keep``. The ``agent`` setting starts
every turn with an empty memory; every setting is shown its last test digest.
"""
from __future__ import annotations

from agent.task.action import (
    CODE_ACTIONS, ActionFormatError, execute, numbered, parse_answer, python_blocks,
)
import agent.protocols.prompts
from agent.common.text import one_line
from agent.feedback.guidance import shown_fields
from agent.feedback.llm import FeedbackStyle
from agent.feedback.records import CATEGORIES, FIELDS, FeedbackRequest
from agent.protocols.base import Acted, Ask, Exchange, Opening, Setting, StepView, TaskBrief, TurnInput, prompt_texts
from agent.protocols.digest import digest_brief, format_test_digest
from agent.protocols.notes import SUMMARY_WORDS, answer_note, bounded_summary, invalid_note, observation_note, settle
from agent.protocols.prompts import (
    ACTION_HELP, AGENT_SYSTEM, BASELINE_SYSTEM, FEEDBACK_REQUEST, FEEDBACK_RETRY, FEEDBACK_SYSTEM, FORMAT_ERROR,
    MEMORY_DIGEST, MEMORY_FEEDBACK, MEMORY_RESULT, MEMORY_STEP, SECTION_BASELINE_ASK, SECTION_DIGEST,
    SECTION_FEEDBACK, SECTION_FILE, SECTION_FILE_EMPTY, SECTION_FILE_PLAIN, SECTION_LAST_ACTION, SECTION_PAPER,
    SECTION_STEP, SECTION_TASK, SUMMARY_MEMORY, SUMMARY_REQUEST, SUMMARY_SYSTEM,
)
from agent.task.workspace import RepoWorkspace

FEEDBACK_KEY = "feedback"
FEEDBACK_ATTEMPTS = 3
FEEDBACK_SCHEMA = {
    "type": "object",
    "properties": {
        FEEDBACK_KEY: {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {name: ({"type": "string", "enum": list(CATEGORIES)} if name == "category"
                                      else {"type": "string"}) for name in FIELDS},
                "required": list(FIELDS),
                "additionalProperties": False,
            },
        }
    },
    "required": [FEEDBACK_KEY],
    "additionalProperties": False,
}
_LABELS = {"description": "Description", "analysis": "Analysis", "actionable_feedback": "Actionable feedback",
           "direct_code_feedback": "Code suggestion"}


def format_feedback(records: list[dict], level: int) -> str:
    """The text the CodeAgent sees for ``records`` at ``level`` (empty at L0 or without records)."""
    fields = [name for name in shown_fields(level) if name != "interface"]
    if not fields or not records:
        return ""
    items = []
    for number, record in enumerate(records, start=1):
        lines = [f"### Feedback {number}: `{record['interface'].strip()}`"]
        for name in fields:
            value = record[name].strip()
            if value:
                lines.append(f"{_LABELS[name]}:\n{_fenced(value)}" if name == "direct_code_feedback"
                             else f"{_LABELS[name]}: {value}")
        items.append("\n".join(lines))
    return "\n\n".join(items)


def feedback_brief(records: list[dict], level: int) -> str:
    """Feedback in brief (for memory): each shown record's interface and description."""
    if not shown_fields(level):
        return ""
    return "; ".join(f"`{record['interface'].strip()}`: {one_line(record['description'])}" for record in records)


def _fenced(code: str) -> str:
    code = code.strip("\n")
    return code if code.lstrip().startswith("```") else f"```python\n{code}\n```"


def _feedback_messages(request: FeedbackRequest) -> list[dict]:
    prompt = FEEDBACK_REQUEST.format(latex=request.latex, instruction=request.instruction,
                                     canonical=request.canonical, turn=request.turn, code=request.code,
                                     digest=request.digest)
    return [{"role": "system", "content": FEEDBACK_SYSTEM}, {"role": "user", "content": prompt}]


def merge_roles(messages: list[dict]) -> list[dict]:
    """Join consecutive messages of one role: some providers require strict alternation."""
    merged: list[dict] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": merged[-1]["content"] + "\n\n" + message["content"]}
        else:
            merged.append({"role": message["role"], "content": message["content"]})
    return merged


class ImprovedProtocol:
    """Bounded notes, the step budget told, the configured keep honoured, the digest, chat-shaped history."""

    name = "improved"
    copies_seed_feedback = False
    step_attempts = 1
    applies_unusable = False  # a cut-off, refused or filtered answer is shown back as invalid, never applied
    settings = {
        "baseline": Setting("one_call", carries_memory=False),
        "agent": Setting("tools", carries_memory=False),
        "memory_agent": Setting("tools"),
        "snippet": Setting("snippet", carries_memory=False),
    }

    def __init__(self, memory_threshold: int, memory_to_keep: int) -> None:
        self.memory_threshold = memory_threshold
        self.memory_to_keep = memory_to_keep

    def prompts(self) -> dict[str, object]:
        """The texts this protocol sends (part of a job's identity): ours, the release's slots left out."""
        return {name: text for name, text in prompt_texts(agent.protocols.prompts).items() if name != "RELEASE_SLOTS"}

    # ------------------------------------------------------------ the code model

    def system(self, actions: tuple[str, ...], max_steps: int) -> str:
        return AGENT_SYSTEM.format(max_steps=max_steps, actions="\n".join(
            f"  {ACTION_HELP[name][0]:<17}  {ACTION_HELP[name][1]}" for name in actions))

    def opening(self, turn: TurnInput) -> Opening:
        digest = format_test_digest(turn.execution, turn.test_cases) if turn.execution else ""
        feedback = format_feedback(turn.feedback.records, turn.feedback.level) if turn.feedback else ""
        return Opening(SECTION_DIGEST.format(digest=digest) if digest else "",
                       SECTION_FEEDBACK.format(feedback=feedback) if feedback else "")

    def messages(self, view: StepView) -> list[dict]:
        parts = self._context(view.brief, view.code, numbered_file=True) + self._shown(view.opening)
        if view.last is not None:
            parts.append(view.last.shown)
        parts.append(SECTION_STEP.format(turn=view.turn.turn, step=view.step, max_steps=view.max_steps))
        head = [{"role": "system", "content": view.system}]
        return head + merge_roles(view.memory + [{"role": "user", "content": "\n\n".join(parts)}])

    def before_step(self, memory: list[dict], ask: Ask) -> list[dict]:
        return memory

    def after_step(self, memory: list[dict], exchange: Exchange, ask: Ask) -> list[dict]:
        """The step's news (the digest and feedback in brief at step 1, the last result, the step header) and
        the answer, each with the note it keeps once the turn is over; a summary past the threshold."""
        view, last = exchange.view, exchange.view.last
        briefs = self._briefs(view.turn) if view.step == 1 else []
        outcome = [last.shown] if last else []
        header = SECTION_STEP.format(turn=view.turn.turn, step=view.step, max_steps=view.max_steps)
        notes = [MEMORY_STEP.format(turn=view.turn.turn, step=view.step)] + briefs
        if last:
            notes.append(MEMORY_RESULT.format(action=last.action["label"], note=observation_note(last.observation)))
        news = {"role": "user", "content": "\n\n".join(briefs + outcome + [header]), "note": "\n".join(notes)}
        memory = memory + [news, {"role": "assistant", "content": exchange.answer, "note": exchange.acted.remembered}]
        return self._summarised(memory, ask) if len(memory) > self.memory_threshold else memory

    def end_turn(self, memory: list[dict]) -> list[dict]:
        return settle(memory)

    def recover(self, memory: list[dict], ask: Ask, error: Exception) -> list[dict]:
        raise error

    def act(self, answer: str, workspace: RepoWorkspace, actions: tuple[str, ...], step: int) -> Acted:
        before = workspace.code
        try:
            action = parse_answer(answer, actions)
        except ActionFormatError as exc:
            return self.invalid(answer, str(exc), actions, step)
        observation = execute(action, workspace)
        argument = f"{action.start} {action.end}" if action.name == "EDIT" else action.argument
        label = f"{action.name} {argument}".strip()
        record = {"step": step, "action": action.name, "argument": argument, "ok": observation.ok, "label": label}
        return Acted(record, observation.text, SECTION_LAST_ACTION.format(action=label, result=observation.text),
                     answer_note(action, label, before, workspace.code), submitted=observation.submitted,
                     wrote_code=action.name in CODE_ACTIONS and observation.ok)

    def invalid(self, answer: str, problem: str, actions: tuple[str, ...], step: int) -> Acted:
        code_actions = " and ".join(name for name in actions if name in CODE_ACTIONS)
        usage = " | ".join(ACTION_HELP[name][0] for name in actions)
        shown = FORMAT_ERROR.format(problem=problem, usage=usage, code_actions=code_actions)
        record = {"step": step, "action": "INVALID", "argument": problem, "ok": False, "label": "invalid answer"}
        return Acted(record, shown, SECTION_LAST_ACTION.format(action="invalid answer", result=shown),
                     invalid_note(problem, answer))

    def one_call(self, brief: TaskBrief, code: str, turn: TurnInput) -> list[dict]:
        prompt = "\n\n".join(self._context(brief, code, numbered_file=False) + self._shown(self.opening(turn))
                             + [SECTION_BASELINE_ASK.format(turn=turn.turn, path=brief.target)])
        return [{"role": "system", "content": BASELINE_SYSTEM}, {"role": "user", "content": prompt}]

    def one_call_code(self, answer: str) -> str | None:
        return python_blocks(answer)

    # ------------------------------------------------------------ the researcher's side

    def test_info(self, execution: dict, test_cases: tuple[str, ...], test_path: str = "test.py") -> str:
        return format_test_digest(execution, test_cases)

    def test_path(self, dataset: DatasetManager, index: int) -> str:
        return "test.py"  # the digest shows no tracebacks

    def feedback_text(self, records: list[dict], level: int) -> str:
        return format_feedback(records, level)

    def feedback_style(self) -> FeedbackStyle:
        return FeedbackStyle(_feedback_messages, FEEDBACK_SCHEMA, FEEDBACK_KEY, CATEGORIES, FEEDBACK_ATTEMPTS,
                             reask=lambda problem: FEEDBACK_RETRY.format(problem=problem))

    def record_code(self, code: str) -> str:
        return code

    def sampling(self, provider: str, model: str, role: str) -> dict:
        return {}

    # ------------------------------------------------------------ parts

    @staticmethod
    def _context(brief: TaskBrief, code: str, numbered_file: bool) -> list[str]:
        """Paper, task and the current target file: the part of the prompt that memory never stores."""
        count = len(code.splitlines())
        if not code.strip():
            file_section = SECTION_FILE_EMPTY.format(path=brief.target)
        elif numbered_file:
            file_section = SECTION_FILE.format(path=brief.target, count=count, numbered=numbered(code))
        else:
            file_section = SECTION_FILE_PLAIN.format(path=brief.target, count=count, code=code.rstrip("\n"))
        return [SECTION_PAPER.format(latex=brief.latex.strip()),
                SECTION_TASK.format(instruction=brief.instruction.strip()), file_section]

    @staticmethod
    def _shown(opening: Opening) -> list[str]:
        return [part for part in (opening.result, opening.feedback) if part]

    def _briefs(self, turn: TurnInput) -> list[str]:
        """The turn's opening as memory keeps it: the test result and the feedback in brief."""
        parts = [MEMORY_DIGEST.format(brief=digest_brief(turn.execution, turn.test_cases))] if turn.execution else []
        brief = feedback_brief(turn.feedback.records, turn.feedback.level) if turn.feedback else ""
        return parts + ([MEMORY_FEEDBACK.format(brief=brief)] if brief else [])

    def _summarised(self, memory: list[dict], ask: Ask) -> list[dict]:
        """All but the last ``memory_to_keep`` messages replaced by one bounded LLM summary of their notes."""
        keep = max(0, self.memory_to_keep)
        old = memory[:-keep] if keep else memory
        if not old:
            return memory
        history = "\n\n".join(f"[{m['role'].upper()}]\n{m['content']}" for m in settle(old))
        request = SUMMARY_REQUEST.format(max_words=SUMMARY_WORDS, history=history)
        summary = ask([{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": request}],
                      "summary")
        condensed = {"role": "user", "content": SUMMARY_MEMORY.format(summary=bounded_summary(summary))}
        return [condensed] + memory[len(old):]
