"""The libraries the test will import, imported before the watch starts.

A torch test spends most of its run importing torch, and under the watch each
of its ~1,300 modules costs audit events, import wrappers and a baseline taken
one by one. Imported here, before any of that exists, they cost what they cost
without the guard, and the watch adopts them in one pass when it starts.

This adds nothing a candidate could use. Only names that the test file and
the reference files import at their top level are imported (never a name of
the candidate's file), and only from outside the repository: while they load,
no directory of the repository is on ``sys.path``, and a name that any file or
folder of the repository could provide is left to the test's own import, as is
every name that fails here. No candidate code exists yet; what these imports
leave in the interpreter is the baseline everything later is judged against.

Warnings the imports raise are replayed when pytest collects (``replay``), so
its report reads as when the test imported them itself.
"""
from __future__ import annotations

import ast
import functools
import importlib
import os
import sys
import warnings

import recode_guard_origin as origin

_MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")
_MAX_REPOSITORY_ENTRIES = 50_000  # a larger repository is not walked: nothing is preloaded

_caught: list[warnings.WarningMessage] = []
NOT_LITERAL = object()  # what literal() gives for an expression that is not a literal


def literal(node: ast.expr | None) -> object:
    """``ast.literal_eval`` of ``node``, or ``NOT_LITERAL``: no node, not a literal, or too deep or large to read."""
    if node is None:
        return NOT_LITERAL
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


_read: dict[str, bytes] = {}  # what parse() read, per path


@functools.lru_cache(maxsize=None)
def parse(path: str) -> ast.Module | None:
    """The syntax tree of a file the guard reads (the test's: here and for its bindings), parsed once."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        tree = ast.parse(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    _read[path] = data
    return tree


def parsed_from(path: str, source: bytes) -> ast.Module | None:
    """parse()'s tree of ``path`` when ``source`` is the very text it read (pytest's rewriter reads the test file
    again: what the guard read before any candidate code ran answers for it), else None."""
    tree = parse(path)
    return tree if tree is not None and _read.get(path) == source else None


def children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes``'s nodes, as a list (no generators: the guard reads trees of thousands of nodes)."""
    found = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            found += [item for item in value if isinstance(item, ast.AST)]
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


def walk(tree: ast.AST) -> list[ast.AST]:
    """The nodes ``ast.walk`` yields, in its order (breadth first), as one list: about twice as fast as its
    nested generators, on trees the guard reads in full (the test's, the reference's)."""
    found = [tree]
    for node in found:  # the list grows as it is read: breadth first, each node's children in field order
        found += children(node)
    return found


class Transformer(ast.NodeTransformer):
    """``ast.NodeTransformer``, each node class's visitor looked up once and fields visited without
    ``ast.iter_fields``'s generator: the guard rewrites the test module and the reference, thousands of nodes."""

    def __init__(self) -> None:
        self.visitors: dict[type, object] = {}

    def visit(self, node: ast.AST) -> object:
        return (self.visitors.get(type(node)) or self.visitor(node))(node)

    def visitor(self, node: ast.AST):
        found = self.visitors[type(node)] = getattr(self, "visit_" + type(node).__name__, self.generic_visit)
        return found

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return node  # no child nodes (``ast.NodeVisitor``'s looks for the visitors of the old constant nodes)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        """``ast.NodeTransformer.generic_visit``; a list is rebuilt only from the first element its visitor
        replaced (most are returned as they were)."""
        visitors = self.visitors
        for name in node._fields:
            old = getattr(node, name, None)
            if isinstance(old, list):
                new: list | None = None
                for position, value in enumerate(old):
                    if isinstance(value, ast.AST):
                        visitor = visitors.get(type(value)) or self.visitor(value)
                        replaced = visitor(value)
                        if replaced is value and new is None:
                            continue
                        if new is None:
                            new = old[:position]
                        if replaced is None:
                            continue
                        if not isinstance(replaced, ast.AST):
                            new.extend(replaced)
                            continue
                        value = replaced
                    if new is not None:
                        new.append(value)
                if new is not None:
                    old[:] = new
            elif isinstance(old, ast.AST):
                replaced = self.visit(old)
                if replaced is None:
                    delattr(node, name)
                elif replaced is not old:
                    setattr(node, name, replaced)
        return node


_walked: dict[ast.AST, list[ast.AST]] = {}


def nodes(tree: ast.AST) -> list[ast.AST]:
    """``walk`` of a tree ``parse`` returned, once: the test's is read by several rules (never changed)."""
    found = _walked.get(tree)
    if found is None:
        found = _walked[tree] = walk(tree)
    return found


def top_level_imports(tree: ast.Module) -> list[str]:
    """Absolute module names a file imports in its top-level statements, in order (``import a.b`` gives
    ``a.b``, ``from a.b import c`` gives ``a.b``)."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return list(dict.fromkeys(names))


def repository_names(repo: str) -> set[str] | None:
    """Every name a file or folder of the repository could be imported as (None: too large to tell)."""
    names: set[str] = set()
    seen = 0
    for _, folders, files in os.walk(repo):
        folders[:] = [name for name in folders if not name.startswith(".") and name != "__pycache__"]
        seen += len(folders) + len(files)
        if seen > _MAX_REPOSITORY_ENTRIES:
            return None
        names.update(folders)
        names.update(name.split(".", 1)[0] for name in files if name.endswith(_MODULE_SUFFIXES))
    return names


def _outside(path: str, root: str) -> bool:
    real = os.path.realpath(path)
    return real != root and not real.startswith(root + os.sep)


def preload(files: list[str], repo: str, candidate: str) -> list[str]:
    """Import the libraries ``files`` import at their top level; the names imported."""
    wanted: list[str] = []
    for path in files:
        tree = parse(path) if os.path.realpath(path) != candidate else None
        wanted += top_level_imports(tree) if tree is not None else []
    local = repository_names(repo) if wanted else None
    if local is None:
        return []
    wanted = [name for name in dict.fromkeys(wanted) if name.split(".")[0] not in local]
    saved, root = sys.path[:], os.path.realpath(repo)
    sys.path[:] = [entry for entry in saved if entry and _outside(entry, root)]
    imported = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for name in wanted:
                try:
                    importlib.import_module(name)
                except Exception:  # the test's own import meets it again, as in an unguarded run
                    continue
                imported.append(name)
        _caught.extend(caught)
    finally:
        sys.path[:] = saved
    return imported


def replay() -> None:
    """Raise again, once, the warnings the preloaded imports raised (pytest records them at collection)."""
    caught, _caught[:] = _caught[:], []
    if not caught:
        return
    modules = {origin.module_file(m): name for name, m in list(sys.modules.items())}
    seen = set()
    for item in caught:
        key = (str(item.message), item.category, item.filename, item.lineno)
        if key not in seen:  # raised in a loop, a warning is shown once per place, as the default filter does
            seen.add(key)
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno,
                                   module=modules.get(item.filename), source=item.source)
