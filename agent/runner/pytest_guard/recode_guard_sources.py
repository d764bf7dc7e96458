"""The test's and the reference's module namespaces, judged against what their own source binds.

A baseline taken when such a module's import ends would already hold what the
candidate wrote while the module was still importing (its ``from target import
...`` line runs the candidate first). So the comparison is with the source: each
name the module's top level binds once is the function or class it defines, the
module or attribute its import names, or the literal it assigns (a tolerance
dict, a list, a number); a value built otherwise (``np.array(...)``) must keep
its plain data (``snapshot``: containers, scalars and arrays, copied when first
seen; the other objects they hold by identity, their state being their own). What the module's own code changes
(its ``global`` statements, a subscript or method call on the name, ``del``)
is its own; a change to a value the source hands to a call (which may be the
candidate's, mutating its argument) cannot be told apart from tampering and
is only noted as suspicious. Names the source never binds may not shadow a
builtin or hold the candidate's objects, unless one of its star imports gives
them (a star import of the candidate's module binds its public names; one
shadowing a builtin is only noted as suspicious).
"""
from __future__ import annotations

import ast
import builtins
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Callable

import recode_guard_origin as origin
import recode_guard_preload as preload

_MISSING = object()
_BUILTIN_NAMES = frozenset(dir(builtins))
_CONTAINERS = (list, dict, set, tuple, bytearray)
_COPY_LIMIT = 10_000  # plain data with more elements is not copied (judged by identity only)
_FUNCTION_CODE = types.FunctionType.__dict__["__code__"]
_NAMESPACE = types.ModuleType.__dict__["__dict__"]


@dataclass
class Plan:
    """What a module's source binds at its top level, and which names its own code changes or hands out."""

    path: str
    defined: dict[str, tuple[str, object]] = field(default_factory=dict)  # name -> (kind, detail)
    changed: set[str] = field(default_factory=set)  # names its code rebinds itself
    mutated: set[str] = field(default_factory=set)  # names it changes in place (``X[k] = v``, ``X.append``)
    calls: dict[str, set[str]] = field(default_factory=dict)  # name -> roots of the callees it is passed to
    stars: list[tuple[int, str]] = field(default_factory=list)  # (level, module) of its ``from m import *``
    copies: dict[str, object] = field(default_factory=dict)  # built values: their contents when first seen


def _binding(node: ast.stmt) -> list[tuple[str, str, object]]:
    """(name, kind, detail) bound by one top-level statement."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        kind = "class" if isinstance(node, ast.ClassDef) else "def"
        detail = (node.lineno, node.end_lineno, tuple(
            n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and
            not n.decorator_list)) if kind == "class" else None
        return [(node.name, kind if not node.decorator_list else "decorated", detail)]
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], "import", a.name if a.asname else a.name.split(".")[0])
                for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [(a.asname or a.name, "from", (node.level, node.module or "", a.name)) for a in node.names
                if a.name != "*"]
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            value = preload.literal(node.value)
            return [(targets[0].id, "value", None) if value is preload.NOT_LITERAL else
                    (targets[0].id, "literal", value)]
    return []


def _module_stores(statement: ast.stmt) -> set[str]:
    """Names a top-level statement binds in the module's scope anywhere inside it (an import or a ``def`` under
    ``if sys.version_info ...``, a loop variable), not in the functions and classes it defines."""
    names, stack = set(), [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names if a.name != "*")
        stack.extend(ast.iter_child_nodes(node))
    return names


_PLANNED = frozenset({ast.Global, ast.Nonlocal, ast.Subscript, ast.Attribute, ast.Call, ast.AugAssign})


def plan(path: str, tree: ast.Module) -> Plan:
    result = Plan(path)
    counts: dict[str, int] = {}
    for node in tree.body:
        for name, kind, detail in _binding(node):
            counts[name] = counts.get(name, 0) + 1
            result.defined[name] = (kind, detail)
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            result.stars.append((node.level, node.module or ""))
    top_level = {name for node in tree.body if not _binding(node) for name in _module_stores(node)}
    for node in preload.nodes(tree):
        if type(node) not in _PLANNED:  # the parser's nodes are of these classes exactly: most are none of them
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            result.changed.update(node.names)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load) and \
                isinstance(node.value, ast.Name):
            result.mutated.add(node.value.id)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                result.mutated.add(node.func.value.id)
            root = _root(node.func)
            for arg in [*node.args, *(k.value for k in node.keywords if k.arg)]:
                if isinstance(arg, ast.Name):
                    result.calls.setdefault(arg.id, set()).add(root)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, (ast.Name, ast.Subscript)):
            target = node.target if isinstance(node.target, ast.Name) else node.target.value
            if isinstance(target, ast.Name):
                result.mutated.add(target.id)
    result.changed |= top_level | {name for name, count in counts.items() if count > 1}
    return result


def _root(node: ast.expr) -> str:
    """The name a callee expression starts from (``np`` of ``np.testing.assert_allclose``), or ''."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


_LIBRARY_ROOTS = (os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix))


def _library_root(module: types.ModuleType, plan_: Plan, root: str) -> bool:
    """A callee reached from a library the module imports (numpy's, torch's, pytest's): not the candidate's."""
    kind, detail = plan_.defined.get(root, ("", None))
    if kind not in ("import", "from"):
        return False
    value = _NAMESPACE.__get__(module).get(root)
    code = origin.code_of(value)
    if code is not None:
        file: object = code.co_filename
    else:
        owner = value if origin.is_kind(value, (types.ModuleType, type)) else type(value)
        if not origin.is_kind(owner, types.ModuleType):
            owner = sys.modules.get(str(origin.type_dict(owner).get("__module__", "")))
        file = origin.module_file(owner)
    return isinstance(file, str) and ("-packages" + os.sep in file or os.path.realpath(file).startswith(
        _LIBRARY_ROOTS)) and not origin.is_candidate_file(file)


def _handed(module: types.ModuleType, plan_: Plan, name: str) -> bool:
    """Whether the source passes ``name`` to a callee that may be the candidate's (which may mutate it)."""
    return any(not _library_root(module, plan_, root) for root in plan_.calls.get(name, ()))


def _resolve(module: types.ModuleType, detail: tuple) -> object:
    """What ``from m import x`` gives now (relative imports resolved against the module's package)."""
    level, name, attribute = detail
    if level:
        package = str(_NAMESPACE.__get__(module).get("__package__") or "")
        parts = package.split(".") if package else []
        base = ".".join(parts[:len(parts) - level + 1])
        name = f"{base}.{name}".strip(".") if name else base
    source = sys.modules.get(name)
    if source is None:
        return _MISSING
    value = _NAMESPACE.__get__(source).get(attribute, _MISSING) if origin.is_kind(source, types.ModuleType) \
        else _MISSING
    return sys.modules.get(f"{name}.{attribute}", _MISSING) if value is _MISSING else value


def _same_contents(old: object, new: object) -> bool:
    numpy, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    if numpy is not None and origin.is_kind(old, numpy.ndarray):
        return old.shape == new.shape and bool(numpy.array_equal(old, new, equal_nan=old.dtype.kind in "fc"))
    if torch is not None and origin.is_kind(old, torch.Tensor):
        return old.shape == new.shape and bool(torch.equal(old, new))
    return type(old) is type(new) and old == new


def _array_copy(value: object) -> object:
    """A copy of a plain numpy array's or tensor's contents; ``_MISSING`` for anything else."""
    numpy, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    if numpy is not None and type(value) is numpy.ndarray and value.dtype.kind != "O":
        return value.copy()
    if torch is not None and type(value) is torch.Tensor and not value.requires_grad:
        return value.detach().clone()
    return _MISSING


class _Array(tuple):
    """An array met in plain data: (the array, a copy of its contents when it was met)."""


def snapshot(value: object) -> object:
    """The plain data ``value`` is (containers, scalars, arrays), copied down to the other objects it holds,
    which are kept by identity: their state is their class's business, not the module's data (an object that
    raises on ``==`` still equals itself; a test's object its own method changes is unchanged data). ``_MISSING``
    when ``value`` is no plain data or holds more than ``_COPY_LIMIT`` elements."""
    budget = [_COPY_LIMIT]

    def copy(item: object) -> object:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError
        kind = type(item)
        if kind is dict:
            return {key: copy(member) for key, member in item.items()}
        if kind in _CONTAINERS:
            return bytearray(item) if kind is bytearray else kind(map(copy, item))
        array = _array_copy(item)
        return item if array is _MISSING else _Array((item, array))
    if type(value) not in _CONTAINERS and _array_copy(value) is _MISSING:
        return _MISSING
    try:
        return copy(value)
    except (OverflowError, RecursionError, TypeError):
        return _MISSING


def kept(old: object, new: object) -> bool:
    """Whether ``new`` still holds what ``snapshot`` took as ``old``: the same containers' contents, the same
    arrays' contents, the same objects inside them."""
    kind = type(old)
    if kind is _Array:
        return old[0] is new and equal(old[1], new)
    if kind is not type(new):
        return False
    if kind is dict:
        return old.keys() == new.keys() and all(kept(old[key], new[key]) for key in old)
    if kind in (list, tuple):
        return len(old) == len(new) and all(map(kept, old, new))
    return old is new or equal(old, new)


def equal(old: object, new: object) -> bool:
    try:
        return _same_contents(old, new)
    except Exception:
        return False


def _defined(module: types.ModuleType, plan_: Plan, name: str, kind: str, detail: object, value: object) -> bool:
    """Whether ``value`` is what the source's binding of ``name`` gives."""
    if kind == "def":
        code = _FUNCTION_CODE.__get__(value) if type(value) is types.FunctionType else None
        return code is not None and code.co_name == name and (code.co_filename == plan_.path or os.path.realpath(
            code.co_filename) == plan_.path)
    if kind == "class":
        return origin.is_kind(value, type) and type.__dict__["__qualname__"].__get__(value) == name and \
            _built_here(value, _NAMESPACE.__get__(module).get("__name__"), plan_.path, detail)
    if kind == "import":
        expected = sys.modules.get(detail, _MISSING)
        return expected is _MISSING or expected is value
    if kind == "from":
        expected = _resolve(module, detail)
        return expected is _MISSING or expected is value or origin.candidate_object(expected)
    return kind != "literal" or equal(detail, value)


def _built_here(klass: type, module_name: object, path: str, statement: tuple) -> bool:
    """Whether ``klass`` is what this module's class statement built: by the ``__module__`` the statement records in
    its dict (the qualified name is checked by the caller), or, where a metaclass put a descriptor there instead
    (object proxies, wrapt's, keep ``__module__`` and ``__doc__`` as properties), by each plain function of the
    statement's body being there, compiled from this file within the statement's lines."""
    namespace = origin.type_dict(klass)
    recorded = namespace.get("__module__")
    if type(recorded) is str:
        return recorded == module_name
    first, last, methods = statement
    for method in methods:
        code = origin.code_of(namespace.get(method))
        if code is None or not first <= code.co_firstlineno <= last or (
                code.co_filename != path and os.path.realpath(code.co_filename) != path):
            return False
    return True


def check(module: types.ModuleType, plan_: Plan, label: str, flag: Callable[[str], None],
          suspect: Callable[[str], None]) -> None:
    """Compare ``module``'s namespace with what its source binds (see the module's docstring)."""
    namespace = _NAMESPACE.__get__(module)
    for name, (kind, detail) in plan_.defined.items():
        if name in plan_.changed or (kind in ("literal", "value") and name in plan_.mutated):
            continue
        value = namespace.get(name, _MISSING)
        if value is _MISSING:
            continue  # not bound yet (the module is still importing) or its import failed
        if not _defined(module, plan_, name, kind, detail, value):
            what = "the literal its source assigns" if kind == "literal" else "what its source binds"
            (suspect if kind == "literal" and _handed(module, plan_, name) else flag)(
                f"{label}.{name} is not {what} ({origin.describe(value)})")
        elif kind == "value":
            _check_contents(module, plan_, name, value, label, flag, suspect)
    for name, value in list(namespace.items()):
        if name in plan_.defined or name in plan_.changed or name.startswith(("@", "__")):
            continue
        own, builtin = origin.candidate_object(value), name in _BUILTIN_NAMES
        if not (own or builtin):
            continue
        finding = f" holding {origin.describe(value)}" if own else ", shadowing the builtin"
        if not any(_resolve(module, (level, star, name)) is value for level, star in plan_.stars):
            flag(f"adds {label}.{name}{finding}")
        elif own and builtin:  # funcy's tests star-import its ``map``: the test chose it, or was fooled
            suspect(f"{label}'s star import gives {name}{finding}, shadowing the builtin")


def _check_contents(module: types.ModuleType, plan_: Plan, name: str, value: object, label: str, flag: Callable[[str], None],
                    suspect: Callable[[str], None]) -> None:
    known = plan_.copies.get(name, _MISSING)
    if known is _MISSING or known[0] is not value:
        plan_.copies[name] = (value, snapshot(value))
    elif known[1] is not _MISSING and not kept(known[1], value):
        (suspect if _handed(module, plan_, name) else flag)(f"changes the contents of {label}.{name} in place")
        plan_.copies[name] = (value, snapshot(value))
