"""Texts of an imported ResearchCodeBench task: adapted test entry point, test.sh, instruction, test names.

Pure functions over source text. The paper's test imports untouched
reference copies (``<stem>_ref.py``); shipping them inside the repository
would hand the answer to any agent that can read files, so the adapted test
serves them through an import hook from the hidden side: from the task's
``canonical.py`` (which the runner copies beside it and guards) when the copy
is the annotated file without tags, else from sources embedded in the test
file itself (hidden and read-only at test time like canonical.py).
"""
from __future__ import annotations

import ast
import re
from pathlib import PurePosixPath

from agent.rcb.annotations import SIZE_LINE, TODO_LINE

PAPER_TEST_NAME = "paper2code_test.py"
DEFAULT_ENV_NAME = "recode_rcb"
# pytest's per-test cap (a hung test stops there; the runner's wall-clock timeout still bounds the run). Roomy
# because the machine may be loaded: llm-sci-use's bootstrap test, ~25 s of CPU, took over 60 s on a busy
# 2-core machine, which a tighter cap reports as a broken reference.
DEFAULT_TIMEOUT = 300
# The release fails a snippet whose test output contains any of these, whatever the exit code.
ERROR_MARKERS = ("Error:", "Exception:", "Traceback", "failed")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

_PREAMBLE = """\
# Added by the RECODE-H importer (see agent/rcb/tasks.py). The paper's reference modules are served from
# the hidden side (canonical.py beside this file, or the copies below), so no reference ships in the
# repository; uninstallable imports the tests never use are stubs; and, as in the ResearchCodeBench
# release, a test whose output shows an error marker fails even when it passes.
import importlib.util as _recode_util
import os as _recode_os
import sys as _recode_sys

import pytest as _recode_pytest

_RECODE_HERE = _recode_os.path.dirname(_recode_os.path.abspath(__file__))
_RECODE_FROM_CANONICAL = {canonical!r}
_RECODE_REFERENCES = {embedded!r}
_RECODE_STUBS = {stubs!r}
_RECODE_MARKERS = {markers!r}


class _RecodeSourceLoader:
    def __init__(self, path, source):
        self.path, self.source = path, source

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = self.path
        exec(compile(self.source, self.path, "exec"), module.__dict__)


class _RecodeReferenceFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in _RECODE_FROM_CANONICAL:
            return _recode_util.spec_from_file_location(fullname, _recode_os.path.join(_RECODE_HERE, "canonical.py"))
        if fullname in _RECODE_REFERENCES:
            relative, source = _RECODE_REFERENCES[fullname]
            loader = _RecodeSourceLoader(_recode_os.path.join(_RECODE_HERE, relative), source)
            return _recode_util.spec_from_loader(fullname, loader)
        return None


class RecodeStubUsed(RuntimeError):
    pass


class _RecodeStubValue:
    def __init__(self, name, reason):
        self._recode_name, self._recode_reason = name, reason

    def _recode_fail(self):
        raise RecodeStubUsed(f"RECODE-H stub: '{{self._recode_name}}' was used, but it is a stand-in for a module that "
                             f"cannot be installed offline ({{self._recode_reason}})")

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _RecodeStubValue(f"{{self._recode_name}}.{{name}}", self._recode_reason)

    def __call__(self, *args, **kwargs):
        self._recode_fail()

    def __mro_entries__(self, bases):
        return (type(self._recode_name.rsplit(".", 1)[-1], (), {{"__init__": lambda obj, *a, **k: self._recode_fail()}}),)


class _RecodeStubLoader:
    def __init__(self, reason):
        self.reason = reason

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = f"<RECODE-H stub of {{module.__name__}}>"
        module.__path__ = []
        module.__getattr__ = lambda name: _RecodeStubValue(f"{{module.__name__}}.{{name}}", self.reason)


class _RecodeStubFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top in _RECODE_STUBS:
            return _recode_util.spec_from_loader(fullname, _RecodeStubLoader(_RECODE_STUBS[top]), is_package=True)
        return None


_recode_sys.meta_path.insert(0, _RecodeReferenceFinder)
_recode_sys.meta_path.append(_RecodeStubFinder)


@_recode_pytest.fixture(autouse=True)
def _recode_release_error_markers(capfd):
    yield
    out, err = capfd.readouterr()
    _recode_sys.stdout.write(out)
    _recode_sys.stderr.write(err)
    found = [marker for marker in _RECODE_MARKERS if marker in out or marker in err]
    if found:
        _recode_pytest.fail(f"the test's output contains {{found[0]!r}}: the ResearchCodeBench release fails "
                            "a snippet whose output shows an error marker, even when its test passes", pytrace=False)
"""

_TEST_SH = '''\
#!/bin/bash
source "$(conda info --base)/etc/profile.d/conda.sh"
conda activate {env_name}
SCRIPT_DIR="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
TARGET_DIR="${{SCRIPT_DIR}}/{repo}"
cd "${{TARGET_DIR}}{tests_dir}"
cp "${{SCRIPT_DIR}}/canonical.py" ./canonical.py
cp "${{SCRIPT_DIR}}/test.py" ./{test}
PYTHONPATH="${{TARGET_DIR}}{source_root}" pytest {test} -v --timeout={timeout}
rm -f ./canonical.py ./{test}
'''


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.append(base.id)
        elif isinstance(base, ast.Attribute):
            names.append(base.attr)
    return names


def collect_test_cases(source: str) -> list[str]:
    """Sorted test names pytest collects from ``source``: ``test*`` functions, and ``test*`` methods of
    unittest TestCase subclasses or ``Test*`` classes (including methods of base classes in the same file)."""
    tree = ast.parse(source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)

    def methods(node: ast.ClassDef, seen: frozenset[str]) -> set[str]:
        own = {item.name for item in node.body if isinstance(item, functions) and item.name.startswith("test")}
        for base in _base_names(node):
            if base in classes and base not in seen:
                own |= methods(classes[base], seen | {base})
        return own

    def collected(node: ast.ClassDef, seen: frozenset[str] = frozenset()) -> bool:
        if node.name.startswith("Test"):
            return True
        return any(base.endswith("TestCase") or (base in classes and base not in seen
                                                   and collected(classes[base], seen | {base}))
                   for base in _base_names(node))

    names = {node.name for node in tree.body if isinstance(node, functions) and node.name.startswith("test")}
    for node in classes.values():
        if collected(node):
            names |= methods(node, frozenset({node.name}))
    return sorted(names)


def reference_module_names(test_source: str, ref_module: str) -> tuple[list[str], bool]:
    """Dotted names under which the test imports the reference module ``ref_module`` (e.g. ``layers_ref``),
    and whether the test also names it in a way an import hook cannot serve (a file path, say)."""
    names: set[str] = set()
    unservable = False
    for node in ast.walk(ast.parse(test_source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names if alias.name.split(".")[-1] == ref_module}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[-1] == ref_module:
                names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names if alias.name == ref_module}
        elif isinstance(node, ast.ImportFrom) and ref_module in (node.module or "").split(".") + [a.name for a in node.names]:
            unservable = True
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ref_module in node.value:
            if _DOTTED.match(node.value) and node.value.split(".")[-1] == ref_module:
                names.add(node.value)
            elif not any(ch.isspace() for ch in node.value):
                unservable = True  # a path or a computed name; prose that merely mentions it is harmless
    return sorted(names), unservable


def _insert_at(tree: ast.Module) -> int:
    """Line after the module docstring and ``from __future__`` imports (they must stay first)."""
    end = 0
    for position, node in enumerate(tree.body):
        is_doc = position == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
            and isinstance(node.value.value, str)
        if is_doc or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            end = node.end_lineno or end
        else:
            break
    return end


def adapt_test(test_source: str, from_canonical: list[str], references: dict[str, tuple[str, str]] | None = None,
               stubs: dict[str, str] | None = None) -> str:
    """The paper's test with the importer's preamble (see ``_PREAMBLE``) after its docstring and future imports.

    ``from_canonical``: reference module names served from canonical.py;
    ``references``: module name -> (repository path, source) of reference
    copies served from this file; ``stubs``: top-level module -> why it is a stub.
    """
    lines = test_source.splitlines(keepends=True)
    at = _insert_at(ast.parse(test_source))
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    preamble = _PREAMBLE.format(canonical=tuple(sorted(from_canonical)), embedded=dict(sorted((references or {}).items())),
                                stubs=dict(sorted((stubs or {}).items())), markers=ERROR_MARKERS)
    return "".join(lines[:at]) + preamble + "\n" + "".join(lines[at:])


def render_test_sh(repo_dir_name: str, env_name: str = DEFAULT_ENV_NAME, timeout: int = DEFAULT_TIMEOUT,
                   test: str = PAPER_TEST_NAME, tests_dir: str = "", source_root: str = "") -> str:
    """A release-shaped test.sh that runs ``test`` from the repository root, as ResearchCodeBench does (or from
    its sub-folder ``tests_dir``, with ``source_root`` on the path, as a package's own suite runs)."""
    return _TEST_SH.format(env_name=env_name, repo=repo_dir_name, test=test, timeout=timeout,
                           tests_dir=f"/{tests_dir}" if tests_dir else "",
                           source_root=f"/{source_root}" if source_root else "")


def enclosing_scope(source: str, line: int) -> str | None:
    """Qualified name of the innermost function or class containing ``line`` (None at module level)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    path: list[str] = []
    nodes = tree.body
    while True:
        inner = next((n for n in nodes if isinstance(n, scopes) and n.lineno <= line <= (n.end_lineno or n.lineno)), None)
        if inner is None:
            return ".".join(path) or None
        path.append(inner.name)
        nodes = list(ast.iter_child_nodes(inner))


def render_instruction(*, paper_title: str, repo_dir_name: str, file_path: str, block: str, line: int,
                       code_lines: int, scope: str | None, context_files: list[str]) -> str:
    """What the agent is asked to do, in the terms of the file it will see."""
    where = f"inside `{scope}`" if scope else "at module level"
    parts = [
        f'Implement the missing code block "{block}" in `{file_path}` of the repository `{repo_dir_name}`, '
        f"which accompanies the paper \"{paper_title}\" (see the LaTeX).",
        "",
        f"At line {line} of `{file_path}` ({where}) the block has been replaced by two placeholder lines:",
        "    " + TODO_LINE.format(name=block),
        "    " + SIZE_LINE.format(n=code_lines),
        "Replace them with the block's code so that it does what the paper describes. The rest of the file and of "
        "the repository is complete; keep it as it is and keep the block's indentation consistent with its "
        f"surroundings. The module is `{PurePosixPath(file_path).with_suffix('').as_posix().replace('/', '.')}`.",
    ]
    if context_files:
        parts += ["", "Context files (read them first; the block may rely on what they define):"]
        parts += [f"- {path}" for path in context_files]
    return "\n".join(parts) + "\n"
