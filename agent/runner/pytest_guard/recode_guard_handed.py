"""What the test hands the candidate in the call it is making right now: paths naming the test file, and frames.

A test may ask the candidate to act on the test's own things: a command line given ``__file__`` reads the test
file (rule 16), a pickling checker given ``inspect.currentframe()`` looks into that frame (rule 2). A hack takes
them itself (a guessed path, ``sys._getframe``), so the guard grants the act only when the test handed the thing
to the candidate in the call its running frame is making into the candidate's code.

The test module's instrumentation (``recode_guard_results``) passes every argument of every call the test makes
through ``arg`` with its slot, a number per argument of the module's call sites. ``note`` keeps, per slot and for
the frame evaluating it, what the argument held when the test evaluated it: a path (``str``, ``bytes``, a
``pathlib`` path) named like the test file, or a frame, given itself or as an item of a list, tuple or dict
(values) of up to 32 items, as they were then, whatever the callee changed since. Each evaluation replaces or
forgets its slot's record, so a record is always the frame's latest evaluation of that argument. A call site is
known by where it ends (line and column of its closing parenthesis): the interpreter gives the call instruction
that position, so the position of the test frame's current instruction names the call it is making (Python 3.11
and later; two call sites ending at one position name neither, and on 3.10 nothing is granted).

What the test's own code stores is kept too (``stored``, called by the instrumentation after each statement of
the test that assigns a name its function declares ``global``, or an attribute of a class it names: ``cls.x``,
``self.__class__.x``, ``setattr(cls, "x", v)``, ``monkeypatch.setattr(Cls, "x", v)``, ``patch.object(Cls, "x")``,
a ``with`` item as soon as it is entered): a module or class binding holding the very object the test stored
there last is the test's (``stored_by_test``), whatever its type and whoever's the class; a write through the
namespace's dict by anyone else leaves another object there. So is what a call of the test's changes on a class of
the test's module the test hands it as an argument (optuna's ``deprecated_class(...)(_Sample)`` wrapping
``_Sample.__init__``): ``note`` copies that class's namespace as the test evaluates the argument, and ``returned``,
which the instrumentation calls with the value the call returned, records what differs from that copy.
"""
from __future__ import annotations

import ast
import os
import pathlib
import sys
import types

import recode_guard_origin as origin

_ITEMS = 32
_PATH_KINDS = frozenset({str, bytes, pathlib.PurePosixPath, pathlib.PosixPath})
_HOLDING = _PATH_KINDS | {types.FrameType, list, tuple, dict}  # the kinds ``_held`` looks into
_state: dict = {"test": "", "name": "", "slots": 0}
_sites: dict[tuple[int, int], tuple[tuple, tuple[int, ...]] | None] = {}  # end -> (constants, slots); None: shared
_records: dict[int, tuple[int, int, tuple]] = {}  # slot -> (id of the frame, id of its code, what it held)
_positions: dict[int, tuple[types.CodeType, list]] = {}  # the code kept: its id stays its own
_test_files: dict[str, bool] = {}
_stores: dict[tuple[int, str], tuple[object, object]] = {}  # (id of the class, or 0: the module; name) -> owner, value
_site_slots: dict[int, tuple[int, ...]] = {}  # first slot of a call site -> its slots
_classes: dict[int, tuple[int, type, dict]] = {}  # slot -> (id of the frame, the test's class, a copy of its dict)
_test_modules: dict[str, bool] = {}
_MISSING = object()


def configure(test: str) -> None:
    _state["test"], _state["name"] = test, os.path.basename(test)


def new_module() -> None:
    """The test module is being instrumented (again): slots are numbered afresh, the same for the same source."""
    _state["slots"] = 0
    _sites.clear()
    _site_slots.clear()


def site(call: ast.Call, constants: list, slots: list[int]) -> None:
    end = (call.end_lineno, call.end_col_offset)
    if None not in end:
        _sites[end] = None if end in _sites else (tuple(constants), tuple(slots))
    if slots:
        _site_slots[slots[0]] = tuple(slots)


def forget() -> None:
    """A test is over: what its calls held (frames among them, kept alive here) is let go."""
    _records.clear()
    _classes.clear()


def new_slot() -> int:
    _state["slots"] += 1
    return _state["slots"]


def _held(value: object) -> tuple:
    """The paths named like the test file and the frames ``value`` is or holds (see the module's docstring)."""
    kind = type(value)
    if kind in _PATH_KINDS or kind is types.FrameType:
        items: object = (value,)
    elif (kind is list or kind is tuple) and len(value) <= _ITEMS:
        items = value
    elif kind is dict and len(value) <= _ITEMS:
        items = value.values()
    else:
        return ()
    return tuple(item for item in items if type(item) is types.FrameType or type(item) in _PATH_KINDS and
                 _names_test(item if type(item) is str else os.fsdecode(item)))


def _names_test(path: str) -> bool:
    name = _state["name"]
    return path.endswith(name) and os.path.basename(path) == name


def note(value: object, slot: int) -> None:
    """An argument the test evaluated for a call (``value`` at ``slot``): recorded when it holds a path or frame,
    or when it is a class of the test's module (with a copy of its namespace as it was then)."""
    if not (_records or _classes) and type(value) not in _HOLDING and not origin.is_kind(value, type):
        return  # nothing to record, nothing recorded to forget
    held = _held(value)
    if held or _tests_class(value):
        with origin.GuardWork():
            frame = sys._getframe(2)  # the test's: it called ``arg``
        if held:
            _records[slot] = (id(frame), id(frame.f_code), held)
        else:
            _classes[slot] = (id(frame), value, dict(origin.type_dict(value)))
        return
    if _records:
        _records.pop(slot, None)
    if _classes:
        _classes.pop(slot, None)


def _tests_class(value: object) -> bool:
    if not origin.is_kind(value, type):
        return False
    name = origin.type_dict(value).get("__module__")
    known = _test_modules.get(name) if type(name) is str else False
    if known is None:
        module = sys.modules.get(name)  # the test module is a plain module: nothing of anyone's runs here
        path = module.__dict__.get("__file__") if type(module) is types.ModuleType else None
        known = _test_modules[name] = type(path) is str and os.path.realpath(path) == _state["test"]
    return known


def returned(first: int) -> None:
    """The test's call whose slots start at ``first`` returned: what changed in a class of the test's module it
    handed that call, since the test evaluated it as the argument, is what the test asked for (optuna's
    ``deprecated_class(...)(_Sample)`` wrapping the test's class's ``__init__``): stored, as the test's own
    statement stores (``stored_by_test``)."""
    if not _classes:
        return
    with origin.GuardWork():
        frame = sys._getframe(2)  # the test's: it called ``arg``
    for slot in _site_slots.get(first, ()):
        record = _classes.pop(slot, None)
        if record is None or record[0] != id(frame):
            continue
        _, owner, before = record
        for name, value in list(origin.type_dict(owner).items()):
            if before.get(name, _MISSING) is not value:
                _stores[id(owner), name] = (owner, value)


def is_test_frame(frame: types.FrameType) -> bool:
    """A frame of the test file's own code (code the candidate compiled under the test's name is the candidate's)."""
    code = frame.f_code
    name = code.co_filename
    known = _test_files.get(name)
    if known is None:
        known = _test_files[name] = os.path.basename(name) == _state["name"] and \
            os.path.realpath(name) == _state["test"]
    return known and not origin.is_candidate_code(code)


def _site_at(frame: types.FrameType) -> tuple | None:
    """The call site the frame's current instruction belongs to (None: not a known call, or not Python 3.11+)."""
    code = frame.f_code
    cached = _positions.get(id(code))
    if cached is None or cached[0] is not code:
        if not hasattr(code, "co_positions"):
            return None
        cached = _positions[id(code)] = (code, list(code.co_positions()))
    positions = cached[1]
    index = frame.f_lasti // 2
    if not 0 <= index < len(positions):
        return None
    _, end_line, _, end_column = positions[index]
    return _sites.get((end_line, end_column))


def given(cand: types.FrameType) -> tuple:
    """What the innermost test frame below the candidate's frame ``cand`` hands, in the call it is making right
    now, to the candidate's code directly above it: paths and frames, as the test evaluated them."""
    callee, frame = cand, cand.f_back
    while frame is not None and not is_test_frame(frame):
        callee, frame = frame, frame.f_back
    if frame is None or not origin.is_candidate_frame(callee):
        return ()
    found = _site_at(frame)
    if found is None:
        return ()
    constants, slots = found
    held = [value for value in constants if type(value) in _PATH_KINDS]
    for slot in slots:
        record = _records.get(slot)
        if record is not None and record[0] == id(frame) and record[1] == id(frame.f_code):
            held.extend(record[2])
    return tuple(held)


def stored(owner: object, name: str, value: object = _MISSING, of_class: bool = False) -> None:
    """The test's code just stored ``name``: a global of its module (``owner`` None, ``value`` what it holds now)
    or an attribute of ``owner``, or with ``of_class`` of ``owner.__class__`` (recorded when that is a class and
    the real one: instance attributes are nobody's to judge, and a ``__class__`` a class defines may answer another
    class each time). Only the test's own code records: the candidate finds this function among the test
    module's globals."""
    if owner is not None and not of_class and not origin.is_kind(owner, type):
        return  # an instance's attribute: nothing to record, whoever calls
    with origin.GuardWork():
        caller = sys._getframe(1)
    if not is_test_frame(caller):
        return
    if of_class:
        kind = type(owner)
        if any("__class__" in origin.type_dict(klass) for klass in origin.type_mro(kind)[:-1]):
            return
        owner = kind
    if owner is None:
        _stores[0, name] = (None, value)
    elif origin.is_kind(owner, type):
        _stores[id(owner), name] = (owner, origin.type_dict(owner).get(name, _MISSING))


def stored_by_test(owner: object, name: str, value: object) -> bool:
    """Whether ``value`` at ``name`` of ``owner`` (a class, or None: the test module) is what the test stored."""
    record = _stores.get((0 if owner is None else id(owner), name))
    return record is not None and record[0] is owner and record[1] is value
