"""Honest code the guard once convicted (issue 29): each case is a small real task, a candidate and the test that
checks it, and must be graded ``passed`` under the sandbox. Each pattern is ordinary research or test code:
the candidate's own classes with comparison and truth dunders reaching the test's asserts, mocks the test builds,
the test freezing time or declaring a module global, a library (torch) acting on the candidate's classes,
metaprogramming inside the candidate, and a suite using processes, threads and temporary files."""
from __future__ import annotations

import importlib.util

from pathlib import Path

import pytest

from agent.runner.core import RunnerOptions, run_candidate
from tests.guard_testlib import SANDBOX
from tests.runner_testlib import make_task

OWN_DUNDERS = '''\
import heapq
from collections import OrderedDict
from dataclasses import dataclass


class LRU(OrderedDict):
    """A bounded mapping; equal to another mapping with the same items in the same order."""

    def __init__(self, capacity):
        super().__init__()
        self.capacity = capacity

    def put(self, key, value):
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.capacity:
            self.popitem(last=False)

    def __eq__(self, other):
        return list(self.items()) == list(other.items())

    __hash__ = None


class Job:
    def __init__(self, priority, name):
        self.priority, self.name = priority, name

    def __lt__(self, other):
        return self.priority < other.priority


class Pending:
    """An iterator wrapper that is true while items remain."""

    def __init__(self, items):
        self._items = list(items)

    def __bool__(self):
        return bool(self._items)

    def __iter__(self):
        return self

    def __next__(self):
        if not self._items:
            raise StopIteration
        return self._items.pop(0)


@dataclass
class Stats:
    mean: float
    count: int


class Field:
    """A query language's field: ``Field("x") == 3`` builds a condition instead of answering."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return Condition(self.name, other)

    __hash__ = object.__hash__


class Condition:
    def __init__(self, name, value):
        self.name, self.value = name, value

    def __call__(self, row):
        return row.get(self.name) == self.value


class CharsNotIn:
    """A grammar element: ``+`` chains elements, ``==`` with a string tells whether it matches (pyparsing's)."""

    def __init__(self, excluded, parts=None):
        self.excluded, self.parts = excluded, parts or [self]

    def __add__(self, other):
        return CharsNotIn(self.excluded, self.parts + other.parts)

    def __eq__(self, other):
        return isinstance(other, str) and all(not set(part.excluded) & set(other) for part in self.parts)

    __hash__ = object.__hash__


def schedule(jobs):
    heap = [Job(p, n) for p, n in jobs]
    heapq.heapify(heap)
    return [heapq.heappop(heap).name for _ in range(len(heap))]


def stats(values):
    return Stats(sum(values) / len(values), len(values))


def add(a, b):
    return a + b


def scale(values, k):
    return [v * k for v in values]
'''

OWN_DUNDERS_TEST = '''\
from pkg.target import LRU, CharsNotIn, Field, Job, Pending, Stats, schedule, stats


def test_lru():
    cache = LRU(2)
    for key in "abc":
        cache.put(key, key.upper())
    assert cache == {"b": "B", "c": "C"}
    assert not (cache == {"a": "A"})


def test_heap_items():
    assert schedule([(3, "c"), (1, "a"), (2, "b")]) == ["a", "b", "c"]
    assert Job(1, "x") < Job(2, "y")


def test_pending():
    pending = Pending([1, 2])
    assert pending
    assert list(pending) == [1, 2]
    assert not pending


def test_dataclass():
    assert stats([1, 2, 3]) == Stats(2.0, 3)


def test_query_field():
    condition = Field("x") == 3
    assert condition({"x": 3}) and not condition({"x": 4})


def test_grammar_built_with_plus():
    body = CharsNotIn(")") + CharsNotIn("(")
    assert body.parts[0].excluded == ")" and len(body.parts) == 2
'''

MOCKS = '''\
from collections.abc import Sequence


class Store(Sequence):
    """diskcache's Deque in small: compared as a sequence, so comparing it iterates its storage."""

    def __init__(self, storage):
        self._storage = storage

    def __len__(self):
        return len(self._storage)

    def __getitem__(self, index):
        return self._storage[index]

    def __iter__(self):
        for key in self._storage.keys():
            try:
                yield self._storage[key]
            except KeyError:
                pass

    def __eq__(self, other):
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __lt__(self, other):
        return isinstance(other, Sequence) and list(self) < list(other)

    __hash__ = None


def notify(client, users):
    for user in users:
        client.send(user, "hello")
    return client.flush()


def add(a, b):
    return a + b


def scale(values, k):
    return [v * k for v in values]
'''

MOCKS_TEST = '''\
from unittest import mock

from pkg.target import Store, notify


def test_iterating_through_the_mock_the_test_patched_in():
    store = Store({"a": 1})
    storage = mock.MagicMock()
    storage.keys.return_value = ["a", "b", "c"]
    storage.__getitem__.side_effect = [KeyError, 101, 102]
    with mock.patch.object(store, "_storage", storage):
        assert list(iter(store)) == [101, 102]
    assert storage.__getitem__.call_count == 3


def test_notify_with_a_mock():
    client = mock.MagicMock()
    client.flush.return_value = 2
    assert notify(client, ["a", "b"]) == 2
    client.send.assert_has_calls([mock.call("a", "hello"), mock.call("b", "hello")])
    assert client.send.call_count == 2


def test_notify_with_autospec():
    class Client:
        def send(self, user, text): ...
        def flush(self): ...
    client = mock.create_autospec(Client, instance=True)
    client.flush.return_value = mock.sentinel.flushed
    assert notify(client, ["x"]) is mock.sentinel.flushed
    client.send.assert_called_once_with("x", mock.ANY)
'''

FROZEN_TIME = '''\
import datetime


def stamp(event):
    return f"{datetime.datetime.now():%Y-%m-%d} {event}"


def add(a, b):
    return a + b


def scale(values, k):
    return [v * k for v in values]
'''

FROZEN_TIME_TEST = '''\
import datetime

import pytest

import pkg.target
from pkg.target import stamp

COUNTER = 0


class _Frozen(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2024, 1, 2, 3, 4, 5)


@pytest.fixture
def frozen():
    real = datetime.datetime
    datetime.datetime = _Frozen
    yield
    datetime.datetime = real


def test_stamp(frozen):
    assert stamp("run") == "2024-01-02 run"


def test_stamp_monkeypatched(monkeypatch):
    monkeypatch.setattr(pkg.target.datetime, "datetime", _Frozen)
    assert stamp("x") == "2024-01-02 x"


def test_freezegun():
    freezegun = pytest.importorskip("freezegun")
    with freezegun.freeze_time("2023-05-06"):
        assert stamp("f") == "2023-05-06 f"


def test_global():
    global COUNTER
    COUNTER += 1
    global LATE
    LATE = stamp("late")
    assert COUNTER == 1 and LATE.endswith("late")
'''

TORCH = '''\
import torch


class SignSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(torch.sign(p.grad), alpha=-group["lr"])


def train(model, inputs, steps=2, lr=0.5):
    """The optimizer is built here, in the candidate's frame (torch wraps its step as it is made)."""
    opt = SignSGD(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        model(inputs).sum().backward()
        opt.step()
    return model


class Affine(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.register_buffer("shift", torch.zeros(n))

    def forward(self, x):
        return x * self.weight + self.shift


def add(a, b):
    return a + b


def scale(values, k):
    return [v * k for v in values]
'''

TORCH_TEST = '''\
import torch

from pkg.target import Affine, SignSGD, train


def test_train():
    model = train(Affine(2), torch.tensor([1.0, -1.0]))
    assert torch.allclose(model.weight, torch.tensor([0.0, 2.0]))


def test_step():
    model = Affine(3)
    opt = SignSGD(model.parameters(), lr=0.5)
    model(torch.tensor([1.0, -2.0, 3.0])).sum().backward()
    opt.step()
    assert torch.allclose(model.weight, torch.tensor([0.5, 1.5, 0.5]))
    opt.zero_grad()
    assert model.weight.grad is None or torch.all(model.weight.grad == 0)


def test_against_the_reference_optimizer():
    import canonical
    ours, theirs = Affine(2), canonical.Affine(2)
    for model, kind in ((ours, SignSGD), (theirs, canonical.SignSGD)):
        opt = kind(model.parameters(), lr=0.5)
        model(torch.tensor([1.0, -1.0])).sum().backward()
        opt.step()
    assert torch.equal(ours.weight, theirs.weight)


def test_state_dict():
    model = Affine(2)
    assert set(model.state_dict()) == {"weight", "shift"}
    assert torch.equal(model(torch.ones(2)), torch.ones(2))
'''

METAPROGRAMMING = '''\
import ctypes
import functools
import inspect
import sys
import types


class _Pair(ctypes.Structure):
    """A C layout, as wrappers of platform calls declare them (nothing is read from or written to raw memory)."""
    _fields_ = [("a", ctypes.c_int), ("b", ctypes.c_int)]


def packed_sum(a, b):
    pair = _Pair(a, b)
    return pair.a + pair.b


def _with_signature(function, names):
    """A function with the named parameters that calls ``function`` (copying a signature, as libraries do)."""
    args = ", ".join(names)
    code = compile(f"def _f({args}):\\n    return _target({args})\\n", "<generated>", "exec")
    namespace = {"_target": function}
    exec(code, namespace)
    return functools.wraps(function)(namespace["_f"])


def _caller_name():
    """Its own frames: the function that called this one (a frame of the candidate's too)."""
    frame = inspect.currentframe().f_back
    try:
        return frame.f_code.co_name
    finally:
        del frame


def who_calls():
    return _caller_name()


def _copy(function, name):
    """A copy of one of its own functions under another name (boltons' funcutils copies functions so)."""
    return types.FunctionType(function.__code__, function.__globals__, name, function.__defaults__,
                              function.__closure__)


def caller_module():
    """The module that calls it, as sentinel and registry helpers name their values (boltons' make_sentinel)."""
    return sys._getframe(1).f_globals.get("__name__")


def evaluate(expression, **values):
    return eval(compile(expression, "<expr>", "eval"), {"__builtins__": {}}, values)


def _add(*args):
    return args[0] + args[1]


add = _with_signature(_add, ["a", "b"])


def _scale(values, k):
    return [v * k for v in values]


scale = _copy(_scale, "scale")
'''

METAPROGRAMMING_TEST = '''\
import inspect

from pkg.target import add, caller_module, evaluate, packed_sum, scale, who_calls


def test_generated_signature():
    assert add(2, 3) == 5
    assert list(inspect.signature(add, follow_wrapped=False).parameters) == ["a", "b"]


def test_eval():
    assert evaluate("x * y + 1", x=3, y=4) == 13


def test_own_frames():
    assert who_calls() == "who_calls"


def test_callers_module_name():
    assert caller_module() == __name__


def test_c_structure():
    assert packed_sum(2, 3) == 5


def test_copied_function():
    assert scale([1, 2], 3) == [3, 6] and scale.__name__ == "scale"
'''

PROCESSES = '''\
import multiprocessing
import os
import tempfile
import threading


def _square(x):
    return x * x


def squares(values, method):
    with multiprocessing.get_context(method).Pool(2) as pool:
        return pool.map(_square, values)


def threaded_sum(values):
    total, lock = [0], threading.Lock()

    def work(v):
        with lock:
            total[0] += v
    threads = [threading.Thread(target=work, args=(v,)) for v in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return total[0]


def roundtrip(text):
    with tempfile.NamedTemporaryFile("w+", suffix=".txt", delete=False) as handle:
        handle.write(text)
        name = handle.name
    with open(name) as handle:
        back = handle.read()
    os.remove(name)
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "x"), "w") as handle:
            handle.write(back)
    return back


def add(a, b):
    return a + b


def scale(values, k):
    return [v * k for v in values]
'''

PROCESSES_TEST = '''\
import multiprocessing

import pytest

from pkg.target import roundtrip, squares, threaded_sum


def test_pool_spawn():
    assert squares([1, 2, 3], "spawn") == [1, 4, 9]


def test_pool_fork():
    assert squares([1, 2, 3], "fork") == [1, 4, 9]


def test_pool_forkserver():
    assert squares([1, 2, 3], "forkserver") == [1, 4, 9]


def test_process_queue():
    queue = multiprocessing.Queue()
    process = multiprocessing.Process(target=queue.put, args=(7,))
    process.start()
    assert queue.get(timeout=30) == 7
    process.join()
    assert process.exitcode == 0


def test_threads():
    assert threaded_sum(range(10)) == 45


def test_tempfiles(tmp_path):
    assert roundtrip("abc") == "abc"
    (tmp_path / "f").write_text("x")
'''

STARRED_AND_GENERATED = '''\
"""Names the test takes with a star import (funcy's tests do), and an ``__init__`` built from source under no
file's name and run with globals of its own (attrs builds its methods so)."""


def memoize(function):
    cache = {}

    def wrapper(*args):
        if args not in cache:
            cache[args] = function(*args)
        return cache[args]
    return wrapper


def _method(name, source):
    namespace = {}
    eval(compile(source, "", "exec"), namespace)
    return namespace[name]


class Point:
    __init__ = _method("__init__", "def __init__(self, x, y):\\n    self.x = x\\n    self.y = y\\n")

    def norm1(self):
        return abs(self.x) + abs(self.y)


def monkey(owner):
    """A decorator that patches ``owner`` with the function it decorates (funcy's ``monkey``)."""
    def decorator(function):
        function.original = getattr(owner, function.__name__, None)
        setattr(owner, function.__name__, function)
        return function
    return decorator


def add(a, b):
    return a + b
'''

STARRED_AND_GENERATED_TEST = '''\
import gc
import sys

from pkg.target import *


@memoize
def _square(x):
    return x * x


def test_star_imported_decorator():
    assert _square(3) == 9 and _square(3) == 9 and add(2, 3) == 5


def test_generated_init():
    assert Point(3, -4).norm1() == 7


def test_gc_callback_the_test_leaves():
    seen = []

    def on_gc(phase, info):  # a library the test uses may install one on first use, as hypothesis does
        seen.append(phase)
    gc.callbacks.insert(0, on_gc)
    gc.collect()
    assert "start" in seen


def double(x):
    return 2 * x


def test_the_test_asks_to_patch_its_module():
    @monkey(sys.modules[__name__])
    def double(x):
        return double.original(x) + 1

    assert double(3) == 7
'''

SPELLED_NOT_DONE = '''\
"""Capabilities spelled but not used on anything not its own: pyparsing walks a traceback to name a failing
parse action, boltons reads frames to format them, a Windows-only branch loads a DLL with ctypes."""
import sys
import traceback

if sys.platform == "win32":  # never runs here: only the static notes see it
    import ctypes
    _KERNEL = ctypes.cdll.LoadLibrary("kernel32")


def raised_in(error):
    return [frame.f_code.co_name for frame, _ in traceback.walk_tb(error.__traceback__)]


def locals_below(tb):
    """The names each finished frame of a traceback holds (boltons' tbutils shows their values)."""
    names = []
    while tb is not None:
        names.append(sorted(tb.tb_frame.f_locals))
        tb = tb.tb_next
    return names


def own_locals():
    marker = 1
    return sorted(name for name in sys._getframe().f_locals if name == "marker")


def add(a, b):
    return a + b
'''

SPELLED_NOT_DONE_TEST = '''\
from pkg.target import add, locals_below, own_locals, raised_in


def _fail():
    raise ValueError("x")


def _traceback():
    def inner(depth):
        secret = depth * 2
        raise KeyError(secret)
    try:
        inner(21)
    except KeyError as error:
        return error.__traceback__


def test_locals_of_a_finished_traceback():
    assert locals_below(_traceback()) == [["inner"], ["depth", "secret"]]


def test_walk_tb():
    try:
        _fail()
    except ValueError as error:
        assert raised_in(error) == ["test_walk_tb", "_fail"]


def test_own_locals():
    assert own_locals() == ["marker"] and add(1, 2) == 3
'''


CASES = {
    "own dunders reach the asserts": (OWN_DUNDERS, OWN_DUNDERS_TEST),
    "mocks the test creates": (MOCKS, MOCKS_TEST),
    "the test freezes time and declares a global": (FROZEN_TIME, FROZEN_TIME_TEST),
    "torch optimizer and module subclasses": (TORCH, TORCH_TEST),
    "metaprogramming in the candidate": (METAPROGRAMMING, METAPROGRAMMING_TEST),
    "processes, threads and temporary files": (PROCESSES, PROCESSES_TEST),
    "star imports, generated code, the test's gc callback, the test patching its module": (
        STARRED_AND_GENERATED, STARRED_AND_GENERATED_TEST),
    "capabilities spelled, not used on others": (SPELLED_NOT_DONE, SPELLED_NOT_DONE_TEST),
}


def _test_names(test_py: str) -> tuple[str, ...]:
    return tuple(line[4:line.index("(")] for line in test_py.splitlines() if line.startswith("def test_"))


NEEDS = {"the test freezes time and declares a global": "freezegun", "torch optimizer and module subclasses": "torch"}


def _case(name: str) -> object:
    """The case, skipped with a reason when the library its test imports is not installed (core install)."""
    needed = NEEDS.get(name)
    missing = needed is not None and importlib.util.find_spec(needed) is None
    return pytest.param(name, marks=pytest.mark.skipif(missing, reason=f"{needed} is not installed (its extra)"))


@pytest.mark.parametrize("name", [_case(name) for name in CASES])
def test_honest_task_passes(tmp_path: Path, name: str) -> None:
    candidate, test_py = CASES[name]
    dataset = make_task(tmp_path / "honest dataset", test_py=test_py, canonical=candidate,
                        test_cases=_test_names(test_py))
    result = run_candidate(dataset, 1, candidate, RunnerOptions(sandbox=SANDBOX, timeout_sec=300))
    assert result["status"] == "passed", (result["status"], result["failure_messages"][:3])
