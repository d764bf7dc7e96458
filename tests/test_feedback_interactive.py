"""The interactive feedback source driven through a real pseudo-terminal, as a person would."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

REPO = Path(__file__).resolve().parents[1]
DRIVER = """
import json, sys
sys.path.insert(0, {repo!r})
from agent.feedback import FeedbackRequest, InteractiveFeedback
request = FeedbackRequest(task_index=7, turn=2, level=3, latex="", instruction="", canonical="SECRET",
                          code="x = 2\\n", previous_code="x = 1\\n", digest="FAILED test_scale")
reply = InteractiveFeedback()(request)
print("RESULT " + json.dumps({{"records": reply.records, "source": reply.source}}))
"""


def spawn() -> "pexpect.spawn":
    child = pexpect.spawn(sys.executable, ["-c", DRIVER.format(repo=str(REPO))], encoding="utf-8", timeout=20)
    child.expect("Task 7, turn 2 \\(guidance level L3\\)")
    child.expect("FAILED test_scale")
    child.expect("-x = 1")
    child.expect("\\+x = 2")
    return child


def result(child: "pexpect.spawn") -> dict:
    child.expect("RESULT (.*)\r\n")
    payload = json.loads(child.match.group(1))
    child.expect(pexpect.EOF)
    return payload


def test_a_person_types_two_items_and_ends_with_an_empty_interface() -> None:
    child = spawn()
    child.expect("Item 1 interface")
    child.sendline("scale")
    child.expect("category T0-T4")
    child.sendline("T9")                      # refused, asked again
    child.expect("not one of")
    child.expect("category T0-T4")
    child.sendline("t1")
    child.expect("description: ")
    child.sendline("x is doubled")
    child.expect("analysis: ")
    child.sendline("the paper adds one")
    child.expect("actionable feedback: ")
    child.sendline("add one instead")
    child.expect("direct code feedback")
    child.sendline("x = 1")
    child.sendline("x += 1")
    child.sendline(".")
    child.expect("Item 2 interface")
    child.sendline("helper")
    child.expect("category T0-T4")
    child.sendline("")                        # default T2
    for prompt in ("description: ", "analysis: ", "actionable feedback: "):
        child.expect(prompt)
        child.sendline("")
    child.expect("direct code feedback")
    child.sendline(".")
    child.expect("Item 3 interface")
    child.sendline("")
    payload = result(child)
    assert payload["source"] == "interactive"
    assert payload["records"] == [
        {"interface": "scale", "category": "T1", "description": "x is doubled", "analysis": "the paper adds one",
         "actionable_feedback": "add one instead", "direct_code_feedback": "x = 1\nx += 1"},
        {"interface": "helper", "category": "T2", "description": "", "analysis": "", "actionable_feedback": "",
         "direct_code_feedback": ""},
    ]


def test_ctrl_d_ends_input_keeping_completed_items() -> None:
    child = spawn()
    child.expect("Item 1 interface")
    child.sendline("scale")
    child.expect("category T0-T4")
    child.sendline("T2")
    for prompt in ("description: ", "analysis: ", "actionable feedback: "):
        child.expect(prompt)
        child.sendline("d")
    child.expect("direct code feedback")
    child.sendline(".")
    child.expect("Item 2 interface")
    child.sendline("half typed")
    child.expect("category T0-T4")
    child.sendeof()
    child.expect("end of input: 1 item")
    payload = result(child)
    assert [r["interface"] for r in payload["records"]] == ["scale"]
