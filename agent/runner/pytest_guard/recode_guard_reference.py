"""Reference use detected by behaviour: the reference's own code reports every time it starts running.

The hidden reference (canonical.py, and ``<stem>_ref.py`` copies ResearchCodeBench
tests import) is compiled by this module instead of the import system: every
function of it begins with a call to ``_entry``, held as a constant of the code
object itself, so no name lookup can disable it and every copy of that code
(``types.FunctionType(ref.__code__, ...)``, wrappers, subclasses, pickles by
name) still reports. ``_entry`` looks at the stack: reference code called by
reference code, by the test, or by anything without candidate code below, is
normal; reference code started while a frame of the candidate is below it, and
not reached through an object the candidate received as an argument (a model
the test built with the reference, a callback), is reference access. So are
reference objects the candidate module or its ``__getattr__`` hands to the test
(re-exports, subclasses, code copies), compiling or serialising the
reference's code, and threads the candidate started running reference code.

Cost: one call and one frame lookup per reference call made by reference code
(frames are told apart by their globals: reading ``f_code`` or calling ``id``
raises an audit event each); a stack walk only for calls entering the
reference from outside. Nothing else in the process is traced.

Standard library only: it runs in the task's interpreter.
"""
from __future__ import annotations

import ast
import functools
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import types
import warnings
from typing import Callable

import recode_guard_origin as origin
import recode_guard_preload as preload
from recode_guard_origin import candidate_frame as candidate_on_stack, is_candidate_code, is_candidate_file

SENTINEL = f"__recode_reference_entry_{os.urandom(8).hex()}__"
_MAX_REPORTS = 3
_GIVEN_DEPTH = 4
_GIVEN_CAP = 20000
_VARARGS, _VARKW = 0x04, 0x08

_ref_ids: set[int] = set()
_ref_keep: list[types.CodeType] = []  # keeps the code objects alive, so their ids stay theirs
_ref_bytecode: set[bytes] = set()
_test_ids: set[int] = set()
_test_globals: list[dict] = []  # namespaces of the test module (its code runs with them)
_reference_globals: list[dict] = []  # namespaces of the reference modules
_allowed_receivers: dict[int, object] = {}
_file_is_reference: dict[str, bool] = {}
_reports: list[str] = []
_tls = origin.tls
_config: dict = {}


def configure(*, candidate: str, references: tuple[str, ...], report: Callable[[str], None],
              note: Callable[[str], None]) -> None:
    """Set the watched files and the channel writers, then take over compiling the reference."""
    _config.update(candidate=candidate, references=frozenset(references), report=report, note=note,
                   names=tuple({os.path.basename(p) for p in references}),  # str.endswith takes a tuple
                   blocks=_reference_blocks(references))
    _patch_loader()


# ------------------------------------------------------------ frame origins

def is_reference_file(path: object) -> bool:
    if not isinstance(path, str) or not path.endswith(_config["names"]) or \
            os.path.basename(path) not in _config["names"]:
        return False
    known = _file_is_reference.get(path)
    if known is None:
        known = _file_is_reference[path] = os.path.realpath(path) in _config["references"]
    return known


def remember_test_code(functions: list) -> None:
    """Code objects of the collected test functions: a reference call made by them needs no further look."""
    for function in functions:
        namespace = getattr(function, "__globals__", None)
        if type(namespace) is dict and not any(namespace is known for known in _test_globals):
            _test_globals.append(namespace)
        code = getattr(function, "__code__", None)
        stack = [code] if isinstance(code, types.CodeType) else []
        while stack:
            item = stack.pop()
            if not is_candidate_code(item) and id(item) not in _ref_ids:
                _test_ids.add(id(item))
                _ref_keep.append(item)
                stack.extend(c for c in item.co_consts if isinstance(c, types.CodeType))


# ------------------------------------------------------- compiling the reference

class _Prologue(preload.Transformer):
    """Put ``SENTINEL()`` first in every function body (after the docstring) and lambda; each new node takes the
    position of the node it stands by (what ``ast.fix_missing_locations`` would give it, without a walk)."""

    def _call(self, at: ast.AST) -> ast.Call:
        call = ast.Call(func=ast.copy_location(ast.Constant(value=SENTINEL), at), args=[], keywords=[])
        return ast.copy_location(call, at)

    def _function(self, node):
        self.generic_visit(node)
        body = node.body
        start = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) else 0
        at = body[start] if start < len(body) else body[-1]
        node.body = body[:start] + [ast.copy_location(ast.Expr(self._call(at)), at)] + body[start:]
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        self.generic_visit(node)
        pair = ast.copy_location(ast.Tuple(elts=[self._call(node.body), node.body], ctx=ast.Load()), node.body)
        node.body = ast.copy_location(ast.Subscript(value=pair, slice=ast.copy_location(ast.Constant(value=1),
                                                                                        node.body), ctx=ast.Load()),
                                      node.body)
        return node


def _bind(code: types.CodeType) -> types.CodeType:
    """Replace the sentinel constant by ``_entry`` in ``code`` and its nested code; remember them all."""
    consts = tuple(_entry if type(c) is str and c == SENTINEL else _bind(c) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    bound = code.replace(co_consts=consts)
    _ref_ids.add(id(bound))
    _ref_keep.append(bound)
    _ref_bytecode.add(bound.co_code)
    return bound


def compile_reference(source: bytes, path: str) -> types.CodeType:
    tree = _Prologue().visit(ast.parse(source, path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "'str' object is not callable": the constant is replaced below
        code = compile(tree, path, "exec", dont_inherit=True)
    return _bind(code)


def adopt(module: types.ModuleType, source: str) -> None:
    """Instrument a reference module some other loader already ran (ResearchCodeBench tests execute
    reference copies embedded in the test file): its functions get the instrumented code in place, so every
    holder of them, candidate included, runs the watched version from now on."""
    path = os.path.realpath(module.__file__)
    _config["references"] = _config["references"] | {path}
    _config["names"] = tuple({*_config["names"], os.path.basename(path)})
    _file_is_reference.clear()
    _config["blocks"] += _blocks_of(source)
    with origin.GuardWork():
        watched = compile_reference(source.encode("utf-8"), module.__file__)
    by_place = {(code.co_name, code.co_firstlineno): code for code in origin.nested_codes(watched)}
    for function in _functions_of(module):
        new = by_place.get((function.__code__.co_name, function.__code__.co_firstlineno))
        if new is not None and new.co_freevars == function.__code__.co_freevars:
            function.__code__ = new


def _functions_of(module: types.ModuleType) -> list[types.FunctionType]:
    """Functions defined by ``module``: module level, in its classes (methods, properties), under decorators."""
    found: dict[int, types.FunctionType] = {}
    pending = list(vars(module).values())
    seen: set[int] = set()
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, type) and value.__dict__.get("__module__") == module.__name__:
            pending.extend(vars(value).values())
        elif isinstance(value, (staticmethod, classmethod)):
            pending.append(value.__func__)
        elif isinstance(value, property):
            pending.extend(f for f in (value.fget, value.fset, value.fdel) if f is not None)
        elif isinstance(value, types.FunctionType):
            if value.__globals__ is vars(module):
                found[id(value)] = value
            wrapped = _own_attribute(value, "__wrapped__")
            if wrapped is not None:
                pending.append(wrapped)
    return list(found.values())


def _patch_loader() -> None:
    """Reference files are compiled here (never from a .pyc), wherever the import comes from."""
    original = importlib.machinery.SourceFileLoader.get_code

    @functools.wraps(original)
    def get_code(self, fullname):
        __tracebackhide__ = True  # a candidate's syntax error reads as in an unguarded run
        path = self.get_filename(fullname)
        if not is_reference_file(path):
            return original(self, fullname)
        caller = candidate_on_stack(sys._getframe(1))
        if caller is not None:
            _report(f"{_where(caller)} loads the reference module {fullname}")
        with origin.GuardWork():
            return compile_reference(self.get_data(path), path)

    origin.patch(importlib.machinery.SourceFileLoader, "get_code", get_code)


# ------------------------------------------------------------ the entry check

def _entry() -> None:
    """First statement of every reference function (see the module docstring).

    Frames are told apart by their globals (the reference's module, the test's): reading ``f_code`` or calling
    ``id`` would raise an audit event per frame."""
    if getattr(_tls, "busy", False):
        return
    _tls.busy = True
    try:
        frame = sys._getframe(1)
        caller = frame.f_back
        if caller is not None and caller.f_globals is frame.f_globals:
            return  # reference code calling its own module's code
        if not any(frame.f_globals is known for known in _reference_globals):
            _reference_globals.append(frame.f_globals)
        _check_entry(frame)
    except Exception as exc:  # the reference must keep working for an honest test
        _config["note"](f"reference entry check failed: {type(exc).__name__}: {exc}")
    finally:
        _tls.busy = False


def _reference_frame(frame: types.FrameType) -> bool:
    namespace = frame.f_globals
    return any(namespace is known for known in _reference_globals) or (
        not origin.known_namespace(namespace) and id(frame.f_code) in _ref_ids)


def _check_entry(frame: types.FrameType) -> None:
    below = frame.f_back
    candidate = None
    while below is not None:
        if _reference_frame(below):
            return  # called by the reference (the candidate, if any, was called by it)
        if candidate is None:
            if any(below.f_globals is known for known in _test_globals):
                return  # the test's own call, through libraries at most
            if origin.is_candidate_frame(below):
                candidate = below
        below = below.f_back
    if candidate is None:
        if origin.in_candidate_thread():
            _report(f"a thread the candidate started runs the reference's {_name(frame.f_code)}")
        return
    if not _received(frame, candidate):
        _report(f"{_where(candidate)} runs the reference's {_name(frame.f_code)}")


def _received(frame: types.FrameType, candidate: types.FrameType) -> bool:
    """Whether the reference code now starting belongs to an object the candidate was handed as an argument."""
    code = frame.f_code
    receiver = _receiver(frame)
    if receiver is not None and id(receiver) in _allowed_receivers:
        return True
    nodes, trusted = _given(_boundary_frames(candidate))
    if receiver is not None and (id(receiver) in nodes or id(type(receiver)) in nodes):
        _allowed_receivers[id(receiver)] = receiver
        return True
    return any(_code_of(nodes[i]) is code for i in trusted)


def _receiver(frame: types.FrameType) -> object:
    """The object whose method this frame runs (instance, or class for a classmethod), else None."""
    code = frame.f_code
    if not code.co_argcount:
        return None
    value = frame.f_locals.get(code.co_varnames[0])
    owner = value if isinstance(value, type) else type(value)
    try:
        method = inspect.getattr_static(owner, code.co_name)
    except AttributeError:
        return None
    if isinstance(method, property):
        method = method.fget
    return value if _code_of(method) is code else None


def _boundary_frames(candidate: types.FrameType) -> list[types.FrameType]:
    """Candidate frames called by something else: their arguments came from outside the candidate."""
    found = []
    frame = candidate
    while frame is not None:
        if is_candidate_code(frame.f_code) and (frame.f_back is None or not is_candidate_code(frame.f_back.f_code)):
            found.append(frame)
        frame = frame.f_back
    return found


def _arguments(frame: types.FrameType) -> list:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & _VARARGS) + bool(
        code.co_flags & _VARKW)
    local = frame.f_locals
    return [local[name] for name in code.co_varnames[:count] if name in local]


def _given(frames: list[types.FrameType]) -> tuple[dict[int, object], set[int]]:
    """Objects reachable from those arguments: (id -> object, ids reached without passing through an
    object of the candidate's classes, whose attributes the candidate itself may have filled)."""
    candidate_modules = {m.__name__ for m in list(sys.modules.values())
                         if isinstance(getattr(m, "__file__", None), str) and is_candidate_file(m.__file__)}
    nodes: dict[int, object] = {}
    trusted: set[int] = set()
    layer = [(value, True) for frame in frames for value in _arguments(frame)]
    for _ in range(_GIVEN_DEPTH):
        following = []
        for value, clean in layer:
            if id(value) in nodes and (id(value) in trusted or not clean):
                continue
            nodes[id(value)] = value
            if clean:
                trusted.add(id(value))
            if len(nodes) > _GIVEN_CAP:
                return nodes, trusted
            own = getattr(type(value), "__module__", None) in candidate_modules
            following += [(child, clean and not own) for child in _children(value)]
        layer = following
    return nodes, trusted


def _own_attribute(value: object, name: str) -> object:
    """``value.__dict__[name]`` without running any code of ``value``'s class."""
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return None
    return attributes.get(name) if isinstance(attributes, dict) else None


def _children(value: object) -> list:
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, types.MethodType):
        return [value.__func__, value.__self__]
    if isinstance(value, functools.partial):
        return [value.func, *value.args, *value.keywords.values()]
    if isinstance(value, (type, types.ModuleType, types.FunctionType, types.CodeType)):
        return []
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return []
    return list(attributes.values()) if isinstance(attributes, dict) else []


def _code_of(value: object) -> object:
    for _ in range(8):
        if isinstance(value, (types.FunctionType, types.LambdaType)):
            return value.__code__
        if isinstance(value, (types.GeneratorType, types.CoroutineType)):
            return getattr(value, "gi_code", None) or getattr(value, "cr_code", None)
        if isinstance(value, types.MethodType):
            value = value.__func__
        elif isinstance(value, functools.partial):
            value = value.func
        elif isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        else:
            wrapped = _own_attribute(value, "__wrapped__") if not isinstance(value, type) else None
            if wrapped is None:
                return None
            value = wrapped
    return None


# ------------------------------------------------------------ reference objects

def reference_modules() -> list[types.ModuleType]:
    """Loaded reference modules (looked for again only when the set of loaded modules changed)."""
    loaded = len(sys.modules)
    if _config.get("loaded") != loaded:
        _config["loaded"] = loaded
        _config["reference_modules"] = [m for m in list(sys.modules.values())
                                        if is_reference_file(origin.module_file(m))]
    return _config["reference_modules"]


def describe_reference(value: object, reference_names: frozenset[str]) -> str | None:
    """What reference object ``value`` is (a module, code copy, class or subclass), or None."""
    if isinstance(value, types.ModuleType):
        return "module" if is_reference_file(getattr(value, "__file__", None)) else None
    if isinstance(value, type):
        for cls in value.__mro__:
            if cls.__dict__.get("__module__") in reference_names:
                return "class" if cls is value else f"subclass of {cls.__qualname__}"
        return None
    code = _code_of(value)
    if isinstance(code, types.CodeType) and id(code) in _ref_ids:
        return f"function {_name(code)}"
    return None


def scan_module(module: types.ModuleType, label: str) -> None:
    """Reference objects the candidate's module holds, directly or in its own classes."""
    names = frozenset(m.__name__ for m in reference_modules())
    if not names:
        return
    for attr, value in list(vars(module).items()):
        what = describe_reference(value, names)
        if what:
            _report(f"{label}.{attr} is the reference's {what}")
        elif isinstance(value, type) and value.__dict__.get("__module__") == module.__name__:
            for member, inner in list(vars(value).items()):
                what = describe_reference(inner, names)
                if what:
                    _report(f"{label}.{attr}.{member} is the reference's {what}")


def check_value(value: object, label: str) -> None:
    names = frozenset(m.__name__ for m in reference_modules())
    what = describe_reference(value, names) if names else None
    if what:
        _report(f"{label} is the reference's {what}")


def guard_module_getattr(module: types.ModuleType) -> None:
    """Wrap the candidate module's ``__getattr__``: whatever it resolves is checked before the test gets it."""
    original = vars(module).get("__getattr__")
    if not callable(original) or getattr(original, "_recode_checked", False):
        return

    def __getattr__(name):
        value = original(name)
        check_value(value, f"{module.__name__}.{name} (resolved by the candidate's module __getattr__)")
        return value

    __getattr__._recode_checked = True
    vars(module)["__getattr__"] = __getattr__


# --------------------------------------------------------------- audit rules

def _reference_blocks(references) -> list[tuple[str, str, str]]:
    """(name, first line, normalised text) of every function and class of the reference files (their syntax
    trees are the ones the preload parsed, not parsed again)."""
    blocks = []
    for path in references:
        try:
            with open(path, "rb") as handle:
                blocks += _blocks_of(handle.read().decode("utf-8", "replace"), preload.parse(path))
        except OSError:
            continue
    return blocks


def _blocks_of(source: str, tree: ast.Module | None = None) -> list[tuple[str, str, str]]:
    """The blocks of ``source``; ``tree``: the preload's (its walk is shared with the source plans)."""
    try:
        walked = preload.nodes(tree) if tree is not None else preload.walk(ast.parse(source))
    except (SyntaxError, ValueError):
        return []
    blocks = []
    lines = [line.encode("utf-8") for line in _LINE_END.split(source)]  # once, not once per node
    for node in walked:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            text = _normalise(_segment(lines, node))
            if text.count("\n") >= 1:
                blocks.append((node.name, text.split("\n", 1)[0], text))
    return blocks


_LINE_END = re.compile(r"\r\n|\r|\n")  # the line ends of the parser (not str.splitlines's)


def _segment(lines: list[bytes], node: ast.AST) -> str:
    """``ast.get_source_segment`` over lines split once (its offsets count UTF-8 bytes)."""
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first][node.col_offset:node.end_col_offset].decode("utf-8", "replace")
    parts = [lines[first][node.col_offset:], *lines[first + 1:last], lines[last][:node.end_col_offset]]
    return "\n".join(part.decode("utf-8", "replace") for part in parts)


def _normalise(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _candidate_text() -> str:
    if "candidate_text" not in _config:
        try:
            with open(_config["candidate"], "rb") as handle:
                _config["candidate_text"] = _normalise(handle.read().decode("utf-8", "replace"))
        except OSError:
            _config["candidate_text"] = ""
    return _config["candidate_text"]


def _shortest_block() -> int:
    """The length of the shortest block's text (blocks are only ever added)."""
    blocks = _config["blocks"]
    known = _config.get("shortest")
    if known is None or known[0] != len(blocks):
        known = _config["shortest"] = (len(blocks), min((len(block[2]) for block in blocks), default=0))
    return known[1]


def _copied_block(source: object) -> str | None:
    """Name of a reference function or class whose text ``source`` holds and the candidate's own file does not."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    if not isinstance(source, str) or len(source) < _shortest_block():
        return None  # normalising never lengthens a text: a shorter source holds no block (a unit name compiled)
    hits = [b for b in _config["blocks"] if b[1] in source]
    if not hits:
        return None
    text = _normalise(source)
    own = None
    for name, _, block in hits:
        if block in text:
            own = _candidate_text() if own is None else own
            if block not in own:
                return name
    return None


def _text_of(source: object, filename: str) -> bool:
    """Whether ``source`` is the text of the file ``filename`` names. Compiling a file's own text under its name
    (a config loader running a config file, a script runner) runs that file: the file does not become the
    candidate's, as it does when the candidate gives its code a file's name (``compile(hack, pytest_file)``)."""
    if not isinstance(source, (str, bytes, bytearray)):
        return False
    try:
        with open(filename, "rb") as handle:
            data = handle.read()
    except (OSError, ValueError):
        return False
    if isinstance(source, str):
        try:
            return source == importlib.util.decode_source(data)
        except (SyntaxError, UnicodeDecodeError, LookupError):
            return False
    return bytes(source) == data


def audit(event: str, args: tuple, direct: types.FrameType) -> None:
    """Audit events through which reference code is copied, compiled or serialised (called by the guard's hook,
    which skips the guard's own work, such as compiling the reference); ``direct`` made the call."""  # the frame that called exec, compile...: audit hooks run from C
    code = args[0] if args else None
    if event in ("exec", "function.__new__") and isinstance(code, types.CodeType) and id(code) not in _ref_ids:
        if is_candidate_code(direct.f_code):
            origin.taint(code)  # the candidate's own generated code, whatever file name it claims
        return
    if event == "compile":
        source, filename = (tuple(args) + (None, None))[:2]
        if isinstance(filename, str) and not filename.startswith("<") and is_candidate_code(direct.f_code) and \
                not is_candidate_file(filename) and not _text_of(source, filename):
            origin.taint_file(filename)  # "<string>" and the like are left to the code objects' taint
        if is_reference_file(filename):
            evidence = "compiles the reference's source"
        else:
            block = _copied_block(source)
            evidence = f"compiles the reference's source of {block}" if block else None
    elif event in ("function.__new__", "marshal.dumps"):
        verb = "builds a function from" if event == "function.__new__" else "serialises"
        evidence = f"{verb} the reference's code {_name(code)}" if (
            isinstance(code, types.CodeType) and id(code) in _ref_ids) else None
    elif event == "code.__new__":
        bytecode, filename = (tuple(args) + (None, None))[:2]
        evidence = "builds a code object from the reference's code" if (
            is_reference_file(filename) or bytecode in _ref_bytecode) else None
    else:
        evidence = None
    caller = candidate_on_stack(direct) if evidence else None  # the stack is walked only for a finding
    if caller is not None:
        _report(f"{_where(caller)} {evidence}")


AUDIT_EVENTS = ("exec", "compile", "function.__new__", "marshal.dumps", "code.__new__")


# ----------------------------------------------------------------- reporting

def _name(code: types.CodeType) -> str:
    return getattr(code, "co_qualname", code.co_name)


def _where(frame: types.FrameType) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} ({frame.f_code.co_name})"


def _report(evidence: str) -> None:
    if evidence in _reports or len(_reports) >= _MAX_REPORTS:
        return
    _reports.append(evidence)
    _config["report"](evidence)


def reports() -> list[str]:
    return list(_reports)
