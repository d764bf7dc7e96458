"""In-process witness of one RECODE-H test run: a pytest plugin loaded with ``-p`` before the candidate.

It runs inside the task's interpreter (any environment), so it imports only the
standard library and never ``agent``. The runner (``agent/clean_test_runner.py``)
gives it, through the environment variable ``RECODE_GUARD``, the paths that
matter and two inherited file descriptors: one it reads a per-run secret key
from (then closes, before any candidate code exists) and one it writes its
findings to. What it writes, line by line:

* ``hello`` when loaded: proof the harness started (its absence is an infra error);
* ``flag <reason>`` the moment it sees the candidate tamper with the run;
* ``seal <json> <hmac>`` at the very end of the session: the exit status, the
  sha256 of the JUnit report pytest wrote, the outcome of every test as
  observed by this plugin's own hook wrappers, and every flag, authenticated
  with the secret key so that a candidate cannot forge it.

Tampering it detects (each becomes a flag):
* candidate code on the stack while opening, copying, renaming or linking
  canonical.py, the test file or the JUnit report, importing ``canonical``,
  writing Python source/bytecode into the task repository, or running a command naming them;
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
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import types

import pytest

_CONFIG = json.loads(os.environ["RECODE_GUARD"])
_OUT_FD = int(_CONFIG["out_fd"])
_REAL = os.path.realpath
_CANDIDATE = _REAL(_CONFIG["target"])
_CANONICAL = _REAL(_CONFIG["canonical"])
_TEST = _REAL(_CONFIG["test"])
_JUNIT = _REAL(_CONFIG["junit"])
_REPO = _REAL(_CONFIG["repo"]) + os.sep
_PROTECTED = {_CANONICAL: "canonical.py", _TEST: "the test file", _JUNIT: "the JUnit report"}
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


def _read_key() -> "hmac.HMAC":
    fd = int(_CONFIG["key_fd"])
    key = os.read(fd, 64)
    os.close(fd)
    return hmac.new(key, digestmod=hashlib.sha256)


_MAC = _read_key()
_write_line("hello")


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
    label = _protected_label(path)
    if label:
        return (f"opens {label}", "stack", _REAL(_path(path)))
    writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
        mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
    if writing and _is_source(path):
        return (f"writes Python source or bytecode {os.path.basename(_path(path))}", "stack", None)
    return None


def _rule_paths(event: str):
    """Rule for file-system events whose arguments are paths (rename, remove, link, copy...)."""
    def rule(args: tuple) -> tuple | None:
        paths = [a for a in args if _path(a) is not None]
        for value in paths:
            label = _protected_label(value)
            if label:
                return (f"touches {label} ({event})", "stack", None)
        if any(_is_source(value) for value in paths):
            return (f"modifies Python source or bytecode ({event})", "stack", None)
        return None
    return rule


def _rule_import(args: tuple) -> tuple | None:
    module = args[0] if args else ""
    if isinstance(module, str) and module.split(".")[0] == "canonical":
        return ("imports the reference module canonical", "stack", None)
    return None


def _rule_setattr(args: tuple) -> tuple | None:
    """Only special attributes are audited: code swaps, and re-classing modules or classes."""
    target, name = args[0], args[1]
    if name == "__code__":
        return ("replaces a function's __code__", "stack", None)
    if name == "__class__" and isinstance(target, (types.ModuleType, type)):
        path = getattr(target, "__file__", None)
        if not (isinstance(path, str) and _REAL(path) == _CANDIDATE):
            return (f"changes the class of {getattr(target, '__name__', '?')}", "direct", None)
    return None


def _rule_gc(args: tuple) -> tuple | None:
    return ("inspects the interpreter's object graph", "stack", None)


def _rule_command(args: tuple) -> tuple | None:
    text = " ".join(str(a) for a in args if isinstance(a, (str, bytes, list, tuple)))
    word = next((w for w in _COMMAND_WORDS if w in text), None)
    return (f"runs a command naming {word}", "stack", None) if word else None


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


def _stack_files():
    """co_filename of every frame above the audited call, innermost first, skipping our own frames."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name != __file__:
            yield name
        frame = frame.f_back


def _is_candidate_file(name: str) -> bool:
    if name == _CANDIDATE:
        return True
    return os.path.basename(name) == os.path.basename(_CANDIDATE) and _REAL(name) == _CANDIDATE


def _judge(finding: tuple) -> None:
    """Flag the finding if candidate code caused it: directly, or anywhere up the stack."""
    reason, scope, exempt_if_active = finding
    files = _stack_files()
    innermost = next(files, None)
    if innermost is None:
        return
    if scope == "direct":
        guilty = _is_candidate_file(innermost)
    else:
        rest = list(files)
        guilty = _is_candidate_file(innermost) or any(_is_candidate_file(name) for name in rest)
        if guilty and exempt_if_active and os.path.basename(innermost) in _SOURCE_READERS:
            # traceback/warning machinery reading the source of a frame that is running
            guilty = not any(_REAL(name) == exempt_if_active for name in rest)
    if guilty:
        _flag(reason)


def _audit(event: str, args: tuple) -> None:
    rule = _RULES.get(event)
    if rule is None or getattr(_tls, "busy", False):
        return
    _tls.busy = True
    try:
        finding = rule(args)
        if finding:
            _judge(finding)
    except Exception as exc:  # an exception here would break the audited call of an honest test
        _write_line(f"note audit rule for {event} failed: {type(exc).__name__}")
    finally:
        _tls.busy = False


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
    before = _state["hooks"]
    now = _hook_functions(config)
    if before - now:
        _flag("unregistered pytest hook implementations")
    added = [f for f in now - before if not _legitimate_late_hook(f)]
    if added:
        names = sorted(f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}" for f in added)
        _flag("registered foreign pytest hooks: " + ", ".join(names[:5]))


# ------------------------------------------------------- namespace inspection

def _import_bindings(source: str) -> tuple[set[str], set[str], bool]:
    """Names test.py binds by importing: (from other modules, from canonical, has a star import)."""
    other: set[str] = set()
    reference: set[str] = set()
    star = False
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                (reference if alias.name.split(".")[0] == "canonical" else other).add(bound)
        elif isinstance(node, ast.ImportFrom):
            from_reference = (node.module or "").split(".")[0] == "canonical"
            for alias in node.names:
                if alias.name == "*":
                    star = star or not from_reference
                else:
                    (reference if from_reference else other).add(alias.asname or alias.name)
    return other, reference, star


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
    by_file = _modules_by_file((_CANDIDATE, _TEST, _CANONICAL))
    candidates, tests, references = by_file[_CANDIDATE], by_file[_TEST], by_file[_CANONICAL]
    candidate_names = {m.__name__ for m in candidates}
    allowed, reference_names, star = _state["bindings"]
    for test_module in tests:
        for name in reference_names:
            value = vars(test_module).get(name)
            if isinstance(value, types.ModuleType) and value not in references:
                _flag(f"the test's reference module '{name}' is not canonical.py")
    skip = {id(m) for m in candidates} | {id(sys.modules[__name__])}
    for module in _reachable_modules(tests + references, skip):
        is_test = module in tests
        if not is_test and module not in references and _in_repo(module):
            continue  # the repository's own modules may re-export the target (package __init__ files)
        for name, value in list(vars(module).items()):
            if is_test and (name in allowed or (star and name not in reference_names)):
                continue
            if _defined_by_candidate(value, candidate_names):
                _flag(f"candidate code placed at {module.__name__}.{name}")


def _check_test_functions(items: list) -> None:
    for item in items:
        function = getattr(item, "function", None)
        code = getattr(function, "__code__", None)
        if code is None:
            continue
        _test_codes[item.nodeid] = code
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


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session) -> None:
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
                       "flags": list(_flags)}, sort_keys=True)
    mac = _MAC.copy()
    mac.update(body.encode("utf-8"))
    _write_line(f"seal {body} {mac.hexdigest()}")
