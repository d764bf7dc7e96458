"""Executor backends: same results in every mode, a failing job never stops the others."""
from __future__ import annotations

import importlib.util
import time
from concurrent.futures import wait

import pytest

from agent.parallel.executor import ExecutorError, make_executor, unwrap_error
from tests.executor_jobs import die_once, square_or_fail

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="ray not installed (optional extra)")
MODES = ["none", "threads", "processes", pytest.param("ray", marks=needs_ray)]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for this module (starting one takes seconds); executors then leave it running."""
    if not HAS_RAY:
        yield None
        return
    import ray

    from agent.parallel.executor import REPO_ROOT

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}})
    yield ray
    ray.shutdown()


@pytest.mark.parametrize("mode", MODES)
def test_failing_job_does_not_stop_the_others(mode: str, request) -> None:
    if mode == "ray":
        request.getfixturevalue("local_ray")
    executor = make_executor(mode, 2)
    try:
        send, drain = executor.channel()
        futures = {value: executor.submit(square_or_fail, value, send.tagged(value)) for value in range(6)}
        wait(futures.values(), timeout=120)
        errors = {v: unwrap_error(f.exception()) for v, f in futures.items() if f.exception() is not None}
        assert list(errors) == [3]
        assert isinstance(errors[3], ValueError) and "failed on purpose" in str(errors[3])
        assert {v: f.result() for v, f in futures.items() if v != 3} == {v: v * v for v in (0, 1, 2, 4, 5)}
        reports: list = []
        deadline = time.monotonic() + 30
        while len(reports) < 6 and time.monotonic() < deadline:
            reports += drain()
            time.sleep(0.05)
        assert sorted(reports, key=lambda r: r[0]) == [(v, {"value": v}) for v in range(6)]
    finally:
        assert executor.shutdown() is True


@needs_ray
def test_ray_retries_a_job_whose_worker_died(tmp_path, local_ray) -> None:
    executor = make_executor("ray", 1)
    try:
        future = executor.submit(die_once, str(tmp_path / "marker"))
        assert future.result(timeout=120) > 0
        assert (tmp_path / "marker").read_text() == "died once"
    finally:
        executor.shutdown()


def test_ray_missing_is_one_line(monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ExecutorError, match=r"pip install -r requirements-extras.txt") as info:
        make_executor("ray", 2)
    assert "\n" not in str(info.value)


def test_unknown_mode() -> None:
    with pytest.raises(ExecutorError, match="unknown parallel mode 'gpu'"):
        make_executor("gpu", 2)
