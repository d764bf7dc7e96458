"""Integrity of everything the verdict relies on: module and class namespaces, sys.modules, pytest itself.

Two mechanisms, because assigning an attribute of a module or class raises no
audit event:

* **write time**: every write to the attribute of a module (except the
  candidate's own) is judged by who is writing. With the compiled helper
  (``native/recode_guard_native.c``) the ``module`` type's own setattr slot asks
  the judge, and modules keep their exact type (CPython specialises attribute
  loads only on those). Without it, each module gets, the moment the import
  system creates it, a subclass of its class whose ``__setattr__`` and
  ``__delattr__`` ask the judge. A write is allowed
  from the module's own code, the import system, module-level set-up code of
  a library or a package writing its own modules, through a descriptor of the
  module's class (``torch.backends.cudnn.deterministic``), to ``sys``'s streams
  and hooks; it is refused when the writing frame is the candidate's, when it
  places a value of the candidate's, or when a library writes a module the
  verdict runs through on the candidate's behalf, unless a frame of the test
  or a conftest lies between (``_check_write``), with the writer's line
  (``target.py:7 writes numpy.testing.assert_allclose``). The subclass
  defines nothing else: an own ``__dict__`` would hide the namespace from
  ``inspect.getattr_static``, through which pluggy 1.7 finds the hooks of
  plugin modules (conftest files, autoloaded plugins). Writes through a
  module's ``__dict__`` are the baselines' to find.
* **baselines**: each module namespace is copied when its import completes,
  each class defined in it with it, and compared by identity. With the
  helper, every one at every test boundary. Without it, those the verdict
  runs through (the test's, the reference's and the task's modules, pytest,
  pluggy, unittest, the testing parts of numpy and torch, builtins) at every
  test boundary, every one after collection, at the end and between tests
  whenever the tests since the last full comparison took
  ``FULL_CHECK_SHARE`` times longer than it did. A difference the module's own
  code does not explain (its functions never assign that global) is a
  dict-level write through a function's ``__globals__``: reported. So are new
  values holding candidate code, names shadowing builtins, changed methods of
  library classes, any change to pytest's, pluggy's, unittest's and the
  testing libraries' classes, to the test module or the reference module,
  replaced ``sys.modules`` entries, installed tracers or profilers, torch
  dispatch modes, pytest hook implementations added
  or removed after collection, and test items whose class, function or
  methods were replaced. A dict-level write the candidate undoes itself before
  the next comparison (from a finalizer) is not seen.

Namespaces are kept in blocks of ``BLOCK_SIZE``. With the compiled helper a
block is one pass in C over its dicts' version tags, and only a namespace whose
dict changed since it was last seen equal to its baseline is compared value by
value. Without it, a block is one C-level identity pass over a flat list of its
values, and only a block that changed is looked at namespace by namespace. A
namespace that changed once is also compared before each test's call.
"""
from __future__ import annotations

import array
import ast
import builtins
import dis
import importlib.util
import itertools
import operator
import os
import sys
import threading
import time
import tokenize
import types
import warnings
import weakref
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from typing import Callable

import recode_guard_capabilities as capabilities
import recode_guard_handed as handed
import recode_guard_origin as origin
import recode_guard_preload as preload
from recode_guard_origin import (GuardWork, candidate_frame, candidate_object, code_of, describe, in_candidate_thread,
                                is_kind, type_dict)

_HEAP, _IMMUTABLE = 1 << 9, 1 << 8
# Between tests every namespace is compared again once the tests since the last full comparison took this many
# times longer than it did (so it costs at most ~4 % of the tests' time); the hot ones always are.
FULL_CHECK_SHARE = 25
_MISSING, _UNKNOWN = object(), object()
_DICT = types.ModuleType.__dict__["__dict__"]
_GLOBALS = types.FunctionType.__dict__["__globals__"]
_BUILTINS = types.FunctionType.__dict__["__builtins__"]
_PLAIN_SETATTR = types.ModuleType.__setattr__
_IMPORT_SYSTEM = frozenset({"importlib", "_frozen_importlib", "_frozen_importlib_external"})
_VALUES = operator.methodcaller("values")
_TRUSTED_TOPS = frozenset({"_pytest", "pytest", "pluggy", "recode_guard_core", "recode_guard_reference",
                           "recode_guard_origin", "recode_guard_capabilities", "recode_guard_integrity",
                           "recode_guard_results", "_recode_pytest_guard", "conftest"})
_VERDICT_TOPS = frozenset({"_pytest", "pytest", "pluggy", "unittest", "recode_guard_core", "recode_guard_reference",
                           "recode_guard_origin", "recode_guard_capabilities", "recode_guard_integrity",
                           "recode_guard_results"})
_HOT_PREFIXES = ("builtins", "math", "cmath", "operator", "functools", "numpy.testing", "numpy._core.numeric",
                 "numpy.core.numeric", "numpy._core.fromnumeric", "numpy.core.fromnumeric", "numpy.ma", "torch.testing",
                 "torch._tensor", "torch.nn.parameter", "torch.overrides", "torch.functional", "_pytest", "pytest",
                 "pluggy", "unittest")
# classes whose methods decide comparisons of the values tests compare most
_VERDICT_CLASSES = frozenset({"torch._tensor.Tensor", "torch.nn.parameter.Parameter", "numpy.ma.core.MaskedArray"})
_SYS_FREE = frozenset({"stdout", "stderr", "stdin", "argv", "displayhook", "excepthook", "unraisablehook", "ps1",
                       "ps2", "tracebacklimit", "last_type", "last_value", "last_traceback", "last_exc", "path",
                       "dont_write_bytecode", "breakpointhook"})
_BUILTIN_NAMES = frozenset(dir(builtins))
_BUILTIN_VALUES = dict(vars(builtins))  # as the guard found them: ``np.float = float`` is told by identity
_WARNINGS_FREE = frozenset({"showwarning", "formatwarning"})  # display hooks: what they return decides nothing
_report: list[Callable[[str], None]] = []
_suspect: list[Callable[[str], None]] = []
_state: dict = {"checkpoint": "collection"}


class _Space:
    """One namespace under watch: a module's dict or a class's, and its accepted contents."""

    __slots__ = ("label", "owner", "mapping", "base", "version", "kind", "volatile", "module", "protection",
                 "blocks")

    def __init__(self, label: str, owner: object, mapping, kind: str, module: types.ModuleType,
                 protection: object = _UNKNOWN, base: dict | None = None, version: int | None = None) -> None:
        self.label, self.owner, self.mapping, self.kind, self.module = label, owner, mapping, kind, module
        if base is None:
            version = _native[0].version(owner) if _native else 0  # read first: a later change shows
            base = mapping.copy()  # a class's mappingproxy copies its dict in C
        self.version, self.base = version, base
        self.volatile = False
        self.protection = protection
        self.blocks: list = []

    def unchanged(self) -> bool:
        mapping, base = self.mapping, self.base
        return len(mapping) == len(base) and all(map(operator.is_, mapping.values(), base.values()))

    def rebase(self, base: dict) -> None:
        self.base = base
        for block in self.blocks:
            block.stale = True


class _Block:
    """Up to ``BLOCK_SIZE`` namespaces compared together: one C-level identity pass over all their values, so
    a comparison looks at namespaces one by one (and copies a flat list again) only in a block that changed.
    The watch in Python, where the compiled helper could not be built."""

    __slots__ = ("spaces", "maps", "lens", "flat", "stale")

    def __init__(self) -> None:
        self.spaces: list[_Space] = []
        self.maps: list = []
        self.lens: list[int] = []
        self.flat: list = []
        self.stale = False

    def add(self, space: _Space) -> None:
        space.blocks.append(self)
        self.spaces.append(space)
        self.maps.append(space.mapping)
        self.lens.append(len(space.base))
        self.flat.extend(space.base.values())

    def unchanged(self) -> bool:
        if self.stale:
            self.lens = [len(s.base) for s in self.spaces]
            self.flat = list(itertools.chain.from_iterable(s.base.values() for s in self.spaces))
            self.stale = False
        return list(map(len, self.maps)) == self.lens and all(
            map(operator.is_, itertools.chain.from_iterable(map(_VALUES, self.maps)), self.flat))

    def changed(self) -> list[_Space]:
        return [] if self.unchanged() else [s for s in self.spaces if not s.unchanged()]


class _TaggedBlock:
    """Up to ``BLOCK_SIZE`` namespaces whose dicts' version tags are compared in one C pass (the compiled
    helper): a namespace is compared value by value only when its dict changed since it was last seen equal to
    its baseline. The tags only say where to look; the baseline stays what is judged against."""

    __slots__ = ("spaces", "namespaces", "tags", "stale")

    def __init__(self) -> None:
        self.spaces: list[_Space] = []
        self.namespaces: list[dict] = []  # the dicts themselves: the pass reads their tags without their owners
        self.tags = array.array("Q")
        self.stale = False  # the values are the baseline's to tell, not the tags': nothing to rebuild

    def add(self, space: _Space) -> None:
        space.blocks.append(self)
        self.spaces.append(space)
        self.namespaces += _native[0].namespaces([space.owner])
        self.tags.append(space.version)

    def changed(self) -> list[_Space]:
        return _tags_moved(self.namespaces, self.tags, self.spaces.__getitem__)


class _ClassTable:
    """Every class of the watched modules, with the compiled helper: the class, its dict's version tag and the
    baseline of its dict side by side, appended in C as each module is adopted (a torch test defines thousands).
    A class gets its ``_Space`` only when its tag first moves, or when a check asks for it by name."""

    def __init__(self) -> None:
        self.positions: dict[type, int] = {}
        self.owners: list[type] = []
        self.namespaces: list[dict] = []  # their dicts, as in _TaggedBlock
        self.tags = array.array("Q")
        self.bases: list[dict | None] = []
        self.modules: list[_Space] = []
        self.stale = False  # the blocks' protocol (``_Space.rebase``): the table keeps no copy to refresh

    def adopt(self, module: _Space) -> None:
        added = _native[0].adopt_classes(module.mapping, module.label, self.positions, self.owners, self.tags,
                                         self.bases)
        self.modules.extend(itertools.repeat(module, added))
        self.namespaces += _native[0].namespaces(self.owners[len(self.namespaces):])

    def space(self, owner: type) -> _Space | None:
        space = _by_owner.get(owner)
        position = self.positions.get(owner)
        if space is None and position is not None:
            module = self.modules[position]
            label = f"{module.label}.{_QUALNAME.__get__(owner)}"
            space = _Space(label, owner, type_dict(owner), "class", module.module,
                           _protected_kind(module) or _name_protection(label, "class"), self.bases[position],
                           self.tags[position])
            self.bases[position] = None  # the space's now
            space.blocks.append(self)
            _by_owner[owner] = space
        return space

    def changed(self) -> list[_Space]:
        return _tags_moved(self.namespaces, self.tags, lambda position: self.space(self.owners[position]))


def _tags_moved(namespaces: list, tags: array.array, space_at: Callable[[int], _Space]) -> list[_Space]:
    """The watched ``namespaces`` whose dict's tag moved and whose values differ from their baseline; a tag that
    moved over the same values (changed and changed back, or a write the baseline followed) is taken."""
    found = []
    for position in _native[0].changed(namespaces, tags):
        space = space_at(position)
        version = _native[0].version(space.owner)  # read first: a change while comparing shows next time
        if space.unchanged():
            tags[position] = version
        else:
            found.append(space)
    return found


BLOCK_SIZE = 64
_native = origin.native  # the compiled helper (recode_guard_native), when the runner could build it
# every module's and class's namespace; those the verdict runs through (compared at every test boundary, the rest
# after collection, at the end and now and then between tests); those changed once (compared before each call)
_blocks: dict[str, list] = {"module": [], "class": [], "hot": [], "volatile": []}
_classes: list[_ClassTable] = []  # with the helper, the one table of every class ("class" blocks are it)
_by_owner: dict[object, _Space] = {}  # modules and classes hash by identity: no id() (an audit event)
_self_written: dict[tuple, bool] = {}
_guarded: dict[type, type] = {}
_base_class: dict[type, type] = {}
_modules: dict[str, object] = {}
_modules_seen: list = []  # sys.modules' values in order, as the last check_modules left them
_protected_paths: dict[str, str] = {}  # realpath -> "test" | "reference"
_protected_names: set[str] = set()
_pytest_objects: list[list] = []  # [label, object, its callables, what _object_print read last]
_items: dict[str, tuple] = {}
_hooks: dict = {}


def configure(report: Callable[[str], None], *, test: str, references: tuple[str, ...], repo: str,
              suspect: Callable[[str], None] = lambda text: None) -> None:
    """Watch every module from now on: those loaded so far, and each one the import system creates (with the
    compiled helper when ``origin`` has it, else in Python, at a higher cost). ``suspect`` takes what a rule
    notices but cannot attribute exactly."""
    _report.append(report)
    _suspect.append(suspect)
    _state["repo"] = repo
    _protected_paths[test] = "test"
    for path in references:
        _protected_paths[path] = "reference"
    _protected_names.update(os.path.basename(path) for path in _protected_paths)
    with GuardWork():
        loaded = [m for m in list(sys.modules.values())
                  if is_kind(m, types.ModuleType) and (_real_dict(m) or {}).get("__name__") != "__main__"]
        if not _native:  # with the helper, adopting them below notes them as well
            for module in loaded:
                protect(module)
        if _native:
            trusted = tuple(namespace for name, m in list(sys.modules.items())
                            if name.split(".")[0] in _IMPORT_SYSTEM and (namespace := _real_dict(m)) is not None)
            _native[0].install(_judge_write, accept, _DELETING, _subclasses(types.ModuleType), _by_owner, trusted)
            _native[0].allow_writes(sys, _SYS_FREE, origin.candidate_namespaces, origin.known_keys)
            _classes.append(_ClassTable())
            _blocks["class"].append(_classes[0])
        _patch_import_system()
        for module in loaded:
            adopt(module)
        main = sys.modules.get("__main__")
        if is_kind(main, types.ModuleType) and _real_dict(main) is not None:
            origin.note_module(main, candidate=False)  # pytest's launcher: the bottom frame of every stack walked
        _modules.update(sys.modules)


def add_reference(path: str) -> None:
    _protected_paths[path] = "reference"
    _protected_names.add(os.path.basename(path))


def _subclasses(kind: type) -> list[type]:
    """Every class deriving from ``kind``, at any depth, each once."""
    reached, seen = [kind], {kind}
    for klass in reached:
        reached += [k for k in type.__subclasses__(klass) if k not in seen and not seen.add(k)]
    return reached[1:]


def set_checkpoint(label: str) -> None:
    _state["checkpoint"] = label


def _flag(text: str) -> None:
    _report[0](text)


# ------------------------------------------------------------------- write time

def _is_candidate_module(module: types.ModuleType) -> bool:
    namespace = _real_dict(module) or {}
    spec = namespace.get("__spec__")
    path = namespace.get("__file__") or (spec.origin if type(spec) is ModuleSpec else None)
    if origin.is_candidate_file(path):
        if namespace.get("__name__", "?") not in origin.candidate_modules():
            origin.note_candidate_module(namespace.get("__name__", "?"))
        origin.note_module(module, candidate=True)
        return True
    return False


def _scratch_child(module: types.ModuleType) -> bool:
    """A module loaded from outside the repository into a package the import system did not make (a scratch
    module built at run time, as jinja2's ``ModuleLoader`` builds one for its compiled templates, kept only by
    its loader): like its package, nobody's to protect. The guard keeps nothing of it (no baseline, no judged
    writes), so it lives only as long as its maker keeps it, as without the guard."""
    namespace = _real_dict(module) or {}
    name, path = namespace.get("__name__"), namespace.get("__file__")
    package = sys.modules.get(name.rpartition(".")[0], _MISSING) if type(name) is str and "." in name else _MISSING
    if package is _MISSING or is_kind(package, types.ModuleType) and (
            package in _judged or package in _by_owner or type(package) in _base_class):
        return False  # a package the import system made (judged, or given the guarded class, as it imports)
    return not (type(path) is str and os.path.realpath(path).startswith(_state.get("repo", "/")))


def protect(module: types.ModuleType) -> None:
    """Without the compiled helper, give ``module`` the guarded subclass of its class (write-time checks);
    modules that refuse stay as they are. With it, every module's writes are judged already."""
    if _native:
        if not _is_candidate_module(module) and _real_dict(module) is not None:
            origin.note_module(module, candidate=False)
            _judged.add(module)
        return
    if _is_candidate_module(module):
        base = _base_class.get(type(module))  # ``type(sys)(name)`` makes modules of the guarded class
        if base is not None:
            object.__setattr__(module, "__class__", base)
        return
    if _real_dict(module) is not None:
        origin.note_module(module, candidate=False)
    kind = type(module)
    if kind in _base_class:
        return
    guarded = _guarded.get(kind)
    if guarded is None:
        guarded = type(kind.__name__, (kind,), {"__setattr__": _setattr, "__delattr__": _delattr, "__slots__": (),
                                                  "__module__": kind.__module__})
        _guarded[kind] = guarded
        _base_class[guarded] = kind
    try:
        object.__setattr__(module, "__class__", guarded)  # past a class of its own that refuses writes
    except TypeError:
        pass  # a module class with its own layout: watched by the baselines only


_DELETING = object()
_judged: "weakref.WeakSet[types.ModuleType]" = weakref.WeakSet()  # modules the import system made, or adopted
_scratch: "weakref.WeakSet[types.ModuleType]" = weakref.WeakSet()  # made by it in a scratch package (_scratch_child)


def _judge_write(module, name, value, writer: types.FrameType | None = None) -> bool:
    """A write to a module's attribute, from the compiled helper before it writes (which decides the module's own
    and the import system's writes itself, and hands over the writing frame): whether the baseline may follow
    it (raises when it is refused). The candidate's own modules are its to change."""
    if writer is None:
        writer = _writer()
    if _own_or_import_system(module, writer):
        return True
    if module not in _judged:
        return False  # the candidate's, or a scratch module someone made (``types.ModuleType(name)``)
    return _check_write(module, name, value, type(module), value is _DELETING, writer)


def _setattr(module, name, value) -> None:
    base = _base_class[type(module)]
    writer = _writer()
    if _own_or_import_system(module, writer):
        base.__setattr__(module, name, value)
        accept(module, name)
        return
    judged = _check_write(module, name, value, base, False, writer)
    base.__setattr__(module, name, value)
    if name == "__class__":
        with GuardWork():
            protect(module)  # re-classed by its library (``trio``): guarded again, as its new class
    elif judged:
        accept(module, name)


def _delattr(module, name) -> None:
    base = _base_class[type(module)]
    judged = _check_write(module, name, None, base, True, _writer())
    base.__delattr__(module, name)
    if judged:
        accept(module, name)


def _writer() -> types.FrameType:
    """The code that assigned: the caller of the guard's judge. Read as the guard's own work, which the audit hook
    lets pass at once (writes come by the thousand while libraries import)."""
    with GuardWork():
        return sys._getframe(2)


def _own_or_import_system(module, writer: types.FrameType) -> bool:
    """The module's own code, or the import system setting up a module it loads (attributes, a C extension's own
    init): the common writes, allowed at once (the compiled helper decides them in C the same way)."""
    return writer.f_globals is _DICT.__get__(module) or _module_top(writer) in _IMPORT_SYSTEM


def _module_top(frame: types.FrameType) -> str:
    return str(frame.f_globals.get("__name__", "")).split(".")[0]


def _plainly_allowed(module, name: str, value: object, base: type, writer: types.FrameType) -> bool:
    """Writes allowed whoever is on the stack (decided without walking it). The compiled helper decides the
    commonest without asking (``allow_writes``): the module's own code and the import system, ``_SYS_FREE``, and
    a package writing its own modules from a known library namespace (pytest's capture and assertion plugins
    write a dozen times per test)."""
    if _own_or_import_system(module, writer):
        return True
    namespace = _DICT.__get__(module)
    member = next((type_dict(k)[name] for k in origin.type_mro(base) if name in type_dict(k)), None)
    if (hasattr(type(member), "__set__") and name != "__class__") or base.__setattr__ is not _PLAIN_SETATTR:
        return True  # a descriptor of the module's class (a configuration property), or its own rules
    if module is sys and name in _SYS_FREE or module is warnings and name in _WARNINGS_FREE:
        return True
    own_name = namespace.get("__name__", "")
    return (writer.f_code.co_name == "<module>" or _module_top(writer) == own_name.split(".")[0]) and \
        not origin.is_candidate_frame(writer)  # a library's import-time set-up, or a package writing its own


def _data(value: object) -> bool:
    """A plain value (a counter, a flag, a cache): not code, a class or a module."""
    return not callable(value) and not is_kind(value, (types.ModuleType, staticmethod, classmethod, property))


def _check_write(module, name: str, value: object, base: type, deleting: bool, writer: types.FrameType) -> bool:
    """True when the write is allowed (and the baseline may follow it); raises when it is refused. A write
    made while the guard itself works is not judged here: the next boundary check sees it.

    Refused: a write the candidate's own code makes (the writing frame is its, or runs in a thread it started);
    unless the test acts (a frame of the test file or a conftest between the writer and the candidate's frame,
    or pytest writing with no candidate frame below), a value of the candidate's placed by anyone (a callback
    left behind; putting back what the name held before the first write not the module's own is no placing: a
    ``mock.patch`` undone by the suite's base class), and a library's write into a module the verdict runs
    through (the test's, the reference's, pytest and the testing libraries) on the candidate's behalf. The
    test's own tooling (a time-freezing library, its ``monkeypatch``) and libraries writing other modules are
    theirs; a function of the test file placed in the test's namespace is judged against what the test's source
    binds (``recode_guard_sources``)."""
    if getattr(origin.tls, "busy", False):
        return False
    with GuardWork():  # the writer's callers are read below: the guard's own frames count as trusted code
        if _plainly_allowed(module, name, value, base, writer):
            return True
        held = _held_first.setdefault((id(module), name), _DICT.__get__(module).get(name, _MISSING))
        cand = candidate_frame(writer)
        if cand is not None and origin.library_body_between(cand, writer):
            return True  # a library's import-time set-up reaching into another module
        if not (cand is writer or in_candidate_thread()):
            placed = not deleting and value is not held and candidate_object(value)
            if not placed and (cand is None or _verdict_space(module) is None) or _test_acts(cand, writer):
                return True
        if not deleting and _verdict_space(module) == "test" and _tests_own(value):
            return True  # the test's function placed in its namespace (funcy's ``monkey``): judged by its source
        if cand is not None and _verdict_space(module) == "test" and _named_by_the_test(module, name, cand):
            named_by_the_test.add(name)  # the test rebinds it through the candidate: not judged by its source
            return True  # the test handed its module and this name to the candidate's call running now (wrapt)
    label = f"{_DICT.__get__(module).get('__name__', '?')}.{name}"
    if not deleting and _builtin_at_its_name(module, name, value):
        if {"__getattr__", "__path__"} & _DICT.__get__(module).keys():
            _suspect[0](f"{origin.where(writer)} adds the builtin {name} at {label}, which the module's "
                        f"__getattr__ or a submodule may have answered before")
        return True
    capabilities.deny(cand, writer, f"{'deletes' if deleting else 'writes'} {label}")
    return False


def _builtin_at_its_name(module, name: str, value: object) -> bool:
    """A builtin written at its own name, new to a library module (old code's ``np.float = float`` for a numpy
    that dropped the alias): the module's own code finds the very object it found in builtins, so only lookups
    through the module that failed before answer now (unless a module ``__getattr__`` or a submodule of that name
    answered them: then it is only suspicious). Never a dunder, nor the test's, the reference's, a conftest,
    pytest's or a testing library's module."""
    namespace = _DICT.__get__(module)
    return name in _BUILTIN_VALUES and value is _BUILTIN_VALUES[name] and name not in namespace and \
        not (name.startswith("__") and name.endswith("__")) and _verdict_space(module) is None and \
        not _test_file(str(namespace.get("__file__")))


# (id of a module, name) -> what that name held before the first write the module's own code or the import system
# did not make: putting it back (the test's ``mock.patch`` undone) places nothing of the candidate's there.
_held_first: dict[tuple[int, str], object] = {}
named_by_the_test: set[str] = set()  # names of the test's module it had the candidate write (``_named_by_the_test``)
_paths_named_by_the_test: set[str] = set()  # ``Class.attr`` strings the test's source hands over with its ``__name__``


def note_paths_named_by_the_test(tree: ast.Module) -> None:
    """The dotted strings (``"Class_1.method"``) the test's calls hand over together with its own ``__name__``
    (``wrapt.wrap_function_wrapper(__name__, "Class_1.method", wrapper)``): attributes of its classes it patches."""
    for node in preload.nodes(tree):
        values = [*node.args, *(k.value for k in node.keywords)] if isinstance(node, ast.Call) else []
        if any(isinstance(v, ast.Name) and v.id == "__name__" for v in values):
            _paths_named_by_the_test.update(v.value for v in values if isinstance(v, ast.Constant) and
                                           isinstance(v.value, str) and "." in v.value)


def _named_by_the_test(module: types.ModuleType, name: str, cand: types.FrameType) -> bool:
    """Whether the test's frame that called the candidate (the frame below its outermost frame ``cand``) is in a
    statement whose call hands over this module (itself, a name bound to it, or its name) and ``name`` as a
    string (``wrapt.wrap_function_wrapper(__name__, "f", w)``, ``@patch_function_wrapper(module, "f")``)."""
    caller = cand.f_back
    while caller is not None and origin.is_candidate_frame(caller):
        caller = caller.f_back
    if caller is None or not _test_file(caller.f_code.co_filename) or os.path.basename(
            caller.f_code.co_filename) == "conftest.py":
        return False
    statement = _statement_at(preload.parse(caller.f_code.co_filename), caller.f_lineno)
    module_name = _DICT.__get__(module).get("__name__")

    def names_module(node: ast.expr) -> bool:
        value = node.value if isinstance(node, ast.Constant) else caller.f_locals.get(
            node.id, caller.f_globals.get(node.id)) if isinstance(node, ast.Name) else None
        return value is module or (type(value) is str and value == module_name)

    for call in _calls(statement):
        values = [*call.args, *(k.value for k in call.keywords)]
        if any(isinstance(v, ast.Constant) and v.value == name for v in values) and any(map(names_module, values)):
            return True
    return False


def _statement_at(tree: ast.Module | None, line: int | None) -> ast.stmt | None:
    """The innermost statement of ``tree`` spanning ``line`` (a definition from its first decorator on)."""
    found, nodes = None, list(tree.body) if tree is not None and line is not None else []
    while nodes:
        node = nodes.pop()
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if first <= line <= (node.end_lineno or node.lineno):
            found, nodes = node, [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
    return found


def _calls(statement: ast.stmt | None) -> list[ast.Call]:
    """The calls a statement makes itself: a definition's decorators, not its body."""
    roots = statement.decorator_list if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                               ast.ClassDef)) else [statement] if statement else []
    calls, stack = [], list(roots)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            calls.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)) or node in roots:
            stack.extend(ast.iter_child_nodes(node))
    return calls


def _tests_own(value: object) -> bool:
    """A function of the test file's (the test asking a decorator of the candidate's to patch its module)."""
    code = code_of(value)
    return code is not None and _protected_paths.get(os.path.realpath(code.co_filename)) == "test"


def _test_acts(cand: types.FrameType | None, writer: types.FrameType) -> bool:
    """A frame of the test file or a conftest between the writer and the candidate's frame (the bottom of the
    stack when there is none), or pytest itself writing with no candidate frame below."""
    if cand is None and _module_top(writer) in _TRUSTED_TOPS:
        return True
    frame: types.FrameType | None = writer
    while frame is not None and frame is not cand:
        if _test_file(frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


def for_the_verdict(function: object, cand: types.FrameType, writer: types.FrameType) -> bool:
    """Whether a library changing ``function``'s code or defaults with the candidate's frame ``cand`` below acts
    on the candidate's behalf on what the verdict runs through (rule 7, as rule 9 for modules): a function of the
    test file or a conftest, of the reference, or of pytest and the testing libraries (by its module), with no
    frame of the test between."""
    code = code_of(function)
    if code is None or _test_acts(cand, writer):
        return False
    if _test_file(code.co_filename) or _protected_paths.get(os.path.realpath(code.co_filename)) == "reference":
        return True
    module = _GLOBALS.__get__(function).get("__name__") if type(function) is types.FunctionType else None
    return _name_protection(str(module or ""), "module") == "verdict"


_test_files: dict[str, bool] = {}


def _test_file(path: str) -> bool:
    """The test file or a conftest.py (by the code's file name, resolved once)."""
    known = _test_files.get(path)
    if known is None:
        known = _test_files[path] = os.path.basename(path) == "conftest.py" or (
            os.path.basename(path) in _protected_names and _protected_paths.get(os.path.realpath(path)) == "test")
    return known


def _verdict_space(module: types.ModuleType) -> str | None:
    space = _by_owner.get(module)
    if space is not None:
        return _protected_kind(space)
    return _name_protection(str((_real_dict(module) or {}).get("__name__", "")), "module")


def watches_namespace(namespace: dict) -> bool:
    """A namespace the guard keeps a baseline of (any module it adopted, in ``sys.modules`` or not)."""
    return any(space.mapping is namespace for space in list(_by_owner.values()))


def accept(owner: object, name: str) -> None:
    """An allowed write: the baseline follows it."""
    space = _by_owner.get(owner)
    if space is None:
        return
    if name in space.mapping:
        space.base[name] = space.mapping[name]
    else:
        space.base.pop(name, None)
    space.rebase(space.base)  # the blocks' copies of it are stale
    _make_volatile(space)


def _make_volatile(space: _Space) -> None:
    """A namespace that changed is compared again before each test's call (set-up may have changed it)."""
    if not space.volatile:
        space.volatile = True
        _add(space, "volatile")


# -------------------------------------------------------------------- baselines

def _real_dict(module: types.ModuleType) -> dict | None:
    try:
        namespace = _DICT.__get__(module)
    except TypeError:
        return None
    return namespace if isinstance(namespace, dict) else None


def _mutable_class(value: object) -> bool:
    return is_kind(value, type) and bool(value.__flags__ & _HEAP) and not value.__flags__ & _IMMUTABLE


def _is_hot(space: _Space) -> bool:
    """What the test's verdict runs through: the test, the reference and the task's own modules, pytest and the
    other testing libraries, the builtins (a module's classes: see ``_adopt_classes``)."""
    if _protected_kind(space) is not None or space.label.startswith(_HOT_PREFIXES):
        return True
    path = (_real_dict(space.module) or {}).get("__file__")
    return type(path) is str and path.startswith(_state.get("repo", "\0"))


def _watch(space: _Space, hot: bool) -> None:
    _add(space, space.kind)
    if hot:
        _add(space, "hot")
    _by_owner[space.owner] = space


def _add(space: _Space, group: str) -> None:
    blocks = _blocks[group]
    if not blocks or len(blocks[-1].spaces) >= BLOCK_SIZE:
        blocks.append(_TaggedBlock() if _native else _Block())
    blocks[-1].add(space)


def adopt(module: types.ModuleType) -> None:
    """Baseline of ``module`` and the classes it defines (not the candidate's)."""
    if not is_kind(module, types.ModuleType) or module in _by_owner or module in _scratch or \
            _is_candidate_module(module):
        return
    namespace = _real_dict(module)
    if namespace is None:
        return
    name = namespace.get("__name__", "?")
    origin.note_module(module, candidate=False)
    space = _Space(name, module, namespace, "module", module)
    if _classes:  # the helper: every namespace is compared at every boundary, none needs to be hot
        _judged.add(module)
        _watch(space, False)
        _classes[0].adopt(space)
        return
    hot = _is_hot(space)
    _watch(space, hot)
    _adopt_classes(space, hot)


_QUALNAME = type.__dict__["__qualname__"]
_NAME = type.__dict__["__name__"]
_FGET, _FSET, _FDEL = (property.__dict__[name] for name in ("fget", "fset", "fdel"))


def _adopt_classes(module: _Space, hot: bool) -> None:
    """The classes ``module`` defines: hot and protected as their module is (or as a verdict class)."""
    namespace, module_name = module.mapping, module.label
    for value in _own_classes(namespace, module_name):
        if value not in _by_owner:
            label = f"{module_name}.{_QUALNAME.__get__(value)}"
            protection = module.protection or _name_protection(label, "class")
            _watch(_Space(label, value, type_dict(value), "class", module.module, protection),
                   hot or bool(protection))


def _own_classes(namespace: dict, module_name: str) -> list[type]:
    values = list(namespace.values())
    metaclasses = {kind for kind in set(map(type, values)) if issubclass(kind, type)}
    return [value for value in itertools.compress(values, map(metaclasses.__contains__, map(type, values)))
            if _mutable_class(value) and type_dict(value).get("__module__") == module_name]


def _patch_import_system() -> None:
    """Guard each module the moment it exists; take its baseline the moment its import completes."""
    import importlib._bootstrap as bootstrap

    make, load = bootstrap.module_from_spec, bootstrap._load_unlocked

    # Both wrappers hide their frame from pytest's tracebacks: the test information the model is shown stays
    # the same as an unguarded run's (importlib's own frames are hidden there too).
    def module_from_spec(spec):
        __tracebackhide__ = True
        module = make(spec)
        if is_kind(module, types.ModuleType):
            with GuardWork():
                if _scratch_child(module):  # its package exists, protected already if the import system made it
                    _scratch.add(module)
                else:
                    protect(module)
        return module

    def _load_unlocked(spec):
        __tracebackhide__ = True
        _enter_import(not origin.is_candidate_file(spec.origin))
        try:
            module = load(spec)
        finally:
            _leave_import()
        with GuardWork():
            if module not in _scratch:
                adopt(module)
                _modules[spec.name] = sys.modules.get(spec.name, module)
        return module

    def _exec(spec, module):
        __tracebackhide__ = True
        try:
            return run(spec, module)
        finally:
            with GuardWork():
                _reloaded(spec, module)

    run = bootstrap._exec
    origin.patch(bootstrap, "module_from_spec", module_from_spec)
    origin.patch(bootstrap, "_load_unlocked", _load_unlocked)
    origin.patch(bootstrap, "_exec", _exec)


def _reloaded(spec, module: types.ModuleType) -> None:
    """A module whose body the import system ran again (``importlib.reload``) from a file and loader not the
    candidate's, called with no frame of the candidate's on the stack and no thread of its alive: what its
    top-level code binds (``def``, imports, assignments; a value of the candidate's only as its ``from ... import``
    names it) is its baseline now, and the classes it made anew are watched; any other change is still judged at
    the next boundary."""
    space, loader = _by_owner.get(module), getattr(spec, "loader", None)
    if space is None or space.kind != "module" or origin.is_candidate_file(spec.origin) or candidate_object(
            loader) or candidate_frame(sys._getframe(1)) is not None or origin.candidate_threads_alive():
        return
    try:
        code = loader.get_code(spec.name)
    except Exception:  # no code to read (a namespace package, a loader without it): nothing accepted
        return
    stored = {i.argval for i in dis.get_instructions(code) if i.opname in ("STORE_NAME", "DELETE_NAME")} \
        if type(code) is types.CodeType else set()
    imported = _imported_names(loader, spec) if any(candidate_object(space.mapping.get(n)) for n in stored) else {}
    for name in stored & (set(space.mapping) | set(space.base)):
        value = space.mapping.get(name, _MISSING)
        if not candidate_object(value) or name in imported and _attribute(*imported[name]) is value:
            accept(module, name)  # the candidate's values only as its body's ``from ... import`` names them
    if _classes:
        _classes[0].adopt(space)
    else:
        _adopt_classes(space, _is_hot(space))


def _attribute(module_name: str, name: str) -> object:
    return (_real_dict(sys.modules.get(module_name)) or {}).get(name, _MISSING)


def _imported_names(loader, spec) -> dict[str, tuple[str, str]]:
    """What a module's top-level ``from M import n as a`` statements bind: ``a`` -> (M, n)."""
    try:
        tree = ast.parse(loader.get_source(spec.name) or "")
    except Exception:  # no source, or none that parses: no import is taken as the module's
        return {}
    package = spec.parent or ""
    return {alias.asname or alias.name: (importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                                         if node.level else node.module or "", alias.name)
            for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names}


# A library's import is a window: what it changes in other libraries' classes (torchrl patching a torch class,
# triton re-wiring its own) is its set-up. So class changes made before a library's import starts (outside any
# such window) are judged then, and those made inside are accepted when it ends; the candidate's own import inside
# a library's (the test importing it) closes the window until it returns. Module namespaces need no window: a
# library's import-time writes to other modules go through their guarded ``__setattr__``, which accepts them as
# they happen, and a dict-level write is judged as anywhere else. The candidate's import is judged when it ends;
# what changed before its first import starts is nobody's but the libraries' and pytest's. Before pytest's session
# starts, what runs outside any window is pytest's own start-up (its configure hooks add ``Config.rootdir``): when a
# task's conftest.py imports the candidate that early, those changes are accepted at the next library import, not
# judged (the candidate's import-time changes were judged as it ended). Kinds of the imports in progress, the
# innermost last: True for a library's.
_importing: list[bool] = []


def _in_library_import() -> bool:
    return bool(_importing) and _importing[-1]


def _enter_import(library: bool) -> None:
    first = not (library or origin.active[0])  # the candidate's first import: nothing changed so far is its doing
    loaded = origin.candidate_loaded()
    if first or (loaded and library != _in_library_import()):
        with GuardWork():
            (_judge_changes if loaded and library and "config" in _hooks else accept_changes)()
    _importing.append(library)


def _leave_import() -> None:
    library = _importing.pop()
    if not (library and _in_library_import()) and origin.candidate_loaded():  # else a library's inside a library's
        with GuardWork():
            (accept_changes if library else _judge_changes)()


def _judge_changes() -> None:
    _check_blocks(_blocks["class"])


def accept_changes() -> None:
    """Every watched class as it is now becomes its baseline: a library's import just did its set-up."""
    _rebase_changed(_blocks["class"])


def _rebase_changed(blocks: list) -> None:
    for block in blocks:
        for space in block.changed():
            space.rebase(space.mapping.copy())


# ----------------------------------------------------------------- judging changes

def _writes_global(space: _Space, name: str, old: object = None) -> bool:
    """Whether the module's own code assigns global ``name`` (``global x`` in one of its functions) or writes
    ``globals()`` freely; its function ``old`` that stood at that name counts too, as it may have rebound itself
    and left the namespace (pydoc's ``pager`` replacing itself by the pager it picks)."""
    def found(code: types.CodeType) -> bool:
        return "globals" in code.co_names or name in code.co_names and any(
            i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") and i.argval == name for i in dis.get_instructions(code))
    replaced = tuple(_own_codes(old, space.mapping))
    return _code_finds((space.owner, name), lambda: _module_codes(space.mapping), found) or bool(replaced) and \
        _code_finds((name, *replaced), lambda: list(replaced), found)


def _module_codes(namespace: dict) -> list[types.CodeType]:
    """The code of a module's own functions and of the methods of the classes it defines."""
    codes = []
    for value in list(namespace.values()):
        if is_kind(value, type) and type_dict(value).get("__module__") == namespace.get("__name__"):
            codes += [code for member in list(type_dict(value).values()) for code in _own_codes(member, namespace)]
        else:
            codes += _own_codes(value, namespace)
    return codes


_UNWRAP = {kind: kind.__dict__[attribute] for kind, attribute in (
    (classmethod, "__func__"), (staticmethod, "__func__"), (types.MethodType, "__func__"), (property, "fget"))}
_FUNCTION_DICT = types.FunctionType.__dict__["__dict__"]


def _own_codes(value: object, namespace: dict) -> list[types.CodeType]:
    """The code of a function or method of the module, and through ``__wrapped__`` of what a decorator wrapped
    (contextlib's ``contextmanager`` around click's ``CliRunner.isolation``): each function whose globals are
    the module's."""
    codes = []
    for _ in range(4):
        for _ in range(3):
            value = _UNWRAP[type(value)].__get__(value) if type(value) in _UNWRAP else value
        if type(value) is not types.FunctionType:
            break
        if _GLOBALS.__get__(value) is namespace:
            codes.append(types.FunctionType.__dict__["__code__"].__get__(value))
        value = _FUNCTION_DICT.__get__(value).get("__wrapped__")
    return codes


def _stores_attribute(name: str) -> Callable[[types.CodeType], bool]:
    """Code storing or deleting attribute ``name`` (``obj.name = ...``, ``setattr(obj, "name", ...)``)."""
    def found(code: types.CodeType) -> bool:
        return name in code.co_consts and "setattr" in code.co_names or name in code.co_names and any(
            i.opname in ("STORE_ATTR", "DELETE_ATTR") and i.argval == name for i in dis.get_instructions(code))
    return found


def _code_finds(key: tuple, codes: Callable[[], list[types.CodeType]], found: Callable[[types.CodeType], bool]) -> bool:
    """Whether ``found`` holds for one of the ``codes()`` or the code nested in them (kept under ``key``, so the
    codes are gathered once); code that never mentions the name is skipped without disassembly by each ``found``."""
    known = _self_written.get(key)
    if known is not None:
        return known
    stack, seen, known = codes(), set(), False
    while stack and not known:
        code = stack.pop()
        if code not in seen:
            seen.add(code)
            known = found(code)
            stack.extend(c for c in code.co_consts if type(c) is types.CodeType)
    _self_written[key] = known
    return known


_describe = describe


def _is_callable_member(value: object) -> bool:
    return callable(value) or is_kind(value, (staticmethod, classmethod, property))


def _protected_kind(space: _Space) -> str | None:
    """'test' / 'reference' for those modules and their classes, 'verdict' for pytest & the testing libraries."""
    if space.protection is _UNKNOWN:
        space.protection = _protection(space)
    return space.protection


def _protection(space: _Space) -> str | None:
    path = (_real_dict(space.module) or {}).get("__file__")
    if type(path) is str and os.path.basename(path) in _protected_names:
        kind = _protected_paths.get(os.path.realpath(path))
        if kind:
            return kind
    return _name_protection(space.label, space.kind)


def _name_protection(name: str, kind: str) -> str | None:
    if name.split(".")[0] in _VERDICT_TOPS or ".testing" in name or name.startswith("testing") or (
            kind == "class" and name in _VERDICT_CLASSES):
        return "verdict"
    return None


def _judge_module(space: _Space, name: str, old: object, new: object, present: bool) -> str | None:
    """A module's binding that changed without going through its guarded ``__setattr__``: a write to its
    namespace dict (``__globals__`` of one of its functions). Its own code's ``global`` writes are its state."""
    if name == "__warningregistry__" or (present and _protected_kind(space) == "test" and
                                         handed.stored_by_test(None, name, new)):
        return None  # the test's own ``global`` statement stored it
    if present and candidate_object(new):
        placed = f"places {_describe(new)} at {space.label}.{name}"
        return _Suspicion(f"{placed}, where every lookup failed before") if old is _MISSING and \
            _module_answered_nothing(space, name, new) else placed
    verb = "adds" if old is _MISSING else "replaces" if present else "deletes"
    shown = f"{verb} {space.label}.{name}" + (f" with {_describe(new)}" if present and callable(new) else "")
    if _protected_kind(space) in ("test", "reference"):
        return None if _writes_global(space, name, old) else shown  # its own code's ``global`` writes, new or not
    if old is _MISSING:
        return f"{shown}, shadowing the builtin" if name in _BUILTIN_NAMES and not _writes_global(space, name) \
            else None
    if _data(old) and (not present or _data(new)):
        return None  # a library's counters and caches
    if _compiled(space.module) and (not present or _data(new) or is_kind(new, types.ModuleType)):
        return None  # a compiled module's own globals (Cython), a module it imports lazily (pyarrow)
    return None if _writes_global(space, name, old) else shown


def _compiled(module: types.ModuleType) -> bool:
    """A C extension (Cython) module: its code cannot be read to tell which globals it writes."""
    return str((_real_dict(module) or {}).get("__file__") or "").endswith(tuple(EXTENSION_SUFFIXES))


def _package(value: object) -> str:
    """Top-level package a function, class or instance comes from (an instance: its class's; '' when unknown)."""
    code = code_of(value)
    if code is not None:
        return _top_of_file(code.co_filename)
    kind = value if is_kind(value, type) else type(value)
    return str(type.__dict__["__module__"].__get__(kind)).split(".")[0]


def _top_of_file(path: str) -> str:
    for module in list(sys.modules.values()):
        if (_real_dict(module) or {}).get("__file__") == path:
            return str(_real_dict(module).get("__name__", "")).split(".")[0]
    return ""


class _Suspicion(str):
    """A finding whose author a baseline cannot tell: noted as suspicious, never a verdict."""


def _judge_class(space: _Space, name: str, old: object, new: object, present: bool) -> str | None:
    """A class attribute that changed (class writes raise no event: every change is judged here). On a library
    class, a change that only makes lookups answer that failed before is a note (``_answered_nothing``)."""
    if present and name == "__slotnames__" and _copyreg_cache(space.owner, new):
        return None  # copyreg caching the slot names when an instance is copied (torch's ``Parameter``)
    finding = _class_change(space, name, old, new, present)
    if finding and type(finding) is not _Suspicion and present and _protected_kind(space) is None and \
            _answered_nothing(space.owner, name, old, new):
        return _Suspicion(f"{finding}, where every lookup failed before")
    return finding


def _copyreg_cache(owner: type, value: object) -> bool:
    """The list ``copyreg._slotnames`` computes and stores on a class: its slots' names over its MRO, private
    ones mangled, without ``__dict__`` and ``__weakref__``. Equal to it, the cache changes no copy or pickle."""
    if type(value) is not list:
        return False
    names = []
    for klass in origin.type_mro(owner):
        slots = type_dict(klass).get("__slots__", ())
        if type(slots) not in (str, tuple, list, dict):
            return False
        slots = _slot_names(slots)
        if any(type(s) is not str for s in slots):
            return False
        prefix = "_" + _NAME.__get__(klass).lstrip("_")
        names += [prefix + s if s.startswith("__") and not s.endswith("__") and prefix != "_" else s
                  for s in slots if s not in ("__dict__", "__weakref__")]
    return len(value) == len(names) and all(type(v) is str and v == n for v, n in zip(value, names))


def _answered_nothing(owner: type, name: str, old: object, new: object) -> bool:
    """Whether every lookup the change affects failed before: a name that no class of the lookups through the
    class, its subclasses and their metaclasses defines (mpmath's ``@defun`` adding ``taylor`` to its context's
    base), or a member whose code only raises ``NotImplementedError`` (zuko setting torch's abstract
    ``Distribution.arg_constraints``); never a dunder or a data descriptor (``_plain_new_name``). A library
    probing with ``hasattr`` or catching the error could still take another path, so it is only suspicious."""
    if not _plain_new_name(name, new):
        return False
    if old is not _MISSING:
        return _only_raises(old)
    return not _defined_on_the_way(name, [k for klass in (owner, *_subclasses(owner)) for k in (
        *origin.type_mro(klass), *origin.type_mro(type(klass)))], owner)


def _plain_new_name(name: str, new: object) -> bool:
    """Neither a dunder (the interpreter's slots, the import system's names) nor a data descriptor (which hides
    what instances hold)."""
    return not (name.startswith("__") and name.endswith("__")) and not any(
        "__set__" in type_dict(k) or "__delete__" in type_dict(k) for k in origin.type_mro(type(new)))


def _defined_on_the_way(name: str, classes: list, changed: object = None) -> bool:
    """Whether one of the ``classes`` a lookup goes through (``changed`` aside) defines ``name``, or a
    ``__getattr__`` or ``__getattribute__`` of its own (which may answer any name)."""
    return any("__getattr__" in type_dict(k) or (k not in (object, type) and "__getattribute__" in type_dict(k)) or
               (k is not changed and name in type_dict(k)) for k in classes)


def _module_answered_nothing(space: _Space, name: str, new: object) -> bool:
    """Whether a name added to a library module only makes lookups answer that failed before (networkx's
    ``argmap`` storing the function it wraps at a new name of its own module): a plain new name
    (``_plain_new_name``), not a builtin's (a global shadowing ``len`` changes what the module's code does),
    that its source never names (``builtins``, the last lookup of every module, has none), in a module with
    no ``__getattr__``, no package (``from pkg import name`` imports a submodule where the name is missing),
    whose class adds nothing on the way. Never the test's, the reference's, a conftest, pytest's or a testing
    library's."""
    namespace = space.mapping
    return _protected_kind(space) is None and name not in _BUILTIN_NAMES and \
        "__getattr__" not in namespace and "__path__" not in namespace and _plain_new_name(name, new) and \
        not _test_file(str(namespace.get("__file__"))) and not _defined_on_the_way(
            name, [k for k in origin.type_mro(type(space.owner)) if k is not types.ModuleType]) and \
        not _source_names(namespace, name)


_named: dict[str, frozenset | None] = {}


def _source_names(namespace: dict, name: str) -> bool:
    """Whether a module's own source names ``name`` as a variable anywhere (binds it, at any depth and in any
    scope, or reads it: its code's own lookups, ``except NameError`` included), or may name any (its code
    names ``globals`` or ``vars``, or it has no source that parses)."""
    path = namespace.get("__file__")
    path = path if type(path) is str else ""
    names = _named.get(path, _MISSING)
    if names is _MISSING:
        names = _named[path] = _names_in(path)
    return names is None or name in names


def _names_in(path: str) -> frozenset | None:
    try:
        with tokenize.open(path) as source:
            tree = ast.parse(source.read())
    except (OSError, SyntaxError, ValueError):
        return None
    names = set()
    for node in preload.walk(tree):
        if isinstance(node, ast.Name):
            if node.id in ("globals", "vars"):
                return None
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif type(getattr(node, "name", None)) is str:  # a def, a class, ``except ... as``, a match capture
            names.add(node.name)
    return frozenset(names)


_RAISING_OPS = frozenset({"RESUME", "NOP", "CACHE", "LOAD_GLOBAL", "LOAD_CONST", "PUSH_NULL", "PRECALL", "CALL",
                          "CALL_FUNCTION", "CALL_FUNCTION_KW", "KW_NAMES", "RAISE_VARARGS"})


def _only_raises(member: object) -> bool:
    """A plain function, or a read-only property's getter, whose code raises the builtin ``NotImplementedError``
    and does nothing else (a message and a docstring aside): an abstract stub of a library base class."""
    if type(member) is property and _FSET.__get__(member) is None and _FDEL.__get__(member) is None:
        member = _FGET.__get__(member)
    if type(member) is not types.FunctionType:
        return False
    code = code_of(member)
    ops = {instruction.opname for instruction in dis.get_instructions(code)}
    found = dict.get(_GLOBALS.__get__(member), "NotImplementedError", _MISSING)
    if found is _MISSING:
        found = dict.get(_BUILTINS.__get__(member), "NotImplementedError", _MISSING)
    return code.co_names == ("NotImplementedError",) and "RAISE_VARARGS" in ops and ops <= _RAISING_OPS and \
        found is builtins.NotImplementedError


def _own_member_replaced(old: object, new: object) -> bool:
    """A function of the candidate's replaced by another of its own (``new`` is the candidate's), or a property
    whose accessors are all the candidate's functions by one with the candidate's functions at the same accessors
    (bitstring's ``add_dtype`` building ``Bits.bfloat`` again): nothing the member already there could not do."""
    if type(old) is type(new) is types.FunctionType:
        return origin.is_candidate_code(code_of(old))
    if not type(old) is type(new) is property:
        return False
    pairs = [(get.__get__(old), get.__get__(new)) for get in (_FGET, _FSET, _FDEL)]
    return any(a is not None for a, _ in pairs) and all(
        (a is None) == (b is None) and (a is None or all(
            type(f) is types.FunctionType and origin.is_candidate_code(code_of(f)) for f in (a, b))) for a, b in pairs)


def _class_change(space: _Space, name: str, old: object, new: object, present: bool) -> str | None:
    kind = _protected_kind(space)
    if present and handed.stored_by_test(space.owner, name, new):
        return None  # this very object stored by the test's own statement (``Cls.x = v``, ``patch.object(Cls, "x")``)
    if kind == "test" and _tests_class_write(space.owner, name):
        return None
    if present and candidate_object(new):
        if _own_member_replaced(old, new):
            return None  # the candidate's function replaced by its own (mpmath wrapping its functions at each context)
        if kind == "test" and (old is _MISSING or old is None) and space.owner in origin.type_mro(type(new)):
            return None  # the test's class caching its own instance in an empty slot (traitlets' singletons)
        placed = f"places {_describe(new)} at {space.label}.{name}"
        if kind is None and old is None and _library_fills(space.owner, name, new):
            return _Held(placed)
        own = kind == "test" and _built_from_candidates(new) and _class_assigns(space.owner, name)
        return _Suspicion(placed) if own else placed  # the test's ``setup_class`` storing a class a library built
    if name == "__doc__" or (present and _library_wrapper(name, new, old)):
        return None
    verb = "adds" if old is _MISSING else "replaces" if present else "deletes"
    inherited = old is _MISSING and any(name in type_dict(k) for k in origin.type_mro(space.owner)[1:])
    if kind == "test":
        if old is _MISSING or type(old) is not types.FunctionType or _base_protocol(space.owner, old, new):
            return None  # pytest injects its fixtures into test classes
        return f"{verb} {space.label}.{name}"
    if kind in ("verdict", "reference"):
        if old is _MISSING and (type(new) is bool or (not inherited and _data(new))):
            return None  # pytest keeping state on its classes (a warning shown once per class)
        own = kind == "verdict" and space.label.split(".")[0] not in _VERDICT_TOPS and present and \
            _own_literal_store(space.owner, name, old, new)
        return _Suspicion(f"{verb} {space.label}.{name}") if own else f"{verb} {space.label}.{name}"
    if old is _MISSING or not _is_callable_member(old):
        return None
    if present and _package(new) and _package(new) == space.label.split(".")[0]:
        return None  # the library re-wiring its own class (mpmath choosing its backend functions, triton its JIT)
    return f"{verb} {space.label}.{name}" + (f" with {_describe(new)}" if present else "")


_PLAIN = (bool, int, float, complex, str, bytes, type(None))
_class_stores: dict[tuple, dict[str, list]] = {}  # (file, qualified name of a class) -> attribute -> literals


def _own_literal_store(owner: type, name: str, old: object, new: object) -> bool:
    """A testing library's class attribute moved from one plain literal to one a method of that class or of a
    base stores on the class itself (optuna's ``NamedTemporaryFilePool.__init__``: ``self.__class__._registered
    = True``, ``cls.x = ...``, ``Class.x = ...``): class writes raise no event, so the class's own set-up and the
    candidate writing that literal cannot be told apart (a note)."""
    return type(old) in _PLAIN and type(new) in _PLAIN and any(
        type(literal) is type(new) and literal == new
        for klass in origin.type_mro(owner)[:-1] for literal in _class_literals(klass).get(name, ()))


def _class_literals(klass: type) -> dict[str, list]:
    module = sys.modules.get(str(type_dict(klass).get("__module__")))
    path = (_real_dict(module) or {}).get("__file__") if module is not None else None
    key = (path, _QUALNAME.__get__(klass))
    found = _class_stores.get(key)
    if found is None:
        found = _class_stores[key] = _literal_stores(path, key[1]) if type(path) is str else {}
    return found


def _literal_stores(path: str, qualname: str) -> dict[str, list]:
    """The literals the methods of the class ``qualname`` defined in ``path`` store on that class."""
    try:
        with tokenize.open(path) as source:
            node: ast.AST = ast.parse(source.read())
    except (OSError, SyntaxError, ValueError):
        return {}
    for part in qualname.split("."):
        node = next((n for n in getattr(node, "body", ()) if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return {}
    stores: dict[str, list] = {}
    for statement in preload.walk(node):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
                _on_the_class(statement.targets[0], node.name):
            value = preload.literal(statement.value)
            if value is not preload.NOT_LITERAL:
                stores.setdefault(statement.targets[0].attr, []).append(value)
    return stores


def _on_the_class(target: ast.expr, name: str) -> bool:
    """``cls.x``, ``Class.x``, ``self.__class__.x``, ``type(self).x``."""
    if not isinstance(target, ast.Attribute):
        return False
    owner = target.value
    return isinstance(owner, ast.Name) and owner.id in ("cls", name) or \
        isinstance(owner, ast.Attribute) and owner.attr == "__class__" or \
        isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "type"


def _tests_class_write(owner: type, name: str) -> bool:
    """A test class's attribute the test patches by naming it with its module (wrapt's ``"Class.method"``), or
    any attribute of a test class a metaclass of the candidate's built: that metaclass made the class's body and
    answers every read of its attributes anyway."""
    return f"{_QUALNAME.__get__(owner)}.{name}" in _paths_named_by_the_test or origin.candidate_class(type(owner))


def _class_assigns(owner: type, name: str, naming: str = "") -> bool:
    """Whether a method of the class or of a class it derives from stores attribute ``name`` (pint's test base:
    ``cls.Q_ = cls.ureg.Quantity`` in ``setup_class``): the test may have written it; with ``naming``, in code
    that also names that global or attribute (tqdm's ``cls.monitor = TMonitor(...)``)."""
    stores = _stores_attribute(name)
    return _code_finds((owner, name, naming), lambda: [
        code for klass in origin.type_mro(owner) for value in list(type_dict(klass).values())
        if (code := code_of(value)) is not None and not origin.is_candidate_code(code)],
        lambda code: (not naming or naming in code.co_names) and stores(code))


# What an object whose class (over its MRO, ``object`` aside) defines no other dunder cannot do: be called,
# compared, tested for truth, iterated, hashed, converted, or answer attribute lookups it does not define.
_INERT_DUNDERS = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
                            "__annotations__", "__firstlineno__", "__static_attributes__", "__init__", "__repr__"})


class _Held(str):
    """A note about a slot judged again at every boundary (its baseline stays), so a later change is seen."""


def _library_fills(owner: type, name: str, new: object) -> bool:
    """A library class's empty slot (``None``) now holding an instance of the candidate's class that a method
    of the class or a base stores there by that class's name (tqdm's ``tqdm.__new__``: ``cls.monitor =
    TMonitor(...)``, ``TMonitor`` being the candidate's): class writes raise no event, so the library and the
    candidate cannot be told apart (a note). Only an inert object (``_INERT_DUNDERS``): library code can reach
    it only through its named methods, the calls the library's own code makes on that class by design. The name
    must bind that very class in the module of the class or a base (tqdm.std's ``TMonitor``), not a namesake."""
    kind = type(new)
    label = _NAME.__get__(kind)
    return not is_kind(new, type) and not any(
        key.startswith("__") and key.endswith("__") and key not in _INERT_DUNDERS
        for klass in origin.type_mro(kind)[:-1] for key in list(type_dict(klass))) and any(
        (_real_dict(sys.modules.get(str(type_dict(klass).get("__module__")))) or {}).get(label) is kind
        for klass in origin.type_mro(owner)[:-1]) and _class_assigns(owner, name, label)


def _built_from_candidates(value: object) -> bool:
    """A class the candidate's only through its bases (pint's registry deriving ``Quantity`` from the candidate's
    class): its own namespace neither names a module of the candidate's nor holds its code."""
    if not is_kind(value, type):
        return False
    namespace = type_dict(value)
    return namespace.get("__module__") not in origin.candidate_modules() and not any(
        (code := code_of(member)) is not None and origin.is_candidate_code(code) for member in list(namespace.values()))


def _base_protocol(owner: type, old: object, new: object) -> bool:
    """A library re-wiring its protocol method on a class derived from its base (mashumaro compiling
    ``__mashumaro_to_dict__`` onto the test's dataclass at first use): the method replaced and its replacement
    are both code of the package of a library class the class derives from."""
    package = _code_package(old)
    return bool(package) and package == _code_package(new) and any(
        str(type_dict(klass).get("__module__", "")).split(".")[0] == package for klass in origin.type_mro(owner)[1:])


def _code_package(value: object) -> str:
    """Top-level package of a library's function: its file's module, or for code it generated (``exec`` under
    its module's globals, as mashumaro and dataclasses do) the module its globals name; '' for the candidate's
    and the test's."""
    code = code_of(value)
    if code is None or origin.is_candidate_code(code) or _test_file(code.co_filename):
        return ""
    package = _top_of_file(code.co_filename)
    if package or type(value) is not types.FunctionType:
        return package
    return str(_GLOBALS.__get__(value).get("__name__") or "").split(".")[0]


def _library_wrapper(name: str, new: object, old: object) -> bool:
    """A library's wrapper of the method it replaces (torch's ``Optimizer.__init__`` wraps ``step`` of the
    subclass it makes, click's ``CliRunner`` defaults ``pdb.Pdb.__init__`` to the terminal while it invokes):
    library code whose closure holds the old method, from a module whose own code stores that attribute (a
    wrapper factory such as ``contextlib.contextmanager`` never does: a candidate wrapping for its sake)."""
    code = code_of(new)
    if code is None or origin.is_candidate_code(code) or type(new) is not types.FunctionType:
        return False
    cells = types.FunctionType.__dict__["__closure__"].__get__(new) or ()
    namespace = _GLOBALS.__get__(new)
    return any(_cell(c) is old for c in cells) and origin.known_namespace(namespace) and _code_finds(
        (namespace.get("__name__"), name), lambda: _module_codes(namespace), _stores_attribute(name))


def _cell(cell: types.CellType) -> object:
    try:
        return cell.cell_contents
    except ValueError:
        return None


def _judge(space: _Space) -> None:
    current, base = space.mapping.copy(), space.base
    judge = _judge_module if space.kind == "module" else _judge_class
    for name in set(current) | set(base):
        old, new = base.get(name, _MISSING), current.get(name, _MISSING)
        if old is new:
            continue
        finding = judge(space, name, old, new, new is not _MISSING)
        if type(finding) is _Held:
            current[name] = old  # judged again at every boundary: its class may gain a dunder later
            _suspect[0](f"{finding} (judged at every test boundary)")
        elif finding:
            (_suspect[0] if type(finding) is _Suspicion else _flag)(f"{finding} (seen {_state['checkpoint']})")
    space.rebase(current)
    _make_volatile(space)


def check_namespaces(full: bool = True) -> None:
    """Watched namespaces against their baselines (every one, or those the verdict runs through): differences
    are judged, then become the baseline."""
    if not full:
        _check_blocks(_blocks["hot"])
        return
    _check_blocks(_blocks["module"])
    _check_blocks(_blocks["class"])


def _check_blocks(blocks: list[_Block]) -> None:
    for block in blocks:
        for space in block.changed():
            _judge(space)


def check_modules() -> None:
    """``sys.modules``: entries replaced or removed since they were loaded; new modules get their baseline. With
    the compiled helper, a dict whose version tag has not moved since the last check is unchanged."""
    current = sys.modules
    tag = _native[0].version(current) if _native and type(current) is dict else None
    if tag is not None and current is _state.get("modules") and tag == _state.get("modules_tag"):
        return
    _compare_modules()
    _state["modules"], _state["modules_tag"] = current, tag


def _compare_modules() -> None:
    seen, values = _modules_seen, list(sys.modules.values())  # one C call: another thread cannot interleave
    if len(values) >= len(seen) and all(map(operator.is_, values, seen)):
        # the common case: nothing imported since, or modules appended (those of another thread meanwhile: next time)
        entries = list(itertools.islice(sys.modules.items(), len(seen), None)) if len(values) > len(seen) else []
    else:  # reordered (the import system pops and re-inserts each module it loads) or changed: compared in C
        now = dict(sys.modules)
        names, loaded = list(_modules), list(_modules.values())
        current = list(map(now.get, names, itertools.repeat(_MISSING)))
        for name, value in itertools.compress(zip(names, current), map(operator.is_not, current, loaded)):
            _judge_entry(name, value)
        entries = [(name, now[name]) for name in now.keys() - _modules.keys()]
    for name, module in entries:
        if name in _modules:
            if _modules[name] is not module:
                _judge_entry(name, module)
            continue
        _modules[name] = module
        if is_kind(module, types.ModuleType):
            if _is_candidate_module(module):
                continue
            if (_real_dict(module) or {}).get("__spec__") is None and any(
                    candidate_object(v) for v in list(_real_dict(module).values())):
                _flag(f"registers a module of its own as sys.modules[{name!r}] (seen {_state['checkpoint']})")
            adopt(module)
        elif candidate_object(module):
            _flag(f"registers {_describe(module)} as sys.modules[{name!r}] (seen {_state['checkpoint']})")
    seen[:] = values


def forget_modules(names: list[str]) -> None:
    """Entries of ``sys.modules`` the guard itself took out (its own modules, hidden from the candidate)."""
    for name in names:
        _modules.pop(name, None)
    _modules_seen[:] = list(sys.modules.values())


def _judge_entry(name: str, current: object) -> None:
    """A ``sys.modules`` entry that is no longer the module loaded under that name. Only the entry of a module the
    guard protects is judged: one that held anything else (jinja2's weak proxy of its template package, removed
    when the package dies) is its maker's."""
    previous = _modules.get(name)
    guarded = is_kind(previous, types.ModuleType) and (previous in _by_owner or previous in _judged)
    if guarded and current is _MISSING:
        _flag(f"removes sys.modules[{name!r}] (seen {_state['checkpoint']})")
    elif guarded and (candidate_object(current) or not is_kind(current, types.ModuleType)):
        _flag(f"replaces sys.modules[{name!r}] with {_describe(current)} (seen {_state['checkpoint']})")
    elif guarded and _DICT.__get__(current).get("__name__") != name:  # else a library's module imported again
        _flag(f"replaces sys.modules[{name!r}] (seen {_state['checkpoint']})")
    _modules[name] = current


def check_tracers() -> None:
    """No trace or profile function, thread hook or ``sys.monitoring`` tool of anyone's but debuggers'."""
    found = [("sys.settrace", sys.gettrace()), ("sys.setprofile", sys.getprofile()),
             ("threading.settrace", getattr(threading, "_trace_hook", None)),
             ("threading.setprofile", getattr(threading, "_profile_hook", None))]
    for label, function in found:
        if function is not None and not capabilities.trace_tool(function):
            _flag(f"{_describe(function)} is installed by {label} (seen {_state['checkpoint']})")
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        for tool in range(6):
            name = monitoring.get_tool(tool)
            if name is not None:
                _flag(f"a sys.monitoring tool {name!r} is registered (seen {_state['checkpoint']})")
    _check_torch_modes()


def _check_torch_modes() -> None:
    """Torch function and dispatch modes reroute every torch call in the process (``isclose`` included) from C:
    none may be left active by anyone but torch itself."""
    torch_c = getattr(sys.modules.get("torch"), "_C", None)
    for kind, length, at in (("function", "_len_torch_function_stack", "_get_function_stack_at"),
                             ("dispatch", "_len_torch_dispatch_stack", "_get_dispatch_stack_at")):
        if not hasattr(torch_c, length):
            continue
        for index in range(getattr(torch_c, length)()):
            mode = getattr(torch_c, at)(index)
            if str(type(mode).__module__).split(".")[0] != "torch":
                _flag(f"enters a torch {kind} mode ({_describe(type(mode))}) (seen {_state['checkpoint']})")


# --------------------------------------------------------------------------- pytest

_IMPL_FIELDS = operator.attrgetter("function", "hookwrapper", "wrapper", "tryfirst", "trylast")


def _impl_fields(impl) -> tuple:
    return (impl.function, getattr(impl, "hookwrapper", False), getattr(impl, "wrapper", False),
            getattr(impl, "tryfirst", False), getattr(impl, "trylast", False))


def _impl_keys(impls: list) -> tuple:
    """Each implementation and its function and flags, read in C (pytest asks for the state before every test)."""
    try:
        return tuple(zip(impls, map(_IMPL_FIELDS, impls)))
    except AttributeError:  # a pluggy whose implementations lack some of the flags
        return tuple(zip(impls, map(_impl_fields, impls)))



def _hook_state(config) -> dict[str, tuple]:
    """Per hook: its executor and its implementations (objects compared by identity, their flags by value)."""
    state = {}
    for name, caller in list(vars(config.pluginmanager.hook).items()):
        get = getattr(caller, "get_hookimpls", None)
        if get is not None:
            state[name] = (getattr(caller, "_hookexec", None), _impl_keys(get()))
    return state


_IMPLS, _HOOKEXEC = operator.attrgetter("_hookimpls"), operator.attrgetter("_hookexec")


def _hook_print(config) -> tuple | None:
    """The hook registry as flat lists read in C: equal to the last one, the state (``_hook_state``) is too, and
    the check before each test costs a few passes over some hundred objects. The implementations are the list
    pluggy calls (``get_hookimpls`` copies it). None when an entry of the registry is not a hook caller of a
    pluggy that keeps one list (the state then decides)."""
    relay = vars(config.pluginmanager.hook)
    callers = list(relay.values())
    try:
        impls = list(map(_IMPLS, callers))
        executors = list(map(_HOOKEXEC, callers))
        flat = list(itertools.chain.from_iterable(impls))
        fields = _impl_slots(flat)
    except AttributeError:
        return None
    return list(relay), callers + executors + flat, list(map(len, impls)), fields


_FIELD_NAMES = ("function", "hookwrapper", "wrapper", "tryfirst", "trylast")


def _impl_slots(flat: list) -> list:
    """The function and flags of each implementation: read from its slots by the compiled helper (pluggy keeps
    them there), else through attribute lookup."""
    if _native and flat:
        namespace = type_dict(type(flat[0]))
        try:
            return _native[0].slot_values(flat, tuple(namespace.get(name) for name in _FIELD_NAMES))
        except TypeError:  # not one class, or not slots (another pluggy)
            pass
    return list(map(_IMPL_FIELDS, flat))


def _same_print(now: tuple | None, before: tuple | None) -> bool:
    return now is not None and before is not None and now[0] == before[0] and now[2] == before[2] and \
        len(now[1]) == len(before[1]) and all(map(operator.is_, now[1], before[1])) and now[3] == before[3]


def _same_hooks(now: dict, before: dict) -> bool:
    return now.keys() == before.keys() and all(
        now[name][0] is before[name][0] and now[name][1] == before[name][1] for name in now)


def _object_print(obj: object) -> tuple | None:
    """What ``_callables`` reads of a pytest object, cheaply (with the compiled helper): its ``__dict__``'s version
    tag, which of its values are callable, and its slots' values. Equal to the last, the callables are too."""
    namespace = getattr(obj, "__dict__", None)
    if not _native or type(namespace) is not dict:
        return None
    slots = [getattr(obj, slot, _MISSING) for klass in origin.type_mro(type(obj))
             for slot in _slot_names(type_dict(klass).get("__slots__", ()))]
    return _native[0].version(namespace), list(map(callable, namespace.values())), slots


def _same_object_print(now: tuple, before: tuple | None) -> bool:
    return before is not None and now[0] == before[0] and now[1] == before[1] and len(now[2]) == len(
        before[2]) and all(map(operator.is_, now[2], before[2]))


def _slot_names(slots: object) -> tuple:
    return (slots,) if type(slots) is str else tuple(slots)  # as _callables reads them (a dict's keys too)


def _callables(obj: object) -> dict:
    """Callable instance attributes of a pytest object (in its ``__dict__`` or its slots)."""
    attributes = dict(getattr(obj, "__dict__", None) or {})
    for klass in origin.type_mro(type(obj)):
        slots = type_dict(klass).get("__slots__", ())
        for slot in (slots,) if type(slots) is str else slots:
            if slot not in attributes and hasattr(obj, slot):
                attributes[slot] = getattr(obj, slot)
    return {k: v for k, v in attributes.items() if callable(v) and not is_kind(v, type)}


def _legitimate_late_hook(function) -> bool:
    """Hooks registered during collection come from pytest itself or from conftest.py files."""
    code = code_of(function)
    if code is None or origin.is_candidate_code(code) or not os.path.isfile(code.co_filename):
        return False
    path = code.co_filename
    return os.path.basename(path) == "conftest.py" or any(f"{os.sep}{top}{os.sep}" in path
                                                          for top in ("_pytest", "pytest", "pluggy"))


def hooks_registered(config) -> None:
    """Pytest as configured, before collection imports anything of the task: plugins have patched pytest's
    classes as they do (legacy paths, hypothesis...), which becomes the baseline."""
    with GuardWork():
        _rebase_changed(_blocks["module"] + _blocks["class"])
        _modules.update(sys.modules)
    _hooks["config"] = config
    _hooks["state"], _hooks["print"] = _hook_state(config), None  # the print follows at the first check
    _hooks["functions"] = _hook_functions(config)


def _hook_functions(config) -> dict[int, object]:
    functions = {}
    for caller in list(vars(config.pluginmanager.hook).values()):
        get = getattr(caller, "get_hookimpls", None)
        if get is not None:
            functions.update((id(i.function), i.function) for i in get())
    return functions


def freeze_pytest(session) -> None:
    """After collection: conftest hooks are judged, then pytest's hooks, objects and the items are frozen."""
    config = session.config
    added = [f for key, f in _hook_functions(config).items() if key not in _hooks.get("functions", {})]
    foreign = [f for f in added if not _legitimate_late_hook(f)]
    if foreign:
        _flag("registers pytest hooks: " + ", ".join(sorted(_describe(f) for f in foreign)[:5]))
    _hooks["state"], _hooks["print"] = _hook_state(config), None
    pm = config.pluginmanager
    objects = [("the plugin manager", pm), ("pytest's config", config), ("the session", session)]
    _pytest_objects[:] = [[label, obj, _callables(obj)] for label, obj in objects]  # hook executors: _hook_state
    for item in session.items:
        _items[item.nodeid] = (item, type(item), code_of(item.__dict__.get("_obj")))


def _check_hook_state(config) -> None:
    state = _hook_state(config)
    if not _same_hooks(state, _hooks.get("state", {})):
        before = _hooks["state"]
        changed = sorted(name for name in set(state) | set(before) if not _same_hooks(
            {name: state[name]} if name in state else {}, {name: before[name]} if name in before else {}))
        _flag(f"changes pytest hook implementations of {', '.join(changed[:3])} (seen {_state['checkpoint']})")
        _hooks["state"] = state


def check_pytest(item=None) -> None:
    """Hook registry, pytest's objects, and ``item`` (None: every collected item)."""
    config = _hooks.get("config")
    if config is None:
        return
    print_ = _hook_print(config)
    if not _same_print(print_, _hooks.get("print")):
        _check_hook_state(config)
        _hooks["print"] = print_
    for entry in _pytest_objects:
        label, obj, callables = entry[:3]
        print_ = _object_print(obj)
        if print_ is not None and len(entry) > 3 and _same_object_print(print_, entry[3]):
            continue
        now = _callables(obj)
        if now.keys() != callables.keys() or any(now[k] is not v for k, v in callables.items()):
            _flag(f"replaces methods of {label} (seen {_state['checkpoint']})")
            callables.clear()
            callables.update(now)
        entry[3:] = [print_]
    for entry in ([_items.get(item.nodeid)] if item is not None else list(_items.values())):
        if entry is not None:
            _check_item(*entry)
    undone = origin.undone_patches()
    if undone:
        _flag("undoes the guard's watch on " + ", ".join(undone))


def _check_item(item, kind: type, code: object) -> None:
    if type(item) is not kind:
        _flag(f"re-classes test item {item.name} (seen {_state['checkpoint']})")
    if code is not None and item.__dict__.get("_obj") is not None and not _same_or_wrapping(item.__dict__["_obj"],
                                                                                            code):
        _flag(f"replaces the function of test item {item.name} (seen {_state['checkpoint']})")
    methods = _methods_of(kind)
    for name in list(item.__dict__):
        method = methods.get(name) if methods is not None else None
        if method is None:
            method = _is_method(kind, name)
            if methods is not None:
                methods[name] = method
        if method:
            _flag(f"replaces {name} of test item {item.name} (seen {_state['checkpoint']})")


def _same_or_wrapping(function: object, code: object) -> bool:
    """Whether ``function`` runs ``code``, or is a library's wrapper of it (``__wrapped__``, as pytest-asyncio's
    items store their coroutine run in an event loop as ``obj``): the body still has to run to its end."""
    for _ in range(8):
        found = code_of(function)
        if found is code:
            return True
        if found is None or origin.is_candidate_code(found):
            return False
        function = getattr(function, "__wrapped__", None)
    return False


def _is_method(kind: type, name: str) -> bool:
    """Whether an instance attribute ``name`` of a ``kind`` item would replace a method of its class."""
    return callable(getattr(kind, name, None)) and not isinstance(getattr(kind, name), type) and name not in (
        "_obj", "obj") and not isinstance(getattr(kind, name), property)


_methods: dict[type, tuple] = {}


def _methods_of(kind: type) -> dict[str, bool] | None:
    """``_is_method``'s answers for ``kind``, kept while the dicts of its classes and metaclasses keep their
    version tags (with the compiled helper; else None: asked each time)."""
    if not _native:
        return None
    entry = _methods.get(kind)
    if entry is None or _native[0].changed(entry[0], entry[1]):
        classes = [klass for klass in (*kind.__mro__, *type(kind).__mro__) if klass.__flags__ & _HEAP]
        namespaces = _native[0].namespaces(classes)
        entry = _methods[kind] = (namespaces, array.array("Q", map(_native[0].version, namespaces)), {})
    return entry[2]


def check_all(full: bool = True, item=None) -> None:
    """The boundary between two tests: ``sys.modules``, tracers, pytest, import hooks, and the namespaces: every
    one when ``full`` (after collection, at the end), with the helper, or when the tests since the last full
    check took ``FULL_CHECK_SHARE`` times longer than it did; else those the verdict runs through. Test items:
    every one when ``item`` is None, else that one (each is also checked before its call)."""
    with GuardWork():
        check_modules()
        now = time.perf_counter()
        full = full or bool(_native) or now - _state.get("full_at", 0.0) >= FULL_CHECK_SHARE * _state.get(
            "full_cost", 0.0)  # with the helper a full comparison costs a pass over tags: at every boundary
        check_namespaces(full)
        if full:
            _state["full_at"] = time.perf_counter()
            _state["full_cost"] = _state["full_at"] - now
        check_tracers()
        if item is None:
            check_pytest()
        elif item.nodeid in _items:  # the hooks and pytest's objects: before the next test's call and at the end
            _check_item(*_items[item.nodeid])
        capabilities.check_import_hooks()


def check_before_call(item) -> None:
    """What runs between this point and the test body: tracers, pytest's hooks, the item and its classes."""
    with GuardWork():
        check_tracers()
        check_pytest(item)
        _check_blocks(_item_classes(type(item)))
        _check_blocks(_blocks["volatile"])


_item_blocks: dict[type, list] = {}


def _item_classes(kind: type) -> list:
    """The watched classes of a test item's class, as blocks to compare: with the compiled helper, a block of
    their tags (compared value by value only when a tag moved), else the namespaces themselves."""
    blocks = _item_blocks.get(kind)
    if blocks is None:
        spaces = [space for klass in kind.__mro__
                  if (space := _classes[0].space(klass) if _classes else _by_owner.get(klass)) is not None]
        if _native:
            blocks = [_TaggedBlock()]
            for space in spaces:
                blocks[0].add(space)
        else:
            blocks = [_Single(space) for space in spaces]
        _item_blocks[kind] = blocks
    return blocks


class _Single:
    """One namespace as a block (``_check_blocks``), compared value by value."""

    def __init__(self, space: _Space) -> None:
        self.space = space

    def changed(self) -> list[_Space]:
        return [] if self.space.unchanged() else [self.space]
