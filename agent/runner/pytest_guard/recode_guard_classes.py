"""The data of the test's own classes, judged against what the test's source binds (rule 11, for classes).

A class attribute can be written without any event (``TestX.atol = 1``) and a
baseline taken while the tests run would follow the candidate's change, so the
comparison is with the source, as for the test's module namespace: each class
the test module defines (nested ones too) keeps what its body binds to a literal
(``atol = 1e-5``, ``expected = [3, 6]``) and the plain data of what it binds to a
built value (``data = np.arange(3)``, ``sources.snapshot``); an attribute the
test's methods store as ``cls.NAME = <literal>`` (``setup_class``) keeps a value
equal to one the source stores. An attribute the source writes, mutates or
hands out any other way is the test's own state and is not judged: stored from
a non-literal, aliased and changed, mutated through a subscript, an augmented
assignment or a method call, or named by a string a call is given (``setattr``,
``mock.patch.object(TestX, "atol")``, ``monkeypatch.setattr``, ``mock.patch``) or
by a keyword of ``mock.patch.multiple``. Only suspicious,
since who changed it cannot be told: a change to a value the source hands to a
non-library call (which may be the candidate's, mutating its argument), to an
attribute the code of a base class from elsewhere names (a library's test base),
and a literal already changed when first seen (a class decorator may rewrite its
class; a descriptor not the candidate's in its place, as ``NamedTuple`` and
slots leave, is the class's). Classes with a metaclass of their own (``Enum``,
traitlets' ``HasTraits``, pydantic) rewrite their bodies and are left out.
"""
from __future__ import annotations

import abc
import ast
import types
import unittest
from dataclasses import dataclass, field
from typing import Callable

import recode_guard_integrity as integrity
import recode_guard_origin as origin
import recode_guard_preload as preload
import recode_guard_sources as sources

_MISSING = sources._MISSING
_PLAIN_METACLASSES = (type, abc.ABCMeta)
_NAMESPACE = types.ModuleType.__dict__["__dict__"]
_QUALNAME = type.__dict__["__qualname__"]
_LIBRARY = "@library"  # the root of a callee known to be a library's
_UNITTEST_ASSERTS = frozenset(n for n in dir(unittest.TestCase) if n.startswith(("assert", "fail")))


@dataclass
class Plan:
    """The classes a test module's source defines, and what its code does to their attributes."""

    classes: dict[tuple[str, ...], dict[str, tuple[str, object]]] = field(default_factory=dict)  # path -> body
    assigned: dict[str, list[object]] = field(default_factory=dict)  # attribute -> literals stored to it
    free: set[str] = field(default_factory=set)  # attributes the source writes or hands out otherwise
    calls: dict[str, set[str]] = field(default_factory=dict)  # attribute -> roots of the callees it is passed to
    seen: dict[tuple[type, str], tuple[object, object]] = field(default_factory=dict)  # (class, name) -> value, copy


def plan(tree: ast.Module, module_plan: sources.Plan) -> Plan:
    result = Plan()
    _collect_classes(tree.body, (), result)
    if not result.classes:
        return result  # what the code does to attributes is read for the classes only (``check``)
    aliases: dict[str, set[str]] = {}
    for node in preload.nodes(tree):
        if type(node) in _READ:  # the parser's nodes are of these classes exactly: most are none of them
            _read_node(node, result, aliases)
    for name, attributes in aliases.items():  # ``rows = self.rows``: what the source does to ``rows``
        if name in module_plan.mutated or name in module_plan.changed:
            result.free |= attributes
        for attribute in attributes:
            result.calls.setdefault(attribute, set()).update(result.calls.get(name, ()))
    return result


def _collect_classes(body: list[ast.stmt], path: tuple[str, ...], result: Plan) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            inner = (*path, node.name)
            entries, counts = {}, {}
            for statement in node.body:
                for name, kind, detail in sources._binding(statement):
                    counts[name] = counts.get(name, 0) + 1
                    entries[name] = (kind, detail)
            others = {n for s in node.body if not sources._binding(s) for n in sources._module_stores(s)}
            result.classes[inner] = {name: entry for name, entry in entries.items() if entry[0] in (
                "literal", "value") and counts[name] == 1 and name not in others and not name.startswith("__")
                and name != "pytestmark"}
            _collect_classes(node.body, inner, result)


def _chain(node: ast.expr) -> list[str]:
    """Attribute names along ``a.b[k].c``'s object (``b``, ``c``): whose contents a store through it changes."""
    names = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    return names


_STORES = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr,
           ast.comprehension)
_READ = frozenset({*_STORES, ast.Call})


def _read_node(node: ast.AST, result: Plan, aliases: dict[str, set[str]]) -> None:
    if isinstance(node, _STORES):
        _read_store(node, result, aliases)
    elif isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            result.free.update(_chain(node.func.value))
        root = _callee_root(node.func)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "multiple":  # ``mock.patch.multiple``
            result.free.update(k.arg for k in node.keywords if k.arg)
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            argument = argument.value if isinstance(argument, ast.Starred) else argument
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str) and len(argument.value) < 200:
                result.free.update(part for part in argument.value.split(".") if part.isidentifier())
            names = [argument.id] if isinstance(argument, ast.Name) else _chain(argument)  # a class body's own
            for name in names:
                result.calls.setdefault(name, set()).add(root)


def _read_store(node: ast.AST, result: Plan, aliases: dict[str, set[str]]) -> None:
    """Attributes a statement stores (a literal, or anything else), changes through, or aliases to a name."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
    elif isinstance(node, ast.Delete):
        targets, value = node.targets, None
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        targets, value = [node.target], node.iter
    elif isinstance(node, ast.withitem):
        targets, value = [node.optional_vars] if node.optional_vars else [], node.context_expr
    else:  # AugAssign, NamedExpr
        targets, value = [node.target], node.value
    literal = preload.literal(value) if isinstance(node, (ast.Assign, ast.AnnAssign)) and len(targets) == 1 \
        else preload.NOT_LITERAL
    for target in targets:
        for part in preload.walk(target):
            if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store) and value is not None:
                aliases.setdefault(part.id, set()).update(_chain(value))
            if isinstance(part, ast.Attribute) and part is target and literal is not preload.NOT_LITERAL:
                result.assigned.setdefault(part.attr, []).append(literal)
            elif isinstance(part, (ast.Attribute, ast.Subscript)):
                result.free.update(_chain(part))


def _callee_root(node: ast.expr) -> str:
    """The name a callee starts from; a ``self.assertEqual`` of unittest's counts as the library's."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in _UNITTEST_ASSERTS \
            and node.value.id in ("self", "cls"):
        return _LIBRARY
    return sources._root(node)


def check(module: types.ModuleType, plan_: Plan, module_plan: sources.Plan, label: str,
          flag: Callable[[str], None], suspect: Callable[[str], None]) -> None:
    """Compare the data of the classes ``module``'s source defines with what the source binds (see above)."""
    for path, body in plan_.classes.items():
        owner = _class(module, path)
        if owner is None:
            continue
        namespace = origin.type_dict(owner)
        names = {name for name in plan_.assigned if name in namespace} | set(body)
        for name in names - plan_.free - module_plan.mutated:  # also changed by name in its class body
            value = namespace.get(name, _MISSING)
            if value is not _MISSING:
                kind, detail = body.get(name, ("assigned", _MISSING))
                allowed = plan_.assigned.get(name, []) + ([detail] if kind == "literal" else [])
                where = f"{label}.{'.'.join(path)}.{name}"
                report = suspect if _handed(module, module_plan, plan_, name) or _bases_use(
                    owner, name, namespace.get("__module__")) else flag
                _judge(plan_, (owner, name), value, allowed, kind == "value", where, report, suspect)


def _class(module: types.ModuleType, path: tuple[str, ...]) -> type | None:
    """The class at ``path`` in ``module`` if it is the one the source defines there, with a plain metaclass."""
    value = _NAMESPACE.__get__(module).get(path[0], _MISSING)
    for name in path[1:]:
        value = origin.type_dict(value).get(name, _MISSING) if origin.is_kind(value, type) else _MISSING
    if type(value) not in _PLAIN_METACLASSES or _QUALNAME.__get__(value) != ".".join(path):
        return None
    return value if origin.type_dict(value).get("__module__") == _NAMESPACE.__get__(module).get("__name__") \
        else None


def _judge(plan_: Plan, key: tuple, value: object, allowed: list, built: bool, where: str,
           report: Callable[[str], None], suspect: Callable[[str], None]) -> None:
    """One attribute: a literal it must equal, or (a built value) the object first seen, with its contents; a
    value judged before and unchanged since is not judged again. A literal already changed when first seen
    may be a class decorator's or a library metaclass's doing (attrs' slotted classes): only suspicious."""
    kept = plan_.seen.get(key)
    if kept is None and any("__get__" in origin.type_dict(k) for k in origin.type_mro(type(value))) and \
            not origin.candidate_object(value):
        plan_.seen[key] = (value, _MISSING)  # a class a library built (``NamedTuple``'s field getters, slots)
        return
    same = kept is not None and kept[0] is value
    if same and (kept[1] is _MISSING or sources.kept(kept[1], value)):
        return
    if not (any(sources.equal(literal, value) for literal in allowed) or (built and kept is None)):
        (report if kept is not None else suspect)(
            f"changes the contents of {where} in place" if same else
            f"{where} is not what its source assigns ({origin.describe(value)})")
    plan_.seen[key] = (value, sources.snapshot(value))


def _handed(module: types.ModuleType, module_plan: sources.Plan, plan_: Plan, name: str) -> bool:
    """Whether the source passes the attribute to a callee that may be the candidate's (which may mutate it)."""
    return any(root != _LIBRARY and not sources._library_root(module, module_plan, root)
               for root in plan_.calls.get(name, ()))


def _bases_use(owner: type, name: str, module_name: object) -> bool:
    """Whether code of a base class defined elsewhere (a library's test base, the candidate's class) names the
    attribute: it may change the class's data itself (traitlets' ``TraitTestBase`` moves ``None`` within
    ``_bad_values``), which cannot be told from the candidate's change."""
    return integrity._code_finds(("named by a base", owner, name), lambda: [
        code for klass in origin.type_mro(owner)[1:] if origin.type_dict(klass).get("__module__") != module_name
        for member in list(origin.type_dict(klass).values()) if (code := origin.code_of(member)) is not None],
        lambda code: name in code.co_names)
