"""Where jobs run: in this process, in threads, in worker processes, or as Ray tasks.

Every backend has the same two-method surface: ``submit(fn, *args)`` returns a
``concurrent.futures.Future`` and ``shutdown(cancel=...)`` ends the workers, so
the scheduler is written once. A job that raises resolves its future with the
exception in every mode; the caller records it and carries on. ``channel()``
gives a picklable ``send`` that workers call to report progress, and a
``drain`` the driver polls.
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import signal
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing.managers import SyncManager
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
TERMINATE_GRACE_SEC = 3.0  # for a worker to kill its test run and clean up after SIGTERM
RAY_HINT = "pip install -r requirements-extras.txt (or pip install ray)"
PARALLEL_MODES = ("processes", "threads", "none", "ray")


class ExecutorError(Exception):
    """The backend cannot start (Ray missing or unreachable); one line naming the fix."""


class _Sender:
    """Picklable progress callback: puts ``(tag, message)`` on a queue; a failed report never fails a job."""

    def __init__(self, target: Any, tag: Any = None) -> None:
        self.target = target
        self.tag = tag

    def tagged(self, tag: Any) -> _Sender:
        return _Sender(self.target, tag)

    def __call__(self, message: Any) -> None:
        try:
            self.target.put((self.tag, message))
        except Exception:  # the driver may be shutting down; progress is best effort
            pass


def _drain(source: Any) -> list[Any]:
    """Everything queued so far; a queue whose manager is gone (shutdown, Ctrl-C) has nothing more."""
    items = []
    while True:
        try:
            items.append(source.get_nowait())
        except (queue.Empty, EOFError, OSError):
            return items


class InlineExecutor:
    """Runs each job at submit time in this process: deterministic order, easiest to debug."""

    mode = "none"

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def channel(self) -> tuple[_Sender, Callable[[], list]]:
        box: queue.SimpleQueue = queue.SimpleQueue()
        return _Sender(box), lambda: _drain(box)

    def shutdown(self, *, cancel: bool = False) -> bool:
        return True


class ThreadExecutor(InlineExecutor):
    """A thread pool: jobs spend their time waiting on model APIs and test subprocesses, so threads suffice."""

    mode = "threads"

    def __init__(self, max_workers: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="recode-job")

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self.pool.submit(fn, *args)

    def shutdown(self, *, cancel: bool = False) -> bool:
        """Threads cannot be killed: on cancel, returns False while jobs are still running."""
        self.pool.shutdown(wait=not cancel, cancel_futures=cancel)
        return not cancel or not any(t.is_alive() for t in getattr(self.pool, "_threads", ()))


def _ignore_sigint() -> None:
    """Leave Ctrl-C to the driver, which ends the workers itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


_terminating = False


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    """Unwind on the driver's terminate(), so a test run in flight is killed with its process tree
    and temporary folders are removed; a second SIGTERM kills outright."""
    global _terminating
    _terminating = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise SystemExit(128 + signum)


def _init_worker() -> None:
    _ignore_sigint()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """Run one job in a pool worker; once a terminate() has unwound it, end the worker instead of
    letting the pool hand it the next job."""
    try:
        return fn(*args)
    finally:
        if _terminating:
            os._exit(128 + signal.SIGTERM)


class ProcessExecutor(InlineExecutor):
    """Worker processes started by forkserver (spawn where unavailable), so no lock or thread is forked."""

    mode = "processes"

    def __init__(self, max_workers: int) -> None:
        methods = multiprocessing.get_all_start_methods()
        self.context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        self.pool = ProcessPoolExecutor(max_workers=max_workers, mp_context=self.context, initializer=_init_worker)
        self.manager: Any = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self.pool.submit(_in_worker, fn, *args)

    def channel(self) -> tuple[_Sender, Callable[[], list]]:
        if self.manager is None:
            manager = SyncManager(ctx=self.context)
            manager.start(_ignore_sigint)
            self.manager = manager
        box = self.manager.Queue()
        return _Sender(box), lambda: _drain(box)

    def shutdown(self, *, cancel: bool = False) -> bool:
        if cancel:
            workers = list(getattr(self.pool, "_processes", {}).values())
            settler = getattr(self.pool, "_executor_manager_thread", None)
            self.pool.shutdown(wait=False, cancel_futures=True)
            for process in workers:
                process.terminate()
            for process in workers:
                process.join(timeout=TERMINATE_GRACE_SEC)
                if process.is_alive():
                    process.kill()
                    process.join()
            # With its workers gone the pool fails their futures (BrokenProcessPool) from its own
            # thread; waiting for that thread means every future is settled when shutdown returns.
            if settler is not None:
                settler.join(timeout=TERMINATE_GRACE_SEC)
        else:
            self.pool.shutdown(wait=True)
        if self.manager is not None:
            self.manager.shutdown()
        return True


class RayExecutor:
    """Jobs as Ray tasks, on the cluster at ``address`` or on a local Ray started here.

    A job whose worker dies (node lost, OOM-killed) is retried by Ray
    (``max_retries``); a job that raises is not retried and resolves with its
    exception like in the other modes. The harness and dataset must be at the
    same paths on every node (a shared filesystem), as results are written
    there directly.
    """

    mode = "ray"

    def __init__(self, max_workers: int, address: str | None = None, num_cpus: float = 1.0,
                 num_gpus: float = 0.0, max_retries: int = 3) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError(f"parallel-mode ray needs the optional Ray package: {RAY_HINT}") from None
        self.ray = ray
        self.options = {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_retries": max_retries,
                        "retry_exceptions": False}
        self.refs: dict[Future, Any] = {}
        self.remotes: dict[Callable, Any] = {}
        self.owns_runtime = not ray.is_initialized()
        if self.owns_runtime:
            self._start(max_workers, address, num_cpus)

    def _start(self, max_workers: int, address: str | None, num_cpus: float) -> None:
        settings: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
            "runtime_env": {"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
        }
        if address is None:
            settings["num_cpus"] = max(1, int(max_workers * max(num_cpus, 1)))
        try:
            self.ray.init(address=address, **settings)
        except Exception as exc:  # Ray raises several types for an unreachable or refused cluster
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ExecutorError(f"could not start {where}: {first_line}; check ray-address") from None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        remote = self.remotes.get(fn)
        if remote is None:
            remote = self.remotes[fn] = self.ray.remote(**self.options)(fn)
        ref = remote.remote(*args)
        future = ref.future()
        self.refs[future] = ref
        future.add_done_callback(lambda done: self.refs.pop(done, None))
        return future

    def channel(self) -> tuple[_Sender, Callable[[], list]]:
        from ray.util.queue import Queue

        box = Queue()
        return _Sender(box), lambda: box.get_nowait_batch(box.qsize())

    def shutdown(self, *, cancel: bool = False) -> bool:
        if cancel:
            for ref in list(self.refs.values()):
                self.ray.cancel(ref, force=True)
        if self.owns_runtime:
            self.ray.shutdown()
        return True


def unwrap_error(exc: BaseException) -> BaseException:
    """The job's own exception: Ray wraps it in a RayTaskError whose ``cause`` is the original."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def make_executor(mode: str, max_workers: int, *, ray_address: str | None = None, ray_num_cpus: float = 1.0,
                  ray_num_gpus: float = 0.0) -> InlineExecutor | RayExecutor:
    """The backend for ``mode`` (processes | threads | none | ray)."""
    if mode == "none":
        return InlineExecutor()
    if mode == "threads":
        return ThreadExecutor(max_workers)
    if mode == "processes":
        return ProcessExecutor(max_workers)
    if mode == "ray":
        return RayExecutor(max_workers, ray_address, ray_num_cpus, ray_num_gpus)
    raise ExecutorError(f"unknown parallel mode '{mode}'; choose one of {', '.join(PARALLEL_MODES)}")
