"""The release's protocol, fact by fact (SPEC 8.6), on our own texts: what each call holds, in which order,
what memory keeps and when it is summarised, how a failed call is retried, how results and feedback are
worded. The same facts against the release itself: tests/test_protocol_conformance.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.task.action import RELEASE_ACTIONS
from agent.job.agents import CodeAgent, TaskBrief
from agent.models.build import InferenceError
from agent.protocols.prompts import RELEASE_SLOTS
from agent.protocols.base import FeedbackShown, TurnInput
from agent.protocols.release import FEEDBACKS_SCHEMA, ReleaseProtocol, numbered_lines
from agent.protocols.release_texts import SLOTS, load_release_texts
from agent.task.workspace import RepoWorkspace
from tests import chat_doubles as doubles
from tests.chat_doubles import small_repo

TEXTS = load_release_texts(None)
EXECUTION = {"status": "failed", "tests": 2, "failures": 1, "errors": 0, "skipped": 0,
             "test_summary": {"test.py::test_a": True, "test.py::test_b": False},
             "failure_messages": ["FAILURE in test_b: assert 1 == 2\ntest.py:9: in test_b\n    assert f() == 2\n"
                                  "E   assert 1 == 2"]}
RECORD = {"interface": "f", "category": "free text", "description": "DESC", "analysis": "WHY",
          "actionable_feedback": "HOW", "direct_code_feedback": "return 2"}


def list_model(answers: list[str], fail: tuple[int, ...] = (), summary: str = "SUMMARY") -> doubles.ListModel:
    return doubles.ListModel(answers, lambda messages: messages[0]["content"] == TEXTS.fill("summary_system"),
                             summary, fail)


@pytest.fixture()
def ws(tmp_path: Path) -> RepoWorkspace:
    return small_repo(tmp_path)


def agent(model: doubles.ListModel, ws: RepoWorkspace, setting: str = "memory_agent", threshold: int = 15,
          max_steps: int = 3) -> CodeAgent:
    protocol = ReleaseProtocol(TEXTS, threshold)
    brief = TaskBrief("PAPER-LATEX\n", "TASK-INSTRUCTION\n", "pkg/target.py")
    return CodeAgent(model, protocol, protocol.settings[setting], brief, ws, max_steps=max_steps,
                     actions=RELEASE_ACTIONS)


def user_prompt(history: str, code: str, feedback: str, result: str) -> str:
    return TEXTS.fill("user", latex="PAPER-LATEX\n", instruction="TASK-INSTRUCTION\n", history=history, code=code,
                      feedback=feedback, result=result)


def wrapped(result: str) -> str:
    return TEXTS.fill("result_wrap", result=result, guidance=TEXTS.fill("guidance"))


SUBMIT = "reflect: done\naction:\nSUBMIT"
READ = "reflect: look\naction: READ pkg/util.py"
REPLACE = "reflect: write\naction:\n```\nREPLACE\nx = 1\n```"


def test_every_call_is_system_and_one_six_slot_user_message(ws: RepoWorkspace) -> None:
    model = list_model([READ, REPLACE, SUBMIT])
    result = agent(model, ws).run_turn(TurnInput(0))
    system = TEXTS.fill("system", tools="\n".join(TEXTS.fill(f"tool_{n}") for n in
                                                  ("READ", "RETRIEVE", "REPLACE", "SUBMIT", "BROWSE")))
    assert all([m["role"] for m in r] == ["system", "user"] and r[0]["content"] == system for r in model.requests)
    first = user_prompt(TEXTS.fill("history_empty"), TEXTS.fill("file_empty"), TEXTS.fill("feedback_none"),
                        TEXTS.fill("result_none"))
    assert model.requests[0][1]["content"] == first  # nothing else: no step budget, no path, no header
    # the history is the verbatim transcript: each step's shown result and the (cleaned) answer
    entries = [("User", TEXTS.fill("result_none")), ("Assistant", READ)]
    history = "\n\n".join(TEXTS.fill("history_entry", role=r, content=c) for r, c in entries)
    read_output = wrapped("def helper():\n    return 41\n")
    assert model.requests[1][1]["content"] == user_prompt(history, TEXTS.fill("file_empty"),
                                                           TEXTS.fill("feedback_none"), read_output)
    cleaned = REPLACE.replace("```\n", "```")
    assert model.requests[2][1]["content"].endswith(wrapped(TEXTS.fill("replace_done")) + "\n")
    assert numbered_lines("x = 1") in model.requests[2][1]["content"]  # the fence glued to REPLACE is dropped
    assert ws.code == "x = 1"
    assert result.memory == [{"role": "user", "content": TEXTS.fill("result_none")},
                             {"role": "assistant", "content": READ},
                             {"role": "user", "content": read_output}, {"role": "assistant", "content": cleaned},
                             {"role": "user", "content": wrapped(TEXTS.fill("replace_done"))},
                             {"role": "assistant", "content": SUBMIT}]
    assert [m["role"] for m in result.history] == ["user", "assistant"] * 3
    assert result.history[0]["content"] == first and result.history[3]["content"] == REPLACE  # raw answers


def test_the_file_is_numbered_as_the_release_numbers_it() -> None:
    assert numbered_lines("a\n\nb\n") == "   1:a\n   2:\n   3:b"
    assert numbered_lines("") == ""


def test_a_turn_opens_with_its_test_information_and_its_feedback_only(ws: RepoWorkspace) -> None:
    model = list_model([SUBMIT])
    bot = agent(model, ws)
    bot.run_turn(TurnInput(1, EXECUTION, FeedbackShown([RECORD], 2)))
    bot.run_turn(TurnInput(2, EXECUTION, None))
    info = ReleaseProtocol(TEXTS, 15).test_info(EXECUTION, ())
    turn1, turn2 = model.requests[0][1]["content"], model.requests[1][1]["content"]
    feedback = TEXTS.fill("fb_head", i=0, interface="f") + TEXTS.fill("fb_description", value="DESC") + TEXTS.fill(
        "fb_analysis", value="WHY")
    assert turn1.endswith(wrapped(info) + "\n") and TEXTS.fill("feedback_wrap", feedback=feedback) in turn1
    assert "HOW" not in turn1 and "return 2" not in turn1 and "free text" not in turn1
    assert "DESC" not in turn2 and TEXTS.fill("feedback_none") in turn2  # past feedback never comes back
    assert bot.memory[0]["content"] == wrapped(info)


def test_test_information_holds_the_counts_the_long_messages_and_each_verdict() -> None:
    protocol = ReleaseProtocol(TEXTS, 15)
    info = protocol.test_info(EXECUTION, ())
    assert info == TEXTS.fill("test_info", status="2 tests in all; 1 ok plus 1 not ok",
                              messages=str(EXECUTION["failure_messages"]),
                              summary="test.py::test_a -> ok\ntest.py::test_b -> not ok")
    broken = {"tests": 3, "errors": 1, "failures": 0, "skipped": 1, "test_summary": {}, "failure_messages": []}
    assert protocol._counts(broken) == "3 tests in all; 3 not ok plus 1 error that stopped the module"
    assert protocol._counts({"tests": 1}) == "1 test in all plus 1 ok"


def test_the_agent_setting_carries_memory_but_is_never_shown_a_result() -> None:
    protocol = ReleaseProtocol(TEXTS, 15)
    agent_setting, memory_agent = protocol.settings["agent"], protocol.settings["memory_agent"]
    assert agent_setting.carries_memory and not agent_setting.shows_result and not agent_setting.shares_seed
    assert memory_agent.carries_memory and memory_agent.shows_result and memory_agent.shares_seed
    assert not protocol.settings["baseline"].shares_seed


def test_memory_is_summarised_before_a_step_from_the_raw_transcript_keeping_five(ws: RepoWorkspace) -> None:
    model = list_model([READ, READ, READ, SUBMIT], summary="THE SUMMARY")
    result = agent(model, ws, threshold=5, max_steps=4).run_turn(TurnInput(0))
    summary_calls = [r for r in model.requests if r[0]["content"] == TEXTS.fill("summary_system")]
    assert len(summary_calls) == 1 and model.requests[3] is summary_calls[0]  # before step 4: 6 entries > 5
    oldest = TEXTS.fill("summary_line", role="user", content=TEXTS.fill("result_none"))
    assert summary_calls[0][1]["content"] == TEXTS.fill("summary_request", conversation=oldest)
    entry = TEXTS.fill("summary_entry", summary="THE SUMMARY")
    assert TEXTS.fill("history_entry", role="System", content=entry) in model.requests[4][1]["content"]
    assert result.memory[0] == {"role": "system", "content": entry}
    assert len(result.memory) == 1 + 5 + 2  # the summary, the last 5 entries, then step 4
    assert result.memory[1] == {"role": "assistant", "content": READ}
    assert [u["purpose"] for u in result.usage].count("summary") == 1
    assert len(result.history) == 2 * 4  # the summary call is not in the release's history


def test_a_failed_call_clears_a_short_history_and_is_retried_three_calls_in_all(ws: RepoWorkspace) -> None:
    model = list_model([READ, SUBMIT], fail=(2,))
    result = agent(model, ws).run_turn(TurnInput(0))
    assert TEXTS.fill("history_empty") not in model.requests[1][1]["content"]
    assert TEXTS.fill("history_empty") in model.requests[2][1]["content"]  # the retry: the history was cleared
    assert model.requests[2][1]["content"] == user_prompt(TEXTS.fill("history_empty"), TEXTS.fill("file_empty"),
                                                          TEXTS.fill("feedback_none"),
                                                          wrapped("def helper():\n    return 41\n"))
    assert [u["purpose"] for u in result.usage] == ["step", "failed", "step"]
    failing = list_model([READ], fail=(1, 2, 3, 4))
    with pytest.raises(InferenceError):
        agent(failing, ws).run_turn(TurnInput(0))
    assert len(failing.requests) == 3


def test_answers_are_read_as_the_release_reads_them(ws: RepoWorkspace) -> None:
    model = list_model(["I would rather not.", "action: READ ../canonical.py", "action: REFLECT", SUBMIT])
    result = agent(model, ws, max_steps=4).run_turn(TurnInput(0))
    invalid = TEXTS.fill("invalid")
    assert model.requests[1][1]["content"].endswith(invalid + "\n")  # not wrapped as a command result
    assert model.requests[2][1]["content"].endswith(wrapped(TEXTS.fill("read_error", path="../canonical.py")) + "\n")
    assert "SECRET" not in "".join(m["content"] for r in model.requests for m in r)
    assert [a["action"] for a in result.actions] == ["INVALID", "READ", "INVALID", "SUBMIT"]
    assert result.actions[2]["argument"]  # the release would crash here: our record names the defect


def test_feedback_is_worded_per_level_and_says_so_when_there_is_none() -> None:
    protocol = ReleaseProtocol(TEXTS, 15)
    assert protocol.feedback_text([RECORD], 0) == TEXTS.fill("fb_none") == protocol.feedback_text([], 4)
    full = protocol.feedback_text([RECORD, {**RECORD, "interface": "g"}], 4)
    assert full.count(TEXTS.fill("fb_code", value="return 2")) == 2
    assert TEXTS.fill("fb_head", i=1, interface="g") in full  # counted from 0, as the release counts


def test_the_feedback_model_is_asked_the_release_schema_the_same_request_four_times() -> None:
    style = ReleaseProtocol(TEXTS, 15).feedback_style()
    assert style.key == "feedbacks" and style.categories is None and style.attempts == 4 and style.reask is None
    assert FEEDBACKS_SCHEMA["title"] == "Feedbacks" and FEEDBACKS_SCHEMA["required"] == ["feedbacks"]
    item = FEEDBACKS_SCHEMA["$defs"]["FeedbackInstance"]
    assert item["properties"]["category"] == {"title": "Category", "type": "string"}  # free text


@pytest.mark.parametrize("provider, model, role, expected", [
    ("openai", "gpt-5", "code", {"top_p": 1.0, "fold_system": False}),
    ("openai", "o1-mini", "code", {"top_p": 1.0, "fold_system": True}),
    ("openai", "o4-mini", "feedback", {"top_p": 1.0, "openai_api": "responses", "fold_system": False}),
    ("anthropic", "claude-sonnet-4-20250514", "code", {"temperature": 0.0, "top_p": 1.0, "max_output_tokens": 4096}),
    ("together", "m", "code", {"temperature": 0.0, "top_p": 1.0, "fold_system": False}),
    ("deepseek", "deepseek-chat", "code", {"temperature": 0.0, "top_p": 1.0, "fold_system": False}),
    ("gemini", "gemini-2.5-pro", "code", {"temperature": 0.0, "top_p": 1.0, "fold_system": True,
                                          "thinking_budget": 1000}),
    ("gemini", "gemini-2.5-flash", "code", {"temperature": 0.0, "top_p": 1.0, "fold_system": True,
                                            "thinking_budget": 0}),
])
def test_sampling_per_provider(provider: str, model: str, role: str, expected: dict) -> None:
    assert ReleaseProtocol(TEXTS, 15).sampling(provider, model, role) == expected


def test_our_texts_fill_every_slot_with_the_same_fields() -> None:
    assert set(RELEASE_SLOTS) == set(SLOTS)
    for name, slot in SLOTS.items():
        TEXTS.fill(name, **{field: "x" for field in slot.fields})
