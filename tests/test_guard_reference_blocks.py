"""The reference's blocks the guard looks for in code the candidate compiles (``recode_guard_reference``):
read with the source split once, they must be what ``ast.get_source_segment`` gives node by node."""
from __future__ import annotations

import ast
import functools
import glob
import sys
from pathlib import Path

import pytest

from agent.runner.core import GUARD_DIR

sys.path.insert(0, str(GUARD_DIR))
import recode_guard_reference as reference  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "rcb_pset_sample"
TRICKY = ("class One: pass\n"
          "def two(a,\n        b): return a + b  # trailing\n"
          "x = 1; \u00e9t\u00e9 = 2\nclass Tr\u00e8s:\r\n    def \u00e9(self):\r\n        return '\u00e9'\r\n"
          "def form(\x0c):\n    return 1\n")


def _by_segment(source: str) -> list[tuple[str, str, str]]:
    blocks = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            text = reference._normalise(ast.get_source_segment(source, node) or "")
            if text.count("\n") >= 1:
                blocks.append((node.name, text.split("\n", 1)[0], text))
    return blocks


@functools.lru_cache(maxsize=1)
def _sources() -> list[str]:
    files = sorted(glob.glob(str(Path(__file__).resolve().parents[1] / "work_dir" / "dataset" / "annotations" / "*"
                                 / "canonical.py")))
    files += sorted(glob.glob(str(SHARED / "**" / "*.py"), recursive=True))[:200]
    return [TRICKY] + [Path(f).read_text(encoding="utf-8", errors="replace") for f in files]


@pytest.mark.parametrize("index", range(len(_sources())))
def test_blocks_are_the_source_segments_of_their_nodes(index: int) -> None:
    source = _sources()[index]
    try:
        ast.parse(source)
    except SyntaxError:
        pytest.skip("not Python the parser reads")
    assert reference._blocks_of(source) == _by_segment(source)
