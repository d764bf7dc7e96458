"""What a paper imports from outside itself: module-level imports of the files its test reaches.

Starting from the test entry point and the annotated files, every import is
resolved against the paper folder (the paper root and the importing file's
own folder are on ``sys.path`` when the release runs the test, and package
-relative imports are relative to the file's package). Imports that resolve
to a file of the paper are followed, transitively; the rest are standard
library (``sys.stdlib_module_names``) or third party. Only imports that run
when a module is loaded count as needs: an import inside a function runs only
if the function does, and one inside ``try: ... except ImportError`` is
optional by construction, so both are reported apart as ``optional``.
Pure over file text; nothing is imported or executed.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

_OPTIONAL_HANDLERS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class ImportUse:
    """One import statement: the dotted module it names, where, and whether it runs at load time."""

    module: str
    file: str
    line: int
    load_time: bool


@dataclass
class PaperImports:
    """Third-party top-level modules a paper needs (at load time) or may use (optional), with a first site each."""

    needed: dict[str, ImportUse] = field(default_factory=dict)
    optional: dict[str, ImportUse] = field(default_factory=dict)
    local_files: list[str] = field(default_factory=list)


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(n, ast.Name) and n.id in _OPTIONAL_HANDLERS for n in names):
            return True
    return False


def import_uses(source: str, file: str, package: str) -> list[tuple[ImportUse, int]]:
    """(use, relative level) of every import in ``source``; ``package`` is the file's dotted package.

    Relative imports are made absolute against ``package``; level 0 keeps the
    name as written.
    """
    found: list[tuple[ImportUse, int]] = []

    def absolute(module: str | None, level: int) -> str | None:
        if level == 0:
            return module
        parts = package.split(".") if package else []
        if level - 1 > len(parts):
            return None
        base = parts[: len(parts) - (level - 1)]
        return ".".join(base + ([module] if module else [])) or None

    def visit(nodes: list[ast.stmt], load_time: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.extend((ImportUse(alias.name, file, node.lineno, load_time), 0) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = absolute(node.module, node.level)
                if base is None:
                    continue
                found.append((ImportUse(base, file, node.lineno, load_time), node.level))
                found.extend((ImportUse(f"{base}.{alias.name}", file, node.lineno, load_time), node.level)
                             for alias in node.names if alias.name != "*")
            elif isinstance(node, ast.Try):
                optional = _catches_import_error(node)
                visit(node.body, load_time and not optional)
                for part in (node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                    visit(part, load_time)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(node.body if isinstance(node.body, list) else [], False)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, load_time)
            elif isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith)):
                visit(node.body, load_time)
                visit(getattr(node, "orelse", []), load_time)
            elif hasattr(ast, "Match") and isinstance(node, ast.Match):
                for case in node.cases:
                    visit(case.body, load_time)

    visit(ast.parse(source).body, True)
    return found


def _module_file(root: Path, search: list[Path], dotted: str) -> Path | None:
    """The paper file a dotted module name loads from (module.py or package/__init__.py), if any."""
    parts = dotted.split(".")
    for base in search:
        candidate = base.joinpath(*parts)
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if path.is_file() and root in path.resolve().parents:
                return path.resolve()
        if candidate.is_dir() and root in candidate.resolve().parents:
            return candidate.resolve()  # a namespace package of the paper: local, nothing to read
    return None


def _package_of(root: Path, path: Path) -> str:
    """Dotted package of a paper file, counted from the paper root."""
    return ".".join(path.relative_to(root).parent.parts)


def scan_paper(root: Path, start_files: list[str]) -> PaperImports:
    """Third-party imports reached from ``start_files`` (paths relative to ``root``), following local ones."""
    root = root.resolve()
    stdlib = set(sys.stdlib_module_names)
    result = PaperImports()
    queue = [(root / rel).resolve() for rel in start_files]
    seen: set[Path] = set()
    while queue:
        path = queue.pop(0)
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        rel = str(path.relative_to(root))
        result.local_files.append(rel)
        try:
            uses = import_uses(path.read_text(encoding="utf-8", errors="replace"), rel, _package_of(root, path))
        except SyntaxError:
            continue
        search = [path.parent, root] if path.parent != root else [root]
        for use, level in uses:
            top = use.module.split(".")[0]
            local = _module_file(root, [root] if level else search, use.module)
            if local is not None:
                queue += [local] if local.is_file() else []
                parents = use.module.split(".")
                queue += [p for p in (_module_file(root, [root] if level else search, ".".join(parents[:i]))
                                      for i in range(1, len(parents))) if p is not None and p.is_file()]
                continue
            if level or top in stdlib or _module_file(root, search, top) is not None:
                continue
            target = result.needed if use.load_time else result.optional
            target.setdefault(top, use)
    for top in list(result.optional):
        if top in result.needed:
            del result.optional[top]
    return result


def local_imports(root: Path, relative: str) -> list[str]:
    """Paper files (relative paths) that ``relative`` imports directly, at any depth of its code."""
    root = root.resolve()
    path = (root / relative).resolve()
    search = [path.parent, root] if path.parent != root else [root]
    found: list[str] = []
    for use, level in import_uses(path.read_text(encoding="utf-8", errors="replace"), relative, _package_of(root, path)):
        local = _module_file(root, [root] if level else search, use.module)
        if local is not None and local.is_file() and str(local.relative_to(root)) not in found:
            found.append(str(local.relative_to(root)))
    return found
