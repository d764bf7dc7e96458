"""The interactive feedback source driven through a real pseudo-terminal, as a person would."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.loop_config import make_config

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


def converse(child: "pexpect.spawn", *turns: tuple[str, str | None]) -> None:
    """Wait for each prompt (a regex) and type the reply; None sends end of input (Ctrl-D)."""
    for prompt, reply in turns:
        child.expect(prompt)
        if reply is None:
            child.sendeof()
        else:
            child.sendline(reply)


def item(interface: str, category: str, description: str = "", analysis: str = "",
         actionable: str = "") -> list[tuple[str, str]]:
    """The prompt/reply pairs of one complete feedback item without code feedback."""
    return [("Item \\d+ interface", interface), ("category T0-T4", category), ("description: ", description),
            ("analysis: ", analysis), ("actionable feedback: ", actionable), ("direct code feedback", ".")]


def test_a_person_types_two_items_and_ends_with_an_empty_interface() -> None:
    child = spawn()
    converse(child, ("Item 1 interface", "scale"), ("category T0-T4", "T9"), ("not one of", "t1"),
             ("description: ", "x is doubled"), ("analysis: ", "the paper adds one"),
             ("actionable feedback: ", "add one instead"), ("direct code feedback", "x = 1"), ("\\| ", "x += 1"),
             ("\\| ", "."))
    converse(child, *item("helper", ""), ("Item 3 interface", ""))  # empty category: T2
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
    converse(child, *item("scale", "T2", "d", "d", "d"), ("Item 2 interface", "half typed"),
             ("category T0-T4", None))
    child.expect("end of input: 1 item")
    assert [r["interface"] for r in result(child)["records"]] == ["scale"]


RUN_DRIVER = """
import json, os, sys
sys.path.insert(0, {repo!r})
os.environ["RECODE_ENV_BACKEND"] = "current"
from agent.config import load_config
from agent.job.workflow import Job, run_task
cfg = load_config({config!r})
outcome = run_task(cfg, Job(cfg.models[0], 1, 1))
print("RESULT " + json.dumps(outcome))
"""


def test_a_person_gives_the_feedback_of_a_real_run(tmp_path: Path) -> None:
    make_config(tmp_path, evaluation_setting="agent", guidance_level=1, feedback_source="interactive",
                protocol="improved")
    config = str(tmp_path / "config_0.yaml")
    child = pexpect.spawn(sys.executable, ["-c", RUN_DRIVER.format(repo=str(REPO), config=config)],
                          encoding="utf-8", timeout=60, cwd=str(REPO))
    child.expect("Task 1, turn 0 \\(guidance level L1\\)")
    child.expect("FAILED test_dpo_loss_grad")
    child.expect("\\+def dpo_loss_grad")          # the diff against the empty previous file
    converse(child, *item("dpo_loss_grad", "T2", "the gradient ignores label_smoothing"), ("Item 2 interface", ""))
    payload = result(child)                      # turn 1 is solved and last: nobody is asked again
    assert payload["state"] == "finished" and payload["solved"] and payload["turns"] == 2
