"""Capabilities research code never needs, denied to the candidate through the guard's audit hook.

The hook (``sys.addaudithook``, installed by the plugin before any candidate
code is imported) cannot be removed by Python code. Each rule below looks at
the stack when its event fires (``recode_guard_origin`` decides which frames are
the candidate's). A denial writes one line of evidence to the guard's channel
at once (``target.py:12 sets sys.settrace``) and raises ``Denied`` into the
call, so the capability is not used and the run is graded ``tampered``
whatever happens next.

Denied to candidate code (on the stack, or in a thread it started):

* tracers and profilers: ``sys.settrace``, ``sys.setprofile``, their
  all-threads forms and ``sys.monitoring`` callbacks (from anywhere, except the
  debuggers and coverage tools pytest itself may run); a thread starting installs
  the hook ``threading.settrace`` registered, judged as that hook's act;
* frames: reading the locals of a running frame not its own (``f_locals``, which
  the compiled helper gates, directly or through a library such as
  ``inspect.getargvalues``; finished frames a traceback holds, a frame the test
  hands it in the call the test is making, and the test's own code reading are
  free); without the helper, holding a frame object that is
  not its own (``sys._getframe``, ``tb_frame``, ``gi_frame``, handed out by
  ``inspect.stack``, ``traceback.walk_stack``...; ``f_back`` cannot be gated).
  Libraries the candidate calls may still look at frames for their own use
  (logging, warnings, ``traceback.format_stack``, ``torch.jit.script``);
* the object graph: ``gc.get_objects``, ``get_referrers``, ``get_referents``;
* forging code: ``types.CodeType``/``code.replace``, a ``marshal`` load the guard did not wrap, called by
  candidate code itself (``types.FunctionType`` too without the compiled helper, which sees its globals; what it
  loads through the wrapped ``marshal.load``/``loads`` is its code, as what it compiles), and
  running code of its file under other globals (``exec``, ``types.FunctionType``); what it compiles, executes
  or evaluates is its code wherever it runs (a file whose own text it compiles under the file's name, such as a
  config file, stays that file's);
* native memory: any ``ctypes`` operation with an audit event called from candidate code (importing
  ``ctypes`` and defining structures is not one; the compiled helper adds the events of calling a foreign function
  and of dereferencing a pointer, which CPython does not raise; without it, looking a symbol up stands for the call);
* import hooks: ``sys.meta_path``/``path_hooks`` entries of the candidate's
  (checked at every import and every test boundary);
* audit hooks of its own, replacing the code or defaults of a function not its own (a library may change its own),
  re-classing modules, classes or pytest objects;
* ending or signalling the process: ``os._exit``, ``os.abort``,
  ``os.kill``/``killpg`` of the test process or its parent,
  ``signal.pthread_kill``/``raise_signal``, ``alarm``/``setitimer`` arming a timer whose signal has no
  handler, and ``signal.signal`` putting back the default action of a signal whose timer is armed (installing a
  handler is neither),
  ``os.exec*``. The functions without an audit event are wrapped in their modules.
  Forked children (multiprocessing workers) may exit as they please. ``sys.exit`` is not among them: it
  raises ``SystemExit``, an exception its callers catch (a command line's test runner) and pytest records
  as the test's failure (an internal error at collection) when none does, so it cannot end the process.

Writes to attributes of modules and classes the candidate did not define are
watched by ``recode_guard_integrity``; values that reach the test's
comparisons by ``recode_guard_results``; pytest plugins and hooks by both.
"""
from __future__ import annotations

import functools
import gc
import inspect
import os
import sys
import threading
import types
from typing import Callable

import recode_guard_handed as handed
import recode_guard_origin as origin
from recode_guard_origin import candidate_frame, code_of, describe, in_candidate_thread, is_candidate_code, is_kind, where

MAIN_PID = os.getpid()
_report: list[Callable[[str], None]] = []
_suspect: list[Callable[[str], None]] = []
_for_the_verdict: list[Callable[[object, types.FrameType, types.FrameType], bool]] = []
_watched: list[Callable[[dict], bool]] = []
_TRACE_TOOLS = frozenset({"bdb", "pdb", "coverage", "pytest_cov", "_pytest", "pydevd", "_pydevd_bundle", "IPython",
                          "cProfile", "profile", "doctest"})  # doctest: puts back the tracer its run found
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_FUNCTION_WRITES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
_SPECIAL_WRITES = _FUNCTION_WRITES | {"__class__", "__bases__"}
_handout_codes: dict[int, bool] = {}  # code id -> it hands out only its caller's frame
gated = [False]  # the compiled helper gates frame.f_back (recode_guard_core)
_known_hooks: dict[str, tuple] = {}


class Denied(RuntimeError):
    """Raised into a call the guard refused (the run is already graded ``tampered``)."""


def configure(report: Callable[[str], None], is_reference_file: Callable[[str], bool],
              suspect: Callable[[str], None], for_the_verdict: Callable[[object, types.FrameType, types.FrameType],
                                                                        bool], watched: Callable[[dict], bool]) -> None:
    """``for_the_verdict(function, cand, writer)``: a library's change of that function on the candidate's behalf
    reaches what the verdict runs through; ``watched(namespace)``: a module namespace with a baseline
    (``recode_guard_integrity``, which imports this module)."""
    _report.append(report)
    _suspect.append(suspect)
    _for_the_verdict.append(for_the_verdict)
    _is_reference_file.append(is_reference_file)
    _watched.append(watched)
    _remember_handouts()
    _wrap_exits()
    _wrap_marshal()
    _wrap_exec()
    remember_import_hooks()


def evidence(cand: types.FrameType | None, trigger: types.FrameType | None, what: str) -> str:
    """``target.py:12 <what>``; when no candidate frame is on the stack, where it happened and why it is blamed."""
    if cand is not None:
        return f"{where(cand)} {what}"
    place = f" ({where(trigger)})" if trigger is not None else ""
    if in_candidate_thread():
        return f"a thread the candidate started {what}{place}"
    return f"{what}{place}, outside the candidate's frames (a callback left behind)"


def deny(cand: types.FrameType | None, trigger: types.FrameType | None, what: str) -> None:
    text = evidence(cand, trigger, what)
    _report[0](text)
    raise Denied(f"recode guard: {text}: denied (research code never needs this)")


def _context(trigger: types.FrameType) -> tuple[types.FrameType | None, bool]:
    """The candidate's innermost frame below ``trigger``, and whether the event is the candidate's doing. A
    library module's body running between the two (``import numpy`` in the candidate's file, numpy's first
    import) makes it the library's: its initialisation writes what it defines (bases, defaults)."""
    cand = candidate_frame(trigger)
    if cand is not None and origin.library_body_between(cand, trigger):
        return None, False
    return cand, cand is not None or in_candidate_thread()


# --------------------------------------------------------------------- audit rules

def _tracer(name: str):
    def rule(trigger: types.FrameType, args: tuple) -> None:
        if trigger.f_code is _THREAD_START and trace_tool(trigger.f_globals.get(_THREAD_HOOKS.get(name, ""))):
            return
        cand, context = _context(trigger)
        module = str(trigger.f_globals.get("__name__", "")).split(".")[0]
        if module not in _TRACE_TOOLS or cand is not None or context and name not in _THREAD_HOOKS:
            deny(cand, trigger, f"sets {name}")  # a tool's own code may set the tracer of a thread it runs in
    return rule


# A thread starting installs the hook ``threading.settrace``/``setprofile`` registered (its bootstrap's globals),
# whoever registered it: the act is the hook's, and a debugger's or coverage tool's is theirs (coverage registers
# its tracer so for every thread started later, by the test or the candidate); any other is judged as set here.
_THREAD_START = threading.Thread._bootstrap_inner.__code__
_THREAD_HOOKS = {"sys.settrace": "_trace_hook", "sys.setprofile": "_profile_hook"}
_TOOL_PLACES = ("bdb", "pdb", "coverage", "pytest_cov", "_pytest", "pydevd")


def trace_tool(function: object) -> bool:
    """A tracer of a debugger or coverage tool pytest may run, told by where its code comes from, and not bound to
    an object of the candidate's (its subclass of ``bdb.Bdb``)."""
    if function is None or is_kind(function, types.MethodType) and origin.candidate_object(
            types.MethodType.__dict__["__self__"].__get__(function)):
        return False
    code = code_of(function) or code_of(getattr(type(function), "__call__", None))
    path = code.co_filename if code is not None else str(type(function).__module__)
    return any(f"{os.sep}{tool}{os.sep}" in path or path.startswith(tool) or os.path.basename(path) == f"{tool}.py"
               for tool in _TOOL_PLACES)


def _remember_handouts() -> None:
    """Library functions whose result hands frame objects to their caller: its own (``inspect.currentframe``) or
    others' too (``inspect.stack``, ``traceback.walk_stack``...)."""
    import inspect
    import logging
    import traceback

    for function, own in ((inspect.currentframe, True), (logging.currentframe, True), (inspect.stack, False),
                          (inspect.trace, False), (inspect.getouterframes, False), (inspect.getinnerframes, False),
                          (traceback.walk_stack, False), (traceback.walk_tb, False)):
        code = getattr(function, "__code__", None)
        if code is not None:
            _handout_codes[id(code)] = own


def _called_by(cand: types.FrameType, trigger: types.FrameType) -> types.FrameType:
    """The frame the candidate's frame called on the way to ``trigger``."""
    frame = trigger
    while frame.f_back is not None and frame.f_back is not cand:
        frame = frame.f_back
    return frame


def _frame_given(what: str, args: tuple) -> types.FrameType | None:
    """The frame the event hands out: ``sys._getframe``'s (3.11+), or the one a traceback or generator holds."""
    if what == "sys._getframe":
        return args[0] if args and type(args[0]) is types.FrameType else None
    if what in _FRAME_ATTRIBUTES and len(args) > 1:
        try:
            frame = getattr(args[0], what)
        except Exception:
            return None
        return frame if type(frame) is types.FrameType else None
    return None


def _frames(what: str):
    """Without the compiled helper, candidate code may hold its own frames only (from any frame every other one is
    reachable); with it, any frame: the locals of frames not its own are gated (``refuse_frame``)."""
    def rule(trigger: types.FrameType, args: tuple) -> None:
        if gated[0]:
            return
        cand, _ = _context(trigger)
        if cand is None:
            return
        entry = cand if cand is trigger else _called_by(cand, trigger)
        own = _handout_codes.get(id(entry.f_code))
        if own is False:
            deny(cand, trigger, f"reads the interpreter's frames ({entry.f_code.co_name})")
        if cand is not trigger and own is None:
            return  # a library reading frames for itself (logging, warnings, traceback.format_stack)
        given = _frame_given(what, args)
        if given is None or not origin.is_candidate_frame(given):
            deny(cand, trigger, f"reads the interpreter's frames ({what if cand is trigger else entry.f_code.co_name})")
    return rule


def refuse_frame(frame: types.FrameType) -> None:
    """``f_locals`` of a frame not in the candidate's namespaces, read with a frame that may be the candidate's on
    the stack (the compiled helper asks): denied when the reader is the candidate's code, or a library function
    it called directly (``inspect.getargvalues``), and the frame is not its own, nor one the test hands it in the
    call the test is making (dill's ``badtypes(inspect.currentframe())``). A library reading locals deeper
    down (its own import-time set-up, with the candidate's import below) and the test's own code (tblib calling
    the test's ``get_locals``) act for themselves."""
    if getattr(origin.tls, "busy", False):
        return
    with origin.GuardWork():
        reader = sys._getframe(1)
        cand = None if handed.is_test_frame(reader) else next(
            (f for f in (reader, reader.f_back) if f is not None and origin.is_candidate_frame(f)), None)
        refused = cand is not None and not origin.is_candidate_frame(frame) and not _finished_frame(frame) \
            and not any(value is frame for value in handed.given(cand))
    if refused:
        deny(cand, reader, f"reads the interpreter's frames (f_locals) of {where(frame)} ({frame.f_code.co_name})")


_is_reference_file: list[Callable[[str], bool]] = []
_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _finished_frame(frame: types.FrameType) -> bool:
    """A frame that has returned or raised, of any code but the guard's and the reference's: the frames a
    traceback holds below the one that caught it (boltons' ``tbutils`` shows the test's, jinja2's debugger reads a
    template's to rebuild its traceback). No value still awaits the candidate's answer there; a running frame (on
    any thread's stack, or a suspended generator's) is where one does, however the candidate came by it
    (``f_back``, ``sys._getframe``, a traceback's head, a frame kept from earlier)."""
    code = frame.f_code
    if origin.is_guard_code(code) or _is_reference_file[0](code.co_filename):
        return False
    for top in sys._current_frames().values():
        running = top
        while running is not None:
            if running is frame:
                return False
            running = running.f_back
    return not code.co_flags & _SUSPENDABLE or not _suspended(frame)


_SUSPENDED_IN = {types.GeneratorType: "gi_frame", types.CoroutineType: "cr_frame", types.AsyncGeneratorType: "ag_frame"}


def _suspended(frame: types.FrameType) -> bool:
    """A generator's (or coroutine's) frame its generator still holds: one not run to its end (jinja2's template
    functions are generators; one that raised is finished). Asked only of such frames off every stack."""
    return any(getattr(owner, _SUSPENDED_IN[type(owner)], None) is frame for owner in gc.get_referrers(frame)
               if type(owner) in _SUSPENDED_IN)


def _attribute_read(trigger: types.FrameType, args: tuple) -> None:
    if len(args) > 1 and args[1] in _FRAME_ATTRIBUTES:
        _frames(args[1])(trigger, args)


def _object_graph(name: str):
    def rule(trigger: types.FrameType, args: tuple) -> None:
        cand, context = _context(trigger)
        if context:
            deny(cand, trigger, f"walks the interpreter's object graph ({name})")
    return rule


def _builds_code(name: str):
    """Candidate code forging code objects (``types.CodeType``, ``code.replace``, ``marshal`` not wrapped; and
    ``types.FunctionType`` where the compiled helper cannot see the globals it is given, see ``refuse_function``);
    and anyone running code of a file on disk that is the candidate's (its own, one it wrote, one whose name it
    gave code it compiled that is not that file's text) with namespaces not its own: the ``exec`` event carries
    the code only, so any run of such code but the import system's (running its module) is refused, unless the
    guard's ``exec`` (``_wrap_exec``) saw it run in a dict no module owns (``_fresh``). Code it
    builds under a name no file has (attrs' ``<attrs generated ...>`` or ``""``), or from a file's own text
    under the file's name (a config file), runs with globals it built: it stays its code (tainted by
    ``recode_guard_reference.audit``), so the stack checks still see it."""
    def rule(trigger: types.FrameType, args: tuple) -> None:
        forging = name in _FORGING or (name == "function.__new__" and not gated[0])
        if forging and origin.is_candidate_frame(trigger):
            deny(trigger, trigger, f"builds code at run time ({name})")
        code = args[0] if args else None
        if name != "exec" or type(code) is not types.CodeType:
            return
        seen, origin.tls.exec_call = getattr(origin.tls, "exec_call", None), None  # taken by the first event
        if origin.is_candidate_file(code.co_filename) and not _import_system_runs(trigger, code.co_filename) and \
                os.path.isfile(code.co_filename) and not (seen is not None and seen[0] is code and
                                                          origin.is_own_file(code.co_filename) and _fresh(seen[1])):
            cand, _ = _context(trigger)
            deny(cand, trigger, f"runs the candidate's code with foreign globals ({name})")
        if code.co_filename.startswith("<") and not is_candidate_code(code) and not handed.is_test_frame(trigger) and \
                _context(trigger)[0] is not None:
            _note_built_for(code)
    return rule


def _import_system_runs(trigger: types.FrameType, filename: str) -> bool:
    """The import system running a module: importlib's own frame, or a loader's ``exec_module`` that importlib's
    ``_load_unlocked`` called on a plain module of that very file (pytest's assertion rewriter running a module
    its ``python_files`` names: patsy's ``*.py``; a plain module's namespace is its own); a loader of the
    candidate's, or any object standing in for a module, is not."""
    if "importlib" in trigger.f_code.co_filename:
        return True
    caller = trigger.f_back
    if trigger.f_code.co_name != "exec_module" or caller is None or caller.f_code.co_name != "_load_unlocked" or \
            caller.f_code.co_filename != "<frozen importlib._bootstrap>" or origin.is_candidate_frame(trigger):
        return False
    module = trigger.f_locals.get("module")
    return type(module) is types.ModuleType and dict.get(vars(module), "__file__") == filename


def _note_built_for(code: types.CodeType) -> None:
    """Code a library (not the test) compiled from a string and runs while the candidate's code called it
    (namedtuple's ``__new__``), and the code nested in it: functions built for the candidate."""
    _built_for.update((id(item), item) for item in origin.nested_codes(code))


# Code a library compiled from a string while the candidate's code called it, by identity (equal code objects of
# two namedtuples with the same fields are different functions, one may be the test's).
_built_for: dict[int, types.CodeType] = {}


_FORGING = frozenset({"code.__new__", "marshal.loads", "marshal.load"})


def refuse_function(code: object, namespace: dict) -> None:
    """``types.FunctionType(code, namespace)`` with the namespace of a module not the candidate's (the compiled
    helper asks): the candidate's code would run there unseen as its own."""
    if getattr(origin.tls, "busy", False) or type(code) is not types.CodeType or not is_candidate_code(code):
        return
    with origin.GuardWork():
        maker = sys._getframe(1)
        cand = candidate_frame(maker)
    deny(cand, maker, f"runs the candidate's code with foreign globals ({namespace.get('__name__', '?')})")


def _native_memory(event: str, trigger: types.FrameType) -> None:
    frame = trigger
    while frame is not None and f"{os.sep}ctypes{os.sep}" in frame.f_code.co_filename:
        frame = frame.f_back
    if frame is not None and origin.is_candidate_frame(frame):
        deny(frame, frame, f"accesses native memory ({event})")


def _import(trigger: types.FrameType, args: tuple) -> None:
    check_import_hooks(trigger)


def _audit_hook(trigger: types.FrameType, args: tuple) -> None:
    cand, _ = _context(trigger)
    deny(cand, trigger, "adds an audit hook")


def _special_write(trigger: types.FrameType, args: tuple) -> None:
    """``object.__setattr__``/``__delattr__`` fire only for special attributes (code, defaults, class, bases)."""
    target, name = args[0], args[1]
    if name not in _SPECIAL_WRITES:
        return
    cand, context = _context(trigger)
    if name in _FUNCTION_WRITES:
        _function_write(cand, trigger, args)
        return
    if not context:
        return
    if name == "__class__":
        own = str(type(target).__module__)
        if not (is_kind(target, (types.ModuleType, type)) or own.split(".")[0] in ("_pytest", "pytest", "pluggy")):
            return  # re-classing an object of its own or one it was handed: its business
        if is_kind(target, types.ModuleType) and origin.is_candidate_file(
                types.ModuleType.__dict__["__dict__"].__get__(target).get("__file__")):
            return
        deny(cand, trigger, f"changes the class of {describe(target)}")
    if name == "__bases__" and not origin.candidate_object(target):
        deny(cand, trigger, f"changes the bases of {describe(target)}")


def _function_write(cand: types.FrameType | None, trigger: types.FrameType, args: tuple) -> None:
    """A function's code or defaults, judged by the frame that writes and the function it writes onto. The
    candidate's functions (of its code, or code a library compiled for it, such as its namedtuple's ``__new__``)
    anyone may change, and a library its own (networkx's ``argmap`` gives a function it built the code it compiles
    on the first call); giving any other function the candidate's code is refused to everyone. Candidate code
    changing another's is refused, and so is a library doing it on the candidate's behalf to a function the
    verdict runs through (``functools.update_wrapper(test_function, ..., assigned=("__code__",))``); a library
    changing another library's with a candidate frame below is only suspicious."""
    target, name = args[0], args[1]
    owner = code_of(target)
    if owner is None or is_candidate_code(owner) or _built_for.get(id(owner)) is owner:
        return
    if name == "__code__" and len(args) > 2 and type(args[2]) is types.CodeType and is_candidate_code(args[2]):
        deny(cand, trigger, f"gives {describe(target)} the candidate's code")
    writer_is_candidate = origin.is_candidate_frame(trigger)
    if not writer_is_candidate and owner.co_filename == trigger.f_code.co_filename and \
            not owner.co_filename.startswith("<"):
        return
    what = f"replaces {name} of {describe(target)}"
    if writer_is_candidate or in_candidate_thread() or cand is not None and _for_the_verdict[0](target, cand,
                                                                                                  trigger):
        deny(cand, trigger, what)
    if cand is not None:
        _suspect[0](f"{where(trigger)} {what}, with {where(cand)} of the candidate's below")


def _own_process(pid: object) -> bool:
    return type(pid) is int and (pid in (0, -1, MAIN_PID, os.getppid()) or pid < 0)


def _kill(name: str):
    def rule(trigger: types.FrameType, args: tuple) -> None:
        cand, context = _context(trigger)
        if not context or os.getpid() != MAIN_PID:
            return
        if name == "signal.pthread_kill" or _own_process(args[0] if args else None):
            deny(cand, trigger, f"signals the test process ({name})")
    return rule


def _exec(trigger: types.FrameType, args: tuple) -> None:
    cand, context = _context(trigger)
    if context and os.getpid() == MAIN_PID:
        deny(cand, trigger, "replaces the test process (os.exec)")


def rules() -> dict[str, Callable[[types.FrameType, tuple], None]]:
    """Audit event -> rule(trigger frame, event arguments)."""
    table: dict[str, Callable] = {
        "sys._getframe": _frames("sys._getframe"),
        "sys._current_frames": _frames("sys._current_frames"),
        "sys._current_exceptions": _frames("sys._current_exceptions"),
        "object.__getattr__": _attribute_read,
        "object.__setattr__": _special_write,
        "object.__delattr__": _special_write,
        "import": _import,
        "sys.addaudithook": _audit_hook,
        "os.kill": _kill("os.kill"),
        "os.killpg": _kill("os.killpg"),
        "signal.pthread_kill": _kill("signal.pthread_kill"),
        "os.exec": _exec,
    }
    for name in ("sys.settrace", "sys.setprofile", "sys._settraceallthreads", "sys._setprofileallthreads",
                 "sys.monitoring.register_callback"):
        table[name] = _tracer(name)
    for name in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
        table[name] = _object_graph(name)
    for name in ("compile", "exec", "code.__new__", "function.__new__", "marshal.loads", "marshal.load"):
        table[name] = _builds_code(name)
    return table


def native_rule(event: str) -> Callable[[types.FrameType, tuple], None] | None:
    """The rule of a ``ctypes.*`` event (there are many; matched by prefix)."""
    if event.startswith("ctypes."):
        return lambda trigger, args: _native_memory(event, trigger)
    return None


# -------------------------------------------------------------------- import hooks

def _hook_lists() -> dict[str, list]:
    return {"sys.meta_path": sys.meta_path, "sys.path_hooks": sys.path_hooks}


def remember_import_hooks() -> None:
    for name, hooks in _hook_lists().items():
        _known_hooks[name] = tuple(hooks)


def check_import_hooks(trigger: types.FrameType | None = None) -> None:
    """New import hooks of the candidate's are reported (an import hook is installed by mutating a list, so it
    is found at the next import or test boundary)."""
    for name, hooks in _hook_lists().items():
        now, old = tuple(hooks), _known_hooks.get(name, ())
        if len(now) == len(old) and all(a is b for a, b in zip(now, old)):
            continue
        known = {id(h) for h in old}
        _known_hooks[name] = now
        for hook in now:
            if id(hook) not in known and origin.candidate_object(hook):
                _report[0](evidence(candidate_frame(trigger) if trigger else None, trigger,
                                    f"installs an import hook ({name} gets {describe(hook)})"))


# ----------------------------------------------------------------- marshalled code

def _loaded(function: Callable) -> Callable:
    """``marshal.load``/``loads`` whose code objects, loaded by the candidate's own frame, become its code (as
    code it compiles does): a copy of code it dumped (jinja2's bytecode cache) or code it forged under any file
    name runs as the candidate's wherever it runs. The call through this wrapper is the guard's (its audit event
    is skipped); a direct call of a ``marshal`` function not wrapped (re-imported) is still refused."""
    def load(*args, **kwargs):
        __tracebackhide__ = True
        value = function(*args, **kwargs)
        caller = sys._getframe(1)
        if origin.active[0] and origin.is_candidate_frame(caller):
            with origin.GuardWork():
                _taint_loaded(value)
        return value
    load.__name__ = load.__qualname__ = function.__name__
    load.__module__, load.__doc__ = "marshal", function.__doc__
    return load


def _taint_loaded(value: object) -> None:
    """Every code object in what marshal built (code, or containers marshal makes: tuples, lists, sets, dicts)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is types.CodeType:
            origin.taint(item)
        elif kind in (tuple, list, set, frozenset):
            stack.extend(item)
        elif kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())


def _wrap_marshal() -> None:
    """Not a watch (``origin.patch``): whoever replaces these later (a test's mock) only loses the allowance, as
    the audit rule still refuses the candidate's calls of the functions not wrapped."""
    import marshal

    for name in ("load", "loads"):
        setattr(marshal, name, _loaded(getattr(marshal, name)))


# ----------------------------------------------------------------- exec, its namespace seen

def _wrap_exec() -> None:
    """``exec`` that tells the audit rule the namespace it runs code in (the event carries the code only). Not a
    watch: a call of the builtin not through it (a reference kept from before) is judged as before."""
    import builtins

    function = builtins.exec

    def exec(source, /, globals=None, locals=None, **kwargs):
        __tracebackhide__ = True
        if globals is None:  # the caller's namespaces, as the builtin takes them (a snapshot of a function's)
            with origin.GuardWork():
                caller = sys._getframe(1)
                globals = caller.f_globals
                if locals is None:
                    locals = caller.f_locals
                    if sys.version_info >= (3, 13) and caller.f_code.co_flags & inspect.CO_OPTIMIZED:
                        locals = dict(locals)
        origin.tls.exec_call = (source, globals)
        try:
            return function(source, globals, locals, **kwargs)
        finally:
            origin.tls.exec_call = None
    exec.__doc__, exec.__module__, exec.__qualname__ = function.__doc__, "builtins", "exec"
    builtins.exec = exec
    _exec_code.append(exec.__code__)


_exec_code: list[types.CodeType] = []


def past_exec(frame: types.FrameType) -> types.FrameType:
    """The frame an event fired in, the wrapper's caller for the builtin's own events (compiling, running)."""
    return frame.f_back if _exec_code and frame.f_code is _exec_code[0] and frame.f_back is not None else frame


def _fresh(namespace: object) -> bool:
    """A dict that is no module's namespace the guard knows or keeps a baseline of, nor its own: code under the
    candidate's own file name run there changes nothing but that dict (numba runs the kernel it compiles from an
    array expression of the candidate's function, under the function's file name, in a dict of its own); code
    under another file's name claims to be that file's, and stays refused wherever it runs."""
    if type(namespace) is not dict:
        return False
    with origin.GuardWork():
        return not (origin.known_namespace(namespace) or _watched[0](namespace) or
                    any(namespace is g for g in origin.guard_globals) or
                    any(namespace is getattr(m, "__dict__", None) for m in list(sys.modules.values())))


# ------------------------------------------------- process ending without audit events

def _guarded(function: Callable, what: str, harmless: Callable[..., bool] | None = None) -> Callable:
    """``function`` refused to candidate code in the test process (forked children may use it), unless
    ``harmless(*args, **kwargs)`` says this call ends nothing."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True
        try:
            ends_nothing = harmless is not None and harmless(*args, **kwargs)
        except TypeError:  # arguments the function refuses: it raises that itself
            return function(*args, **kwargs)
        if os.getpid() == MAIN_PID and not ends_nothing:
            trigger = origin.outside_guard(sys._getframe(1))
            cand, context = _context(trigger) if trigger is not None else (None, in_candidate_thread())
            if context:
                deny(cand, trigger, what)
        return function(*args, **kwargs)
    return wrapper


def _timer_rules() -> dict[str, Callable[..., bool]]:
    """When a timer call ends nothing: it disarms, or the signal its timer sends has a handler (a time limit
    raising in the candidate's code, HumanEval's ``time_limit``), not the default action that ends the process;
    and putting that default back is harmless only while the signal's timer is not armed."""
    import signal

    import _signal

    getsignal, getitimer = _signal.getsignal, _signal.getitimer
    plain = (int, signal.Signals, signal.Handlers)  # numbers that cannot answer comparisons as they please
    timers = {_signal.SIGALRM: _signal.ITIMER_REAL, _signal.SIGVTALRM: _signal.ITIMER_VIRTUAL,
              _signal.SIGPROF: _signal.ITIMER_PROF}
    sent = {which: signum for signum, which in timers.items()}

    def handled(signum: object) -> bool:
        return type(signum) is int and getsignal(signum) not in (_signal.SIG_DFL, None)

    def setitimer(which, seconds, *rest, **kwargs) -> bool:
        return type(seconds) in (int, float) and seconds == 0 or handled(sent.get(which) if type(which) is int
                                                                          else None)

    def default_put_back(signalnum, handler) -> bool:
        if not isinstance(handler, int) or type(handler) in plain and handler != _signal.SIG_DFL:
            return True  # a handler, or ignoring the signal
        armed = timers.values() if type(signalnum) not in plain else [timers[signalnum]] if signalnum in timers else []
        return not any(getitimer(which)[0] > 0 for which in armed)

    return {"alarm": lambda seconds: setitimer(_signal.ITIMER_REAL, seconds), "setitimer": setitimer,
            "signal": default_put_back}


def _wrap_exits() -> None:
    import posix
    import signal

    import _signal

    timers = _timer_rules()
    for owners, name, what in (((os, posix), "_exit", "ends the test process (os._exit)"),
                               ((os, posix), "abort", "ends the test process (os.abort)"),
                               ((signal, _signal), "raise_signal", "signals the test process (signal.raise_signal)"),
                               ((signal, _signal), "alarm", "signals the test process (signal.alarm)"),
                               ((signal, _signal), "setitimer", "signals the test process (signal.setitimer)"),
                               ((_signal,), "signal", "signals the test process (signal.signal: the default "
                                                      "action for a signal whose timer is armed)")):
        for owner in owners:
            original = getattr(owner, name, None)
            if original is not None:
                origin.patch(owner, name, _guarded(original, what, timers.get(name)))
