"""The instrumentation of the test module (recode_guard_results.instrument): the test's comparisons are checked,
the code the ResearchCodeBench importer adds (agent/rcb/tasks.py) is the harness's and left as it is."""
from __future__ import annotations

import json
import subprocess
import sys

from agent.rcb.tasks import adapt_test
from agent.runner.core import GUARD_DIR

PAPER_TEST = '''\
import unittest
from implementation_ref import reference
from implementation import candidate


class TestPaper(unittest.TestCase):
    def test_same(self):
        self.assertTrue(candidate(2) == reference(2))
'''

INSTRUMENT = r'''
import ast, json, sys
sys.path.insert(0, sys.argv[1])
import recode_guard_results as results
source = sys.stdin.read()
tree = ast.parse(source)
results.instrument(tree, source)
checked = {}
for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        checked[node.name] = any(isinstance(n, ast.Name) and n.id == results.CHECK for n in ast.walk(node))
print(json.dumps(checked))
'''


def test_the_importers_code_is_left_alone_and_the_tests_comparisons_are_checked() -> None:
    source = adapt_test(PAPER_TEST, [], {"implementation_ref": ("implementation_ref.py",
                                                               "def reference(x):\n    return 2 * x\n")})
    done = subprocess.run([sys.executable, "-c", INSTRUMENT, str(GUARD_DIR)], input=source, capture_output=True,
                          text=True, timeout=60, check=True)
    checked = json.loads(done.stdout)
    assert checked["test_same"] and checked["TestPaper"], checked
    harness = {name: seen for name, seen in checked.items() if name.startswith(("_Recode", "_recode"))}
    assert harness and not any(harness.values()), checked
