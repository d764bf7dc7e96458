"""The snippet setting's pure pieces: prompt content and order, last-fence extraction, block insertion."""
from __future__ import annotations

import pytest

from agent.rcb.snippet import (
    SnippetError, SnippetTask, build_prompt, complete_file, extract_last_python_block, insert_block,
)

MASKED = '''\
class Model:
    def forward(self, x):
        y = x
        # TODO: Implement block "scale"
        # Approximately 2 line(s) of code.
        return y
'''


def test_last_python_fence_wins():
    answer = "First try:\n```python\nwrong = 1\n```\nBetter:\n```python\n    y = y * 2\n    y = y + 1\n```\nDone."
    assert extract_last_python_block(answer) == "    y = y * 2\n    y = y + 1"


@pytest.mark.parametrize("answer", ["no code at all", "```\nplain = 1\n```", "```python\nunclosed = 1\n"])
def test_no_complete_python_fence_gives_none(answer):
    assert extract_last_python_block(answer) is None


def test_other_language_fences_are_ignored_and_empty_block_is_empty():
    assert extract_last_python_block("```python\na = 1\n```\n```bash\nls\n```") == "a = 1"
    assert extract_last_python_block("```python\n```") == ""


def test_verbatim_insertion_keeps_the_answer_indentation():
    out = insert_block(MASKED, "scale", "y = y * 2\ny = y + 1\n")
    assert out.splitlines()[3:6] == ["y = y * 2", "y = y + 1", "        return y"]
    with pytest.raises(IndentationError):
        compile(out, "m.py", "exec")
    good = insert_block(MASKED, "scale", "        y = y * 2\n        y = y + 1")
    compile(good, "m.py", "exec")
    assert good == MASKED.replace('        # TODO: Implement block "scale"\n        # Approximately 2 line(s) of code.\n',
                                  "        y = y * 2\n        y = y + 1\n")


def test_reindented_insertion_moves_the_block_to_the_placeholder_column():
    out = insert_block(MASKED, "scale", "  y = y * 2\n  if y > 0:\n      y = y + 1\n\n", reindent=True)
    assert out.splitlines()[3:7] == ["        y = y * 2", "        if y > 0:", "            y = y + 1", "        return y"]
    compile(out, "m.py", "exec")


def test_missing_placeholder_is_an_error():
    with pytest.raises(SnippetError, match='"# TODO: Implement block "other""'):
        insert_block(MASKED, "other", "x = 1")


def test_prompt_order_paper_context_file_block():
    task = SnippetTask(index=3, block="scale", file_path="pkg/model.py", masked_file=MASKED, paper="PAPER TEXT",
                       context_files=(("pkg/util.py", "def helper():\n    return 1\n"),))
    prompt = build_prompt(task)
    order = [prompt.index(part) for part in ("PAPER TEXT", "`pkg/util.py`", "def helper", "`pkg/model.py`",
                                             '# TODO: Implement block "scale"', 'block "scale"')]
    assert order == sorted(order)
    assert prompt.rstrip().endswith("indented exactly as it must appear in the file.")
    assert "Context files" not in build_prompt(SnippetTask(3, "scale", "m.py", MASKED, "P", ()))


def test_complete_file_without_fence_removes_the_block():
    task = SnippetTask(1, "scale", "m.py", MASKED, "P", ())
    assert complete_file(task, "I cannot do this.") == MASKED.replace(
        '        # TODO: Implement block "scale"\n        # Approximately 2 line(s) of code.\n', "")
    assert "        y = y * 2\n" in complete_file(task, "```python\ny = y * 2\n```", reindent=True)
