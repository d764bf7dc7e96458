"""Whose code is running: the candidate's, or someone else's (the test, the reference, libraries, the harness).

Every rule of the guard asks this question of the stack at the moment something
happens. The candidate's code is:

* code objects compiled from the target file (``co_filename`` is its path);
* code the candidate compiled or executed itself, and everything nested in it
  (tainted when the ``compile``/``exec`` audit event fires with a candidate
  frame as the direct caller), whatever file name it claims;
* code loaded from files the candidate wrote (tainted when the ``open`` audit
  event for writing fires in candidate context), so a helper module dropped in
  /tmp and imported runs as candidate code.

A file name cannot be faked without building code objects (``compile`` with a
chosen name, ``code.replace``, ``types.CodeType``, ``marshal``), all of which the
capability rules deny to candidate code, and taint anyway.

Threads the candidate started are its own whatever they run (``Thread.start``
and ``_thread.start_new_thread`` are wrapped while candidate code is on the
stack), so work handed to a thread is not hidden from the stack checks.

Frames of the guard itself are skipped by every stack walk.
"""
from __future__ import annotations

import _thread
import functools
import os
import sys
import threading
import types
import weakref
from typing import Iterator

GUARD_DIR = os.path.dirname(os.path.abspath(__file__))
_config: dict = {}
_tainted_ids: set[int] = set()
_tainted_files: set[str] = set()
_tainted_names: set[str] = set()  # their base names: a path of another name needs no realpath (a stat per part)
_keep: list = []  # keeps tainted code objects alive, so their ids stay theirs
_file_is_candidate: dict[str, bool] = {}
_file_is_guard: dict[str, bool] = {}
# Namespaces are compared by identity without ``id()``: ``id`` raises an audit event, and these checks run
# inside the guard's audit hook for every frame it looks at. Modules are held weakly: a candidate module whose
# import failed must not keep what it allocated alive.
_candidate_modules: list["weakref.ref[types.ModuleType]"] = []
_known_globals: "dict[str, weakref.ref[types.ModuleType]]" = {}  # the first live module of each name
native: list = []  # the guard's compiled helper (recode_guard_native), when the runner could build it
known_keys: dict[int, dict] = {}  # every library namespace noted, by the helper's key: its stack walks skip them
candidate_namespaces: list[tuple] = [()]
guard_globals: list[dict] = []
_NAMESPACE = types.ModuleType.__dict__["__dict__"]
active = [False]  # a candidate module exists: before that, no code is the candidate's and no rule can apply
_candidate_threads: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()
_patches: list[tuple[object, str, object]] = []
tls = threading.local()  # ``busy``: the guard itself is working on this thread (no rule applies)
# Moves whenever what counts as the candidate's grows (a module of its file, code it compiled, a file it wrote):
# an answer about a class kept from before (``class_stamp``) is no longer current.
epoch = [0]


class GuardWork:
    """The guard itself is working on this thread: no rule applies to what it does (re-entrant)."""

    def __enter__(self) -> None:
        self.previous = getattr(tls, "busy", False)
        tls.busy = True

    def __exit__(self, *exc) -> None:
        tls.busy = self.previous


def configure(candidate: str) -> None:
    _config["candidate"] = candidate
    _config["basename"] = os.path.basename(candidate)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if type(path) is str and os.path.dirname(os.path.abspath(path)) == GUARD_DIR:
            guard_globals.append(vars(module))
    _patch_thread_start()


def candidate_path() -> str:
    return _config["candidate"]


# ------------------------------------------------------------------ files and code

def is_own_file(path: object) -> bool:
    """The candidate's own file itself (not one it wrote, nor one whose name it gave code it compiled)."""
    return type(path) is str and (path == _config["candidate"] or os.path.realpath(path) == _config["candidate"])


def is_candidate_file(path: object) -> bool:
    if type(path) is not str:
        return False
    known = _file_is_candidate.get(path)
    if known is None:
        target = _config["candidate"]
        name = os.path.basename(path)  # a link or a rename to another name is a watched event: names match
        known = path == target or path in _tainted_files or (
            name == _config["basename"] and os.path.realpath(path) == target) or (
            name in _tainted_names and os.path.isabs(path) and os.path.realpath(path) in _tainted_files)
        _file_is_candidate[path] = known
    return known


def is_candidate_code(code: types.CodeType) -> bool:
    """Code of the candidate's file, of a file it wrote, or code it compiled or executed itself."""
    return bool(_tainted_ids) and id(code) in _tainted_ids or is_candidate_file(code.co_filename)


def is_guard_code(code: types.CodeType) -> bool:
    name = code.co_filename
    known = _file_is_guard.get(name)
    if known is None:
        known = _file_is_guard[name] = os.path.dirname(os.path.abspath(name)) == GUARD_DIR if os.path.isabs(
            name) else False
    return known


def nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and every code object nested in it (its functions', classes' and comprehensions')."""
    stack = [code]
    while stack:
        item = stack.pop()
        yield item
        stack.extend(c for c in item.co_consts if type(c) is types.CodeType)


def taint(code: types.CodeType) -> None:
    """``code`` and every code object nested in it count as the candidate's."""
    stack = [code]
    while stack:
        item = stack.pop()
        if id(item) not in _tainted_ids:
            epoch[0] += 1
            _tainted_ids.add(id(item))
            _keep.append(item)
            stack.extend(c for c in item.co_consts if isinstance(c, types.CodeType))


def taint_file(path: str) -> None:
    """A file the candidate wrote: code loaded from it is the candidate's."""
    real = os.path.realpath(path)
    if real not in _tainted_files:
        epoch[0] += 1
        _tainted_files.update({real, path})
        _tainted_names.update({os.path.basename(real), os.path.basename(path)})
        _file_is_candidate.clear()


_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_MRO = type.__dict__["__mro__"]
_UNWRAP = {types.MethodType: types.MethodType.__func__, staticmethod: staticmethod.__dict__["__func__"],
           classmethod: classmethod.__dict__["__func__"], property: property.__dict__["fget"],
           functools.partial: functools.partial.__dict__["func"]}


def type_dict(klass: type):
    """``klass.__dict__`` without running anything a metaclass defines."""
    return _TYPE_DICT.__get__(klass)


def type_mro(klass: type) -> tuple:
    return _TYPE_MRO.__get__(klass)


def is_kind(value: object, kinds) -> bool:
    """``isinstance`` by the value's real type: never runs a ``__class__`` the value's class defines."""
    return issubclass(type(value), kinds)


def module_file(value: object) -> object:
    """A module's ``__file__``, read from its namespace: a lazy module's ``__getattr__`` does not run."""
    if not is_kind(value, types.ModuleType):
        return None
    namespace = _NAMESPACE.__get__(value)
    return namespace.get("__file__") if type(namespace) is dict else None


def code_of(value: object) -> types.CodeType | None:
    """The code a callable runs (functions, methods, class/static methods, property getters, partials), read
    through the descriptors of those builtin types, so nothing of the value's own runs."""
    for _ in range(6):
        kind = type(value)
        if kind is types.FunctionType:
            return types.FunctionType.__dict__["__code__"].__get__(value)
        getter = _UNWRAP.get(kind)
        if getter is None:
            for base, candidate_getter in _UNWRAP.items():
                if issubclass(kind, base):
                    getter = candidate_getter
                    break
        if getter is None:
            return None
        value = getter.__get__(value)
    return None


def candidate_modules() -> set[str]:
    """Names under which the candidate's file is loaded (the runner imports it once, normally)."""
    names = _config.setdefault("modules", set())
    return names


def note_candidate_module(name: str) -> None:
    epoch[0] += 1
    candidate_modules().add(name)


_IMMUTABLE = 1 << 8
_HEAP = 1 << 9


def candidate_class(cls: type) -> bool:
    """A class the candidate defined: named after its module, or holding its code. Nothing is the candidate's
    before its module exists; builtin and immutable classes never are."""
    if not candidate_loaded():
        return False
    for klass in type_mro(cls):
        flags = klass.__flags__
        if not flags & _HEAP or flags & _IMMUTABLE:
            continue
        namespace = type_dict(klass)
        if namespace.get("__module__") in candidate_modules():
            return True
        for member in list(namespace.values()):
            kind = type(member)
            if kind is types.FunctionType:
                if is_candidate_code(types.FunctionType.__dict__["__code__"].__get__(member)):
                    return True
            elif kind in _UNWRAP or kind is types.MethodType:
                code = code_of(member)
                if code is not None and is_candidate_code(code):
                    return True
    return False


def describe(value: object) -> str:
    """A short name for a value, read without running any of its code."""
    code = code_of(value)
    if code is not None:
        return f"{code_where(code)} ({code.co_name})"
    if is_kind(value, type):
        return f"{type_dict(value).get('__module__', '?')}.{type.__dict__['__qualname__'].__get__(value)}"
    if is_kind(value, types.ModuleType):
        return f"module {types.ModuleType.__dict__['__dict__'].__get__(value).get('__name__', '?')}"
    if is_kind(value, types.BuiltinFunctionType):
        return f"{value.__module__ or 'builtins'}.{value.__qualname__}"
    kind = type(value)
    return f"a {kind.__module__}.{kind.__qualname__} object"


def candidate_object(value: object) -> bool:
    """A function of the candidate's, a class it defined, or an instance of one."""
    code = code_of(value)
    if code is not None:
        return is_candidate_code(code)
    return candidate_class(value if is_kind(value, type) else type(value))


def note_module(module: types.ModuleType, candidate: bool) -> None:
    """A module: the candidate's (its code runs with the module's namespace as globals), or anyone else's."""
    if candidate:
        active[0] = True
        if native:
            native[0].activate()  # the helper's audit gate: unlike this list, nothing can close it again
        if not any(ref() is module for ref in _candidate_modules):
            epoch[0] += 1
            _candidate_modules.append(weakref.ref(module))
            candidate_namespaces[0] += (_NAMESPACE.__get__(module),)
    else:
        if native:
            _know(native[0], _NAMESPACE.__get__(module))
        name = str(_NAMESPACE.__get__(module).get("__name__"))
        known = _known_globals.get(name)
        if known is None or known() is None:
            _known_globals[name] = weakref.ref(module)


def candidate_loaded() -> bool:
    for ref in _candidate_modules:  # asked for every class looked at: no generator
        if ref() is not None:
            return True
    return False


def known_namespace(namespace: dict) -> bool:
    """The namespace of a loaded module other than the candidate's."""
    if type(namespace) is not dict:
        return False
    known = _known_globals.get(namespace.get("__name__"))
    module = known() if known is not None else None
    return module is not None and _NAMESPACE.__get__(module) is namespace


# ------------------------------------------------------------------------- stacks

def is_candidate_frame(frame: types.FrameType) -> bool:
    """Candidate code runs with the candidate's module namespace as globals (code objects of its file run with
    other globals only if something built such a function or executed such code, which the capability rules
    deny); frames with globals of no known module are judged by their code (an audited read)."""
    namespace = frame.f_globals
    for module in _candidate_modules:
        if (candidate := module()) is not None and _NAMESPACE.__get__(candidate) is namespace:
            return True
    return not known_namespace(namespace) and is_candidate_code(frame.f_code)


def is_guard_frame(frame: types.FrameType) -> bool:
    namespace = frame.f_globals
    for guard in guard_globals:
        if namespace is guard:
            return True
    return not known_namespace(namespace) and is_guard_code(frame.f_code)


def outside_guard(frame: types.FrameType | None) -> types.FrameType | None:
    """The innermost frame at or below ``frame`` that is not the guard's."""
    while frame is not None and is_guard_frame(frame):
        frame = frame.f_back
    return frame


def use_native(path: str) -> types.ModuleType:
    """Load the compiled helper from the path the runner built it at (nothing of the task's folders can stand in
    for it), for every part of the guard to use."""
    from importlib.machinery import ExtensionFileLoader
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("recode_guard_native", path, loader=ExtensionFileLoader("recode_guard_native",
                                                                                            path))
    helper = module_from_spec(spec)
    spec.loader.exec_module(helper)
    native.append(helper)
    for ref in list(_known_globals.values()):
        if (module := ref()) is not None:
            _know(helper, _NAMESPACE.__get__(module))
    return helper


def _know(helper: types.ModuleType, namespace: dict) -> None:
    known_keys[helper.key(namespace)] = namespace


def candidate_frame(frame: types.FrameType | None) -> types.FrameType | None:
    """Innermost candidate frame at or below ``frame`` (with the helper, frames in library namespaces are
    skipped in C: only the candidate's and those of no known module are looked at here)."""
    while frame is not None:
        if native:
            frame = native[0].suspect(frame, candidate_namespaces[0], known_keys)
            if frame is None:
                return None
        if is_candidate_frame(frame):
            return frame
        frame = frame.f_back
    return None


def library_body_between(cand: types.FrameType, frame: types.FrameType) -> bool:
    """Whether a library module's body runs between the candidate's frame ``cand`` and ``frame`` (above it): a
    library's first import, started from the candidate's file, doing its own set-up."""
    current: types.FrameType | None = frame
    while current is not None and current is not cand:
        if current.f_code.co_name == "<module>" and not is_candidate_frame(current):
            return True
        current = current.f_back
    return False


def in_candidate_thread() -> bool:
    return getattr(tls, "candidate_thread", False) or threading.current_thread() in _candidate_threads


def candidate_threads_alive() -> bool:
    return any(thread.is_alive() for thread in list(_candidate_threads))


def where(frame: types.FrameType) -> str:
    """``target.py:12``: the file's name and the line the frame is at."""
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def code_where(code: types.CodeType) -> str:
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"


# ------------------------------------------------------------------------- threads

def patch(owner: object, name: str, replacement: object) -> None:
    """Install a guard wrapper and remember it (see ``undone_patches``)."""
    setattr(owner, name, replacement)
    _patches.append((owner, name, replacement))


def undone_patches() -> list[str]:
    """The guard's wrappers something has put back or replaced since."""
    return [f"{getattr(owner, '__name__', owner)}.{name}" for owner, name, installed in _patches
            if getattr(owner, name, None) is not installed]


def _patch_thread_start() -> None:
    """Threads started while candidate code is on the stack are the candidate's, whatever they run."""
    original = threading.Thread.start

    @functools.wraps(original)
    def start(self):
        if candidate_frame(sys._getframe(1)) is not None or in_candidate_thread():
            _candidate_threads.add(self)
        return original(self)

    patch(threading.Thread, "start", start)
    raw = _thread.start_new_thread

    @functools.wraps(raw)
    def start_new_thread(function, args, kwargs=None):
        if candidate_frame(sys._getframe(1)) is None and not in_candidate_thread():
            return raw(function, args, kwargs or {})

        def run(*inner, **named):
            tls.candidate_thread = True
            return function(*inner, **named)
        return raw(run, args, kwargs or {})

    patch(_thread, "start_new_thread", start_new_thread)
