"""The floor plan of agent/ holds: no import circle, every arrow between folders points down the layers declared
in docs/layers.txt, no function over 60 lines, at most 12 top-level modules, and docs/ARCHITECTURE.md draws the
folders with the arrows the code has. Read with ``ast`` only: nothing of agent/ is imported.

Every import counts, wherever it stands: at module level, under ``if TYPE_CHECKING:`` (a type names a real
dependency: the config -> parts -> layout/session -> config circle of issue 31 ran through such imports), and
inside a function (an import deferred for its cost, an SDK or an environment builder, must point down like any
other; deferring one to get past a circle would hide the circle, so it is counted). An import of a package
(``from agent.feedback import SOURCES``) is an arrow to its ``__init__.py``. What the pytest guard's files import
by bare name (they run inside the sandbox, not as ``agent.*``) draws no arrow.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS_FILE = "docs/layers.txt"
DOC_FILE = "docs/ARCHITECTURE.md"
MAX_FUNCTION_LINES = 60
MAX_TOP_LEVEL_MODULES = 12
ENTRY = "entry"  # the unit of agent/'s top-level files that have no line of their own in the layers file
DRAWING_START = "<!-- floor plan: drawn from docs/layers.txt and the code; tests/test_architecture.py checks it -->"
DRAWING_END = "<!-- end of floor plan -->"
# Long functions another change is replacing, each with that change: the test fails when one is no longer long,
# so this list cannot outlive its reason.

@dataclass(frozen=True)
class Arrow:
    source: str  # module, agent.x.y
    target: str
    file: str  # the source's path, from the root
    line: int
    where: str  # "module", "TYPE_CHECKING" or "function"


# ---------------------------------------------------------------------- reading the tree

def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root/agent``, by dotted name (a package by its folder's name)."""
    found = {}
    for path in sorted((root / "agent").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, known: dict[str, Path]) -> str | None:
    """The longest module of the tree that ``name`` is or lies in (None: not ours)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: dict[str, Path], file: str) -> None:
        self.module, self.is_package, self.known, self.file = module, is_package, known, file
        self.functions = self.type_checking = 0
        self.arrows: list[Arrow] = []

    def _add(self, name: str, line: int) -> None:
        target = _known(name, self.known)
        if target is None or target == self.module:
            return
        where = "function" if self.functions else "TYPE_CHECKING" if self.type_checking else "module"
        self.arrows.append(Arrow(self.module, target, self.file, line, where))

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.functions += 1
        self.generic_visit(node)
        self.functions -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        guarded = "TYPE_CHECKING" in ast.unparse(node.test)
        self.type_checking += guarded
        self.generic_visit(node)
        self.type_checking -= guarded

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            package = package[:len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        for alias in node.names:
            self._add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in self.known else base, node.lineno)


def arrows(root: Path) -> list[Arrow]:
    """Every import of one module of agent/ by another, with where it stands."""
    known = modules(root)
    found: list[Arrow] = []
    for name, path in known.items():
        visitor = _Imports(name, path.name == "__init__.py", known, str(path.relative_to(root)))
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        found += visitor.arrows
    return found


def read_layers(path: Path) -> dict[str, str]:
    """The layers file: folder -> its concept, top first."""
    layers = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, concept = line.partition(" ")
            layers[name] = concept.strip()
    return layers


def unit(module: str, layers: dict[str, str]) -> str:
    """The folder a module belongs to; a top-level file is its own unit only with a line of its own."""
    parts = module.split(".")
    if len(parts) == 1:
        return ENTRY
    return parts[1] if len(parts) > 2 or parts[1] in layers else ENTRY


# ---------------------------------------------------------------------- the checks

def import_circles(found: list[Arrow]) -> list[str]:
    """Each set of modules that import one another in a loop, with the imports that tie it."""
    graph: dict[str, set[str]] = {}
    for arrow in found:
        graph.setdefault(arrow.source, set()).add(arrow.target)
        graph.setdefault(arrow.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for after in sorted(graph[node]):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = set()
            while not component or component_top != node:
                component_top = stack.pop()
                component.add(component_top)
            if len(component) > 1:
                circles.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [" ; ".join(f"{a.source} -> {a.target} ({a.file}:{a.line}, {a.where})" for a in found
                       if a.source in circle and a.target in circle) for circle in circles]


def upward_arrows(found: list[Arrow], layers: dict[str, str], folders: list[str]) -> list[str]:
    """Imports from a folder to one on its own level or above it, and folders the layers do not name."""
    order = {name: rank for rank, name in enumerate(layers)}
    problems = [f"agent/{folder}/ has no line in {LAYERS_FILE}" for folder in folders if folder not in order]
    for arrow in found:
        source, target = unit(arrow.source, layers), unit(arrow.target, layers)
        if source != target and source in order and target in order and order[target] <= order[source]:
            problems.append(f"{arrow.file}:{arrow.line} imports {arrow.target} ({arrow.where}): {source} -> {target} "
                            f"points up")
    return problems


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """Every function or method of agent/ longer than ``limit`` lines (from ``def`` to its last line)."""
    found = {}
    for path in modules(root).values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found[f"{path.relative_to(root)}::{node.name}"] = lines
    return found


def too_many_top_level(root: Path, limit: int = MAX_TOP_LEVEL_MODULES) -> list[str]:
    """agent/'s top-level modules, when there are more than ``limit``."""
    names = sorted(p.name for p in (root / "agent").glob("*.py"))
    return names if len(names) > limit else []


def drawing(found: list[Arrow], layers: dict[str, str]) -> str:
    """The floor plan: each folder top first, its concept, and the folders it imports."""
    width = max(map(len, layers)) + 2
    lines = []
    for rank, (name, concept) in enumerate(layers.items(), 1):
        below = {unit(a.target, layers) for a in found if unit(a.source, layers) == name} - {name}
        lines.append(f"{rank:>2}  {name.ljust(width)}{concept}")
        lines.append(f"    {' ' * width}-> {' '.join(n for n in layers if n in below) or '(nothing of ours)'}")
    return "\n".join(lines)


def drawn_block(doc: str) -> str | None:
    """The floor plan as the document shows it (inside its code fence), or None when it has none."""
    if DRAWING_START not in doc or DRAWING_END not in doc:
        return None
    block = doc.split(DRAWING_START, 1)[1].split(DRAWING_END, 1)[0].strip()
    return block.removeprefix("```").removesuffix("```").strip("\n")


# ---------------------------------------------------------------------- the tree as it is

@pytest.fixture(scope="module")
def found() -> list[Arrow]:
    return arrows(REPO)


@pytest.fixture(scope="module")
def layers() -> dict[str, str]:
    return read_layers(REPO / LAYERS_FILE)


def test_no_import_circle_in_agent(found: list[Arrow]) -> None:
    circles = import_circles(found)
    assert not circles, "modules of agent/ that import one another in a loop:\n" + "\n".join(circles)


def test_every_arrow_between_folders_points_down(found: list[Arrow], layers: dict[str, str]) -> None:
    folders = sorted(p.name for p in (REPO / "agent").iterdir() if (p / "__init__.py").is_file())
    problems = upward_arrows(found, layers, folders)
    assert not problems, f"the layers of {LAYERS_FILE} are broken:\n" + "\n".join(problems)


def test_no_function_in_agent_over_60_lines() -> None:
    found = long_functions(REPO)
    assert not found, "functions over 60 lines: " + ", ".join(f"{n} ({k} lines)" for n, k in found.items())


def test_agent_has_few_top_level_modules() -> None:
    crowd = too_many_top_level(REPO)
    assert not crowd, f"{len(crowd)} top-level modules in agent/ (at most {MAX_TOP_LEVEL_MODULES}): {crowd}"


def test_the_architecture_doc_draws_the_folders_and_arrows_the_code_has(found: list[Arrow],
                                                                        layers: dict[str, str]) -> None:
    expected = drawing(found, layers)
    shown = drawn_block((REPO / DOC_FILE).read_text(encoding="utf-8"))
    assert shown == expected, (f"{DOC_FILE}'s floor plan is not the code's; put this between its markers:\n"
                               f"```\n{expected}\n```")


# ---------------------------------------------------------------------- each check can fail

def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_circle_is_found_through_a_function_local_and_a_type_checking_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "agent/__init__.py": "",
        "agent/a.py": "from agent.b import thing\n",
        "agent/b.py": "def late():\n    from agent.c import other\n",
        "agent/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agent import a\n",
        "agent/d.py": "from agent.a import thing\n",
    })
    circles = import_circles(arrows(root))
    assert len(circles) == 1
    assert "agent.b -> agent.c (agent/b.py:2, function)" in circles[0]
    assert "agent.c -> agent.a (agent/c.py:3, TYPE_CHECKING)" in circles[0] and "agent.d" not in circles[0]


def test_an_upward_arrow_and_an_undeclared_folder_are_found(tmp_path: Path) -> None:
    layers = {ENTRY: "top files", "high": "uses low", "low": "uses nothing"}
    root = _tree(tmp_path, {
        "agent/__init__.py": "", "agent/main.py": "import agent.high.one\n",
        "agent/high/__init__.py": "", "agent/high/one.py": "from agent.low import two\n",
        "agent/low/__init__.py": "", "agent/low/two.py": "from ..high.one import x\n",
        "agent/stray/__init__.py": "",
    })
    problems = upward_arrows(arrows(root), layers, ["high", "low", "stray"])
    assert problems == ["agent/stray/ has no line in docs/layers.txt",
                        "agent/low/two.py:1 imports agent.high.one (module): low -> high points up"]


def test_a_long_function_is_named_with_its_length(tmp_path: Path) -> None:
    body = "".join(f"x{i} = {i}\n" for i in range(59))
    indented = body.replace("x", "    x")
    root = _tree(tmp_path, {"agent/__init__.py": "", "agent/m.py": f"def fits():\n{indented}\n\n"
                            f"class Holder:\n    def too_long(self):\n{indented.replace('x', '    x')}"
                            f"        return 1\n"})
    assert long_functions(root) == {"agent/m.py::too_long": 61}


def test_a_crowded_top_level_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {f"agent/m{i}.py": "" for i in range(13)})
    assert len(too_many_top_level(root)) == 13 and not too_many_top_level(root, limit=13)


def test_a_drawing_that_drifted_from_the_code_is_seen(tmp_path: Path) -> None:
    layers = {ENTRY: "top files", "low": "uses nothing"}
    root = _tree(tmp_path, {"agent/main.py": "from agent.low import two\n", "agent/low/__init__.py": "",
                            "agent/low/two.py": ""})
    drawn = drawing(arrows(root), layers)
    assert drawn.splitlines()[1].strip() == "-> low"
    doc = f"text\n{DRAWING_START}\n```\n{drawn}\n```\n{DRAWING_END}\n"
    assert drawn_block(doc) == drawn
    assert drawn_block(doc.replace("-> low", "-> (nothing of ours)", 1)) != drawn
    assert drawn_block("no drawing here") is None
