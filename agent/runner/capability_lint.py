"""Notes on a candidate that spells out a capability research code rarely needs; they never decide a verdict.

Before a run, the candidate's syntax tree is searched for the plain forms of
what the guard judges at run time (``agent/runner/pytest_guard``): tracers and
profilers, frame objects, walks of the object graph, code built from strings
or code objects, ``ctypes``, import and audit hooks, pytest's plugin machinery,
patching tools, writes into numpy's, pytest's, unittest's, builtins' or
``sys``'s namespaces, and ending or signalling the process. Each use found is
named with its line (``target.py:12 sets a tracer (sys.settrace)``) and kept
under the result's ``suspicious`` notes: a spelling is not an act (pyparsing
walks a traceback, boltons reads frames to format them, a Windows-only branch
loads ``ctypes``), so only the run-time guard, which sees who acts on what,
grades ``tampered``. The one exception is a class of the candidate's giving numpy a raw address
(``__array_interface__``, ``__array_struct__``): numpy builds an array over it, a view of any memory, with no
event the run-time guard could see, so that spelling is refused before running (``RAW_MEMORY``).
Code under ``if __name__ == "__main__":`` is not searched.
"""
from __future__ import annotations

import ast

_TRACERS = {"settrace": "sets a tracer", "setprofile": "sets a profiler", "monitoring": "sets a tracer",
            "settrace_all_threads": "sets a tracer", "setprofile_all_threads": "sets a profiler",
            "TorchFunctionMode": "installs a torch dispatch mode", "TorchDispatchMode": "installs a torch dispatch mode"}
# frames of others: its own (``inspect.currentframe()``, ``sys._getframe()``) are judged at run time
_FRAMES = frozenset({"f_trace", "gi_frame", "cr_frame", "ag_frame", "_current_frames", "_current_exceptions",
                     "getouterframes", "getinnerframes", "walk_stack", "walk_tb"})
_INSPECT_FRAMES = frozenset({"stack", "trace"})
_GRAPH = frozenset({"get_objects", "get_referrers", "get_referents"})
_CODE = frozenset({"co_code"})  # a function's __code__ and __globals__ are judged at run time
_CODE_BUILDERS = frozenset({"CodeType"})  # types.FunctionType: judged at run time by its globals
_IMPORT_HOOKS = frozenset({"meta_path", "path_hooks", "path_importer_cache"})
_PYTEST = frozenset({"pluginmanager", "hookimpl", "hookwrapper", "pytest_plugins"})
_PATCHERS = frozenset({"MonkeyPatch", "monkeypatch", "MagicMock", "Mock"})
_PROCESS = {("os", "_exit"), ("os", "abort"), ("os", "kill"), ("os", "killpg"), ("signal", "raise_signal"),
            ("signal", "pthread_kill"), ("signal", "alarm"), ("signal", "setitimer"),
            ("sys", "addaudithook")}
_NATIVE = frozenset({"ctypes", "_ctypes", "cffi", "_cffi_backend"})
# what reads or writes native memory or calls native code (defining a Structure does neither)
_NATIVE_ACCESS = frozenset({"string_at", "wstring_at", "memmove", "memset", "cast", "from_address", "addressof",
                            "pythonapi", "CDLL", "cdll", "PyDLL", "pydll", "LibraryLoader", "FFI", "dlopen"})
_FOREIGN_ROOTS = frozenset({"numpy", "np", "pytest", "_pytest", "unittest", "builtins", "math", "pluggy"})
_SYS_FREE = frozenset({"stdout", "stderr", "stdin", "argv", "path", "dont_write_bytecode", "excepthook",
                       "displayhook", "unraisablehook", "breakpointhook", "tracebacklimit"})
_RAW_MEMORY = frozenset({"__array_interface__", "__array_struct__"})
RAW_MEMORY = "builds a raw memory view"  # the one finding that is refused, not noted (see the docstring)


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _main_block(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and \
        test.left.id == "__name__" and any(isinstance(c, ast.Constant) and c.value == "__main__"
                                            for c in test.comparators)


def _nodes(tree: ast.Module):
    """Every node except those under a ``__main__`` block."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not _main_block(child))


def _attribute_finding(node: ast.Attribute) -> str | None:
    name, chain = node.attr, _dotted(node) or node.attr
    if name in _TRACERS:
        return f"{_TRACERS[name]} ({chain})"
    if name in _FRAMES or (name in _INSPECT_FRAMES and chain == f"inspect.{name}"):
        return f"reads the interpreter's frames ({chain})"
    if name in _GRAPH:
        return f"walks the interpreter's object graph ({chain})"
    if name in _CODE and not (name == "__code__" and isinstance(node.ctx, ast.Load)):
        return f"builds or reaches into code objects ({chain})"
    if name in _IMPORT_HOOKS:
        return f"installs an import hook ({chain})"
    if name in _PYTEST:
        return f"reaches into pytest's plugin machinery ({chain})"
    if name in _PATCHERS:
        return f"patches objects it did not define ({chain})"
    head = chain.split(".")
    if len(head) == 2 and (head[0], head[1]) in _PROCESS:
        return f"ends or signals the test process ({chain})"
    if head[0] in _NATIVE and name in _NATIVE_ACCESS:
        return f"accesses native memory ({chain})"
    return None


def _write_finding(target: ast.expr) -> str | None:
    """Assignments into the namespaces of libraries the verdict relies on."""
    if isinstance(target, ast.Subscript):
        chain = _dotted(target.value)
        return f"writes {chain}[...]" if chain == "sys.modules" else None
    chain = _dotted(target) if isinstance(target, ast.Attribute) else None
    if chain is None:
        return None
    head = chain.split(".")
    if head[0] in _FOREIGN_ROOTS or (head[0] == "sys" and head[1] not in _SYS_FREE) or chain.startswith(
            ("torch.testing.", "torch.Tensor.")):
        return f"writes {chain}, a namespace it did not define"
    return None


def _node_finding(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return _attribute_finding(node)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] + [
            f"{node.module}.{a.name}" if node.module else a.name for a in node.names]
        for name in names:
            top = name.split(".")[0]
            if top in _NATIVE and name.split(".")[-1] in _NATIVE_ACCESS:
                return f"imports {name} (native memory access)"
            if top in ("_pytest", "pluggy") or name == "unittest.mock":
                return f"imports {name} (pytest's internals or a patching tool)"
            last = name.split(".")[-1]
            if last in _TRACERS or last in _FRAMES or last in _GRAPH or last in _IMPORT_HOOKS:
                return f"imports {name}, a capability research code never needs"
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CODE_BUILDERS:
        return f"builds code at run time ({_dotted(node.func) or node.func.attr})"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in _CODE_BUILDERS:
            return f"builds code at run time ({node.func.id})"
        if node.func.id == "setattr" and node.args:
            finding = _write_finding(ast.Attribute(value=node.args[0], attr="?", ctx=ast.Store()))
            return finding.replace(".?", "") if finding else None
        return None
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        return next((f for f in map(_write_finding, targets) if f), None)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("pytest_"):
        return f"defines a pytest hook ({node.name})"
    if isinstance(node, ast.Name) and node.id in _PYTEST and isinstance(node.ctx, ast.Store):
        return f"registers pytest plugins ({node.id})"
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            names = [t.id for t in getattr(item, "targets", []) if isinstance(t, ast.Name)]
            if any(n in _RAW_MEMORY for n in names) or getattr(item, "name", None) in _RAW_MEMORY:
                return f"{RAW_MEMORY} ({node.name})"
    return None


def capability_notes(source: str, filename: str) -> list[str]:
    """One line per spelled capability (``target.py:12 sets a tracer (sys.settrace)``); [] when none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found: dict[tuple[int, str], None] = {}
    for node in _nodes(tree):
        finding = _node_finding(node)
        if finding:
            found.setdefault((getattr(node, "lineno", 0), finding), None)
    return [f"{filename}:{line} {finding}" for line, finding in sorted(found)]
