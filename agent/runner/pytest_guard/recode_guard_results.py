"""What reaches the test's comparisons is what it claims to be; each test's body provably ran to its end.

The test module is compiled by pytest's assertion rewriter; after pytest has
rewritten it (so its failure messages stay exactly pytest's), its syntax tree
is instrumented before compilation:

* every operand of a comparison, of arithmetic, of ``not``/``and``/``or``,
  every condition (``if``, ``while``, conditional expressions, asserts) and
  every argument of a call the test makes (``np.testing.assert_allclose(got,
  want)``, ``self.assertTrue(...)``) passes through ``check``, which returns it
  unchanged after looking at its type (and into tuples, lists, dicts, object
  arrays and the attributes of the candidate's objects);
* every function of the test module reports when it returns normally
  (``return`` and falling off the end; a generator when its driver runs it
  to its end), so the guard knows whether a test's body ran to its end, not
  merely that no exception reached pytest.

``check`` reports a value whose class the candidate gave comparison, truth,
conversion or dispatch code of its own (``__eq__``, ``__bool__``,
``__torch_function__``, ``__array_ufunc__``...) only if the value acts
agreeable: equal to a fresh sentinel, unequal to none, ordered both ways
against one, a zero difference from a random number, or ``allclose``/
``isclose``/``equal`` with random data of its shape (``agreeable``). Classes
the candidate did not define (mocks the test makes, library values) are not
judged; protocol methods libraries write for the candidate's classes
(``dataclass``'s ``__eq__``) are the libraries'.
"""
from __future__ import annotations

import array
import ast
import itertools
import operator
import os
import random
import string
import sys
import threading
import time
import types
from typing import Callable

import recode_guard_handed as handed
import recode_guard_origin as origin
import recode_guard_preload as preload
from recode_guard_origin import candidate_class, code_of, is_candidate_code, is_kind, type_dict, type_mro

CHECK, OPERAND, ENDED, RETURNED, ARG, ENTERED, STORED = "@recode_chk", "@recode_opd", "@recode_end", \
    "@recode_ret", "@recode_arg", "@recode_ent", "@recode_sto"
stored = handed.stored  # what the instrumented test module imports as ``STORED``
PROTOCOL = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__torch_function__",
            "__torch_dispatch__", "__array_ufunc__", "__array_function__", "__array__", "__array_interface__",
            "__array_struct__", "__array_priority__", "__array_wrap__", "__float__", "__int__", "__index__",
            "__complex__", "__abs__", "__sub__", "__rsub__", "__class__")
_PROTOCOL_NAMES = frozenset(PROTOCOL)
SCAN_LIMIT = 100_000
_LEAF, _SEQUENCE, _MAPPING, _ARRAY, _OBJECT, _PROBE = range(6)
_kinds: dict[type, object] = {}
# For the compiled helper's builtins the test module calls (``forwarders``): ``check`` and ``operand``, the first
# two, return a value at once, as ``_checked`` does, when ``_kinds`` holds ``_LEAF`` for its class.
PASSING = (_kinds, _LEAF, 2)
_report: list[Callable[[str], None]] = []
_suspect: list[Callable[[str], None]] = []
_state: dict = {"test": None, "functions": [], "completed": [], "entered": [], "mismatched": [], "decorators": [],
               "parameters": [], "qualnames": [], "arguments": {}, "candidate_lines": None}


def configure(report: Callable[[str], None], test: str, suspect: Callable[[str], None]) -> None:
    """Instrument ``test`` when pytest's assertion rewriter compiles it."""
    _report.append(report)
    _suspect.append(suspect)
    _state["test"] = test
    handed.configure(test)
    import _pytest.assertion.rewrite as rewrite

    original_rewrite, original_read = rewrite.rewrite_asserts, rewrite._read_pyc
    name = os.path.basename(test)

    def is_test(path) -> bool:
        return path is not None and os.path.basename(str(path)) == name and os.path.realpath(str(path)) == test

    def rewrite_asserts(mod, source, module_path=None, config=None):
        original_rewrite(mod, source, module_path, config)
        if is_test(module_path):
            instrument(mod, source)

    def _read_pyc(source, pyc, trace=lambda x: None):
        if is_test(source):
            return None  # always rewritten, so always instrumented
        return original_read(source, pyc, trace)

    origin.patch(rewrite, "rewrite_asserts", rewrite_asserts)
    origin.patch(rewrite, "_read_pyc", _read_pyc)


installed_check: list = []  # what the test module imports as ``check``: it, or the helper's builtin calling it


def instrumented(module: types.ModuleType) -> bool:
    value = types.ModuleType.__dict__["__dict__"].__get__(module).get(CHECK)
    return any(value is known for known in installed_check or [check])


# ------------------------------------------------------------------ the transform

def _located(node: ast.AST, at: ast.AST) -> ast.AST:
    """``node`` and the new nodes in it get ``at``'s position (pytest's own inserted nodes lack an end; whole-tree
    ``fix_missing_locations`` would give them an invalid one). A node placed already holds only placed nodes (the
    parser's, pytest's: it compiles what it rewrote, and compiling needs every line; ours, placed as built), so
    the new nodes are found without walking the test's own expressions again."""
    line = getattr(at, "lineno", 1)
    end = getattr(at, "end_lineno", None)
    end = line if end is None or end < line else end
    pending = [node]
    for child in pending:
        if "lineno" in child._attributes:
            if getattr(child, "lineno", None) is not None:
                continue
            child.lineno, child.col_offset = line, getattr(at, "col_offset", 0)
            child.end_lineno, child.end_col_offset = end, getattr(at, "end_col_offset", None) or child.col_offset
        pending += preload.children(child)
    return node


def _call(name: str, args: list[ast.expr], at: ast.AST) -> ast.Call:
    """``_located``'s call of ``name``, the call and its name placed as built (only new arguments are walked)."""
    line = getattr(at, "lineno", 1)
    end = getattr(at, "end_lineno", None)
    column = getattr(at, "col_offset", 0)
    place = {"lineno": line, "col_offset": column, "end_lineno": line if end is None or end < line else end,
             "end_col_offset": getattr(at, "end_col_offset", None) or column}
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load(), **place), args=[_located(a, at) for a in args],
                    keywords=[], **place)


def _helper(func: ast.expr) -> bool:
    """pytest's own helpers in rewritten code (``@pytest_ar._saferepr``...) and ours; not a ``@py_assert``
    temporary, which holds the test's own callee (``assert np.allclose(got, want)`` calls ``@py_assert1``)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id.startswith("@") and not func.id.startswith("@py_assert")


def _yields(node: ast.AST, lines: list[bytes]) -> bool:
    """Whether a function is a generator; its source lines without the word ``yield`` settle it unwalked."""
    end = getattr(node, "end_lineno", None)
    if end is not None and not any(b"yield" in line for line in lines[node.lineno - 1:end]):
        return False
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        if isinstance(child, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(child))
    return False


# What agent/rcb/tasks.py adds to a ResearchCodeBench test (its import hooks, stubs and error-marker fixture) is
# named so. It is the harness's code, not the test's comparisons, and its finder runs for every import (some 500
# in a torch test, each looking into the embedded reference sources).
_HARNESS_NAMES = ("_Recode", "_recode")


# Builtins that read a value's type, identity or attributes and never compare it: a probe of their argument
# would run the value's own comparison where the test runs none (a lazy proxy's ``==`` creates what it wraps,
# so ``type(proxy)`` would change what the test sees next). What they return is checked where it is compared.
_NOT_COMPARING = frozenset({"type", "id", "isinstance", "issubclass", "callable", "hasattr", "getattr", "setattr",
                            "delattr", "vars", "dir"})


class _Instrument(preload.Transformer):
    def __init__(self, lines: list[bytes], own: frozenset[str]) -> None:
        super().__init__()
        self.lines = lines
        self.own = own  # ``_own_functions``
        self.functions: list[tuple[str, int, int]] = []
        self.decorators: list[list[tuple[str, ...]]] = []  # per function: its own and its classes' decorators
        self.parameters: list[tuple[str, ...]] = []
        self.current: list[int | None] = []
        self.classes: list[list[tuple[str, ...]]] = []
        self.scope: list[str] = []  # the names of the enclosing classes and functions
        self.qualnames: list[str] = []
        self.globals: list[frozenset[str]] = [frozenset()]  # per enclosing scope: the names it declares global

    def wrap(self, node: ast.expr | None, name: str = CHECK) -> ast.expr | None:
        if node is None or isinstance(node, (ast.Constant, ast.JoinedStr, ast.Lambda, ast.Starred)):
            return node
        return _call(name, [node], node)

    def _function(self, node):
        if node.name.startswith(_HARNESS_NAMES):
            return node
        index = len(self.functions)
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        self.functions.append((node.name, node.lineno, first))
        self.decorators.append([_dotted(d) for d in node.decorator_list] + [d for ds in self.classes for d in ds])
        self.qualnames.append(".".join([*self.scope, node.name]))
        arguments = node.args
        self.parameters.append(tuple(a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)))
        # A generator's body ends when whoever drives it (tornado's ``gen_test``) runs it to its end; an async
        # generator may not ``return`` a value, and no runner drives one as a test.
        counted = not (isinstance(node, ast.AsyncFunctionDef) and _yields(node, self.lines))
        self.current.append(index if counted else None)
        self.scope.append(node.name)
        self.globals.append(_declared_global(node, self.lines))
        self.generic_visit(node)
        self.globals.pop()
        self.scope.pop()
        self.current.pop()
        if counted:
            last = node.body[-1]
            node.body.append(_located(ast.Expr(_call(ENDED, [ast.Constant(index)], last)), last))
            first_statement = node.body[_docstring(node.body)]
            values = ast.Tuple(elts=[ast.Name(id=p, ctx=ast.Load()) for p in self.parameters[index]], ctx=ast.Load())
            node.body.insert(_docstring(node.body), _located(
                ast.Expr(_call(ENTERED, [ast.Constant(index), values], first_statement)), first_statement))
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        if node.name.startswith(_HARNESS_NAMES):
            return node
        self.classes.append([_dotted(d) for d in node.decorator_list])
        self.scope.append(node.name)
        self.globals.append(frozenset())
        self.generic_visit(node)
        self.globals.pop()
        self.scope.pop()
        self.classes.pop()
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        self.current.append(None)
        self.generic_visit(node)
        self.current.pop()
        return node

    def visit_Return(self, node: ast.Return) -> ast.Return:
        self.generic_visit(node)
        index = self.current[-1] if self.current else None
        if index is not None:
            value = node.value if node.value is not None else ast.Constant(None)
            node.value = _call(RETURNED, [value, ast.Constant(index)], node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.Compare:
        self.generic_visit(node)
        node.left = self.wrap(node.left)
        node.comparators = [self.wrap(c) for c in node.comparators]
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.BinOp:
        self.generic_visit(node)
        if not isinstance(node.left, ast.Constant) or not isinstance(node.left.value, str):  # not pytest's % format
            node.left, node.right = self.wrap(node.left, OPERAND), self.wrap(node.right, OPERAND)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.UnaryOp:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            node.operand = self.wrap(node.operand)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.BoolOp:
        self.generic_visit(node)
        node.values = [self.wrap(v) for v in node.values]
        return node

    def _test(self, node):
        self.generic_visit(node)
        node.test = self.wrap(node.test)
        return node

    visit_If = visit_While = visit_IfExp = visit_Assert = _test

    def visit_Assign(self, node: ast.Assign) -> ast.Assign | list[ast.stmt]:
        """pytest's failure messages (``@py_format`` strings) are built from values already checked: left alone."""
        if any(isinstance(t, ast.Name) and t.id.startswith("@py_format") for t in node.targets):
            return node
        return self._stores(self.generic_visit(node), node.targets)

    def visit_AugAssign(self, node: ast.AugAssign | ast.AnnAssign) -> ast.stmt | list[ast.stmt]:
        stores = not isinstance(node, ast.AnnAssign) or node.value is not None
        return self._stores(self.generic_visit(node), [node.target] if stores else [])

    visit_AnnAssign = visit_AugAssign

    def visit_Expr(self, node: ast.Expr) -> ast.Expr | list[ast.stmt]:
        """A statement of the test's setting an attribute it names (``setattr(cls, "name", value)``,
        ``monkeypatch.setattr(Cls, "name", value)``) is its store, as ``cls.name = value``."""
        targets = _patched(node.value)
        return self._stores(self.generic_visit(node), targets)

    def visit_With(self, node: ast.With | ast.AsyncWith) -> ast.stmt | list[ast.stmt]:
        """``with patch.object(Cls, "name", value), ...:`` stores on entering (noted as soon as that item is
        entered: the statement becomes the nested ``with`` statements it stands for, since entering the next item
        may run anything, such as a library's first import) and on leaving (after the statement)."""
        patched = [_patched(item.context_expr) for item in node.items]
        self.generic_visit(node)
        if not any(patched):
            return node
        body = node.body
        for item, targets in zip(reversed(node.items[1:]), reversed(patched[1:])):
            body = [_located(type(node)(items=[item], body=[*self._notes(targets, node), *body]), node)]
        node.items, node.body = node.items[:1], [*self._notes(patched[0], node), *body]
        return self._stores(node, [target for targets in patched for target in targets])

    visit_AsyncWith = visit_With

    def _stores(self, node: ast.stmt, targets: list[ast.expr]) -> ast.stmt | list[ast.stmt]:
        notes = self._notes(targets, node)
        return [node, *notes] if notes else node

    def _notes(self, targets: list[ast.expr], node: ast.stmt) -> list[ast.stmt]:
        """A call of ``STORED`` for each global ``targets`` bind and each attribute they store on an owner named
        plainly (``cls``, ``TestX``: loading the name again runs nothing; ``self.__class__``: the guard reads
        the type), placed at ``node``."""
        notes = []
        for target in targets:
            for part in preload.walk(target):
                if not isinstance(getattr(part, "ctx", None), ast.Store):
                    continue
                if isinstance(part, ast.Name) and part.id in self.globals[-1]:
                    notes.append([ast.Constant(None), ast.Constant(part.id), ast.Name(id=part.id, ctx=ast.Load())])
                elif isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name):
                    notes.append([ast.Name(id=part.value.id, ctx=ast.Load()), ast.Constant(part.attr)])
                elif isinstance(part, ast.Attribute) and _of_class(part.value):  # ``self.__class__.x``
                    notes.append([ast.Name(id=part.value.value.id, ctx=ast.Load()), ast.Constant(part.attr),
                                  ast.Constant(None), ast.Constant(True)])
        return [_located(ast.Expr(_call(STORED, args, node)), node) for args in notes]

    def visit_Raise(self, node: ast.Raise) -> ast.Raise:
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        """Each argument passes through ``arg`` with its slot; the call site is known by where it ends."""
        self.generic_visit(node)
        if _helper(node.func) or isinstance(node.func, ast.Name) and (node.func.id in _NOT_COMPARING or
                                                                       node.func.id in self.own):
            return node
        constants: list = []
        slots: list[int] = []
        named = any(isinstance(a, (ast.Name, ast.Attribute)) for a in
                    [*node.args, *(k.value for k in node.keywords)])

        def argument(value: ast.expr) -> ast.expr:
            if isinstance(value, ast.Constant):
                constants.append(value.value)
            if isinstance(value, (ast.Constant, ast.JoinedStr, ast.Lambda)):
                return value
            slots.append(handed.new_slot())
            return _call(ARG, [value, ast.Constant(slots[-1])], value)

        node.args = [_located(ast.Starred(value=argument(a.value), ctx=ast.Load()), a)
                     if isinstance(a, ast.Starred) else argument(a) for a in node.args]
        for keyword in node.keywords:
            keyword.value = argument(keyword.value)
        handed.site(node, constants, slots)
        if not named:
            return node
        return _call(ARG, [node, ast.Constant(-slots[0])], node)  # the call returned (``handed.returned``)


def _patched(call: ast.expr) -> list[ast.expr]:
    """The attribute a call of the test sets on an owner it names plainly, as a store target: the builtin's or
    ``monkeypatch``'s ``setattr(Cls, "name", value)``, mock's ``patch.object(Cls, "name", ...)``."""
    if not isinstance(call, ast.Call) or len(call.args) < 2:
        return []
    func, owner, name = call.func, call.args[0], call.args[1]
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if called not in ("setattr", "object") or not isinstance(name, ast.Constant) or type(name.value) is not str:
        return []
    if isinstance(owner, ast.Name):
        return [ast.Attribute(value=ast.Name(id=owner.id, ctx=ast.Load()), attr=name.value, ctx=ast.Store())]
    if _of_class(owner):  # ``setattr(self.__class__, "name", value)``
        return [ast.Attribute(value=ast.Attribute(value=ast.Name(id=owner.value.id, ctx=ast.Load()), attr="__class__",
                                                  ctx=ast.Load()), attr=name.value, ctx=ast.Store())]
    return []


def _own_functions(mod: ast.Module, walked: list[ast.AST]) -> frozenset[str]:
    """Names that only an undecorated ``def`` of the module's top level binds in all its source (no star import):
    a call of one runs the test's own code, instrumented, which checks what it compares of its arguments there, so
    they are not walked at the call (tenacity's ``make_retry_state`` hands each state it builds to its helper).
    Anyone else binding the name in the test's module is refused by rules 9 to 11."""
    bound: dict[str, int] = {}
    for node in walked:
        kind = type(node)
        if kind is ast.Name:
            names: tuple = () if type(node.ctx) is ast.Load else (node.id,)
        elif kind is ast.alias:
            if node.name == "*":
                return frozenset()
            names = ((node.asname or node.name).split(".")[0],)
        elif kind in _BINDING_NAMES:
            names = (getattr(node, _BINDING_NAMES[kind]),)
        else:
            names = node.names if kind is ast.Global or kind is ast.Nonlocal else ()
        for name in names:
            bound[name] = bound.get(name, 0) + 1
    return frozenset(node.name for node in mod.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and not node.decorator_list and bound.get(node.name) == 1)


# The nodes binding one name, and the field holding it (None where the node binds none: ``except E:``).
_BINDING_NAMES = {ast.FunctionDef: "name", ast.AsyncFunctionDef: "name", ast.ClassDef: "name", ast.arg: "arg",
                  ast.ExceptHandler: "name", ast.MatchAs: "name", ast.MatchStar: "name", ast.MatchMapping: "rest"}


def _declared_global(function: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[bytes]) -> frozenset[str]:
    """The names a function's own body declares ``global`` (not its nested functions' or classes'); its source
    lines without the word ``global`` settle it unwalked."""
    end = getattr(function, "end_lineno", None)
    if end is not None and not any(b"global" in line for line in lines[function.lineno - 1:end]):
        return frozenset()
    names, stack = set(), list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Global):
            names.update(node.names)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def _of_class(node: ast.expr) -> bool:
    """``name.__class__``."""
    return isinstance(node, ast.Attribute) and node.attr == "__class__" and isinstance(node.value, ast.Name)


def _docstring(body: list[ast.stmt]) -> int:
    """1 when a body starts with its docstring, else 0."""
    first = body[0] if body else None
    return int(isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
        first.value.value, str))


def _dotted(decorator: ast.expr) -> tuple[str, ...]:
    """The dotted name a decorator expression calls or is (``freeze_time`` of ``@freeze_time("2012")``), else ()."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.insert(0, node.attr)
        node = node.value
    return (node.id, *names) if isinstance(node, ast.Name) else ()


def _import_position(mod: ast.Module) -> int:
    """After the docstring, ``from __future__`` imports and pytest's own inserted imports."""
    position = 0
    for position, node in enumerate(mod.body):
        docstring = position == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None),
                                                                                 ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        pytest_own = isinstance(node, ast.Import) and any((a.asname or "").startswith("@") for a in node.names)
        if not (docstring or future or pytest_own):
            return position
    return len(mod.body)


def instrument(mod: ast.Module, source: bytes | str) -> None:
    """``mod`` as pytest rewrote it; the test's own functions are read from the tree the guard parsed before
    any candidate code ran when ``source`` is its text (one walk of the test less: pytest only adds ``@`` names)."""
    source = source.encode() if isinstance(source, str) else source
    pristine = preload.parsed_from(_state["test"], source) if _state["test"] else None
    own = _own_functions(pristine, preload.nodes(pristine)) if pristine else _own_functions(mod, preload.walk(mod))
    transformer = _Instrument(source.splitlines(), own)
    handed.new_module()
    transformer.visit(mod)
    names = [ast.alias(name="check", asname=CHECK), ast.alias(name="operand", asname=OPERAND),
             ast.alias(name="ended", asname=ENDED), ast.alias(name="returned", asname=RETURNED),
             ast.alias(name="arg", asname=ARG), ast.alias(name="entered", asname=ENTERED),
             ast.alias(name="stored", asname=STORED)]
    node = ast.ImportFrom(module="recode_guard_results", names=names, level=0)
    position = _import_position(mod)
    mod.body.insert(position, _located(node, mod.body[position - 1] if position else ast.Pass(lineno=1)))
    _state["functions"], _state["decorators"] = transformer.functions, transformer.decorators
    _state["parameters"], _state["qualnames"] = transformer.parameters, transformer.qualnames
    for key in ("completed", "entered", "mismatched"):
        _state[key] = [0] * len(transformer.functions)


# --------------------------------------------------------------- body completion

def _by_the_test(up: int) -> bool:
    """Whether the code ``up`` calls above the caller is the test file's own: the instrumentation's builtins are
    among the test module's globals, where the candidate finds them too (its call of ``ended`` would count a body
    it stopped as ended, its ``operand`` of values of its class spend the probes a class always gets)."""
    return handed.is_test_frame(sys._getframe(up + 1))


def entered(index: int, values: tuple) -> None:
    """A test-module function starts; ``values`` are its parameters as it received them."""
    if not _by_the_test(1):
        return
    _state["entered"][index] += 1
    expected = _state["arguments"].get(index)
    if expected is not None and any(values[position] is not value for position, value in expected.items()):
        _state["mismatched"][index] += 1


def expect_arguments(index: int, arguments: dict[str, object] | None, instance: object = None) -> None:
    """The values pytest hands the test function ``index`` by parameter name, and the instance a method of a
    test class is bound to (None: no longer watched)."""
    if arguments is None:
        _state["arguments"].pop(index, None)
        return
    names = _state["parameters"][index]
    expected = {names.index(name): value for name, value in arguments.items() if name in names}
    if instance is not None and names and names[0] not in arguments:
        expected[0] = instance
    _state["arguments"][index] = expected


def ended(index: int) -> None:
    if _by_the_test(1):
        _state["completed"][index] += 1


def returned(value: object, index: int) -> object:
    if _by_the_test(1):
        _state["completed"][index] += 1
    return value


def function_index(function: object) -> int | None:
    """Index of the test-module function pytest calls for an item (through ``functools.wraps`` wrappers)."""
    for _ in range(8):
        code = code_of(function)
        if code is not None and _is_test_file(code.co_filename):
            return _function_keys().get((code.co_name, code.co_firstlineno))
        function = getattr(function, "__wrapped__", None)
        if function is None:
            return None
    return None


_test_files: dict[str, bool] = {}


def _is_test_file(path: str) -> bool:
    known = _test_files.get(path)
    if known is None:
        known = _test_files[path] = os.path.realpath(path) == _state["test"]
    return known


def _function_keys() -> dict[tuple[str, int], int]:
    """(name, line of its ``def`` or of its first decorator) -> the first function of the test module there."""
    functions = _state["functions"]
    kept = _state.get("function_keys")
    if kept is None or kept[0] is not functions:
        keys: dict[tuple[str, int], int] = {}
        for index, (name, line, first) in enumerate(functions):
            keys.setdefault((name, line), index)
            keys.setdefault((name, first), index)
        kept = _state["function_keys"] = (functions, keys)
    return kept[1]


def counts(index: int) -> tuple[int, int, int]:
    """How often the function ``index`` was entered, ran to its end, and was entered with other arguments."""
    return _state["entered"][index], _state["completed"][index], _state["mismatched"][index]


def decorators(index: int) -> list[tuple[str, ...]]:
    """The dotted names the test's source decorates function ``index`` and its enclosing classes with."""
    return _state["decorators"][index]


def qualname(index: int) -> str:
    """``Class.method`` of function ``index`` as the test's source nests it."""
    return _state["qualnames"][index]


# ------------------------------------------------------------------------- values

def _library_member(value: object) -> bool:
    """A protocol member that is not the candidate's: a function of library code, a builtin type's slot, None."""
    if value is None:
        return True
    code = code_of(value)
    if code is not None:
        return not is_candidate_code(code)
    return type(value) in (types.WrapperDescriptorType, types.MethodWrapperType, types.BuiltinFunctionType,
                           types.MethodDescriptorType, types.ClassMethodDescriptorType)


def _own_protocol(kind: type) -> bool:
    """Whether the candidate's code decides how values of ``kind`` compare, convert or dispatch: a class of its
    overrides a protocol member with code of its own (a dataclass's generated ``__eq__`` is a library's)."""
    for klass in type_mro(kind):
        if klass is not object:
            namespace = type_dict(klass)
            if any(not _library_member(namespace[name]) for name in namespace.keys() & _PROTOCOL_NAMES) and \
                    candidate_class(klass):  # the cheap test first
                return True
    return False


def _kind(kind: type) -> object:
    """How to look at a value of this type: leaf, sequence, mapping, array, object to look into, or why it is bad."""
    cached = _kinds.get(kind)
    if cached is not None:
        return cached
    entry = _candidate_kinds.get(kind)
    if entry is not None and _holds(entry, kind):
        return entry[-1]
    stamp = _stamp(kind) if origin.native and origin.candidate_loaded() else None
    numpy, candidate = sys.modules.get("numpy"), candidate_class(kind)
    if _own_protocol(kind):
        result: object = _PROBE
    elif issubclass(kind, (tuple, list, set, frozenset)):
        result = _SEQUENCE
    elif issubclass(kind, dict):
        result = _MAPPING
    elif numpy is not None and issubclass(kind, numpy.ndarray):
        result = _ARRAY
    elif candidate:
        result = _OBJECT
    else:
        result = _LEAF
    if not candidate:
        _kinds[kind] = result
    elif stamp is not None:  # the candidate's own classes may change: kept only while what it rests on holds
        _candidate_kinds[kind] = (*stamp, result)
        _plain[kind] = _plain_reads(kind)
    return result


# A class of the candidate's: (what counts as the candidate's, its MRO, the classes of it that have a dict, their
# dicts' version tags, its protocol members other than plain functions with their code) and what ``_kind`` said.
_candidate_kinds: dict[type, tuple] = {}
_FLAGS = type.__dict__["__flags__"].__get__
_HEAP_TYPE = 1 << 9


def _stamp(kind: type) -> tuple:
    """What ``_kind``'s answer for a class of the candidate's rests on (with the compiled helper, which reads
    version tags). A plain function's code is not: swapping it is an audited event that gives the candidate's
    code (refused) or library code (not the candidate's either way). A ``staticmethod``, ``property`` or
    ``partial`` can be re-initialised in place without its class's dict changing: their code is."""
    mro = type_mro(kind)
    heap = [klass for klass in mro if _FLAGS(klass) & _HEAP_TYPE]  # builtin types' dicts cannot change
    versions = array.array("Q", map(origin.native[0].version, heap))
    wrapped = []
    for klass in heap:
        namespace = type_dict(klass)
        wrapped += [(namespace[name], code_of(namespace[name])) for name in namespace.keys() & _PROTOCOL_NAMES
                    if type(namespace[name]) is not types.FunctionType]
    return origin.epoch[0], mro, heap, versions, tuple(wrapped)


def _holds(entry: tuple, kind: type) -> bool:
    """Whether a kept answer is still the answer (compared by identity where a metaclass's ``__eq__`` or a code
    object's equality by contents could otherwise decide)."""
    epoch, mro, heap, versions, wrapped, _ = entry
    return epoch == origin.epoch[0] and mro is type_mro(kind) and origin.candidate_loaded() and \
        not origin.native[0].changed(heap, versions) and all(code_of(m) is c for m, c in wrapped)


_plain: dict[type, tuple | None] = {}  # beside _candidate_kinds (current while its entry is): _plain_reads
_foreign = [0]  # moves whenever looking at a value may have run code not the guard's (the walk's kinds are stale)
_PLAIN_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)


def _plain_reads(kind: type) -> tuple | None:
    """How ``_attributes`` reads a value of ``kind`` running only CPython's own descriptors: the getter of its
    ``__dict__`` (or None) and its slots' getters; None when a class shadows ``__dict__`` with a descriptor of its
    own (a ``property``)."""
    found = _own_descriptors(type_mro(kind))
    if found is None:
        return None
    descriptor, slots = found
    return (descriptor.__get__ if descriptor is not None else None), [slot.__get__ for slot in slots]


def _own_descriptors(mro: tuple) -> tuple | None:
    """CPython's own descriptors of what a value of a class of ``mro`` holds itself: its ``__dict__``'s (or None)
    and ``_slots``; None when a class shadows ``__dict__`` with a descriptor of its own."""
    owner = next((klass for klass in mro if "__dict__" in type_dict(klass)), None)
    descriptor = type_dict(owner)["__dict__"] if owner is not None else None
    if descriptor is not None and type(descriptor) not in _PLAIN_DESCRIPTORS:
        return None
    return descriptor, _slots(mro)


def _slots(mro: tuple) -> list:
    """The descriptors of the slots the classes of ``mro`` declare, each taken from the class declaring it: what
    the value holds there. A subclass's attribute of the same name (mpmath's ``mpf.context``, the context every
    number names) is its class's, not the value's, and walking it at every compared number cost more than the
    test."""
    found = []
    for klass in mro:
        namespace = type_dict(klass)
        slots = namespace.get("__slots__", ())
        for name in (slots,) if type(slots) is str else slots if type(slots) in (tuple, list) else ():
            if type(namespace.get(name)) is types.MemberDescriptorType:
                found.append(namespace[name])
    return found


def _attributes(value: object) -> list:
    """What ``value`` holds: its ``__dict__``'s values (read by generic lookup, which may run its class's own
    descriptors, unless ``_plain_reads`` holds for its class) and its slots' contents."""
    readers = _plain.get(type(value)) if _candidate_kinds.get(type(value)) is not None else None
    if readers is None:
        _foreign[0] += 1
        try:
            namespace = object.__getattribute__(value, "__dict__")
        except (AttributeError, TypeError):
            namespace = None
        slot_readers = [slot.__get__ for slot in _slots(type_mro(type(value)))]
    else:
        namespace_reader, slot_readers = readers
        namespace = namespace_reader(value) if namespace_reader is not None else None
    found = list(dict.values(namespace)) if is_kind(namespace, dict) else []
    for reader in slot_readers:
        try:
            found.append(reader(value))
        except AttributeError:  # an empty slot
            continue
    return found


_BUILTIN_CONTAINERS = frozenset({tuple, list, dict, set, frozenset})  # exactly these: their len() is their own
_ITERATORS = ((tuple, tuple.__iter__), (list, list.__iter__), (set, set.__iter__), (frozenset, frozenset.__iter__))
_ITERATE = dict(_ITERATORS)


def _elements(value: object, kind: object) -> list:
    """What a container holds, read with the builtin types' own iterators (a subclass's ``__iter__`` is not run)."""
    if kind is _SEQUENCE:
        iterator = _ITERATE.get(type(value)) or next(method for base, method in _ITERATORS
                                                     if issubclass(type(value), base))
        return list(itertools.islice(iterator(value), SCAN_LIMIT))
    if kind is _MAPPING:
        return list(itertools.islice(itertools.chain.from_iterable(dict.items(value)), SCAN_LIMIT))
    if kind is _ARRAY:
        if type(value) is not sys.modules["numpy"].ndarray:
            _foreign[0] += 1  # a subclass's own ``dtype`` or ``flat``
        return list(itertools.islice(value.flat, SCAN_LIMIT)) if value.dtype.kind == "O" else []
    return _attributes(value)


_probed: dict[type, int] = {}
PROBE_ALWAYS, PROBE_THEN, PROBE_OVER_BUDGET = 32, 1 / 32, 1 / 1024
PROBE_SHARE = 0.1  # of the run's time so far, that the sampled probes may take
_sampler = random.Random()
_probe_clock = {"start": time.perf_counter(), "spent": 0.0}


def _worth_probing(kind: type) -> bool:
    """Every one of the first ``PROBE_ALWAYS`` values of a type is probed, then a random ``PROBE_THEN`` of them
    while the probes have taken under ``PROBE_SHARE`` of the run so far, and a random ``PROBE_OVER_BUDGET``
    beyond: a suite comparing a hundred thousand values of one class (a units library's arrays) is not slowed
    several times over, and a type that agrees with everything cannot tell which of its values are looked at."""
    seen = _probed[kind] = _probed.get(kind, 0) + 1
    if seen <= PROBE_ALWAYS:
        return True
    elapsed = time.perf_counter() - _probe_clock["start"]
    rate = PROBE_THEN if _probe_clock["spent"] <= PROBE_SHARE * elapsed else PROBE_OVER_BUDGET
    return _sampler.random() < rate


def _timed_probe(value: object, probe: Callable[[object], str | None], postponed: list) -> str | None:
    """``_quiet_probe``, its time added to what the probes have spent."""
    start = time.perf_counter()
    try:
        return _quiet_probe(value, probe, postponed)
    finally:
        _probe_clock["spent"] += time.perf_counter() - start


def _find(value: object, depth: int, probe: Callable[[object], str | None], walk: tuple[dict, list],
          kind: object = None) -> tuple[type, str] | None:
    """The first offending (type, how it agrees) in ``value`` and what it holds, down to ``depth`` levels
    (``kind``: what ``_kind`` just said of its type; ``walk``: this check's own, ``_checked``). What each type
    held is looked at as is kept for the container's elements until code not the guard's may have run (a probe,
    a class's own descriptor)."""
    kind = _kind(type(value)) if kind is None else kind
    if id(value) in _fixed or _seen(value, depth, walk[0]):
        return None
    if kind is _PROBE:
        _state["undecided"], _state["probing"] = None, type(value)
        if _worth_probing(type(value)):
            _foreign[0] += 1  # the value's own code runs
            how = _timed_probe(value, probe, walk[1])
        else:
            how = None
        if how is not None:
            return type(value), how
        kind = _OBJECT
    if kind is _LEAF or depth == 0:
        return None
    tag = _tag(value) if kind is _MAPPING else None  # read before its elements: a change while walking shows
    if tag is not None and _prefixes.get(id(value), _NOTHING_KEPT)[2] == tag and _current(_prefixes[id(value)]):
        return None
    known, rest, known_deps = _unwalked(value, kind)
    if not rest and not known:  # a number array: a test's arithmetic loop hands one to ``operand`` at every step
        return None
    kinds = _kinds_of(rest)
    if any(kinds.values()):  # a kind other than _LEAF (0)
        generation = _foreign[0]
        for element in rest:
            element_kind = kinds[type(element)] if _foreign[0] == generation else _kind(type(element))
            if element_kind is not _LEAF and id(element) not in _fixed and (
                    type(element) not in _BUILTIN_CONTAINERS or element):  # not an empty list or dict
                found = _find(element, depth - 1, probe, walk, element_kind)
                if found:
                    return found
    if len(known) + len(rest) < SCAN_LIMIT and (rest or tag is not None):  # else kept as it is
        _keep_if_fixed(value, known, rest, tag, known_deps)
    return None


# What a walk found to hold, for good, only small numbers, strings and bytes (a long text counting as many elements
# towards FIXED_LIMIT as it has 64 characters), and tuples and frozensets (or a
# library's subclasses of them) of such: nothing in it can change or ever agree. A tuple or frozenset of that kind
# is passed by identity (``_fixed``); a list, dict or set (a library's subclass too) that held only such elements is
# kept with them, in order, and the same elements at the start of it (compared by identity, in C) are not looked
# at again (``_prefixes``), nor is a dict at all while its version tag stands (read by the compiled helper):
# networkx's test hands over, at each of thousands of cycles, a dict of the cycles so far (frozensets of edge
# tuples) twice, and pygments' a list of ten thousand token tuples over and over. What is kept is held (its id
# stays its own) until FIXED_LIMIT elements are held in all, then all is let go. A container holding dicts or lists
# kept so (emoji's list of (emoji, dict) pairs) is kept too, while they are as they were (``_depend``, ``_current``).
_fixed: dict[int, object] = {}
_prefixes: dict[int, tuple[object, list, int | None, tuple[list, list] | None]] = {}
_NOTHING_KEPT = (None, None, None, None)
_held = [0]
FIXED_LIMIT, _TEXT_UNIT = 500_000, 64
_SCALARS = frozenset({int, float, complex, bool, type(None)})
_TEXTS = frozenset({str, bytes})


def _unwalked(value: object, kind: object) -> tuple[list, list, tuple[list, list] | None]:
    """``value``'s elements that start it as they did when a walk found them fixed (``_prefixes``), the rest, and
    what the start rests on; past the start of a list or dict found by the compiled helper, in C, without copying
    the start."""
    kept = _prefixes.get(id(value))
    if kept is None or kept[0] is not value or not _current(kept):
        kept = _NOTHING_KEPT
    start = kept[1] or _NOTHING
    if start and issubclass(type(value), (list, dict)):
        rest = origin.native[0].after(value, start) if origin.native else None
        if rest is not None:
            return start, rest[:SCAN_LIMIT - len(start)], kept[3]
        start = _NOTHING
    elements = _elements(value, kind)
    if not start or len(start) > len(elements) or not all(map(operator.is_, elements, start)):
        return _NOTHING, elements, None
    return start, elements[len(start):], kept[3]


_NOTHING: list = []


def _current(kept: tuple) -> bool:
    """Whether the dicts and lists a kept container's fixed elements hold (``_keep_if_fixed``) are as they were."""
    return kept[3] is None or not origin.native[0].stale(*kept[3])


def _tag(mapping: dict) -> int | None:
    """The version tag of a dict (a library's subclass too), which any change of it moves; None without the
    compiled helper."""
    return origin.native[0].version(mapping) if origin.native and issubclass(type(mapping), dict) else None


def _keep_if_fixed(value: object, known: list, rest: list, tag: int | None,
                   known_deps: tuple[list, list] | None) -> None:
    """Keep ``value`` (a builtin container, none of the candidate's) when each element of ``rest`` (those after
    ``known``, the elements a walk found fixed before) is a small scalar, fixed, or a dict or list kept itself (then the kept ``value`` rests
    on it: on its version tag, or its elements, read in C by ``_current``); ``tag``: its version tag before the
    walk, if a dict; ``known_deps``: what the elements known before rest on."""
    kind = _kinds.get(type(value))
    if kind is not _SEQUENCE and kind is not _MAPPING:
        return
    deps = ([*known_deps[0]], [*known_deps[1]]) if known_deps else ([], [])
    weight = len(rest) + 1 - len(deps[0])  # what it holds anew
    for element in rest:
        element_type = type(element)
        if element_type in _TEXTS:
            weight += len(element) // _TEXT_UNIT  # a long text held costs as many elements
        elif element_type not in _SCALARS and id(element) not in _fixed and not _depend(element, deps):
            return
    if _held[0] > FIXED_LIMIT:
        _fixed.clear()
        _prefixes.clear()
        _held[0] = 0
    if issubclass(type(value), (tuple, frozenset)) and not deps[0]:
        _fixed[id(value)] = value
    else:  # a dict's kept elements grow in place (only its own entry holds them: what rests on it, its tag)
        elements = known + rest if tag is None or not known else known
        if elements is known:
            known.extend(rest)
        _prefixes[id(value)] = (value, elements, tag, deps if deps[0] else None)
    _held[0] += weight + len(deps[0])


def _depend(element: object, deps: tuple[list, list]) -> bool:
    """Add to ``deps`` what ``element`` (a container kept with the compiled helper) rests on: its own state (a
    dict's tag, a list's elements) and what it rests on; False when it is not kept so."""
    kept = _prefixes.get(id(element))
    if kept is None or kept[0] is not element or not origin.native:
        return False
    if kept[2] is not None:
        deps[0].append(element)
        deps[1].append(kept[2])
    elif issubclass(type(element), list):
        deps[0].append(element)
        deps[1].append(kept[1])
    elif not issubclass(type(element), (tuple, frozenset)):  # a set: no state of its own read in C
        return False
    if kept[3] is not None:
        deps[0].extend(kept[3][0])
        deps[1].extend(kept[3][1])
    return True


def _kinds_of(elements: list) -> dict[type, object]:
    """``_kind`` of each type among ``elements``, read from ``_kinds`` in C where it has an answer."""
    found = set(map(type, elements))
    kinds = dict(zip(found, map(_kinds.get, found)))
    for kind, known in kinds.items():
        if known is None:
            kinds[kind] = _kind(kind)
    return kinds


def _seen(value: object, depth: int, visited: dict[int, tuple[object, int, int]]) -> bool:
    """Whether this check has already walked ``value`` (shared units, cycles) as deep, with no code but the
    guard's run since: it found nothing then, and would not now. The value is held, so its id stays its own.
    ``visited`` (id -> the value, deepest walk, ``_foreign`` then) is this check's: a check another thread is
    making (the test's function the candidate's thread runs) may be in the middle of walking it."""
    key = id(value)
    seen = visited.get(key)
    if seen is not None and seen[0] is value and seen[1] >= depth and seen[2] == _foreign[0]:
        return True
    visited[key] = (value, depth, _foreign[0])
    return False


def _class_line(klass: type) -> str:
    """``target.py:12 (Name)``: where the candidate defined the class."""
    lines = _state["candidate_lines"]
    if lines is None:
        lines = _state["candidate_lines"] = {}
        try:
            with open(origin.candidate_path(), encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
            for node in preload.walk(tree):
                if isinstance(node, ast.ClassDef):
                    lines.setdefault(node.name, node.lineno)
        except (OSError, SyntaxError, ValueError):
            pass
    base = os.path.basename(origin.candidate_path())
    if klass.__name__ in lines:
        return f"{base}:{lines[klass.__name__]} ({klass.__qualname__})"
    return f"{base} ({klass.__qualname__})"


def check(value: object) -> object:
    """Return ``value``; report it first when it (or what it holds) agrees with what it should not."""
    return _checked(value, agreeable)


def arg(value: object, slot: int) -> object:
    """``check`` for an argument of a call the test makes; what it hands is noted (``recode_guard_handed``). A
    negative slot: the value a call returned, whose first argument had the opposite slot."""
    if slot < 0:
        handed.returned(-slot)
        return value
    _checked(value, agreeable)  # not through ``check``: _checked finds the test's frame two calls up
    handed.note(value, slot)
    return value


def operand(value: object) -> object:
    """``check`` for an operand of the test's arithmetic: judged by what arithmetic makes of it (a zero
    difference); how it compares is judged where it is compared (pyparsing's ``expr + ...`` builds a grammar,
    and its ``==`` with a string is a match)."""
    return _checked(value, no_difference)


def _checked(value: object, probe: Callable[[object], str | None]) -> object:
    if _kinds.get(type(value)) is _LEAF or type(value) in _BUILTIN_CONTAINERS and not value or \
            not _by_the_test(2):
        return value  # most values: a str, a bool, the empty args or kwargs of a call; a call not the test's
    postponed: list[tuple[object, Callable]] = []  # probes of this check that met the test's own objects
    try:
        found = _find(value, 4, probe, ({}, postponed))
    except Exception:  # the value's own code failed while being looked at: the test will meet it too
        found = None
    undecided = _state.pop("undecided", None)
    if found is not None or undecided is not None or postponed:
        frame = sys._getframe(2)  # the test's frame: it called check or operand
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        _deferred.extend((kept, kept_probe, where) for kept, kept_probe in postponed)
        _conclude(found, undecided, where)
    return value


def _conclude(found: tuple[type, str] | None, undecided: tuple[type, type] | None, where: str) -> None:
    if found is None and undecided is not None:
        owner, answer = undecided
        _suspect[0](f"{_class_line(owner)} compares to unrelated values with a truthy {answer.__qualname__} "
                    f"object; one reaches {where} in the test")
    if found is not None:
        klass, how = found
        _report[0](f"{_class_line(klass)} makes values that agree with anything ({how}); one reaches {where} in "
                   f"the test")


# ------------------------------------------------ probes the test could see

class _TestOwned(BaseException):
    """Raised into a probe as it is about to run the test's own code or a mock's (``except Exception`` in the
    candidate's code does not swallow it)."""


_MOCK_FILE = os.path.join("unittest", "mock.py")
_owned_files: dict[str, bool] = {}
_deferred: list[tuple[object, Callable, str]] = []  # ... with the test's line, run when the test's call is over


def _test_owned(code: types.CodeType) -> bool:
    """Code whose running the test can see: its module's, its conftest files', a mock's (each call is recorded,
    a ``side_effect`` list is consumed)."""
    name = code.co_filename
    owned = _owned_files.get(name)
    if owned is None:
        owned = _owned_files[name] = name.endswith(os.sep + _MOCK_FILE) or \
            os.path.basename(name) == "conftest.py" or os.path.realpath(name) == _state["test"]
    return owned


_thread = threading.local()  # ``unset``: this thread's probe stopped, and CPython is unsetting its profile function


def _stop_at_test_code(frame: types.FrameType, event: str, arg: object) -> None:
    if event == "call" and _test_owned(frame.f_code):
        _thread.unset = True  # CPython unsets a profile function that raises, from the frame it stopped
        raise _TestOwned


def unsets_probe() -> bool:
    """Whether a ``sys.setprofile`` event is CPython unsetting the profile function of this thread's probe that
    just raised (the flag is the thread's: another thread's probes stop at their own times)."""
    unset, _thread.unset = getattr(_thread, "unset", False), False
    return unset and sys.getprofile() is _stop_at_test_code


def _set_profile(function: Callable | None) -> None:
    """``sys.setprofile(function)`` for this thread. CPython 3.10 and 3.11 refuse it (``RuntimeError``, nothing
    set, the refusal clears the flag) while any other thread's ``sys.setprofile`` runs the audit hooks, which may
    let this thread run (one flag for the process): a refused unset left the probe's function installed in this
    thread, to stop the test's own callback later (mpmath's ``quad`` in the test's thread pool)."""
    while True:
        try:
            sys.setprofile(function)
            return
        except RuntimeError as exc:
            if type(exc) is not RuntimeError or not str(exc).startswith(_REFUSED):
                raise


_REFUSED = "Cannot install a profile function while another"


def _quiet_probe(value: object, probe: Callable[[object], str | None], postponed: list) -> str | None:
    """``probe(value)``, stopped before it runs the test's code or a mock's, and then postponed to the end of the
    test's call: looking must not change what the test sees (diskcache's ``Deque`` compares by iterating the
    mock the test patched in, whose ``side_effect`` list the test's own call then finds consumed); what the
    value holds itself is put back (``_own_state``). ``postponed``: the check's own list of them."""
    previous, state = sys.getprofile(), _own_state(value)
    _set_profile(_stop_at_test_code)
    try:
        return probe(value)
    except _TestOwned:
        postponed.append((value, probe))
        return None
    finally:
        _thread.unset = False  # also when CPython refused to unset it: the flag lives as long as the probe
        _set_profile(previous)
        _put_back(value, state)


def probe_deferred() -> None:
    """The probes postponed during the test's call, run now that its body is over (the values were held since)."""
    count = len(_deferred)
    pending = _deferred[:count]
    del _deferred[:count]  # what another thread's check adds meanwhile stays for the next time
    for value, probe, where in pending:
        _state["undecided"], _state["probing"] = None, type(value)
        state = _own_state(value)
        try:
            how = probe(value)
        except Exception:
            how = None
        finally:
            _put_back(value, state)
        _conclude((type(value), how) if how is not None else None, _state.pop("undecided", None), where)


_EMPTY = object()  # a slot holding nothing


def _own_state(value: object) -> tuple | None:
    """What ``value`` holds itself, read with CPython's own descriptors: its ``__dict__`` (the dict, its items in
    order) and its slots' contents, for ``_put_back``. A probe runs the value's own code with values the test
    never made, and that code may change the value: lmfit's ``Parameter`` evaluates its expression on its first
    comparison and fixes itself (``vary`` false); deepdiff's ``Delta.__rsub__`` swaps its diff for its reverse,
    raises on a number and never swaps it back. None when a class's own descriptor answers for its ``__dict__``."""
    mro = type_mro(type(value))
    found = _own_descriptors(mro)
    if found is None:
        return None
    descriptor, slots = found
    try:
        namespace = descriptor.__get__(value) if descriptor is not None else None
    except (AttributeError, TypeError):
        namespace = None
    items = tuple(dict.items(namespace)) if is_kind(namespace, dict) else None
    if items is not None and not all(type(name) is str for name, _ in items):
        items = None  # rehashing another key could run its code
    return mro, descriptor, namespace, items, [(slot, _content(slot, value)) for slot in slots]


def _content(slot: types.MemberDescriptorType, value: object) -> object:
    try:
        return slot.__get__(value)
    except AttributeError:
        return _EMPTY


def _put_back(value: object, state: tuple | None) -> None:
    """Rebind what ``_own_state`` read, where the probe changed it: the same dict with the same items in the same
    order, the same slot contents (compared by identity; the value's own code does not run). A value whose class
    or bases the probe changed is left as it is (the descriptors read may no longer apply)."""
    if state is None or type_mro(type(value)) is not state[0]:
        return
    _, descriptor, namespace, items, slots = state
    if items is not None:
        if descriptor.__get__(value) is not namespace:
            descriptor.__set__(value, namespace)
        now = dict.items(namespace)
        if len(now) != len(items) or any(k is not j or v is not w for (k, v), (j, w) in zip(now, items)):
            dict.clear(namespace)
            dict.update(namespace, items)
    for slot, content in slots:
        if _content(slot, value) is content:
            continue
        if content is _EMPTY:
            slot.__delete__(value)
        else:
            slot.__set__(value, content)


# ------------------------------------------------------------------- the probes

_BOOLEAN_NAMES = frozenset({"bool", "bool_", "Tensor", "ndarray"})


def _truth(result: object) -> bool | None:
    """``bool(result)`` of a boolean (Python's, numpy's, a one-element tensor or array), or None when it has no
    single truth or is an object of another kind (a query language's expression: ``M == x`` builds a matcher)."""
    if type(result) is not bool and type(result).__name__ not in _BOOLEAN_NAMES:
        if result is not NotImplemented and _truth_of_other(result):
            _state["undecided"] = (_state["probing"], type(result))
        return None
    try:
        return bool(result)
    except Exception:
        return None


def _truth_of_other(result: object) -> bool:
    try:
        return bool(result)
    except Exception:
        return False


_generators: dict[str, object] = {}


def _generator(library: str, rng: random.Random) -> object:
    """The library's random generator for the probes, seeded from ``rng`` once per process and drawn from ever
    after: seeding one per probe cost more than the probe's comparisons (numpy's ``default_rng``, 80 us)."""
    generator = _generators.get(library)
    if generator is None:
        seed = rng.getrandbits(62)
        generator = _generators[library] = sys.modules["torch"].Generator().manual_seed(seed) \
            if library == "torch" else sys.modules["numpy"].random.default_rng(seed)
    return generator


def _array_probes(value: object, rng: random.Random) -> list[tuple[str, Callable[[], object]]]:
    """Random data of the value's own shape, for a tensor or an array: ``allclose`` with it must be false."""
    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")
    probes: list = []
    if torch is not None and is_kind(value, torch.Tensor) and value.numel() and value.dtype.is_floating_point:
        other = torch.rand(tuple(value.shape), generator=_generator("torch", rng), dtype=value.dtype) + 3.0
        probes += [("torch.allclose", lambda: torch.allclose(value, other)),
                   ("torch.isclose", lambda: torch.isclose(value, other).all()),
                   ("torch.equal", lambda: torch.equal(value, other)),
                   ("==", lambda: (value == other).all())]
    elif numpy is not None and is_kind(value, numpy.ndarray) and value.size and value.dtype.kind in "fc":
        other = _generator("numpy", rng).random(value.shape) + 3.0
        probes += [("numpy.allclose", lambda: numpy.allclose(value, other)),
                   ("numpy.isclose", lambda: numpy.isclose(value, other).all()),
                   ("numpy.array_equal", lambda: numpy.array_equal(value, other)),
                   ("==", lambda: (value == other).all())]
    elif numpy is not None:
        probes += [("numpy.allclose", _beyond_empty(value, numpy, rng, lambda other: numpy.allclose(value, other))),
                   ("numpy.isclose", _beyond_empty(value, numpy, rng,
                                                   lambda other: numpy.all(numpy.isclose(value, other))))]
    return probes


def _beyond_empty(value: object, numpy: types.ModuleType, rng: random.Random,
                  compare: Callable[[object], object]) -> Callable[[], object]:
    """``compare`` with a random number; a value numpy sees as empty (an empty unit container or array) agrees
    with any number by numpy's own rules, so it counts only if the value also agrees with random data of a shape
    no empty array broadcasts to (its shape with each 0 made 2): one agreeing with everything does."""
    def probe() -> object:
        agreed = compare(rng.random() + 3.0)
        if _truth(agreed) is not True:
            return agreed
        shape = _numpy_shape(value, numpy)
        if shape is None or all(shape):
            return agreed
        return compare(_generator("numpy", rng).random(tuple(size or 2 for size in shape)) + 3.0)
    return probe


def _numpy_shape(value: object, numpy: types.ModuleType) -> tuple | None:
    """The shape numpy gives ``value``: an array's own (a subclass's ``shape`` does not run), else that of the
    array numpy makes of it; None when it makes none."""
    if is_kind(value, numpy.ndarray):
        return numpy.ndarray.shape.__get__(value)
    try:
        return numpy.asarray(value).shape
    except Exception:
        return None


def agreeable(value: object) -> str | None:
    """How ``value`` agrees with what no honest value agrees with (a fresh sentinel, random data), or None.

    Its class's own comparisons are run against unrelated values: equal to any, unequal to none, less and
    not less at once, a difference of zero, or ``allclose`` with random data of its shape. What agrees with one
    must agree with a second of another size too (``_unrelated``): an honest ordering by length first (pyasn1's
    ``BitString``, whose ``>=`` holds for any equal length) is "less and not less" only at its own length."""
    rng = random.Random()
    for near, far in zip(_unrelated(rng, False), _unrelated(rng, True)):
        label = type(near).__name__
        for how, compare, bad in _COMPARISONS:
            try:
                truth = _truth(compare(value, near))
                if truth is bad:
                    truth = _truth(compare(value, far))
            except Exception:
                continue
            if truth is bad:
                return how + label
            if truth is None and how.startswith("=="):
                break  # ``==`` builds an object (a query language): ``!=`` and the order say nothing either
    return _agrees(value, _array_probes(value, rng)) or no_difference(value)


_COMPARISONS = (("== ", operator.eq, True), ("!= ", operator.ne, False),
                ("< and >= ", lambda value, other: (value < other) and (value >= other), True),
                ("> and <= ", lambda value, other: (value > other) and (value <= other), True))


def _unrelated(rng: random.Random, far: bool) -> tuple:
    """A fresh sentinel, a random float, int, string and list; ``far``: of another size (the float a million or
    more, the list of seven, the string twice as long)."""
    def number() -> float:
        return rng.random() * 1e6 + 1e6 if far else rng.random() + 3.0
    text = _any_text(rng)
    return (object(), number(), rng.getrandbits(60) + 7 + (far << 61), text + text if far else text,
            [number() for _ in range(7 if far else 3)])


def _any_text(rng: random.Random) -> str:
    """A random string holding every printable character: a grammar element or pattern whose ``==`` with a string
    is a match (pyparsing's ``CharsNotIn(")")``) does not match it; a value equal to any string does."""
    characters = list(string.printable)
    rng.shuffle(characters)
    return f"s{rng.random()}" + "".join(characters)


def no_difference(value: object) -> str | None:
    """``value`` minus a random number, one way round, is zero, and so with a second one a million or more away;
    drawn from the guard's own generator, which the candidate cannot seed as it can ``random``'s. An honest number
    that rounds what its arithmetic makes (pyasn1's ``Integer(3) - 3.6`` is ``Integer(0)``) is within one of
    the first at most, never of both."""
    near, far = _sampler.random() + 3.0, _sampler.random() * 1e6 + 1e6
    return _agrees(value, [("a zero difference", lambda: _zero_at_both(lambda s: abs(value - s) < 1e-12, near, far)),
                           ("a zero difference", lambda: _zero_at_both(lambda s: abs(s - value) < 1e-12, near, far))])


def _zero_at_both(zero: Callable[[float], object], near: float, far: float) -> object:
    """``zero(near)``, and when that is true, ``zero(far)``: what the probe's ``_truth`` then judges."""
    first = zero(near)
    return zero(far) if _truth(first) is True else first


def _agrees(value: object, probes: list[tuple[str, Callable[[], object]]]) -> str | None:
    for how, probe in probes:
        try:
            if _truth(probe()) is True:
                return how
        except Exception:
            continue
    return None
