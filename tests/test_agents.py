"""The CodeAgent's turn in our improved protocol: prompts, actions, step budget, baseline, and memory with
summaries (the release's protocol: tests/test_protocol_release.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.task.action import ACTIONS, RELEASE_ACTIONS
from agent.job.agents import CodeAgent, TaskBrief
from agent.protocols.base import FeedbackShown, TurnInput
from agent.protocols.digest import format_test_digest
from agent.protocols.improved import ImprovedProtocol, format_feedback, merge_roles
from agent.protocols.notes import MAX_SUMMARY_CHARS
from agent.rcb.snippet import SnippetTask, build_prompt
from agent.task.workspace import RepoWorkspace
from tests.chat_doubles import ListModel, small_repo

SUBMIT = "reflect: done\naction: SUBMIT"


def script_model(answers: list[str], summary: str = "SUMMARY-TEXT") -> ListModel:
    return ListModel(answers, lambda messages: "Summarise the history below" in messages[-1]["content"], summary)


@pytest.fixture()
def ws(tmp_path: Path) -> RepoWorkspace:
    return small_repo(tmp_path)


def make_agent(model: ListModel, ws: RepoWorkspace, setting: str = "agent", max_steps: int = 3,
               threshold: int = 100, keep: int = 2, actions: tuple[str, ...] = RELEASE_ACTIONS,
               **options) -> CodeAgent:
    brief = TaskBrief(latex="PAPER-LATEX", instruction="TASK-INSTRUCTION", target="pkg/target.py")
    protocol = ImprovedProtocol(threshold, keep)
    return CodeAgent(model, protocol, protocol.settings[setting], brief, ws, max_steps=max_steps, actions=actions,
                     **options)


EXECUTION = {"status": "failed", "tests": 1, "failures": 1, "errors": 0, "skipped": 0,
             "test_summary": {"test.py::test_x": False}, "failure_messages": ["FAILURE in test_x: wrong"]}
RECORDS = [{"interface": "f", "category": "T2", "description": "FEEDBACK-TEXT", "analysis": "", "actionable_feedback": "",
            "direct_code_feedback": ""}]


def last_prompt(model: ListModel, call: int) -> str:
    return model.requests[call][-1]["content"]


def test_a_turn_reads_replaces_and_submits(ws: RepoWorkspace) -> None:
    model = script_model(["reflect: look\naction: READ pkg/util.py",
                         "reflect: write\naction: REPLACE\n"
                         "```python\nfrom pkg.util import helper\nx = helper() + 1\n```",
                         SUBMIT])
    result = make_agent(model, ws).run_turn(TurnInput(0))
    assert result.code == "from pkg.util import helper\nx = helper() + 1\n" == ws.code
    assert [(a["step"], a["action"], a["ok"]) for a in result.actions] == [(1, "READ", True), (2, "REPLACE", True),
                                                                           (3, "SUBMIT", True)]
    first = last_prompt(model, 0)
    for section in ("PAPER-LATEX", "TASK-INSTRUCTION", "## Target file `pkg/target.py` (empty)",
                    "## Turn 0, step 1 of 3"):
        assert section in first
    assert "## Result of your last action (READ pkg/util.py)" in last_prompt(model, 1)
    assert "2 |     return 41" in last_prompt(model, 1)
    assert "1 | from pkg.util import helper" in last_prompt(model, 2)  # the file with line numbers
    assert len(result.usage) == 3 and all(u["purpose"] == "step" for u in result.usage)
    assert [m["role"] for m in result.history] == ["user", "assistant"] * 3
    assert [[m["role"] for m in call["messages"]] for call in result.calls] == [  # the turn's chat grows
        ["system", "user"], ["system", "user", "assistant", "user"], ["system"] + ["user", "assistant"] * 2 + ["user"]]
    assert result.calls[1]["answer"] == result.history[3]["content"]


def test_every_step_sees_the_digest_and_the_feedback(ws: RepoWorkspace) -> None:
    model = script_model(["reflect: look\naction: BROWSE", SUBMIT])
    make_agent(model, ws).run_turn(TurnInput(2, EXECUTION, FeedbackShown(RECORDS, 1)))
    for call in (0, 1):
        prompt = last_prompt(model, call)
        assert "## Test results of your last submission\nStatus: failed." in prompt and "FAILED test_x" in prompt
        assert "## Researcher feedback on your last submission\n### Feedback 1: `f`\nDescription: FEEDBACK-TEXT" in prompt


def test_malformed_answers_get_the_format_and_the_file_is_auto_submitted(ws: RepoWorkspace) -> None:
    model = script_model(["I think the answer is 42", "action: EDIT 1 0\n```python\ny = 1\n```"])
    result = make_agent(model, ws, max_steps=2, actions=ACTIONS).run_turn(TurnInput(0))
    assert result.actions[0]["action"] == "INVALID" and not result.actions[0]["ok"]
    retry = last_prompt(model, 1)
    assert "no `action:` line was found" in retry and "reflect: <your reasoning>" in retry
    assert result.actions[1] == {"step": 2, "action": "EDIT", "argument": "1 0", "ok": True}
    assert result.actions[-1]["action"] == "SUBMIT" and result.actions[-1]["argument"].startswith("auto")
    assert result.code == "y = 1\n"


def test_a_refused_read_is_reported_to_the_agent(ws: RepoWorkspace) -> None:
    model = script_model(["action: READ ../../etc/passwd", SUBMIT])
    result = make_agent(model, ws).run_turn(TurnInput(0))
    assert result.actions[0]["ok"] is False
    assert "Refused: path leaves the repository" in last_prompt(model, 1)


def test_baseline_takes_the_python_block_in_one_call(ws: RepoWorkspace) -> None:
    ws.write_code("old = 1\n")
    model = script_model(["Here it is:\n```python\nnew = 2\n```\nThanks."])
    result = make_agent(model, ws, setting="baseline").run_turn(TurnInput(1, EXECUTION, FeedbackShown(RECORDS, 1)))
    assert result.code == "new = 2\n" and len(model.requests) == 1
    prompt = last_prompt(model, 0)
    assert "```python\nold = 1\n```" in prompt and "FAILED test_x" in prompt and "FEEDBACK-TEXT" in prompt
    assert [a["action"] for a in result.actions] == ["REPLACE", "SUBMIT"]


def test_baseline_without_a_block_keeps_the_file(ws: RepoWorkspace) -> None:
    ws.write_code("old = 1\n")
    result = make_agent(script_model(["I cannot do that."]), ws, setting="baseline").run_turn(TurnInput(0))
    assert result.code == "old = 1\n"
    assert result.actions[0]["ok"] is False and "no closed python block" in result.actions[0]["argument"]


def test_agent_setting_forgets_between_turns(ws: RepoWorkspace) -> None:
    model = script_model([SUBMIT])
    agent = make_agent(model, ws)
    agent.run_turn(TurnInput(0))
    agent.run_turn(TurnInput(1, EXECUTION))
    assert [m["role"] for m in model.requests[1]] == ["system", "user"]


LONG_EXECUTION = {"status": "failed", "tests": 2, "failures": 1, "errors": 0, "skipped": 0,
                  "test_summary": {"test_ok": True, "test_beta": False},
                  "failure_messages": ["test_beta: AssertionError: loss ignores beta\n" + "TRACEBACK-LINE\n" * 40]}
LONG_DIGEST = format_test_digest(LONG_EXECUTION)
FEEDBACK_RECORDS = [{"interface": "dpo_loss", "category": "T2", "description": "Beta is ignored.",
                     "analysis": "ANALYSIS-TEXT", "actionable_feedback": "ACTION-TEXT",
                     "direct_code_feedback": "CODE-SUGGESTION"}]
FEEDBACK = format_feedback(FEEDBACK_RECORDS, 4)


def test_memory_agent_carries_compact_notes_across_turns(ws: RepoWorkspace) -> None:
    model = script_model(["reflect: write it\naction: REPLACE\n```python\ndef dpo_loss(x):\n    return x\n```",
                         SUBMIT, "action: BROWSE", SUBMIT])
    agent = make_agent(model, ws, setting="memory_agent")
    first = agent.run_turn(TurnInput(0))
    assert [m["content"] for m in first.memory] == [
        "[Turn 0, step 1]",
        "reflect: write it\naction: REPLACE [python block not kept: file 0 -> 2 lines (+2 -0); added: dpo_loss]",
        "[Turn 0, step 2]\nResult of REPLACE: The target file was replaced; it now has 2 lines.",
        "reflect: done\naction: SUBMIT"]
    assert all(set(m) == {"role", "content"} for m in first.memory)
    second = agent.run_turn(TurnInput(1, LONG_EXECUTION, FeedbackShown(FEEDBACK_RECORDS, 4)))
    step2 = model.requests[3]
    assert [m["role"] for m in step2] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert "PAPER-LATEX" not in step2[1]["content"]  # memory keeps the news, not the context
    # every step shows the full digest and feedback once, in its prompt; memory holds them in brief
    for name in ("TRACEBACK-LINE", "ANALYSIS-TEXT", "CODE-SUGGESTION"):
        assert "".join(m["content"] for m in step2[:-1]).count(name) == 0
        assert step2[-1]["content"].count(name) == (40 if name == "TRACEBACK-LINE" else 1)
    assert second.memory[4]["content"] == (
        "[Turn 1, step 1]\nTests of the previous submission, in brief: Status: failed. Tests run: 2, passed: 1, "
        "failures: 1, errors: 0, skipped: 0. Failed: test_beta. Passed: test_ok. First error: test_beta: "
        "AssertionError: loss ignores beta\nResearcher feedback on it, in brief: `dpo_loss`: Beta is ignored.")
    assert second.memory[5]["content"] == "action: BROWSE"


def test_a_turn_sees_its_own_observations_in_full_and_memory_keeps_them_in_brief(ws: RepoWorkspace) -> None:
    model = script_model(["reflect: look\naction: READ pkg/util.py", "action: BROWSE", SUBMIT])
    result = make_agent(model, ws, setting="memory_agent").run_turn(TurnInput(0))
    assert "2 |     return 41" in model.requests[2][3]["content"]  # step 3 still sees the file read at step 1
    assert result.memory[2]["content"] == ("[Turn 0, step 2]\nResult of READ pkg/util.py: pkg/util.py:\n"
                                           "(2 more lines, not kept in memory)")
    assert "return 41" not in "".join(m["content"] for m in result.memory)


def test_memory_is_summarised_past_the_threshold_keeping_the_last_messages(ws: RepoWorkspace) -> None:
    model = script_model(["action: BROWSE", "action: READ pkg/util.py", "action: BROWSE", SUBMIT],
                        summary="SUMMARY-TEXT " * 2000)
    agent = make_agent(model, ws, setting="memory_agent", threshold=4, keep=2)
    result = agent.run_turn(TurnInput(0))
    summary_calls = [r for r in model.requests if "Summarise the history below" in r[-1]["content"]]
    assert len(summary_calls) == 1  # after step 3: 6 messages > 4
    request = summary_calls[0][-1]["content"]
    assert "at most 300 words" in request
    assert "each change made to the target file" in request and "which tests passed and which failed" in request
    assert "[Turn 0, step 2]\nResult of BROWSE: 2 files in the repository:" in request  # notes, not transcripts
    assert "pkg/target.py" not in request and "[Turn 0, step 3]" not in request  # only the older 4, in brief
    assert result.memory[0]["content"].endswith(f"[summary cut at {MAX_SUMMARY_CHARS} characters]")
    assert [m["role"] for m in result.memory] == ["user", "user", "assistant"]
    assert result.memory[1]["content"].startswith("[Turn 0, step 3]\nResult of READ pkg/util.py:")
    assert [u["purpose"] for u in result.usage].count("summary") == 1
    assert [call["purpose"] for call in result.calls].count("summary") == 1
    assert len(result.history) == 2 * 3  # the release's history keeps the 3 step calls only


def test_keep_zero_summarises_everything(ws: RepoWorkspace) -> None:
    model = script_model([SUBMIT])
    agent = make_agent(model, ws, setting="memory_agent", threshold=1, keep=0)
    result = agent.run_turn(TurnInput(0))
    assert len(result.memory) == 1 and "SUMMARY-TEXT" in result.memory[0]["content"]


def test_merge_roles_joins_consecutive_messages() -> None:
    merged = merge_roles([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                          {"role": "assistant", "content": "c"}])
    assert merged == [{"role": "user", "content": "a\n\nb"}, {"role": "assistant", "content": "c"}]


def test_a_snippet_setting_without_its_task_is_refused(ws: RepoWorkspace) -> None:
    with pytest.raises(ValueError, match="snippet task"):
        make_agent(script_model([SUBMIT]), ws, setting="snippet")


def test_snippet_turns_send_rcbs_prompt_then_add_digest_and_feedback(ws: RepoWorkspace) -> None:
    masked = 'def f(x):\n    # TODO: Implement block "double"\n    # Approximately 1 line(s) of code.\n'
    task = SnippetTask(index=1, block="double", file_path="pkg/target.py", masked_file=masked, paper="PAPER",
                       context_files=())
    model = script_model(["```python\nreturn x + x\n```", "no code this time"])
    brief = TaskBrief(latex="PAPER", instruction="", target="pkg/target.py")
    protocol = ImprovedProtocol(10, 2)
    agent = CodeAgent(model, protocol, protocol.settings["snippet"], brief, ws, max_steps=3, actions=RELEASE_ACTIONS,
                      snippet=task, reindent_snippet=True)
    first = agent.run_turn(TurnInput(0))
    assert model.requests[0] == [{"role": "user", "content": build_prompt(task)}]  # RCB's request exactly
    assert first.code == "def f(x):\n    return x + x\n" and first.actions[0]["ok"]
    second = agent.run_turn(TurnInput(1, EXECUTION, FeedbackShown(RECORDS, 1)))
    prompt = last_prompt(model, 1)
    assert prompt.startswith(build_prompt(task)) and "    return x + x" in prompt
    assert "FAILED test_x" in prompt and "FEEDBACK-TEXT" in prompt
    assert second.code == "def f(x):\n" and not second.actions[0]["ok"]  # no block: the block is empty
