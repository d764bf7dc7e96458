"""The release's protocol (``protocol: release``, the default): what the authors' harness shows its models,
fact by fact (SPEC section 8.6), so that scores are comparable with the paper's.

Code model: every call is ``[system, user]``. The user message is one
six-slot template: paper, task, the history rendered as text, the current file
with ``%4d:``-numbered lines, the feedback (only in its own turn), and the last
action's result (the test information after a submission; nothing in the
``agent`` setting). History is verbatim: each step's shown result and the
cleaned answer. Before a step, a history longer than ``memory-threshold`` is
summarised by one extra call (not in the record's tokens or history) into one
system-role entry plus the last 5 entries (the release reads its keep under a
misspelt name, so ``memory-to-keep`` is never used). A failed call summarises
(or clears) the history and is retried, 3 calls in all. The model is never
told its step budget. Answers are read exactly as the release reads them
(agent/protocols/release_answers.py).

Feedback model: ``[system, user]`` with the six slots of the release, asked for
the release's schema (``Feedbacks``, array key ``feedbacks``, category free
text); a bad answer is asked again unchanged, 4 attempts in all. The OpenAI
provider is called through the Responses API, as the release does.

Release defects are fixed, not reproduced (README, "Differences from the
release"): answers that crash its parser are invalid answers here; READ stays
inside the repository; EDIT (disabled in the release) is refused.

The wording of every slot comes from agent/protocols/release_texts.py: ours by
default, the release's own with ``release-prompts``.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from agent.feedback.guidance import shown_fields
from agent.feedback.llm import FeedbackStyle
from agent.feedback.records import FIELDS, FeedbackRequest
from agent.protocols.base import Acted, Ask, Exchange, Opening, Setting, StepView, TaskBrief, TurnInput
from agent.protocols.release_answers import ReleaseCommand, clean_answer, parse_release_answer
from agent.protocols.release_paths import as_release, release_test_path
from agent.protocols.release_texts import TOOL_ORDER, ReleaseTexts
from agent.task.workspace import PathEscapeError, RepoWorkspace, resolve_inside

if TYPE_CHECKING:
    from agent.task.dataset import DatasetManager

KEEP = 5  # what the release keeps after a summary, whatever memory-to-keep says
STEP_ATTEMPTS = 3
FEEDBACK_ATTEMPTS = 4
FEEDBACK_KEY = "feedbacks"
RETRIEVE_TOP_K = 5
_CODE_BLOCK = re.compile(r"```(?:python)?\n(.*?)```", re.DOTALL)
_FIELD_SLOTS = {"description": "fb_description", "analysis": "fb_analysis",
                "actionable_feedback": "fb_actionable", "direct_code_feedback": "fb_code"}
_WALK_SKIPPED = ("__pycache__", ".pytest_cache")
# The schema the release's structured-output classes give: an object "Feedbacks" holding the array
# "feedbacks" of "FeedbackInstance" objects with six string fields (category is free text).
_TITLES = {name: name.replace("_", " ").title() for name in FIELDS}
FEEDBACKS_SCHEMA = {
    "$defs": {"FeedbackInstance": {
        "properties": {name: {"title": _TITLES[name], "type": "string"} for name in FIELDS},
        "required": list(FIELDS), "title": "FeedbackInstance", "type": "object", "additionalProperties": False}},
    "properties": {FEEDBACK_KEY: {"items": {"$ref": "#/$defs/FeedbackInstance"}, "title": "Feedbacks",
                                  "type": "array"}},
    "required": [FEEDBACK_KEY], "title": "Feedbacks", "type": "object", "additionalProperties": False,
}


def numbered_lines(code: str) -> str:
    """The file with ``%4d:``-numbered lines, as the release shows it."""
    return "\n".join(f"{number:4d}:{line}" for number, line in enumerate(code.splitlines(), start=1))


class ReleaseProtocol:
    """The authors' harness, call by call."""

    name = "release"
    copies_seed_feedback = True
    step_attempts = STEP_ATTEMPTS
    applies_unusable = True  # the release reads every answer's text as it came, cut off or not (SPEC 8.6)
    settings = {
        "baseline": Setting("one_call", carries_memory=False, shows_result=False, shares_seed=False),
        "agent": Setting("tools", carries_memory=True, shows_result=False, shares_seed=False),
        "memory_agent": Setting("tools"),
        "snippet": Setting("snippet", carries_memory=False),
    }

    def __init__(self, texts: ReleaseTexts, memory_threshold: int) -> None:
        self.texts = texts
        self.memory_threshold = memory_threshold

    def prompts(self) -> dict[str, object]:
        """The texts this protocol sends (part of a job's identity): the slots, ours or the checkout's."""
        return dict(self.texts.texts)

    # ------------------------------------------------------------ the code model

    def system(self, actions: tuple[str, ...], max_steps: int) -> str:
        tools = "\n".join(self.texts.fill(f"tool_{name}") for name in TOOL_ORDER if name in actions)
        return self.texts.fill("system", tools=tools)

    def opening(self, turn: TurnInput) -> Opening:
        result = (self._result(self.test_info(turn.execution, turn.test_cases, turn.test_path))
                  if turn.execution is not None
                  else self.texts.fill("result_none"))
        feedback = (self.texts.fill("feedback_wrap", feedback=self.feedback_text(turn.feedback.records,
                                                                                turn.feedback.level))
                    if turn.feedback is not None else self.texts.fill("feedback_none"))
        return Opening(result, feedback)

    def messages(self, view: StepView) -> list[dict]:
        user = self.texts.fill("user", latex=view.brief.latex, instruction=view.brief.instruction,
                               history=self._history(view.memory), code=self._file(view.code),
                               feedback=view.opening.feedback, result=self._shown(view))
        return [{"role": "system", "content": view.system}, {"role": "user", "content": user}]

    def before_step(self, memory: list[dict], ask: Ask) -> list[dict]:
        return self._summarised(memory, ask) if len(memory) > self.memory_threshold else memory

    def after_step(self, memory: list[dict], exchange: Exchange, ask: Ask) -> list[dict]:
        return memory + [{"role": "user", "content": self._shown(exchange.view)},
                         {"role": "assistant", "content": exchange.acted.remembered}]

    def end_turn(self, memory: list[dict]) -> list[dict]:
        return memory

    def recover(self, memory: list[dict], ask: Ask, error: Exception) -> list[dict]:
        """The release's answer to a failed call: summarise a long history, else forget it."""
        return self._summarised(memory, ask) if len(memory) > self.memory_threshold else []

    def act(self, answer: str, workspace: RepoWorkspace, actions: tuple[str, ...], step: int) -> Acted:
        cleaned = clean_answer(answer)
        command = parse_release_answer(cleaned)
        name = command.kind.upper()
        if command.kind == "submit":
            return Acted(self._record(step, "SUBMIT", "", True), "", "", cleaned, submitted=True)
        if command.kind in ("invalid", "edit") or name not in actions:
            why = command.defect or ("EDIT is disabled in the release" if command.kind == "edit" else "")
            return self.invalid(answer, why, actions, step)
        argument = {"read": command.path, "retrieve": command.query}.get(command.kind, "") or ""
        observation = self._carry_out(command, workspace)
        wrote = command.kind == "replace"
        return Acted(self._record(step, name, argument, True), observation, self._result(observation), cleaned,
                     wrote_code=wrote)

    def invalid(self, answer: str, problem: str, actions: tuple[str, ...], step: int) -> Acted:
        """The release's invalid-answer result; memory keeps the cleaned answer."""
        invalid = self.texts.fill("invalid")
        record = {**self._record(step, "INVALID", problem, False), "label": "invalid answer"}
        return Acted(record, invalid, invalid, clean_answer(answer))

    def one_call(self, brief: TaskBrief, code: str, turn: TurnInput) -> list[dict]:
        feedback = (self.feedback_text(turn.feedback.records, turn.feedback.level) if turn.feedback is not None
                    else self.texts.fill("baseline_no_feedback"))
        user = self.texts.fill("baseline_user", latex=brief.latex, instruction=brief.instruction, path=brief.target,
                               code=self._file(code), feedback=feedback, guidance=self.texts.fill("baseline_guidance"))
        return [{"role": "system", "content": self.texts.fill("baseline_system")}, {"role": "user", "content": user}]

    def one_call_code(self, answer: str) -> str | None:
        """Every ```python block of the answer, joined; the release appends them to the file, we write them as
        the new file (the evident intent of a one-shot baseline; README, differences)."""
        code = "\n\n".join(_CODE_BLOCK.findall(answer)).strip()
        return f"\n{code}\n" if code else None

    # ------------------------------------------------------------ the researcher's side

    def test_info(self, execution: dict, test_cases: tuple[str, ...], test_path: str = "test.py") -> str:
        """The release's test information: counts in words, the failure messages (pytest's long tracebacks,
        the test module named as the release's pytest names it: ``test_path``) as one Python list, then each
        test's verdict."""
        fill = self.texts.fill
        verdicts = "\n".join(fill("test_line", path=name, verdict=fill("test_pass") if ok else fill("test_fail"))
                             for name, ok in (execution.get("test_summary") or {}).items())
        messages = [as_release(message, test_path) for message in execution.get("failure_messages") or []]
        return fill("test_info", status=self._counts(execution), messages=str(messages), summary=verdicts)

    def test_path(self, dataset: DatasetManager, index: int) -> str:
        return release_test_path(dataset.read(index, "test.sh"), dataset.task_dir(index),
                                 dataset.get(index).repo_dir_name, dataset.test_sh(index).workdir)

    def feedback_text(self, records: list[dict], level: int) -> str:
        fill, fields = self.texts.fill, [name for name in shown_fields(level) if name in _FIELD_SLOTS]
        text = "".join(fill("fb_head", i=i, interface=record["interface"])
                       + "".join(fill(_FIELD_SLOTS[name], value=record[name]) for name in fields)
                       for i, record in enumerate(records) if fields)
        return text or fill("fb_none")

    def feedback_style(self) -> FeedbackStyle:
        return FeedbackStyle(self._feedback_messages, FEEDBACKS_SCHEMA, FEEDBACK_KEY, None, FEEDBACK_ATTEMPTS)

    def record_code(self, code: str) -> str:
        return code.strip()

    def sampling(self, provider: str, model: str, role: str) -> dict:
        """The release's request parameters per provider (SPEC 8.6, "Sampling, per provider")."""
        if provider == "openai" and role == "feedback":
            return {"top_p": 1.0, "openai_api": "responses", "fold_system": model == "o1-mini"}
        if provider == "openai":
            return {"top_p": 1.0, "fold_system": model == "o1-mini"}
        if provider == "anthropic":
            return {"temperature": 0.0, "top_p": 1.0, "max_output_tokens": 4096}
        if provider == "gemini":
            return {"temperature": 0.0, "top_p": 1.0, "fold_system": True,
                    "thinking_budget": 1000 if model == "gemini-2.5-pro" else 0}
        if provider in ("azure-openai", "together", "deepseek"):
            return {"temperature": 0.0, "top_p": 1.0, "fold_system": provider == "azure-openai" and model == "o1-mini"}
        return {}

    # ------------------------------------------------------------ parts

    def _feedback_messages(self, request: FeedbackRequest) -> list[dict]:
        fill = self.texts.fill
        user = fill("feedback_user", latex=request.latex, instruction=request.instruction, lang="python",
                    canonical=request.canonical, lang_again="python", code=request.code.strip(),
                    test_info=request.digest, categories=fill("feedback_categories"))
        return [{"role": "system", "content": fill("feedback_system")}, {"role": "user", "content": user}]

    def _shown(self, view: StepView) -> str:
        """The last-result slot of a step: the previous action's result, or at the first step the opening's."""
        return view.last.shown if view.last is not None else view.opening.result

    def _result(self, text: str) -> str:
        return self.texts.fill("result_wrap", result=text, guidance=self.texts.fill("guidance"))

    def _history(self, memory: list[dict]) -> str:
        if not memory:
            return self.texts.fill("history_empty")
        return "\n\n".join(self.texts.fill("history_entry", role=m["role"].capitalize(), content=m["content"])
                           for m in memory)

    def _file(self, code: str) -> str:
        shown = numbered_lines(code)
        return shown if shown.strip() else self.texts.fill("file_empty")

    def _summarised(self, memory: list[dict], ask: Ask) -> list[dict]:
        """All but the last 5 entries replaced by one system-role summary written from their raw transcript."""
        old, recent = memory[:-KEEP], memory[-KEEP:]
        if not old:
            return memory
        fill = self.texts.fill
        transcript = "\n".join(fill("summary_line", role=m["role"], content=m["content"]) for m in old)
        summary = ask([{"role": "system", "content": fill("summary_system")},
                       {"role": "user", "content": fill("summary_request", conversation=transcript)}], "summary")
        return [{"role": "system", "content": fill("summary_entry", summary=summary)}] + recent

    def _counts(self, execution: dict) -> str:
        """The release's test counts in words (a module that failed to load counts every test as failed)."""
        fill = self.texts.fill
        errors, failures, skipped, total = (int(execution.get(key) or 0)
                                            for key in ("errors", "failures", "skipped", "tests"))
        if errors > 0:
            failures, passed, skipped = total, 0, 0
        else:
            passed = max(0, total - failures - skipped)
        parts = [fill("count_total", n=total, s="" if total == 1 else "s")]
        parts += [fill("count_passed", n=passed)] if passed > 0 else []
        parts += [fill("count_failed", n=failures)] if failures > 0 else []
        parts += [fill("count_errors", n=errors, s="" if errors == 1 else "s")] if errors > 0 else []
        parts += [fill("count_skipped", n=skipped)] if skipped > 0 and errors == 0 else []
        if len(parts) == 1:
            return parts[0]
        return fill("count_sep").join(parts[:-1]) + fill("count_last", last=parts[-1])

    @staticmethod
    def _record(step: int, name: str, argument: str, ok: bool) -> dict:
        return {"step": step, "action": name, "argument": argument, "ok": ok, "label": f"{name} {argument}".strip()}

    def _carry_out(self, command: ReleaseCommand, ws: RepoWorkspace) -> str:
        fill = self.texts.fill
        if command.kind == "replace":
            ws.write_code(command.code)
            return fill("replace_done")
        if command.kind == "read":
            return self._read(command.path, ws)
        if command.kind == "retrieve":
            hits = ws.index.search(command.query, k=RETRIEVE_TOP_K)
            return "".join(fill("retrieve_hit", path=doc.path, code=doc.source) for _, doc in reversed(hits))
        return "\n".join(_walk(ws))

    def _read(self, path: str, ws: RepoWorkspace) -> str:
        """The whole file, as the release reads it; a path outside the repository is refused like an unreadable
        one (the release would read it: the hidden reference leaked this way)."""
        try:
            return resolve_inside(ws.repo, path).read_text(encoding="utf-8")
        except (PathEscapeError, OSError, UnicodeDecodeError, ValueError):
            return self.texts.fill("read_error", path=path)


def _walk(ws: RepoWorkspace) -> list[str]:
    """The repository's files in ``os.walk`` order, as the release's BROWSE lists them."""
    files = []
    for root, _, names in os.walk(ws.repo):
        if os.path.basename(root) == _WALK_SKIPPED[0] or _WALK_SKIPPED[1] in root:
            continue
        files += [os.path.relpath(os.path.join(root, name), ws.repo) for name in names]
    return files
