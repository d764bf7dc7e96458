"""Static refusals: candidates that reach for the hidden reference, or give numpy a raw address.

canonical.py has to sit next to the target (the differential tests import
it), so a candidate could simply re-export it: ``from canonical import *``.
Before anything runs, the candidate's syntax tree is searched for what an
honest file never needs: importing ``canonical`` (an import statement, or
``__import__`` / ``import_module`` / ``find_spec`` with a literal name) and
string literals naming a ``canonical.py`` file. A plain word "canonical" in
code (an option value, say) is fine. This only saves a run on the plain
forms: the guard plugin detects reference use by behaviour at run time,
however it is spelled (``agent/runner/pytest_guard/recode_guard_reference.py``).
Both end as ``reference_access``. A file that does not parse is left to
pytest, which reports the SyntaxError.

The other refusal is of a class of the candidate's that gives numpy a raw
address (``__array_interface__``, ``__array_struct__`` in its body): numpy
builds an array over it, a view of any memory, with no event the run-time
guard could see (``raw_memory``, graded ``tampered``). Code under
``if __name__ == "__main__":`` is not searched for it.
"""
from __future__ import annotations

import ast

REFERENCE = "canonical"
IMPORTERS = ("__import__", "import_module", "find_spec", "spec_from_file_location")


def _is_reference(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] == REFERENCE


def _callee(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _literal_reference(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Constant) and isinstance(a.value, str) and _is_reference(a.value.strip())
               for a in call.args)


def reference_access(source: str) -> list[str]:
    """One line per place where ``source`` reaches for canonical; [] when it does not."""
    if REFERENCE not in source:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import) and any(_is_reference(a.name) for a in node.names):
            found.append(f"line {line}: imports the reference module canonical")
        elif isinstance(node, ast.ImportFrom) and (
                _is_reference(node.module) or (node.module is None and any(a.name == REFERENCE for a in node.names))):
            found.append(f"line {line}: imports from the reference module canonical")
        elif isinstance(node, ast.Call) and _callee(node) in IMPORTERS and _literal_reference(node):
            found.append(f"line {line}: imports canonical dynamically")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip().endswith(
                REFERENCE + ".py"):
            found.append(f"line {line}: names the reference file {node.value.strip()!r}")
    return found


RAW_MEMORY = frozenset({"__array_interface__", "__array_struct__"})


def _main_block(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and \
        test.left.id == "__name__" and any(isinstance(c, ast.Constant) and c.value == "__main__"
                                            for c in test.comparators)


def raw_memory(source: str, filename: str) -> list[str]:
    """One line per class of ``source`` defining a raw memory interface (``target.py:12 builds a raw memory view
    (Name)``); [] when none."""
    if not any(name in source for name in RAW_MEMORY):
        return []
    try:
        stack: list[ast.AST] = [ast.parse(source)]
    except (SyntaxError, ValueError):
        return []
    found = []
    while stack:
        node = stack.pop()
        stack.extend(child for child in ast.iter_child_nodes(node) if not _main_block(child))
        if isinstance(node, ast.ClassDef) and any(
                getattr(item, "name", None) in RAW_MEMORY or
                any(isinstance(t, ast.Name) and t.id in RAW_MEMORY for t in getattr(item, "targets", []))
                for item in node.body):
            found.append((node.lineno, f"{filename}:{node.lineno} builds a raw memory view ({node.name})"))
    return [line for _, line in sorted(found)]
