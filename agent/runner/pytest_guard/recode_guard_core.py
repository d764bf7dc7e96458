"""In-process witness of one RECODE-H test run: a pytest plugin loaded with ``-p`` before the candidate.

It runs inside the task's interpreter (any environment), so it imports only the
standard library and never ``agent``. The runner (``agent/clean_test_runner.py``)
gives it, through the environment variable ``RECODE_GUARD``, the paths that
matter and two inherited file descriptors: one it reads a per-run secret key
from (then closes, before any candidate code exists) and one it writes its
findings to. What it writes, line by line:

* ``hello`` when loaded: proof the harness started (its absence is an infra error);
* ``flag <reason>`` the moment it sees the candidate tamper with the run;
* ``access <evidence>`` the moment it sees the candidate use the hidden
  reference (``recode_guard_reference`` watches the reference's code run);
* ``seal <json> <hmac>`` at the very end of the session: the exit status, the
  sha256 of the JUnit report pytest wrote, the outcome of every test as
  observed by this plugin's own hook wrappers, every flag and every access,
  authenticated with the secret key so that a candidate cannot forge it.

Reference access (each becomes an ``access`` line): importing, loading or
opening a reference file; reference code started from candidate code without
having been handed to it (see ``recode_guard_reference``); reference objects
held by the candidate's module or returned by its ``__getattr__``.

Tampering it detects (each becomes a flag):
* candidate code on the stack while copying, renaming or linking
  canonical.py, the test file or the JUnit report, opening the test file or the report, writing Python source/bytecode into the task repository, or running a command naming them;
* swapping a function's ``__code__``, re-classing a module or class;
* replacing pytest/pluggy module functions or class methods, or registering
  hook implementations from outside pytest and conftest.py files;
* reading the interpreter's object graph (``gc.get_objects`` and friends);
* candidate functions or classes placed in the test module, the reference
  module or the libraries they use (monkeypatching ``numpy.allclose`` etc.;
  the repository's own modules may re-export the target, so they are not
  checked),
  test functions that are not code of the test file, a reference module that
  is not canonical.py.

It cannot stop code that runs in the same process from defeating it on purpose
(for example by locating this module's secret through closures or ctypes); the
runner's docstring states what is and is not guaranteed.
"""
from __future__ import annotations

import ast
import functools
import gc
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import types

import pytest

import recode_guard_reference as reference

_CONFIG = json.loads(os.environ["RECODE_GUARD"])
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
_SOURCE_READERS = ("linecache.py", "tokenize.py")
_OWN_PREFIXES = ("_pytest", "pytest", "pluggy")
# The modules on the path from a test's outcome to the exit code and the JUnit file.
_VERDICT_MODULES = ("_pytest.main", "_pytest.runner", "_pytest.reports", "_pytest.junitxml", "_pytest.python",
                    "_pytest.nodes", "_pytest.outcomes", "_pytest.skipping", "_pytest.config", "pluggy._callers",
                    "pluggy._hooks", "pluggy._manager", "pluggy._result")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_flags: list[str] = []
_access: list[str] = []
_outcomes: dict[str, dict] = {}
_test_codes: dict[str, object] = {}
_state: dict[str, object] = {}
_tls = threading.local()


def _write_line(text: str) -> None:
    """Append one line to the result channel (the runner reads it concurrently)."""
    data = (text.replace("\n", " ") + "\n").encode("utf-8", "replace")
    while data:
        data = data[os.write(_OUT_FD, data):]


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


def _read_key() -> "hmac.HMAC":
    fd = int(_CONFIG["key_fd"])
    key = os.read(fd, 64)
    os.close(fd)
    return hmac.new(key, digestmod=hashlib.sha256)


_MAC = _read_key()
_write_line("hello")
reference.configure(candidate=_CANDIDATE, references=_REFERENCES, report=_report_access,
                    note=lambda text: _write_line("note " + text))


# ---------------------------------------------------------------- audit hook

def _path(value: object) -> str | None:
    if isinstance(value, (str, bytes, os.PathLike)):
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

    Caches elsewhere (torch.compile writes generated .py files to /tmp) are not on the import path.
    """
    path = _path(value)
    return path is not None and bool(_SOURCE_FILE.search(path)) and _REAL(path).startswith(_REPO)


def _rule_open(args: tuple) -> tuple | None:
    path, mode, flags = (tuple(args) + (None, None, None))[:3]
    writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
        mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
    label = _protected_label(path)
    if label:
        kind = "access" if _REAL(_path(path)) in _REFERENCES and not writing else "flag"
        return (f"opens {label}" + (" for writing" if writing else ""), "stack", _REAL(_path(path)), kind)
    if writing and _is_source(path):
        return (f"writes Python source or bytecode {os.path.basename(_path(path))}", "stack", None, "flag")
    return None


def _rule_paths(event: str):
    """Rule for file-system events whose arguments are paths (rename, remove, link, copy...)."""
    def rule(args: tuple) -> tuple | None:
        paths = [a for a in args if _path(a) is not None]
        for value in paths:
            label = _protected_label(value)
            if label:
                return (f"touches {label} ({event})", "stack", None, "flag")
        if any(_is_source(value) for value in paths):
            return (f"modifies Python source or bytecode ({event})", "stack", None, "flag")
        return None
    return rule


def _rule_import(args: tuple) -> tuple | None:
    module = args[0] if args else ""
    if isinstance(module, str) and "canonical" in module.split("."):
        return (f"imports the reference module {module}", "stack", None, "access")
    return None


def _rule_setattr(args: tuple) -> tuple | None:
    """Only special attributes are audited: code swaps, and re-classing modules or classes."""
    target, name = args[0], args[1]
    if name == "__code__":
        return ("replaces a function's __code__", "stack", None, "flag")
    if name == "__class__" and isinstance(target, (types.ModuleType, type)):
        path = getattr(target, "__file__", None)
        if not (isinstance(path, str) and _REAL(path) == _CANDIDATE):
            return (f"changes the class of {getattr(target, '__name__', '?')}", "direct", None, "flag")
    return None


def _rule_gc(args: tuple) -> tuple | None:
    return ("inspects the interpreter's object graph", "stack", None, "flag")


def _rule_command(args: tuple) -> tuple | None:
    text = " ".join(str(a) for a in args if isinstance(a, (str, bytes, list, tuple)))
    word = next((w for w in _COMMAND_WORDS if w in text), None)
    return (f"runs a command naming {word}", "stack", None, "flag") if word else None


_RULES = {
    "open": _rule_open,
    "import": _rule_import,
    "object.__setattr__": _rule_setattr,
    "object.__delattr__": _rule_setattr,
    "gc.get_objects": _rule_gc,
    "gc.get_referrers": _rule_gc,
    "gc.get_referents": _rule_gc,
    "subprocess.Popen": _rule_command,
    "os.system": _rule_command,
    "os.exec": _rule_command,
    "os.posix_spawn": _rule_command,
    "os.spawn": _rule_command,
}
for _event in ("os.rename", "os.remove", "os.rmdir", "os.truncate", "os.symlink", "os.link", "os.chmod",
               "shutil.copyfile", "shutil.copytree", "shutil.move", "shutil.rmtree"):
    _RULES[_event] = _rule_paths(_event)


def _stack_codes():
    """Code object of every frame above the audited call, innermost first, skipping our own frames."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename != __file__:
            yield frame.f_code
        frame = frame.f_back


_is_candidate_file = reference.is_candidate_file


def _judge(finding: tuple) -> None:
    """Report the finding if candidate code caused it: directly, or anywhere up the stack."""
    reason, scope, exempt_if_active, kind = finding
    codes = _stack_codes()
    innermost = next(codes, None)
    if innermost is None:
        return
    guilty = reference.is_candidate_code(innermost)
    if scope != "direct":
        rest = list(codes)
        guilty = guilty or any(reference.is_candidate_code(code) for code in rest)
        if guilty and exempt_if_active and os.path.basename(innermost.co_filename) in _SOURCE_READERS:
            # traceback/warning machinery reading the source of a frame that is running
            guilty = not any(_REAL(code.co_filename) == exempt_if_active for code in rest)
    if guilty:
        (_report_access if kind == "access" else _flag)(reason)


def _audit(event: str, args: tuple) -> None:
    rule = _RULES.get(event)
    watched = event in _REFERENCE_EVENTS
    if (rule is None and not watched) or getattr(_tls, "busy", False):
        return
    _tls.busy = True
    try:
        if watched:
            reference.audit(event, args)
        finding = rule(args) if rule else None
        if finding:
            _judge(finding)
    except Exception as exc:  # an exception here would break the audited call of an honest test
        _write_line(f"note audit rule for {event} failed: {type(exc).__name__}")
    finally:
        _tls.busy = False


_REFERENCE_EVENTS = frozenset(reference.AUDIT_EVENTS)
sys.addaudithook(_audit)


# ------------------------------------------------- snapshots of pytest itself

def _own_callables() -> dict[tuple[str, str], object]:
    """Functions and classes of the verdict path's modules, taken when the session starts.

    That is after every plugin configured itself (some add methods to pytest
    classes) and before collection imports the candidate.
    """
    snapshot = {}
    for name in _VERDICT_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        for attr, value in list(vars(module).items()):
            if callable(value) and getattr(value, "__module__", None) == name:
                snapshot[(name, attr)] = value
    return snapshot


def _class_members(cls: type) -> dict[str, object]:
    return {k: v for k, v in list(vars(cls).items())
            if callable(v) or isinstance(v, (property, classmethod, staticmethod))}


def _same(now: dict, before: dict) -> bool:
    return now.keys() == before.keys() and all(now[k] is v for k, v in before.items())


def _hook_functions(config) -> set:
    functions = set()
    for caller in list(vars(config.pluginmanager.hook).values()):
        get = getattr(caller, "get_hookimpls", None)
        if get is not None:
            functions.update(impl.function for impl in get())
    return functions


def _legitimate_late_hook(function) -> bool:
    """Hooks registered after the session started come from pytest itself or from conftest.py files."""
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    path = code.co_filename
    if _is_candidate_file(path) or not os.path.isfile(path):
        return False
    module = getattr(function, "__module__", "") or ""
    return module.startswith(_OWN_PREFIXES) or os.path.basename(path) == "conftest.py"


def _check_pytest_intact(config) -> None:
    """Compare with the session-start snapshot (after collection and at the end of the session).

    A patch applied and undone between those two points is not seen here;
    the per-test outcomes this plugin records itself still expose a forged report.
    """
    if "hooks" not in _state:
        return  # the session never started (usage error): nothing to compare
    own, classes = _state["own"], _state["classes"]
    changed = [f"{m}.{a}" for (m, a), v in own.items() if getattr(sys.modules.get(m), a, None) is not v]
    changed += [f"{c.__module__}.{c.__qualname__}" for c, members in classes.items()
                if not _same(_class_members(c), members)]
    if changed:
        _flag("replaced pytest internals: " + ", ".join(sorted(changed)[:5]))
    undone = reference.undone_patches()
    if undone:
        _flag("undid the guard's watch on " + ", ".join(undone))
    before = _state["hooks"]
    now = _hook_functions(config)
    if before - now:
        _flag("unregistered pytest hook implementations")
    added = [f for f in now - before if not _legitimate_late_hook(f)]
    if added:
        names = sorted(f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}" for f in added)
        _flag("registered foreign pytest hooks: " + ", ".join(names[:5]))


# ------------------------------------------------------- namespace inspection

def _import_bindings(source: str) -> tuple[list[tuple[str, str, str | None]], bool, dict[str, set[str]]]:
    """What test.py binds by importing: (bound name, module, imported attribute or None) per name,
    whether it has a star import, and the attributes it reads on each imported name."""
    bindings: list[tuple[str, str, str | None]] = []
    star = False
    tree = ast.parse(source)
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
    for node in ast.walk(tree):
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
    names = {os.path.basename(p) for p in paths}
    found: dict[str, list[types.ModuleType]] = {p: [] for p in paths}
    for module in list(sys.modules.values()):
        file = getattr(module, "__dict__", {}).get("__file__")  # a lazy module would import on a missing attribute
        if isinstance(file, str) and os.path.basename(file) in names:
            real = _REAL(file)
            if real in found:
                found[real].append(module)
    return found


def _code_of(value: object) -> object:
    kind = type(value)
    if kind is types.FunctionType:
        return value.__code__
    if kind is types.MethodType:
        return getattr(value.__func__, "__code__", None)
    if kind is functools.partial:
        return _code_of(value.func)
    return None


def _defined_by_candidate(value: object, candidate_names: set[str]) -> bool:
    if isinstance(value, type):
        return value.__dict__.get("__module__") in candidate_names
    code = _code_of(value)
    return code is not None and _is_candidate_file(code.co_filename)


def _reachable_modules(roots: list[types.ModuleType], skip: set[int], depth: int = 2, cap: int = 400) -> list:
    seen = {id(m) for m in roots} | skip
    layer, found = list(roots), list(roots)
    for _ in range(depth):
        nxt = []
        for module in layer:
            for value in list(vars(module).values()):
                if isinstance(value, types.ModuleType) and id(value) not in seen and len(found) < cap:
                    seen.add(id(value))
                    nxt.append(value)
                    found.append(value)
        layer = nxt
    return found


def _in_repo(module: types.ModuleType) -> bool:
    file = getattr(module, "__dict__", {}).get("__file__")  # a lazy module would import on a missing attribute
    return isinstance(file, str) and os.path.abspath(file).startswith(_REPO)  # sys.path entries are real paths


def _scan_namespaces() -> None:
    by_file = _modules_by_file((_CANDIDATE, _TEST) + _REFERENCES)
    candidates, tests = by_file[_CANDIDATE], by_file[_TEST]
    references = [m for path in _REFERENCES for m in by_file[path]]
    candidate_names = {m.__name__ for m in candidates}
    bindings, star, attributes = _state["bindings"]
    from_reference = {name for name, module, attribute in bindings if _from_reference(module, attribute)}
    allowed = {name for name, _, _ in bindings} - from_reference
    for test_module in tests:
        names = vars(test_module)
        for name in from_reference:
            value = names.get(name)
            if isinstance(value, types.ModuleType) and value not in references:
                _flag(f"the test's reference module '{name}' is not a reference file")
        for name, module, attribute in bindings:
            if name in allowed:
                reference.check_value(names.get(name), f"the test's {name} (imported from {module or '.'})")
    for module in candidates:
        reference.guard_module_getattr(module)
        reference.scan_module(module, module.__name__)
    _probe_attributes(tests, candidates, attributes)
    skip = {id(m) for m in candidates} | {id(sys.modules[__name__])}
    for module in _reachable_modules(tests + references, skip):
        is_test = module in tests
        if not is_test and module not in references and _in_repo(module):
            continue  # the repository's own modules may re-export the target (package __init__ files)
        for name, value in list(vars(module).items()):
            if is_test and (name in allowed or (star and name not in from_reference)):
                continue
            if _defined_by_candidate(value, candidate_names):
                _flag(f"candidate code placed at {module.__name__}.{name}")


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


def _check_test_functions(items: list) -> None:
    for item in items:
        function = getattr(item, "function", None)
        code = getattr(function, "__code__", None)
        if code is None:
            continue
        _test_codes[item.nodeid] = code
        reference.remember_test_code([function])
        if _is_candidate_file(code.co_filename):
            _flag(f"test {item.name} runs candidate code as its body")
        elif not os.path.isfile(code.co_filename):
            _flag(f"test {item.name} has code generated at run time")


# ----------------------------------------------------------- test outcomes

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


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session) -> None:
    _state["hooks"] = _hook_functions(session.config)
    _state["own"] = own = _own_callables()
    _state["classes"] = {cls: _class_members(cls) for cls in own.values() if isinstance(cls, type)}
    with open(_TEST, encoding="utf-8") as handle:
        _state["bindings"] = _import_bindings(handle.read())


_REFERENCE_NAME = re.compile(r"(^|_)(ref|reference)\.py$", re.IGNORECASE)


def _adopt_embedded_references() -> None:
    """Reference modules the test ran from sources of its own (a ``*_ref.py`` path in the working copy that
    the import system did not compile from a file) are instrumented now, before any test runs."""
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not (isinstance(file, str) and _REFERENCE_NAME.search(os.path.basename(file))
                and _REAL(file).startswith(_REPO)) or reference.is_reference_file(file):
            continue
        source = getattr(getattr(module, "__loader__", None), "source", None)
        if isinstance(source, str):
            reference.adopt(module, source)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session) -> None:
    _adopt_embedded_references()
    _check_test_functions(session.items)
    _scan_namespaces()
    _check_pytest_intact(session.config)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    outcome = yield
    _record(item, "setup", outcome)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    expected = _test_codes.get(item.nodeid)
    if expected is not None and getattr(getattr(item, "function", None), "__code__", None) is not expected:
        _flag(f"test {item.name} was replaced after collection")
    outcome = yield
    _record(item, "call", outcome)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item):
    outcome = yield
    _record(item, "teardown", outcome)


def _passed(entry: dict) -> bool:
    phases = entry["phases"]
    return set(phases) == {"setup", "call", "teardown"} and all(phases.values())


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    """Runs after the JUnit writer: hash its file and seal everything this plugin saw."""
    if "bindings" in _state:
        _scan_namespaces()
    _check_pytest_intact(session.config)
    try:
        with open(_JUNIT, "rb") as handle:
            junit_sha = hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        junit_sha = None
    tests = [list(junit_address(nodeid)) + [_passed(entry)] for nodeid, entry in _outcomes.items()]
    body = json.dumps({"exitstatus": int(exitstatus), "junit_sha256": junit_sha, "tests": tests,
                       "flags": list(_flags), "access": list(_access)}, sort_keys=True)
    mac = _MAC.copy()
    mac.update(body.encode("utf-8"))
    _write_line(f"seal {body} {mac.hexdigest()}")
    # The verdict is sealed; what follows is pytest's clean-up, whose full collections (twice, for unraisable
    # exceptions) and the interpreter's exit would walk every object of torch-sized imports: 0.1-0.2 s a run.
    gc.freeze()
