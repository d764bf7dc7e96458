"""In-process witness of one RECODE-H test run: a pytest plugin loaded with ``-p`` before the candidate.

It runs inside the task's interpreter (any environment), so it imports only the
standard library and never ``agent``. The runner (``agent/runner/core.py``)
gives it, through the environment variable ``RECODE_GUARD``, the paths that
matter and two inherited file descriptors: one it reads a per-run secret key
from (then closes, before any candidate code exists) and one it writes its
findings to. What it writes, line by line:

* ``hello`` when loaded: proof the harness started (its absence is an infra error);
* ``flag <evidence>`` the moment the candidate uses a capability research code
  never needs or changes something the verdict relies on (the run is graded
  ``tampered``), e.g. ``target.py:12 sets sys.setprofile``;
* ``access <evidence>`` the moment it sees the candidate use the hidden
  reference (``recode_guard_reference`` watches the reference's code run);
* ``seal <json> <hmac>`` at the very end of the session: the exit status, the
  sha256 of the JUnit report pytest wrote, the outcome of every test as
  observed by this plugin's own hook wrappers (including whether its body ran
  to its end), every flag and every access, authenticated with the secret key
  so that a candidate cannot forge it.

The parts, each in its own module of this folder:

* ``recode_guard_preload``: the libraries the test imports, imported before
  the watch starts (what they cost stays what it costs without the guard);
* ``recode_guard_origin``: whose code is running (the candidate's, or not);
* ``recode_guard_capabilities``: the audit-hook rules denying tracers, frames,
  the object graph, code building, ctypes, import and audit hooks, ending or
  signalling the process;
* ``recode_guard_integrity``: module namespaces guarded at write time and, with
  classes, ``sys.modules``, tracers and pytest's hooks, objects and items,
  compared with their baselines at every test boundary;
* ``recode_guard_results``: the test module instrumented so that values
  reaching its comparisons are checked and each test proves its body ended;
* ``recode_guard_reference``: reference use, by behaviour;
* ``recode_guard_handed``: what the test hands the candidate in the call it is
  making (a path to its file, a frame).

This module adds the file-system rules (the reference, the test file and the
JUnit report may not be opened, copied, renamed or linked by candidate code,
but for the test file read under a path the test hands it, ``recode_guard_handed``;
Python sources in the repository may not be written), checks that the test's
functions are the test file's and its reference module a reference file, and
seals the outcome.
"""
from __future__ import annotations

import ast
import gc
import hashlib
import hmac
import inspect
import json
import linecache
import os
import re
import sys
import tokenize
import traceback
import types
import warnings

import _pytest
import pytest

import recode_guard_capabilities as capabilities
import recode_guard_handed as handed
import recode_guard_integrity as integrity
import recode_guard_origin as origin
import recode_guard_preload as preload
import recode_guard_reference as reference
import recode_guard_results as results
import recode_guard_classes as classes
import recode_guard_sources as sources
from recode_guard_origin import candidate_frame, in_candidate_thread, is_candidate_file

_ONE_PROCESS = ("the RECODE-H guard watches only the test process the runner started: a process it starts that "
                "loads the guard plugin (an xdist worker) is refused; run the tests in that one process")
# Taken out of the environment at once: no process the tests start inherits it, so none can load the guard.
_CONFIG = json.loads(os.environ.pop("RECODE_GUARD", None) or "null")
if type(_CONFIG) is not dict:
    raise ImportError(_ONE_PROCESS)
_OUT_FD = int(_CONFIG["out_fd"])
_REAL = os.path.realpath
_CANDIDATE = _REAL(_CONFIG["target"])
_CANONICAL = _REAL(_CONFIG["canonical"])
_TEST = _REAL(_CONFIG["test"])
_JUNIT = _REAL(_CONFIG["junit"])
_REPO = _REAL(_CONFIG["repo"]) + os.sep
_TARGET_REF = os.path.join(os.path.dirname(_CANDIDATE),
                           os.path.splitext(os.path.basename(_CANDIDATE))[0] + "_ref.py")
# canonical.py, the ResearchCodeBench ``<stem>_ref.py`` copy beside the target, and any the runner names
_REFERENCES = tuple(sorted({_CANONICAL, *(_REAL(p) for p in _CONFIG.get("references", ())),
                            *([_REAL(_TARGET_REF)] if os.path.isfile(_TARGET_REF) else [])}))
_PROTECTED = {**{path: os.path.basename(path) for path in _REFERENCES},
              _TEST: "the test file", _JUNIT: "the JUnit report"}
_PROTECTED_NAMES = frozenset(os.path.basename(p) for p in _PROTECTED)
_COMMAND_WORDS = ("canonical", os.path.basename(_TEST), os.path.basename(_JUNIT))
_SOURCE_FILE = re.compile(r"\.(py|pyc|pyo|pth|so)(\.|$)|(^|/)__pycache__(/|$)")
_LOADED_SUFFIX = re.compile(r"\.(py|pyc|pyo|pth|so)$")
_OWN_CACHE = os.path.join(os.path.dirname(_CANDIDATE), "__pycache__")
_OWN_STEM = os.path.splitext(os.path.basename(_CANDIDATE))[0]
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_flags: list[str] = []
_access: list[str] = []
_outcomes: dict[str, dict] = {}
_test_codes: dict[str, object] = {}
_test_index: dict[str, int] = {}
_state: dict[str, object] = {}
_tls = origin.tls
_ACTIVE = origin.active  # the rules apply once the candidate's module exists
_write = os.write


def _write_line(text: str) -> None:
    """Append one line to the result channel (the runner reads it concurrently)."""
    data = (text.replace("\n", " ") + "\n").encode("utf-8", "replace")
    while data:
        data = data[_write(_OUT_FD, data):]


def _flag(reason: str) -> None:
    """Record tampering at once, so a candidate that later kills the process cannot hide it."""
    if reason not in _flags:
        _flags.append(reason)
        try:
            _write_line("flag " + reason)
        except OSError:
            pass  # channel closed by the candidate: the missing seal already fails the run


def _report_access(evidence: str) -> None:
    """Record reference use at once, like a flag."""
    if evidence not in _access:
        _access.append(evidence)
        try:
            _write_line("access " + evidence)
        except OSError:
            pass


def _note(text: str) -> None:
    _write_line("note " + text)


_suspicious: list[str] = []


def _suspect(text: str) -> None:
    """What a rule notices but cannot decide exactly: carried in the result as ``suspicious``, never a verdict."""
    if text not in _suspicious:
        _suspicious.append(text)
        _write_line("suspect " + text)


def _read_key() -> "hmac.HMAC":
    """The runner wrote the key and closed its end before starting pytest: never wait for it (a descriptor of that
    number in another process is something else, which may never have data)."""
    fd = int(_CONFIG["key_fd"])
    try:
        os.set_blocking(fd, False)
        key = os.read(fd, 64)
        os.close(fd)
    except OSError:
        key = b""
    if len(key) != 32:
        raise ImportError(_ONE_PROCESS)
    return hmac.new(key, digestmod=hashlib.sha256)


class _Lines(dict):
    """``linecache``'s cache, keeping no lines of the test or the reference: once pytest formatted a traceback,
    ``linecache.getlines`` would hand them to anyone with no event to judge; each read is now a new read."""

    __slots__ = ()

    def __setitem__(self, key: object, value: object) -> None:
        if not _withheld(key):
            dict.__setitem__(self, key, value)


def _withheld(path: object) -> bool:
    return type(path) is str and os.path.basename(path) in _PROTECTED_NAMES and _REAL(path) in _WITHHELD


_WITHHELD = frozenset({_TEST, *_REFERENCES})


_MAC = _read_key()
_write_line("hello")
# Off only when scripts/bench_runner.py measures what the watch costs: the plugin then preloads, witnesses and seals.
_WATCH = bool(_CONFIG.get("watch", True))
preload.preload([_TEST, *_REFERENCES], _REPO, _CANDIDATE)
# The watch's set-up copies the namespaces of every loaded module and class: those allocations set off a full
# pass of the collector over every object the libraries made (~30 ms with packaging's imports), for objects that
# live until the end. The collector resumes once they are frozen (the end of this module).
_COLLECTING = gc.isenabled()
gc.disable()
if _WATCH:
    if _CONFIG.get("native"):
        origin.use_native(_CONFIG["native"])
    origin.configure(_CANDIDATE)
    linecache.cache = _Lines((key, value) for key, value in linecache.cache.items() if not _withheld(key))
    reference.configure(candidate=_CANDIDATE, references=_REFERENCES, report=_report_access, note=_note)
    capabilities.configure(_flag, reference.is_reference_file, _suspect, integrity.for_the_verdict,
                           integrity.watches_namespace)
    results.configure(_flag, _TEST, _suspect)
    integrity.configure(_flag, test=_TEST, references=_REFERENCES, repo=_REPO, suspect=_suspect)


# --------------------------------------------------------------- file-system rules

def _path(value: object) -> str | None:
    if origin.is_kind(value, (str, bytes, os.PathLike)):
        try:
            return os.fsdecode(value)
        except (TypeError, ValueError):
            return None
    return None


def _protected_label(value: object) -> str | None:
    path = _path(value)
    if path is None or os.path.basename(path) not in _PROTECTED_NAMES:
        return None  # a link under another name must be created first: os.symlink/os.link are watched
    return _PROTECTED.get(_REAL(path))


def _is_source(value: object) -> bool:
    """Python source/bytecode inside the task repository (where the reference and the tests import from).

    Caches elsewhere (torch.compile writes generated .py files to /tmp) are not on the import path; nor is the
    ``__pycache__`` folder beside the candidate's file, and a file there with no suffix an importer loads, named
    for the candidate's module or for no other source of that folder (numba's ``cache=True`` index and code of
    the candidate's functions, ``target.topk-7.py311.nbi``, which numba loads for that source's functions only,
    and the temporary file it tries the folder with).
    """
    path = _path(value)
    if path is None or not _SOURCE_FILE.search(path):
        return False
    real = _REAL(path)
    if not real.startswith(_REPO):
        return False
    folder, name = os.path.split(real)
    stem = name.split(".")[0]
    return not (real == _OWN_CACHE or folder == _OWN_CACHE and not _LOADED_SUFFIX.search(name) and (
        stem == _OWN_STEM or not os.path.exists(os.path.join(os.path.dirname(_CANDIDATE), stem + ".py"))))


def _finding(trigger: types.FrameType, what: str, kind: str = "flag", source: str | None = None) -> None:
    """Report ``what`` if candidate code caused it (anywhere up the stack, or in its thread); ``source``: the
    protected file being read, whose reading by a source reader another frame may have asked for."""
    cand = candidate_frame(trigger)
    if cand is None and not in_candidate_thread():
        return
    asker = _reader_asked_by(trigger, cand, source) if source else None
    if asker == "":
        return  # that file's own code reading its source (a callback of the test's the candidate calls)
    text = capabilities.evidence(cand, trigger, what)
    if asker:
        _suspect(f"{text} for {asker}, which formats the lines its caller names")
    else:
        (_report_access if kind == "access" else _flag)(text)


def _module_files(*modules: types.ModuleType) -> frozenset[str]:
    return frozenset(path for module in modules for path in (module.__file__, _REAL(module.__file__)))


_SOURCE_READERS = _module_files(linecache, tokenize)
_FORMATTERS = _module_files(traceback, warnings)
_PYTEST_CODE = tuple({os.path.dirname(_pytest.__file__) + os.sep, _REAL(os.path.dirname(_pytest.__file__)) + os.sep})
_FRAME_INFO = inspect.getframeinfo.__code__  # inspect.stack, trace, getouterframes and getinnerframes call it


def _reader_asked_by(trigger: types.FrameType, cand: types.FrameType | None, source: str) -> str | None:
    """Who, between the candidate's frame and a source reader (``linecache``, ``tokenize``) reading ``source``,
    asked for it: ``""`` a frame of that file, else the formatter the candidate called (``traceback``,
    ``warnings``, ``inspect``'s frame information, pytest's traceback and warning formatting), None nobody: the
    candidate's own read (``linecache.getlines``, ``inspect.getsource``, ``tokenize.open``)."""
    if trigger.f_code.co_filename not in _SOURCE_READERS:
        return None
    asker, frame = None, trigger.f_back
    while frame is not None and frame is not cand:
        code = frame.f_code
        if _REAL(code.co_filename) == source:
            return ""
        if code.co_filename in _FORMATTERS or code is _FRAME_INFO or code.co_filename.startswith(_PYTEST_CODE):
            asker = f"{os.path.basename(code.co_filename)}:{code.co_name}"
        frame = frame.f_back
    return asker


def _rule_open(trigger: types.FrameType, args: tuple) -> None:
    path, mode, flags = (tuple(args) + (None, None, None))[:3]
    writing = (type(mode) is str and any(c in mode for c in "wax+")) or (
        mode is None and type(flags) is int and flags & _WRITE_FLAGS)
    label = _protected_label(path)
    if label == _PROTECTED[_TEST] and not writing and _handed_by_the_test(trigger, _path(path)):
        return
    if label:
        real = _REAL(_path(path))
        kind = "access" if real in _REFERENCES and not writing else "flag"
        _finding(trigger, f"opens {label}" + (" for writing" if writing else ""), kind, None if writing else real)
    elif writing:
        if _is_source(path):
            _finding(trigger, f"writes Python source or bytecode {os.path.basename(_path(path))}")
        elif _path(path) is not None and (candidate_frame(trigger) is not None or in_candidate_thread()):
            origin.taint_file(_path(path))  # code later loaded from it is the candidate's


def _handed_by_the_test(trigger: types.FrameType, path: str) -> bool:
    """The test file read under the path the test hands, in the call it is making, to the candidate's code
    (a command line given ``__file__``): the test's act."""
    cand = candidate_frame(trigger)
    return cand is not None and any(type(value) is not types.FrameType and os.fsdecode(value) == path
                                    for value in handed.given(cand))


def _at(args: tuple, index: int, dir_fds: dict[int, int]) -> str | None:
    """Argument ``index`` as a path, one given relative to a directory descriptor resolved in that directory:
    ``shutil.rmtree`` removes a folder's entries by name under the folder's descriptor, which names no file
    of the working directory (joblib's cache folder in the test's temporary folder)."""
    path = _path(args[index])
    fd = args[dir_fds[index]] if dir_fds.get(index, len(args)) < len(args) else None
    if path is None or type(fd) is not int or fd < 0 or os.path.isabs(path):
        return path
    try:
        return os.path.join(os.readlink(f"/proc/self/fd/{fd}"), path)
    except OSError:
        return path  # no /proc: judged as in the working directory


def _rule_paths(event: str):
    """Rule for file-system events whose arguments are paths (rename, remove, link, copy...)."""
    dir_fds = _DIR_FD_OF.get(event, {})

    def rule(trigger: types.FrameType, args: tuple) -> None:
        paths = [path for path in (_at(args, i, dir_fds) for i in range(len(args))) if path is not None]
        label = next((label for label in map(_protected_label, paths) if label), None)
        if label:
            _finding(trigger, f"touches {label} ({event})")
        elif any(_is_source(value) for value in paths):
            _finding(trigger, f"modifies Python source or bytecode ({event})")
        elif event in _NEW_NAMES and len(paths) >= 2 and (candidate_frame(trigger) is not None or
                                                          in_candidate_thread()):
            origin.taint_file(_path(paths[1]))  # a link, copy or new name the candidate made is its file too
    return rule


_PLUGIN = "_recode_pytest_guard"  # the module pytest loads with -p (it holds the hooks only)
_GUARD_PREFIXES = ("recode_guard", _PLUGIN)  # this plugin's modules and its compiled helper
_COMMAND_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn")
_PATH_EVENTS = ("os.rename", "os.remove", "os.rmdir", "os.truncate", "os.symlink", "os.link", "os.chmod",
                "shutil.copyfile", "shutil.copytree", "shutil.move", "shutil.rmtree")
_NEW_NAMES = frozenset({"os.rename", "os.symlink", "os.link", "shutil.copyfile", "shutil.copytree", "shutil.move"})
# path argument -> the argument holding the directory descriptor it is relative to (-1 or None: the working
# directory); a symlink's target is read relative to the link, so it has none
_DIR_FD_OF = {"os.remove": {0: 1}, "os.rmdir": {0: 1}, "os.chmod": {0: 2}, "os.rename": {0: 2, 1: 3},
              "os.link": {0: 2, 1: 3}, "os.symlink": {1: 2}, "shutil.rmtree": {0: 1}}


def _rule_import(trigger: types.FrameType, args: tuple) -> None:
    module = args[0] if args else ""
    if type(module) is str and "canonical" in module.split("."):
        _finding(trigger, f"imports the reference module {module}", "access")
    elif type(module) is str and module.startswith(_GUARD_PREFIXES):
        cand = candidate_frame(trigger)
        if cand is not None or in_candidate_thread():
            capabilities.deny(cand, trigger, f"imports the guard's module {module}")


def _rule_command(trigger: types.FrameType, args: tuple) -> None:
    text = " ".join(str(a) for a in args if type(a) in (str, bytes, list, tuple))
    word = next((w for w in _COMMAND_WORDS if w in text), None)
    if word:
        _finding(trigger, f"runs a command naming {word}")


def _rule_table() -> dict[str, tuple]:
    table: dict[str, list] = {}
    for event, rule in [("open", _rule_open), ("import", _rule_import),
                        *[(e, _rule_command) for e in _COMMAND_EVENTS], *[(e, _rule_paths(e)) for e in _PATH_EVENTS],
                        *capabilities.rules().items()]:
        table.setdefault(event, []).append(rule)
    for event in reference.AUDIT_EVENTS:
        table.setdefault(event, [])
    return {event: tuple(rules) for event, rules in table.items()}


_RULES = _rule_table()
_REFERENCE_EVENTS = frozenset(reference.AUDIT_EVENTS)
# events fired for every attribute they concern; only these attributes matter
_ATTRIBUTE_FILTER = {"object.__getattr__": frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"}),
                     "object.__setattr__": frozenset({"__code__", "__defaults__", "__kwdefaults__", "__class__",
                                                      "__bases__"}),
                     "object.__delattr__": frozenset({"__code__", "__defaults__", "__kwdefaults__", "__class__",
                                                      "__bases__"})}


def _audit(event: str, args: tuple, trigger: types.FrameType | None = None) -> None:
    """The audit hook: dispatch to the rules, with the frame that caused the event; the guard's own work is skipped.

    The compiled helper calls it with that frame, once the candidate's module exists (a gate Python code cannot
    close again) and only when the event can concern the candidate (``_WHEN``); without the helper, it finds the
    frame and reads the gate itself."""
    rules = _RULES.get(event)
    if rules is None:
        if event[:7] != "ctypes.":
            return  # builtins.id and most events: nothing to judge
        rules = (capabilities.native_rule(event),)
    wanted = _ATTRIBUTE_FILTER.get(event)
    if not (_NATIVE_GATE or _ACTIVE[0]) or (wanted is not None and (len(args) < 2 or args[1] not in wanted)) or \
            getattr(_tls, "busy", False):
        return
    _tls.busy = True
    try:
        if trigger is None:
            try:
                trigger = sys._getframe(1)
            except ValueError:
                return  # raised by the interpreter itself, with no Python code running
        trigger = capabilities.past_exec(trigger)
        if origin.is_guard_frame(trigger) or event == "sys.setprofile" and results.unsets_probe():
            return
        if event in _REFERENCE_EVENTS:
            reference.audit(event, args, trigger)
        for rule in rules:
            rule(trigger, args)
    except capabilities.Denied:
        raise
    except Exception as exc:  # an exception here would break the audited call of an honest test
        _note(f"audit rule for {event} failed: {type(exc).__name__}: {exc}")
    finally:
        _tls.busy = False


# When an event can concern the candidate at all, for the helper to skip the others (in the main thread; other
# threads' events always reach the hook). The rules of these events act only on what candidate code does: from a
# frame of the stack (files, commands, imports, frames, the object graph, signals, compiling), from the frame that
# fired it (loading marshalled code), or running code unless the import system runs a module's body (the
# candidate's own runs with its own globals). Import hooks the candidate adds are also found at every test
# boundary. The other events (tracers, audit hooks, code swaps, functions or code built, ctypes) always reach it.
_ON_STACK, _BY_TRIGGER, _OUTSIDE_IMPORT_SYSTEM = 1, 2, 3
_WHEN = {**dict.fromkeys(("open", "import", "compile", "sys._getframe", "sys._current_frames",
                          "sys._current_exceptions", "object.__getattr__", "gc.get_objects", "gc.get_referrers",
                          "gc.get_referents", "os.kill", "os.killpg", "signal.pthread_kill", *_COMMAND_EVENTS,
                          *_PATH_EVENTS), _ON_STACK),
         "marshal.loads": _BY_TRIGGER, "marshal.load": _BY_TRIGGER, "exec": _OUTSIDE_IMPORT_SYSTEM}
_NATIVE_GATE = _WATCH and bool(origin.native)
if _NATIVE_GATE:  # the helper calls it for the events of _RULES only (half of all are builtins.id)
    origin.native[0].add_audit_hook(_audit, frozenset(_RULES), _ATTRIBUTE_FILTER, _WHEN,
                                    origin.candidate_namespaces, origin.known_keys)
    origin.native[0].gate_frames(origin.candidate_namespaces, origin.known_keys, capabilities.refuse_frame)
    origin.native[0].gate_functions(capabilities.refuse_function)
    origin.native[0].gate_ctypes()  # foreign calls and pointer dereferences raise events (rule 5)
    capabilities.gated[0] = True
elif _WATCH:
    sys.addaudithook(_audit)


# ------------------------------------------------------------- the test and the reference

def _import_bindings(tree: ast.Module) -> tuple[list[tuple[str, str, str | None]], bool, dict[str, set[str]]]:
    """What test.py binds by importing: (bound name, module, imported attribute or None) per name,
    whether it has a star import, and the attributes it reads on each imported name."""
    bindings: list[tuple[str, str, str | None]] = []
    star = False
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bindings.append((alias.asname or alias.name.split(".")[0],
                                 alias.name if alias.asname else alias.name.split(".")[0], None))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    star = star or "canonical" not in (node.module or "").split(".")
                else:
                    bindings.append((alias.asname or alias.name, node.module or "", alias.name))
    bound = {name for name, _, _ in bindings}
    attributes: dict[str, set[str]] = {}
    for node in preload.nodes(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            attributes.setdefault(node.value.id, set()).add(node.attr)
    return bindings, star, attributes


def _from_reference(module: str, attribute: str | None) -> bool:
    """An import of the reference: named canonical, or resolving to a loaded reference module."""
    dotted = f"{module}.{attribute}" if attribute else module
    if "canonical" in dotted.split("."):
        return True
    return any(reference.is_reference_file(getattr(sys.modules.get(name), "__file__", None))
               for name in (module, dotted))


def _modules_by_file(paths: tuple[str, ...]) -> dict[str, list[types.ModuleType]]:
    """Loaded modules whose file is one of ``paths`` (basename compared first: realpath costs a stat per part)."""
    endings = tuple(os.path.basename(p) for p in paths)
    found: dict[str, list[types.ModuleType]] = {p: [] for p in paths}
    for module in list(sys.modules.values()):
        file = origin.module_file(module)
        if isinstance(file, str) and file.endswith(endings) and os.path.basename(file) in endings:
            real = _REAL(file)
            if real in found:
                found[real].append(module)
    return found



def _scan_reference_use(by_file: dict[str, list[types.ModuleType]] | None = None) -> None:
    """The test's reference names are reference modules; nothing the test imported is reference code handed
    out by the candidate; the candidate's module holds no reference objects (``by_file``: ``_modules_by_file``
    of those files, when just found)."""
    by_file = by_file or _modules_by_file((_CANDIDATE, _TEST) + _REFERENCES)
    candidates, tests = by_file[_CANDIDATE], by_file[_TEST]
    references = [m for path in _REFERENCES for m in by_file[path]]
    bindings, _, attributes = _state["bindings"]
    from_reference = {name for name, module, attribute in bindings if _from_reference(module, attribute)}
    for test_module in tests:
        names = vars(test_module)
        for name, module, attribute in bindings:
            value = names.get(name)
            if name in from_reference:
                if origin.is_kind(value, types.ModuleType) and value not in references:
                    _flag(f"the test's reference module '{name}' is not a reference file")
            else:
                reference.check_value(value, f"the test's {name} (imported from {module or '.'})")
    for module in candidates:
        reference.guard_module_getattr(module)
        reference.scan_module(module, module.__name__)
    _probe_attributes(tests, candidates, attributes)


def _probe_attributes(tests: list, candidates: list, attributes: dict[str, set[str]]) -> None:
    """Names the test reads on the candidate's module that only its ``__getattr__`` provides: resolve them
    now (through the checking wrapper), so what the test will receive is known."""
    for test_module in tests:
        for name, used in attributes.items():
            module = vars(test_module).get(name)
            if module not in candidates:
                continue
            for attribute in sorted(used - set(vars(module))):
                try:
                    getattr(module, attribute)
                except Exception:  # the candidate's own failure, which the test will meet too
                    continue


_plans: dict[str, "sources.Plan"] = {}
_class_plans: dict[str, "classes.Plan"] = {}  # the test's classes (``recode_guard_classes``)
_planned: dict[str, list] = {}  # the modules of those files, found after collection and at the end


def _check_sources(find: bool = False) -> None:
    """The test's and the reference's namespaces against what their sources bind (``recode_guard_sources``);
    their modules are looked up in ``sys.modules`` when ``find``, else those found last. The data of the test's
    own classes is judged too."""
    if not _plans:
        for path in (_TEST, *_REFERENCES):
            tree = preload.parse(path)
            if tree is not None:
                _plans[path] = sources.plan(path, tree)
                if path == _TEST:
                    _class_plans[path] = classes.plan(tree, _plans[path])
    if find or not _planned:
        _planned.update(_modules_by_file(tuple(_plans)))
    if _TEST in _plans:
        _plans[_TEST].changed |= integrity.named_by_the_test  # the test rebinding them through the candidate
    for path, modules in _planned.items():
        label = "the test" if path == _TEST else os.path.basename(path)
        for module in modules:
            sources.check(module, _plans[path], label, _flag, _suspect)
            if path in _class_plans:
                classes.check(module, _class_plans[path], _plans[path], label, _flag, _suspect)


def _check_test_functions(items: list) -> None:
    for item in items:
        function = getattr(item, "function", None)
        code = getattr(function, "__code__", None)
        if code is None:
            continue
        _test_codes[item.nodeid] = code
        reference.remember_test_code([function])
        if is_candidate_file(code.co_filename):
            if _handed_to_candidate(item, function):
                _handed.add(item.nodeid)
            else:
                _flag(f"test {item.name} runs candidate code as its body")
        elif not os.path.isfile(code.co_filename):
            _flag(f"test {item.name} has code generated at run time")


_handed: set[str] = set()  # items whose function the test's source hands to a decorator of the candidate's


def _handed_to_candidate(item, function: object) -> bool:
    """Whether the candidate's wrapper pytest calls for ``item`` wraps (``__wrapped__``) a function of the test
    module that the test's own source decorates, itself or its class, with a name bound to the candidate's code
    (``@freeze_time(...)``): the test chose to run its body through the candidate, which must then run it to its
    end each time, with pytest's arguments (``_body_ended``)."""
    index = results.function_index(function)
    module = getattr(item, "module", None)
    own = ".".join(filter(None, [getattr(getattr(item, "cls", None), "__qualname__", None), item.originalname]))
    if index is None or not isinstance(module, types.ModuleType) or results.qualname(index) != own:
        return False  # a wrapper claiming another function of the test (a passing one) is not this test's
    for names in results.decorators(index):
        value: object = module
        for name in names:
            value = vars(value).get(name) if isinstance(value, types.ModuleType) else None
        code = origin.code_of(value)
        if names and (code is not None and origin.is_candidate_code(code) or origin.candidate_class(
                value if isinstance(value, type) else type(value))):
            return True
    return False


def _body_ended(item, index: int, before: tuple[int, int, int], outcome) -> bool:
    """Whether the test's function ran to its end during the call; one handed to the candidate's decorator, each
    time it was entered and with the arguments pytest gave (a wrapper catching the body's failure, calling it
    again, skipping it or changing its arguments is caught)."""
    entered, completed, mismatched = (now - then for now, then in zip(results.counts(index), before))
    if item.nodeid not in _handed:
        if not completed and outcome.excinfo is None and type(item).__name__ != "TestCaseFunction":
            _flag(f"test {item.name} came through its call without its body running to its end")
        return completed > 0
    if outcome.excinfo is None and (mismatched or not entered or completed != entered):
        _flag(f"test {item.name}, run by the candidate's decorator, did not run to its end each time it was "
              f"entered with pytest's arguments (entered {entered}, ended {completed}, other arguments {mismatched})")
    return completed > 0 and completed == entered and not mismatched


def junit_address(nodeid: str) -> tuple[str, str]:
    """(classname, name) of a test as pytest's JUnit report writes them."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def _record(item, phase: str, outcome) -> None:
    entry = _outcomes.setdefault(item.nodeid, {"phases": {}})
    entry["phases"][phase] = outcome.excinfo is None


def _guarded_check(action, *args) -> None:
    """Integrity checks must never break pytest: a failure of the check itself is noted, not raised."""
    try:
        action(*args)
    except capabilities.Denied:
        raise
    except Exception as exc:
        _note(f"integrity check {getattr(action, '__name__', '?')} failed: {type(exc).__name__}: {exc}")


def hide_guard_modules() -> None:
    """What the guard keeps (its rules, its baselines, whether it is on) is out of the candidate's reach: its
    modules leave ``sys.modules`` as soon as the plugin module has imported them, before any conftest.py (which
    may import the candidate's module) is loaded; importing them again is denied. With the compiled helper the
    globals and closures of its functions are handed only to the guard (``_refuse_read``)."""
    if not _WATCH:
        return
    names = [name for name in sys.modules if name.startswith(_GUARD_PREFIXES) and name != _PLUGIN]
    for name in names:
        del sys.modules[name]
    api = types.ModuleType(results.__name__, "What the test module, as the guard instruments it, imports.")
    functions = (results.check, results.operand, results.ended, results.returned, results.arg, results.entered,
                 handed.stored)
    # With the helper, builtins of ``api`` calling them: a library walking the test's functions and the globals
    # they name (dill's ``source``) skips builtins, and meets no guard function whose closure or globals it reads.
    api.check, api.operand, api.ended, api.returned, api.arg, api.entered, api.stored = \
        origin.native[0].forwarders(api, functions, *results.PASSING) if origin.native else functions
    results.installed_check[:] = [api.check]
    sys.modules[results.__name__] = api
    integrity.forget_modules(names)


def _refuse_read(function: types.FunctionType, attribute: str) -> bool:
    """A guard function's globals, closure or builtins read outside the guard: the candidate's reads are denied,
    a library's own (pluggy reading the hooks' signatures) are not."""
    with origin.GuardWork():
        reader = sys._getframe(1)
        cand = candidate_frame(reader)
        if cand is None and not in_candidate_thread():
            return True
        capabilities.deny(cand, reader, f"reads {attribute} of the guard's {function.__qualname__}")
    return False


# (option, its value that keeps the tests in this process, what it is): pytest-xdist's and pytest-forked's
_ONE_PROCESS_OPTIONS = (("dist", "no", "xdist's distribution (-n)"), ("tx", [], None),
                        ("forked", False, "--forked"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    """The tests run in this one process, the one the guard watches: distribution over worker processes
    (pytest-xdist's ``-n``, often in a package's ``addopts``) and forking each test (pytest-forked) are turned off
    before those plugins act on them (xdist starts its workers from its own later ``pytest_configure``); the
    record says so. The results are those of ``-n 0``."""
    changed = []
    for name, off, label in _ONE_PROCESS_OPTIONS:
        if getattr(config.option, name, off) not in (off, None):
            setattr(config.option, name, off)
            changed += [label] if label else []
    if changed:
        _note("the tests ran in one process, the guard's: it turned off " + ", ".join(changed))


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session) -> None:
    """Inside pytest's collection, where the preloaded libraries' warnings would have been raised."""
    preload.replay()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session) -> None:
    if not _WATCH:
        return
    integrity.hooks_registered(session.config)
    tree = preload.parse(_TEST) or ast.Module(body=[], type_ignores=[])
    _state["bindings"] = _import_bindings(tree)
    integrity.note_paths_named_by_the_test(tree)


_REFERENCE_NAME = re.compile(r"(^|_)(ref|reference)\.py$", re.IGNORECASE)


def _adopt_embedded_references() -> None:
    """Reference modules the test ran from sources of its own (a ``*_ref.py`` path in the working copy that
    the import system did not compile from a file) are instrumented now, before any test runs."""
    for module in list(sys.modules.values()):
        file = origin.module_file(module)
        if not (isinstance(file, str) and file.lower().endswith(("ref.py", "reference.py")) and
                _REFERENCE_NAME.search(os.path.basename(file))
                and _REAL(file).startswith(_REPO)) or reference.is_reference_file(file):
            continue
        source = getattr(getattr(module, "__loader__", None), "source", None)
        if isinstance(source, str):
            reference.adopt(module, source)
            integrity.add_reference(_REAL(file))


def _index_tests(items: list, tests: list[types.ModuleType]) -> None:
    """Which instrumented test-module function each item runs (its completion is counted by the instrumentation);
    ``tests``: the modules of the test file."""
    if tests and not all(results.instrumented(m) for m in tests):
        _note("the test module was not compiled by pytest's assertion rewriter: result checks are off")
        return
    for item in items:
        index = results.function_index(getattr(item, "function", None) or getattr(item, "obj", None))
        if index is not None:
            _test_index[item.nodeid] = index


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session) -> None:
    if not _WATCH:
        return
    _adopt_embedded_references()
    _check_test_functions(session.items)
    by_file = _modules_by_file((_CANDIDATE, _TEST) + _REFERENCES)  # one pass for both: no candidate code between
    _index_tests(session.items, by_file[_TEST])
    _scan_reference_use(by_file)
    integrity.freeze_pytest(session)
    integrity.set_checkpoint("after collection")
    _guarded_check(integrity.check_all)
    _guarded_check(_check_sources, True)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    outcome = yield
    _record(item, "setup", outcome)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    expected = _test_codes.get(item.nodeid)
    if expected is not None and getattr(getattr(item, "function", None), "__code__", None) is not expected:
        _flag(f"test {item.name} was replaced after collection")
    if _WATCH:
        integrity.set_checkpoint(f"before {item.name}")
        _guarded_check(integrity.check_before_call, item)
        _guarded_check(_check_sources)
    index = _test_index.get(item.nodeid)
    before = results.counts(index) if index is not None else (0, 0, 0)
    decorated = index is not None and item.nodeid in _handed
    if decorated:
        results.expect_arguments(index, dict(getattr(item, "funcargs", {})), getattr(item, "instance", None))
    outcome = yield
    if decorated:
        results.expect_arguments(index, None)
    if _WATCH:
        _guarded_check(results.probe_deferred)
    _record(item, "call", outcome)
    if index is not None:
        _outcomes[item.nodeid]["finished"] = _body_ended(item, index, before, outcome)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item):
    outcome = yield
    _record(item, "teardown", outcome)
    if _WATCH:
        handed.forget()
        _guarded_check(results.probe_deferred)  # a fixture of the test module's compares in its set-up or teardown
        integrity.set_checkpoint(f"after {item.name}")
        _guarded_check(integrity.check_all, False, item)


def _passed(entry: dict) -> bool:
    phases = entry["phases"]
    return set(phases) == {"setup", "call", "teardown"} and all(phases.values()) and entry.get("finished", True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    """Runs after the JUnit writer: hash its file and seal everything this plugin saw."""
    if _WATCH and "bindings" in _state:
        _scan_reference_use()
        integrity.set_checkpoint("at the end of the session")
        _guarded_check(integrity.check_all)
        _guarded_check(_check_sources, True)
    try:
        with open(_JUNIT, "rb") as handle:
            junit_sha = hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        junit_sha = None
    tests = [list(junit_address(nodeid)) + [_passed(entry)] for nodeid, entry in _outcomes.items()]
    body = json.dumps({"exitstatus": int(exitstatus), "junit_sha256": junit_sha, "tests": tests,
                       "flags": list(_flags), "access": list(_access),
                       "suspicious": list(_suspicious)}, sort_keys=True)
    mac = _MAC.copy()
    mac.update(body.encode("utf-8"))
    _write_line(f"seal {body} {mac.hexdigest()}")
    # The verdict is sealed; what follows is pytest's clean-up, whose full collections (twice, for unraisable
    # exceptions) and the interpreter's exit would walk every object of torch-sized imports: 0.1-0.2 s a run.
    gc.freeze()


if _NATIVE_GATE:
    origin.native[0].shield(tuple(vars(module) for name, module in list(sys.modules.items())
                                  if name.startswith(_GUARD_PREFIXES) and name != "recode_guard_native"),
                            _refuse_read)

# Set-up is done: what exists now (the preloaded libraries, pytest, the guard's baselines) lives until the
# process ends. The collector's full passes need not walk it again and again while the tests run (for torch,
# millions of objects: about half a second of a run), as they did when the test imported torch itself.
gc.freeze()
if _COLLECTING:
    gc.enable()
