"""Where jobs and their test runs run: in this process, in threads, with a pool of test processes, or on Ray.

Every backend satisfies :class:`Executor`: ``submit(fn, *args)`` returns a
``concurrent.futures.Future``, ``shutdown(cancel=...)`` ends the workers, and
``channel()`` gives a picklable ``send`` that jobs call to report progress and
a ``drain`` the driver polls, so the scheduler is written once. A job that
raises resolves its future with the exception in every mode; the caller
records it and carries on.

Jobs spend their time waiting on model APIs, so the local modes run them as
threads of this process (a waiting job costs a thread, not a process) and
send their test runs through the executor's test slots (``agent/parallel/slots.py``):

* ``none``: one job at a time, in the caller's thread (deterministic order, easiest to debug);
* ``threads``: up to ``max_workers`` job threads; a test run's preparation and verdict run in its job's thread;
* ``processes``: up to ``max_workers`` job threads; each test run is prepared and judged in a pool of
  worker processes, one per slot, so the driver's interpreter stays free for the jobs;
* ``ray``: each job is a Ray task that runs its own tests (Ray's per-job CPUs and GPUs bound them).
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Protocol

from agent.parallel.claims import process_start
from agent.parallel.slots import SlotConfig, TestSlots, runner_call

REPO_ROOT = Path(__file__).resolve().parents[2]
TERMINATE_GRACE_SEC = 3.0  # for a worker to kill its test run and clean up after SIGTERM
DRIVER_CHECK_SEC = 0.2  # how often a test worker checks that its driver is still there
RAY_AUTH_MODE = "RAY_AUTH_MODE"  # Ray's switch: token | disabled
TOKEN_FIX = ("set RAY_AUTH_TOKEN to the cluster's token (`ray get-auth-token` on its head node prints it) or "
             "RAY_AUTH_TOKEN_PATH to a file holding it")
RAY_HINT = "pip install -r requirements-extras.txt (or pip install ray)"
PARALLEL_MODES = ("processes", "threads", "none", "ray")
Drain = Callable[[], list]


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


class Executor(Protocol):
    """What the scheduler needs of a backend."""

    mode: str
    slots: TestSlots | None  # the test slots of its jobs' test runs; None: each job runs its own (Ray)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future: ...

    def channel(self) -> tuple[_Sender, Drain]: ...

    def shutdown(self, *, cancel: bool = False) -> bool:
        """End the workers (on ``cancel``, without waiting for jobs); False if some job thread still runs."""


def _drain(source: Any) -> list[Any]:
    """Everything queued so far; a queue whose manager is gone (shutdown, Ctrl-C) has nothing more."""
    items = []
    while True:
        try:
            items.append(source.get_nowait())
        except (queue.Empty, EOFError, OSError):
            return items


def _local_channel() -> tuple[_Sender, Drain]:
    """Progress within this process: jobs are threads (or inline), so a plain thread-safe queue serves."""
    box: queue.SimpleQueue = queue.SimpleQueue()
    return _Sender(box), lambda: _drain(box)


class InlineExecutor:
    """Runs each job at submit time in this thread: deterministic order, easiest to debug."""

    mode = "none"

    def __init__(self, slots: SlotConfig, call: Callable[..., dict] | None = None) -> None:
        self.slots = TestSlots(slots, call or runner_call())

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def channel(self) -> tuple[_Sender, Drain]:
        return _local_channel()

    def shutdown(self, *, cancel: bool = False) -> bool:
        return True


class ThreadExecutor:
    """Jobs as threads of this process: a waiting job costs a thread's stack, its tests take a slot."""

    mode = "threads"

    def __init__(self, max_workers: int, slots: SlotConfig, call: Callable[..., dict] | None = None) -> None:
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="recode-job")
        self.slots = TestSlots(slots, call or runner_call())

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self.pool.submit(fn, *args)

    def channel(self) -> tuple[_Sender, Drain]:
        return _local_channel()

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


def driver_identity() -> tuple[int, str | None]:
    """This process as a pool worker's driver: (pid, start time)."""
    pid = os.getpid()
    return pid, process_start(pid)


def _end_with_driver(pid: int, start: str | None) -> None:
    """Watch thread of a test worker: once the driver is gone (even SIGKILLed), end this worker.

    A SIGTERM unwinds the worker like the driver's own terminate() (its test
    run killed, its folder removed); if that hangs, the worker is killed
    outright. The forkserver and the resource tracker end by themselves once
    no worker holds their pipes any more.
    """
    while process_start(pid) == start:
        time.sleep(DRIVER_CHECK_SEC)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(TERMINATE_GRACE_SEC)
    os._exit(128 + signal.SIGKILL)


def _init_worker(driver: tuple[int, str | None]) -> None:
    """Pool workers are the forkserver's children, so no parent-death signal reaches them when the
    driver dies (and the forkserver waits for them): each watches the driver itself."""
    _ignore_sigint()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    threading.Thread(target=_end_with_driver, args=driver, name="recode-driver-watch", daemon=True).start()


def _in_worker(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one test run in a pool worker; once a terminate() has unwound it, end the worker instead of
    letting the pool hand it the next one."""
    try:
        return fn(*args, **kwargs)
    finally:
        if _terminating:
            os._exit(128 + signal.SIGTERM)


class ProcessExecutor:
    """Job threads whose test runs go to worker processes (one per slot), started by forkserver
    (spawn where unavailable) so no lock or thread is forked."""

    mode = "processes"

    def __init__(self, max_workers: int, slots: SlotConfig, call: Callable[..., dict] | None = None) -> None:
        methods = multiprocessing.get_all_start_methods()
        self.context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        self.workers = slots.test_slots + slots.gpu_capacity
        self.run_fn = call or runner_call()
        self.tests = self._new_pool()
        self.replacing = threading.Lock()
        self.closing = False
        self.jobs = ThreadExecutor(max_workers, slots, self._run_in_pool)
        self.slots = self.jobs.slots

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=self.context, initializer=_init_worker,
                                   initargs=(driver_identity(),))

    def _run_in_pool(self, *args: Any, **kwargs: Any) -> dict:
        """The test run on a worker; a pool broken by a lost worker is replaced for the runs after this one."""
        pool = self.tests
        try:
            return pool.submit(_in_worker, self.run_fn, *args, **kwargs).result()
        except BrokenProcessPool:
            with self.replacing:
                if self.tests is pool and not self.closing:
                    self.tests = self._new_pool()
            raise

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self.jobs.submit(fn, *args)

    def channel(self) -> tuple[_Sender, Drain]:
        return _local_channel()

    def shutdown(self, *, cancel: bool = False) -> bool:
        """On cancel, test workers are terminated (their runs killed) before the job threads are let go."""
        with self.replacing:
            self.closing = True
        if not cancel:
            done = self.jobs.shutdown()
            self.tests.shutdown(wait=True)
            return done
        pool = self.tests
        workers = list(getattr(pool, "_processes", {}).values())
        settler = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for process in workers:
            process.terminate()
        for process in workers:
            process.join(timeout=TERMINATE_GRACE_SEC)
            if process.is_alive():
                process.kill()
                process.join()
        # With its workers gone the pool fails their futures (BrokenProcessPool) from its own
        # thread; waiting for that thread means every test run's future is settled on return.
        if settler is not None:
            settler.join(timeout=TERMINATE_GRACE_SEC)
        return self.jobs.shutdown(cancel=True)


class RayExecutor:
    """Jobs as Ray tasks, on the cluster at ``address`` or on a local Ray started here.

    A job whose worker dies (node lost, OOM-killed) is retried by Ray
    (``max_retries``); a job that raises is not retried and resolves with its
    exception like in the other modes. The harness and dataset must be at the
    same paths on every node (a shared filesystem), as results are written
    there directly.
    """

    mode = "ray"
    slots = None

    def __init__(self, max_workers: int, address: str | None = None, num_cpus: float = 1.0,
                 num_gpus: float = 0.0, max_retries: int = 3) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError(f"parallel-mode ray needs the optional Ray package: {RAY_HINT}") from None
        self.ray = ray
        # SPREAD: jobs go to every node of a cluster (Ray's default packs them onto the driver's node first)
        self.options = {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_retries": max_retries,
                        "retry_exceptions": False, "scheduling_strategy": "SPREAD"}
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
        else:
            self._check_cluster(address)
        try:
            self.ray.init(address=address, **settings)
        except Exception as exc:  # Ray raises several types for an unreachable or refused cluster
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise ExecutorError(f"could not start {where}: {_first_line(exc)}; check ray-address") from None

    def _check_cluster(self, address: str) -> None:
        """Join with a token when one is at hand, and tell a refused token from an unreachable cluster.

        Clusters started by ``ray start`` use token authentication when their
        node found a token (``RAY_AUTH_TOKEN``, the file at
        ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``) or ``RAY_AUTH_MODE=token``
        is set. Ray's driver sends its token only in token mode, which it turns
        on by itself for a local cluster but not for an explicit address; so,
        like Ray for a local one, we turn it on when a token is at hand and
        ``RAY_AUTH_MODE`` is unset (a cluster without authentication accepts
        such a driver too). Ray's own connection error does not say why it was
        refused: a GCS client asked first does.
        """
        from ray._private.services import canonicalize_bootstrap_address
        from ray._raylet import Config, GcsClient

        try:
            from ray._raylet import AuthenticationTokenLoader
            from ray.exceptions import AuthenticationError
        except ImportError:
            return  # a Ray from before token authentication
        if address.startswith("ray://"):
            return  # a Ray Client server: it does its own checks
        has_token = AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True)
        mode = os.environ.get(RAY_AUTH_MODE)
        if mode is None and has_token:
            os.environ[RAY_AUTH_MODE] = "token"
            Config.initialize("")  # Ray reads its mode from this configuration, built at import
        elif (mode or "").lower() == "token" and not has_token:  # Ray's client would end the process
            raise ExecutorError(f"{RAY_AUTH_MODE}=token but no Ray authentication token is at hand: {TOKEN_FIX}")
        try:
            bootstrap = canonicalize_bootstrap_address(address)
            if bootstrap is not None:  # None: "local", a new Ray started by ray.init
                with _native_stderr_silenced():  # its C++ client logs each refusal there, our line says it
                    GcsClient(address=bootstrap)
        except AuthenticationError:
            raise ExecutorError(f"the Ray cluster at {address} refused this driver's authentication token: "
                                f"{TOKEN_FIX}") from None
        except Exception as exc:
            raise ExecutorError(f"could not reach the Ray cluster at {address}: {_first_line(exc)}; check "
                                "ray-address (`ray status` on its head node prints it)") from None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        remote = self.remotes.get(fn)
        if remote is None:
            remote = self.remotes[fn] = self.ray.remote(**self.options)(_on_node).options(name=fn.__name__)
        ref = remote.remote(fn, *args)
        future = ref.future()
        self.refs[future] = ref
        future.add_done_callback(lambda done: self.refs.pop(done, None))
        return future

    def channel(self) -> tuple[_Sender, Drain]:
        """Progress through a queue actor on the driver's node: a lost worker node does not take it along."""
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(self.ray.get_runtime_context().get_node_id(), soft=False)
        box = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": here})
        return _Sender(box), lambda: box.get_nowait_batch(box.qsize())

    def shutdown(self, *, cancel: bool = False) -> bool:
        if cancel:
            for ref in list(self.refs.values()):
                self.ray.cancel(ref, force=True)
        if self.owns_runtime:
            self.ray.shutdown()
        return True


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 to /dev/null for a while: native libraries write there directly."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _word(arg: Any) -> str | None:
    """A job argument in a log line: plain values as they are, a model by name, a job by task, level and model;
    None for the rest (the run's config, callbacks)."""
    if isinstance(arg, (bool, int, float, str)):
        return repr(arg)
    model = getattr(arg, "model", None)
    if isinstance(model, str):
        return model
    if hasattr(arg, "task_index") and hasattr(arg, "level"):
        return f"task {arg.task_index} L{arg.level} {_word(model)}"
    return None


def _on_node(fn: Callable[..., Any], *args: Any) -> Any:
    """A job as a Ray task: first one line naming the job and its node (in that node's Ray worker log:
    ``<temp-dir>/session_latest/logs/worker-*.out``), then the job."""
    import ray

    words = ", ".join(word for word in map(_word, args) if word is not None)
    print(f"recode: {fn.__name__}({words}) on Ray node {ray.get_runtime_context().get_node_id()}", flush=True)
    return fn(*args)


def unwrap_error(exc: BaseException) -> BaseException:
    """The job's own exception: Ray wraps it in a RayTaskError whose ``cause`` is the original."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def visible_gpus() -> set[str] | None:
    """The ids ``nvidia-smi -L`` lists (indexes, GPU and MIG UUIDs); None without ``nvidia-smi``."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(re.findall(r"^GPU (\d+):", listing, re.M)) | set(re.findall(r"UUID: ([^)\s]+)", listing))


def gpu_problem(gpus: tuple[str, ...], environ: Mapping[str, str], visible: set[str] | None) -> str | None:
    """Why the configured ``gpus`` cannot be used here, in one line naming the fix; None when they can.

    Test runs are given their device with ``CUDA_VISIBLE_DEVICES``, replacing
    ours, so a device outside the one we were given (a cluster scheduler's
    allocation) would be someone else's.
    """
    if not gpus:
        return None
    fix = "remove 'gpus' from the config to test on CPUs, or list GPUs this machine has"
    missing = [gpu for gpu in gpus if visible is None or gpu not in visible]
    if missing:
        seen = "no nvidia-smi, so no NVIDIA GPU" if visible is None else f"nvidia-smi lists {sorted(visible) or 'none'}"
        return f"gpus {list(gpus)} configured but GPU {', '.join(missing)} is not visible here ({seen}); {fix}"
    given = environ.get("CUDA_VISIBLE_DEVICES")
    outside = [gpu for gpu in gpus if given is not None and gpu not in given.split(",")]
    if outside:
        return (f"gpus {list(gpus)} configured but CUDA_VISIBLE_DEVICES={given!r} (the GPUs this process was given) "
                f"excludes {', '.join(outside)}; list only those GPUs in 'gpus', or unset CUDA_VISIBLE_DEVICES")
    return None


def make_executor(mode: str, max_workers: int, slots: SlotConfig | None = None, *,
                  ray_address: str | None = None, ray_num_cpus: float = 1.0, ray_num_gpus: float = 0.0) -> Executor:
    """The backend for ``mode`` (processes | threads | none | ray); ``slots`` default: one per CPU, no GPU."""
    slots = slots or SlotConfig()
    problem = slots.gpus and gpu_problem(slots.gpus, os.environ, visible_gpus())
    if problem:
        raise ExecutorError(problem)
    if mode == "none":
        return InlineExecutor(slots)
    if mode == "threads":
        return ThreadExecutor(max_workers, slots)
    if mode == "processes":
        return ProcessExecutor(max_workers, slots)
    if mode == "ray":
        return RayExecutor(max_workers, ray_address, ray_num_cpus, ray_num_gpus)
    raise ExecutorError(f"unknown parallel mode '{mode}'; choose one of {', '.join(PARALLEL_MODES)}")
