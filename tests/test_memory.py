"""Memory notes: code changes in brief, answers and observations in one line, bounded summaries."""
from __future__ import annotations

from agent.task.action import parse_answer
from agent.protocols.notes import (
    MAX_SUMMARY_CHARS, answer_note, bounded_summary, code_change, invalid_note, observation_note, settle,
)

BEFORE = "import math\n\nclass Layer:\n    def forward(self, x):\n        return x\n\ndef old():\n    return 1\n"
AFTER = ("import math\n\nclass Layer:\n    def forward(self, x):\n        return 2 * x\n\n"
         "class Head:\n    def __call__(self, x):\n        return x\n\ndef new():\n    return math.pi\n")


def test_a_code_change_names_the_definitions_added_changed_and_removed() -> None:
    assert code_change(BEFORE, AFTER) == ("file 8 -> 12 lines (+6 -2); added: Head, Head.__call__, new; "
                                          "changed: Layer.forward; removed: old")
    assert code_change(BEFORE, BEFORE) == "no change to the file"
    assert code_change("", "def f():\n    return 1\n") == "file 0 -> 2 lines (+2 -0); added: f"


def test_a_code_change_says_when_the_new_file_does_not_parse() -> None:
    assert code_change(BEFORE, "def f(:\n") == ("file 8 -> 1 lines (+1 -8); the new file does not parse "
                                                "(line 1: invalid syntax)")
    assert code_change("def f(:\n", "def f():\n    pass\n").endswith("added: f")


def test_an_answer_note_keeps_the_rationale_and_the_change_but_not_the_block() -> None:
    answer = "reflect: The loss\nignores beta.\naction: REPLACE\n```python\n" + AFTER + "```"
    note = answer_note(parse_answer(answer), "REPLACE", BEFORE, AFTER)
    assert note == ("reflect: The loss ignores beta.\naction: REPLACE [python block not kept: file 8 -> 12 lines "
                    "(+6 -2); added: Head, Head.__call__, new; changed: Layer.forward; removed: old]")
    assert answer_note(parse_answer("action: READ a.py"), "READ a.py", BEFORE, BEFORE) == "action: READ a.py"
    assert invalid_note("no `action:` line was found", "I think\n42") == (
        "(not in the reflect/action format: no `action:` line was found) I think 42")


def test_an_observation_note_keeps_the_first_line_and_retrieve_hits() -> None:
    assert observation_note("pkg/util.py:\n1 | a\n2 | b") == "pkg/util.py:\n(2 more lines, not kept in memory)"
    hits = "[1] pkg/a.py:3 helper (score 1.00)\n```python\ndef helper():\n```\n\n[2] pkg/b.py:9 other (score 0.50)"
    assert observation_note(hits) == ("[1] pkg/a.py:3 helper (score 1.00)\n[2] pkg/b.py:9 other (score 0.50)\n"
                                      "(4 more lines, not kept in memory)")
    assert observation_note("The target file was replaced; it now has 2 lines.") == (
        "The target file was replaced; it now has 2 lines.")


def test_summaries_are_bounded_and_notes_replace_contents() -> None:
    assert bounded_summary("  short  ") == "short"
    long = bounded_summary("w " * MAX_SUMMARY_CHARS)
    assert len(long) < MAX_SUMMARY_CHARS + 60 and long.endswith(f"[summary cut at {MAX_SUMMARY_CHARS} characters]")
    messages = [{"role": "user", "content": "FULL", "note": "NOTE"}, {"role": "assistant", "content": "KEPT"}]
    assert settle(messages) == [{"role": "user", "content": "NOTE"}, {"role": "assistant", "content": "KEPT"}]
