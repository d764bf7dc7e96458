"""Reference use is caught by what the candidate does, however it spells it; honest candidates stay green."""
from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from agent.runner.core import RunnerOptions, run_candidate
from agent.job.record import turn_solved
from agent.runner.sandbox import bwrap_problem
from agent.runner.verdict import judge, read_channel
from tests.runner_testlib import CANONICAL, TEST_CASES, WRONG, make_task

OPTIONS = RunnerOptions(sandbox="off", timeout_sec=20, memory_mb=1024, max_processes=64)

# The sample tasks' style: the reference first, the target read by attribute when a test runs.
ATTRIBUTE_TEST = '''\
import canonical
from pkg import target


def test_add():
    assert target.add(2, 3) == canonical.add(2, 3)


def test_scale():
    assert target.scale([1, 2], 3) == canonical.scale([1, 2], 3)
'''

FIND = '''\
import sys


def _ref():
    """Whatever loaded module, other than this one, defines add and scale."""
    return next(m for m in list(sys.modules.values())
                if m is not sys.modules[__name__] and hasattr(m, "add") and hasattr(m, "scale")
                and str(getattr(m, "__file__", "")).endswith(".py"))
'''

# name -> candidate. Each must end as reference_access with a line of evidence.
HOSTILE = {
    "code_copy_at_import": FIND + "import types\nadd = types.FunctionType(_ref().add.__code__, globals())\n"
                                   "scale = types.FunctionType(_ref().scale.__code__, globals())\n",
    "marshal_round_trip": FIND + "import marshal, types\n\n\ndef _copy(f):\n"
                                  "    return types.FunctionType(marshal.loads(marshal.dumps(f.__code__)), {})\n\n\n"
                                  "def add(a, b):\n    return _copy(_ref().add)(a, b)\n\n\n"
                                  "def scale(v, k):\n    return _copy(_ref().scale)(v, k)\n",
    "code_copy": FIND + "import types\n\n\ndef add(a, b):\n"
                         "    return types.FunctionType(_ref().add.__code__, {})(a, b)\n\n\n"
                         "def scale(v, k):\n    return types.FunctionType(_ref().scale.__code__, {})(v, k)\n",
    "caller_globals": "import sys\n\n\ndef add(a, b):\n    return sys._getframe(1).f_globals['canon' + 'ical'].add(a, b)\n"
                       "\n\ndef scale(v, k):\n    return sys._getframe(1).f_globals['canon' + 'ical'].scale(v, k)\n",
    "exec_loader_source": FIND + "_space = {}\n\n\ndef _load():\n    if not _space:\n        m = _ref()\n"
                                   "        exec(compile(m.__loader__.get_data(m.__file__), '<mine>', 'exec'), _space)\n"
                                   "    return _space\n\n\ndef add(a, b):\n    return _load()['add'](a, b)\n\n\n"
                                   "def scale(v, k):\n    return _load()['scale'](v, k)\n",
    "sys_modules_wrap": FIND + "def add(a, b):\n    return _ref().add(a, b)\n\n\n"
                               "def scale(v, k):\n    return _ref().scale(v, k)\n",
    "module_getattr": FIND + "def __getattr__(name):\n    return getattr(_ref(), name)\n",
    "computed_import": "import importlib\n\n\ndef add(a, b):\n    return importlib.import_module(''.join(['canon', 'ical'])).add(a, b)\n"
                       "\n\ndef scale(v, k):\n    return importlib.import_module(''.join(['canon', 'ical'])).scale(v, k)\n",
    "pickle_round_trip": FIND + "import pickle\n\n\ndef add(a, b):\n    return pickle.loads(pickle.dumps(_ref().add))(a, b)\n"
                                "\n\ndef scale(v, k):\n    return pickle.loads(pickle.dumps(_ref().scale))(v, k)\n",
    "thread_pool": FIND + "from concurrent.futures import ThreadPoolExecutor\n\n\ndef add(a, b):\n"
                          "    with ThreadPoolExecutor(1) as pool:\n        return pool.submit(_ref().add, a, b).result()\n"
                          "\n\ndef scale(v, k):\n    with ThreadPoolExecutor(1) as pool:\n"
                          "        return pool.submit(_ref().scale, v, k).result()\n",
    "raw_thread": FIND + "import _thread, time\n\n\ndef _run(f, *args):\n    box = []\n"
                         "    _thread.start_new_thread(lambda: box.append(f(*args)), ())\n"
                         "    while not box:\n        time.sleep(0.001)\n    return box[0]\n\n\n"
                         "def add(a, b):\n    return _run(_ref().add, a, b)\n\n\ndef scale(v, k):\n    return _run(_ref().scale, v, k)\n",
    "c_level_callbacks": FIND + "def add(a, b):\n    return next(map(_ref().add, [a], [b]))\n\n\n"
                                "def scale(v, k):\n    return sorted([v], key=lambda x: 0) and next(map(_ref().scale, [v], [k]))\n",
}

# Module-level captures: the reference is already loaded when the candidate is imported.
REFERENCE_FIRST_TEST = '''\
import canonical
from pkg.target import add, scale


def test_add():
    assert add(2, 3) == canonical.add(2, 3)


def test_scale():
    assert scale([1, 2], 3) == canonical.scale([1, 2], 3)
'''
CAPTURED = {
    "partial_reexport": FIND + "import functools\nadd = functools.partial(_ref().add)\nscale = _ref().scale\n",
    "wraps_wrapper": FIND + "import functools\n_r = _ref()\n\n\n@functools.wraps(_r.add)\ndef add(*a):\n    return _r.add(*a)\n"
                            "\n\n@functools.wraps(_r.scale)\ndef scale(*a):\n    return _r.scale(*a)\n",
}

# Routes to the reference through a capability research code never needs: denied before the reference is
# reached, so the run is tampered, with the capability and the candidate's line as evidence. The test loads the
# reference first, so a route may reach it at import time as well as at run time.
DENIED_FIRST = {
    "gc_walk": ("import gc\n\n\ndef _find(name):\n    return next(o for o in gc.get_objects() if callable(o) and "
                "getattr(o, '__name__', '') == name\n                and getattr(o, '__module__', '') == 'canon' + 'ical')"
                "\n\n\ndef add(a, b):\n    return _find('add')(a, b)\n\n\ndef scale(v, k):\n    return _find('scale')(v, k)\n",
                "target.py:5 walks the interpreter's object graph (gc.get_objects)"),
}


SCALER_CLASS = '''\
class Scaler:
    def __init__(self, k):
        self.k = k

    def scale(self, values):
        return [v * self.k for v in values]


'''
FORWARDERS = '''\
def apply(scaler, values):
    return scaler.scale(values)


def call(function, a, b):
    return function(a, b)


def drain(generator):
    return list(generator)
'''
CLASS_CANONICAL = (SCALER_CLASS + "def add(a, b):\n    return a + b\n\n\n" + FORWARDERS
                   + "\n\ndef numbers(n):\n    yield from range(n)\n")
CLASS_TEST = '''\
import canonical
from pkg import target


def test_scale():
    assert target.Scaler(3).scale([1, 2]) == canonical.Scaler(3).scale([1, 2])


def test_given():
    assert target.apply(canonical.Scaler(2), [1, 2]) == [2, 4]
    assert target.call(canonical.add, 2, 3) == 5
    assert target.drain(canonical.numbers(3)) == [0, 1, 2]
    assert target.apply([canonical.Scaler(2)][0], [3]) == [6]
'''
CLASS_CASES = ("test_scale", "test_given")
HONEST_CLASS = SCALER_CLASS + FORWARDERS  # the same behaviour written by the candidate
CLASS_HOSTILE = {
    "subclass": FIND.replace('"add"', '"Scaler"').replace('"scale"', '"numbers"')
    + "class Scaler(_ref().Scaler):\n    pass\n\n\n" + FORWARDERS,
    "subclass_at_call": FIND.replace('"add"', '"Scaler"').replace('"scale"', '"numbers"')
    + "def __getattr__(name):\n    if name == 'Scaler':\n        return type('Scaler', (_ref().Scaler,), {})\n"
      "    raise AttributeError(name)\n\n\n" + FORWARDERS,
}

HONEST = {
    "plain": CANONICAL,
    "busy_but_honest": "import functools, gc, threading\nfrom concurrent.futures import ThreadPoolExecutor\n"
                       "from dataclasses import dataclass\n\n\n@dataclass\nclass Pair:\n    a: int\n    b: int\n\n\n"
                       "def _plus(a, b):\n    return a + b\n\n\n"
                       "def add(a, b):\n    gc.collect()\n    with ThreadPoolExecutor(1) as pool:\n"
                       "        return pool.submit(_plus, Pair(a, b).a, b).result()\n\n\n"
                       "def scale(values, k):\n    return list(map(functools.partial(lambda v, k: v * k, k=k), values))\n",
}


def _run(tmp_path: Path, candidate: str, *, test_py: str = ATTRIBUTE_TEST, canonical: str = CANONICAL,
         cases: tuple[str, ...] = TEST_CASES) -> dict:
    dataset = make_task(tmp_path / "dataset", test_py=test_py, canonical=canonical, test_cases=cases)
    return run_candidate(dataset, 1, candidate, OPTIONS)


def _assert_caught(result: dict) -> None:
    assert result["status"] == "reference_access", (result["status"], result["failure_messages"][:1],
                                                    result["output"][-2000:])
    evidence = result["failure_messages"][0].splitlines()[0]
    assert evidence.startswith("session: reference access: ") and len(evidence) > len("session: reference access: ")
    assert not turn_solved(result) and not any(result["test_summary"].values())


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_reference_use_at_run_time_is_caught(name: str, tmp_path: Path) -> None:
    _assert_caught(_run(tmp_path, HOSTILE[name]))


@pytest.mark.parametrize("name", sorted(DENIED_FIRST))
def test_reference_routes_through_denied_capabilities_are_tampering(name: str, tmp_path: Path) -> None:
    source, evidence = DENIED_FIRST[name]
    result = _run(tmp_path, source, test_py=REFERENCE_FIRST_TEST)
    assert result["status"] == "tampered", (result["status"], result["failure_messages"][:1])
    assert result["failure_messages"][0].startswith(f"session: tampering: {evidence}")
    assert not turn_solved(result) and not any(result["test_summary"].values())


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_reference_captured_at_import_is_caught(name: str, tmp_path: Path) -> None:
    _assert_caught(_run(tmp_path, CAPTURED[name], test_py=REFERENCE_FIRST_TEST))


@pytest.mark.parametrize("name", sorted(CLASS_HOSTILE))
def test_reference_classes_handed_out_are_caught(name: str, tmp_path: Path) -> None:
    _assert_caught(_run(tmp_path, CLASS_HOSTILE[name], test_py=CLASS_TEST, canonical=CLASS_CANONICAL,
                        cases=CLASS_CASES))


def test_module_getattr_under_from_import_is_caught(tmp_path: Path) -> None:
    _assert_caught(_run(tmp_path, HOSTILE["module_getattr"], test_py=REFERENCE_FIRST_TEST))


def test_evidence_names_the_candidate_line(tmp_path: Path) -> None:
    source = HOSTILE["sys_modules_wrap"]
    line = source.splitlines().index("    return _ref().add(a, b)") + 1
    result = _run(tmp_path, source)
    assert f"target.py:{line} (add) runs the reference's add" in result["failure_messages"][0]


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_candidates_pass(name: str, tmp_path: Path) -> None:
    result = _run(tmp_path, HONEST[name])
    assert result["status"] == "passed", (result["failure_messages"][:1], result["output"][-2000:])


def test_wrong_candidate_fails_normally(tmp_path: Path) -> None:
    assert _run(tmp_path, WRONG)["status"] == "failed"


def test_reference_objects_given_by_the_test_are_fine(tmp_path: Path) -> None:
    result = _run(tmp_path, HONEST_CLASS, test_py=CLASS_TEST, canonical=CLASS_CANONICAL, cases=CLASS_CASES)
    assert result["status"] == "passed", (result["failure_messages"][:1], result["output"][-2000:])


def test_access_then_hang_is_still_reference_access(tmp_path: Path) -> None:
    """The evidence is on the channel the moment it happens: a run that then times out still shows it."""
    candidate = HOSTILE["sys_modules_wrap"].replace("    return _ref().add(a, b)",
                                                    "    _ref().add(a, b)\n    while True:\n        pass")
    dataset = make_task(tmp_path / "dataset", test_py=ATTRIBUTE_TEST)
    # the limit leaves a loaded two-core machine time to start pytest and import the candidate before it hangs
    result = run_candidate(dataset, 1, candidate, RunnerOptions(sandbox="off", timeout_sec=20))
    _assert_caught(result)


@pytest.mark.skipif(bwrap_problem() is not None, reason=f"no working bubblewrap: {bwrap_problem()}")
@pytest.mark.parametrize("name", ["sys_modules_wrap", "caller_globals", "module_getattr"])
def test_issue_candidates_in_the_sandbox(name: str, tmp_path: Path) -> None:
    dataset = make_task(tmp_path / "dataset", test_py=ATTRIBUTE_TEST)
    candidate = HOSTILE[name] if name in HOSTILE else DENIED_FIRST[name][0]
    result = run_candidate(dataset, 1, candidate, RunnerOptions(sandbox="required", timeout_sec=20))
    if name in HOSTILE:
        _assert_caught(result)
    else:
        assert result["status"] == "tampered" and DENIED_FIRST[name][1] in result["failure_messages"][0]


def test_channel_access_lines_and_sealed_access_are_read() -> None:
    key = b"k" * 32
    body = json.dumps({"access": ["sealed evidence"], "exitstatus": 0, "flags": [], "junit_sha256": None,
                       "tests": []}, sort_keys=True)
    seal = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    record = read_channel(f"hello\naccess live evidence\nseal {body} {seal}\n".encode(), key)
    assert record.access == ("live evidence", "sealed evidence")
    result = judge(expected=TEST_CASES, exit_code=0, junit=None, record=record, duration=0.1, output="")
    assert result["status"] == "reference_access"
    assert result["failure_messages"] == ["session: reference access: live evidence"]


RCB_PSET = Path(__file__).resolve().parent / "fixtures" / "rcb" / "pset"
RCB_HOSTILE = '''\
import importlib

_reference = importlib.import_module(__name__ + "_ref")


def __getattr__(name):
    return getattr(_reference, name)
'''


@pytest.mark.slow
def test_researchcodebench_references_are_watched(tmp_path: Path) -> None:
    """Papers whose tests import ``<stem>_ref`` copies (served from canonical.py or embedded in the test):
    gold stays green, a candidate forwarding to the copy is caught."""
    from scripts.import_researchcodebench import main as import_main
    from agent.task.dataset import DatasetManager

    assert import_main(["--pset", str(RCB_PSET), "--out", str(tmp_path / "rcb")]) == 0
    dataset = DatasetManager(tmp_path / "rcb")
    options = RunnerOptions(sandbox="off", timeout_sec=60, env_backend="current")
    papers = {}
    for line in (tmp_path / "rcb" / "researchcodebench_map.jsonl").read_text().splitlines():
        row = json.loads(line)
        papers.setdefault(row["paper"], row["index"])
    assert len(papers) == 2
    for index in papers.values():
        gold = run_candidate(dataset, index, dataset.canonical(index), options)
        assert gold["status"] == "passed", (index, gold["failure_messages"][:1])
        _assert_caught(run_candidate(dataset, index, RCB_HOSTILE, options))
