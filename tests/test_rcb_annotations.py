"""The paper2code annotation grammar: nesting, errors with file:line, stripping, code lines, placeholders."""
from __future__ import annotations

import pytest

from agent.rcb.annotations import (
    AnnotationError, body_lines, count_code_lines, is_code_line, is_tag_like, mask_snippet, masked_line,
    parse_annotations, split_lines, strip_tag_lines, strip_tags,
)

NESTED = '''\
class Model:
    def forward(self, x):
        # <paper2code name="outer">
        # a comment-only line
        # <paper2code name="inner">
        y = x * 2  # trailing comment: still code

        # </paper2code name="inner">
        return y
        # </paper2code name="outer">
'''


def test_nesting_parents_and_line_numbers():
    snippets = parse_annotations(NESTED, "model.py")
    assert [(s.name, s.start, s.end, s.parent) for s in snippets] == [("outer", 3, 10, None), ("inner", 5, 8, "outer")]
    assert snippets[0].indent == " " * 8


def test_strip_tags_leaves_code_only():
    stripped = strip_tags(NESTED, parse_annotations(NESTED))
    assert not any(is_tag_like(line) for line in split_lines(stripped))
    assert stripped.count("\n") == NESTED.count("\n") - 4
    assert "y = x * 2  # trailing comment" in stripped


def test_body_includes_children_and_code_lines_skip_blanks_and_comments():
    snippets = parse_annotations(NESTED)
    outer, inner = snippets
    assert count_code_lines(body_lines(NESTED, outer, snippets)) == 2
    assert count_code_lines(body_lines(NESTED, inner, snippets)) == 1
    assert [is_code_line(s) for s in ["   ", "# c", "  #c", "x = 1  # c", "'''doc'''"]] == [False, False, False, True, True]


def test_mask_replaces_body_with_placeholder_indented_like_the_body():
    snippets = parse_annotations(NESTED)
    masked = mask_snippet(NESTED, snippets[0], snippets)
    assert masked.splitlines()[2:] == [
        '        # TODO: Implement block "outer"',
        "        # Approximately 2 line(s) of code.",
    ]
    inner = mask_snippet(NESTED, snippets[1], snippets)
    assert inner.splitlines() == [
        "class Model:", "    def forward(self, x):", "        # a comment-only line",
        '        # TODO: Implement block "inner"', "        # Approximately 1 line(s) of code.", "        return y",
    ]
    assert masked_line(snippets[1], snippets) == 4


def test_placeholder_takes_the_body_indentation_not_the_tag_indentation():
    text = 'def f():\n# <paper2code name="b">\n    return 1\n# </paper2code name="b">\n'
    snippets = parse_annotations(text)
    assert mask_snippet(text, snippets[0], snippets).splitlines()[1] == '    # TODO: Implement block "b"'


def test_a_repeated_name_is_refused_because_tasks_are_keyed_by_name():
    text = '# <paper2code name="a">\nx = 1\n    # <paper2code name="a">\n    y = 2\n    # </paper2code name="a">\n' \
           '# </paper2code name="a">\n'
    with pytest.raises(AnnotationError, match=r"f.py:3: snippet name 'a' repeats"):
        parse_annotations(text, "f.py")


@pytest.mark.parametrize("text, message", [
    ('x = 1\n# <paper2code name="a">\ny = 2\n', r"^f.py:2: snippet 'a' is never closed"),
    ('# <paper2code name="a">\n# <paper2code name="b">\n# </paper2code name="a">\n# </paper2code name="b">\n',
     r"^f.py:3: end tag of 'a' while 'b' \(opened at line 2\)"),
    ('# </paper2code name="a">\n', r"^f.py:1: end tag of 'a' does not match: no start tag"),
    ('    # <paper2code name="a">\nx = 1\n# </paper2code name="a">\n',
     r"^f.py:3: end tag of 'a' does not match: its start tag \(line 1\) has a different indentation"),
    ('# <paper2code name="a"> trailing\n', r"^f.py:1: malformed paper2code tag"),
    ("# <paper2code name=a>\n", r"^f.py:1: malformed paper2code tag"),
])
def test_errors_name_file_and_line(text, message):
    with pytest.raises(AnnotationError, match=message) as info:
        parse_annotations(text, "f.py")
    assert "\n" not in str(info.value)


def test_whitespace_after_tag_and_crlf_are_accepted():
    text = '# <paper2code name="a">  \r\nx = 1\r\n# </paper2code name="a">\t\r\n'
    snippets = parse_annotations(text)
    assert [s.name for s in snippets] == ["a"]
    assert mask_snippet(text, snippets[0], snippets) == '# TODO: Implement block "a"\r\n# Approximately 1 line(s) of code.\r\n'


def test_tolerant_strip_removes_every_tag_like_line():
    text = 'a = 1\n  # <paper2code name="x">\n# </paper2code name="y">\n#<paper2code broken\nb = 2\n'
    assert strip_tag_lines(text) == "a = 1\nb = 2\n"
