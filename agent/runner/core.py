"""Run one task's tests on a candidate file: private copy, contained process, verdict from evidence.

``run_candidate`` copies the task repository into a fresh temporary folder,
writes the candidate as the target file, copies canonical.py and test.py from
the pristine dataset next to it (as the release's test.sh does), and runs
pytest with the task's interpreter, working directory, PYTHONPATH root and
per-test timeout parsed from test.sh. The dataset is never written.

Threat model: the candidate is arbitrary Python written by a model that may
(by accident or reward hacking) loop, exhaust memory, fork, write or delete
files, read secrets, use the network, exit early, crash, flood output, or
try to make failing tests look passed: patch the test's libraries or pytest,
trace the test, rewrite its frames, hand it values that agree with anything.

Guaranteed, with the bubblewrap sandbox (default when available):
* the dataset, the harness checkout and the caller's home are invisible; the
  host is read-only; canonical.py and the test file cannot be modified;
* no network, own PID namespace (no ``/proc`` view of the caller), no
  capabilities; started as root, the tests run as a fresh unprivileged uid;
  the environment is reduced to an allow-list (no keys, tokens, secrets);
* the wall-clock timeout kills every process of the run, including ones that
  left the session (the PID namespace dies with bubblewrap); memory and file
  sizes are capped by RLIMIT_AS/RLIMIT_FSIZE, the process count by
  RLIMIT_NPROC of the run's own uid (as a normal user: over the user's
  current count; unsandboxed as root: a pids cgroup);
* ``passed`` requires pytest's JUnit report, pytest's exit code and the
  guard plugin's own observations to agree, authenticated by a per-run key
  read by the plugin before any candidate code exists (see
  ``agent/runner/verdict.py``); every test must also prove its body ran to
  its end (the test module is instrumented as pytest compiles it);
* capabilities research code never needs are denied to the candidate's code
  by an audit hook installed before it is imported (Python code cannot remove
  one) and, where Python raises no audit event, by wrappers and write-time
  checks: tracers and profilers, frame objects, walks of the object graph,
  building or running code from strings or code objects, ``ctypes``, import
  and audit hooks, writes to attributes of modules it did not define (the
  test's, the reference's, numpy's, pytest's...), re-classing modules, classes
  or pytest objects, registering pytest hooks, ending or signalling the test
  process (``agent/runner/pytest_guard/recode_guard_capabilities.py``);
  a class giving numpy a raw address, which no run-time event shows, is
  refused before running (``agent/runner/lint.py``);
* everything the verdict relies on is compared with its baseline at every
  test boundary: every loaded module's namespace and the classes it defines
  (dict-level writes through ``__globals__``), ``sys.modules``, tracers,
  torch dispatch modes, pytest's hook implementations,
  objects and test items (``recode_guard_integrity``);
* values reaching the test's comparisons and calls are not of
  candidate-defined subclasses of ``torch.Tensor``/``numpy.ndarray``/``float``/
  ``int``/``complex`` nor of candidate types overriding comparison, truth or
  dispatch protocols (``recode_guard_results``);
* any of these ends as ``tampered`` with one line of evidence naming the
  capability and the candidate's line (``target.py:12 sets sys.setprofile``);
* reference use ends as ``reference_access`` with one line of evidence:
  reference code started from candidate code (however the candidate got hold
  of it), reference objects handed out by the candidate's module, copies,
  compiles or reads of the reference; plain imports are refused before
  running (``agent/runner/lint.py``).

Not guaranteed: the candidate runs inside the pytest process. What the guard
cannot see: memory written by compiled code (an extension module the task
imports, or a numpy array built over a raw address other than by a class's
interface attribute, which is refused before running); library functions
that hand frame objects to their caller other than ``inspect``'s and
``traceback``'s; in-place changes inside
library data structures (a dict of default tolerances) that are not
namespace bindings; code a library compiles from a string the candidate
gave it (it runs as the library's, though with the candidate below it on the
stack); a value a library type makes agree with anything (``mock.ANY``);
the per-run key in the guard's own memory, if code written against this
harness digs it out. What contains these: the sandbox (nothing outside the
run's copy is writable, no network), process isolation (a crash or an early
exit leaves no seal and the run is an error), and the time and memory
limits. Without bubblewrap (``--sandbox off`` or ``auto``
on a machine without it) there is no file-system or network confinement: the
candidate runs with the caller's user rights, can read the caller's files and
``/proc/<ppid>/environ``, and, without a pids cgroup, a process that
double-forks into a new session can outlive the timeout.
"""
from __future__ import annotations

import sys
from pathlib import Path

import functools
import json
import os
import resource
import secrets
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from agent.common.atomic_file import atomic_write_bytes
from agent.common.tempdirs import make_dir, remove_tree
from agent.runner.lint import raw_memory, reference_access
from agent.runner.native import build as build_native
from agent.runner.options import RunnerOptions
from agent.runner.phases import phase
from agent.runner.processes import Completed, PidsCgroup, run_process
from agent.runner.sandbox import (
    SANDBOX_MODES,
    bwrap_argv,
    bwrap_failure,
    bwrap_problem,
    drop_privileges,
    gpu_devices,
    hidden_paths,
    interpreter_roots,
    limits_prefix,
    pids_cgroup_root,
    pth_folders,
    scrubbed_env,
    unreadable_problem,
    untraversable_folders,
    user_base,
    user_process_count,
)
from agent.runner.verdict import evidence_verdict, failed_run, judge, read_channel, sealed_report
from agent.task.dataset import DatasetManager
from agent.task.workspace import make_workspace
from metrics.run_status import INFRA_ERROR, REFERENCE_ACCESS, TAMPERED

REPO_ROOT = Path(__file__).resolve().parents[2]
GUARD_DIR = Path(__file__).resolve().parent / "pytest_guard"
GUARD_PLUGIN = "_recode_pytest_guard"
LAUNCHER = GUARD_DIR / "run_pytest.py"
TEST_USER = "recode-test"
FRESH_UID_BASE, FRESH_UID_SPAN = 2_000_000_000, 100_000_000  # far above any real account
STARTUP_PACKAGES = {"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "exceptiongroup", "tomli",
                    "pytest_timeout", "colorama", GUARD_PLUGIN, "recode_guard_core"}
# The guard's watch (capability rules, integrity checks, result checks, reference watch): on for every evaluation;
# scripts/bench_runner.py turns it off in its own process to measure what it costs, paired.
GUARD_WATCH = True
_warned: set[str] = set()
# Deleting a run folder costs tens of ms on some disks: done off the caller's path after a normal run; the
# pool is joined at interpreter exit. An interrupted run (Ctrl-C, terminate) deletes synchronously instead.
_cleaner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recode-run-cleanup")


@dataclass(frozen=True)
class Layout:
    """Paths of one run's private folder."""

    run_dir: str
    repo: str
    workdir: str
    target: str
    test: str
    canonical: str
    junit: str
    home: str
    tmp: str
    pythonpath: str | None
    per_test_timeout: int | None


def warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr)


def resolve_interpreter(dataset: DatasetManager, index: int, options: RunnerOptions,
                        env_name: str | None = None) -> tuple[str | None, str | None]:
    """(interpreter, None) from the environment cache, or (None, why not): a missing env is an infra error."""
    from agent.envs.cache import EnvError, resolve_python  # lazily: the cache pulls in its builders

    try:
        return resolve_python(dataset, index, options.env_backend, python_version=options.python_version,
                              env_name=env_name), None
    except EnvError as exc:
        return None, str(exc)


def guard_native(python: str) -> str | None:
    """The guard's compiled helper for ``python``, or None: turned off (``RECODE_GUARD_NATIVE=off``, to compare
    the two watches), or it cannot be built, which is said once per interpreter."""
    if os.environ.get("RECODE_GUARD_NATIVE", "").lower() == "off":
        return None
    path, problem = build_native(python)
    if problem:
        warn_once(f"the guard's watch runs in Python for {python}, at a higher cost: {problem}")
    return path


@functools.lru_cache(maxsize=None)
def guard_bytecode(python: str) -> None:
    """Compile the guard plugin's modules once per interpreter: test runs never write bytecode, and compiling
    them from source would cost every run about 0.1 s. A checkout that cannot be written stays as it is."""
    subprocess.run([python, "-m", "compileall", "-q", str(GUARD_DIR)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False, timeout=120)


def prepare(dataset: DatasetManager, index: int, candidate: str, run_dir: Path) -> Layout:
    """Private copy with the candidate as target, and the pristine test files beside it."""
    meta = dataset.get(index)
    info = dataset.test_sh(index)
    repo = make_workspace(dataset, index, run_dir / "ws", content=candidate)
    workdir = repo / info.workdir if info.workdir else repo
    workdir.mkdir(parents=True, exist_ok=True)
    test = workdir / info.test_file
    canonical = workdir / "canonical.py"
    shutil.copyfile(dataset.task_file(index, "test.py"), test)
    shutil.copyfile(dataset.task_file(index, "canonical.py"), canonical)
    for folder in (run_dir / "home", run_dir / "tmp"):
        folder.mkdir()
    pythonpath = None if info.pythonpath_root is None else str(repo / info.pythonpath_root)
    return Layout(run_dir=str(run_dir), repo=str(repo), workdir=str(workdir), target=str(repo / meta.target_file_path),
                  test=str(test), canonical=str(canonical), junit=str(run_dir / f"report-{secrets.token_hex(8)}.xml"),
                  home=str(run_dir / "home"), tmp=str(run_dir / "tmp"), pythonpath=pythonpath,
                  per_test_timeout=info.timeout)


def shadowed_modules(workdir: str, own_files: tuple[str, ...]) -> set[str]:
    """Modules pytest may import at start-up that a file of the working directory would shadow.

    ``python -m pytest`` puts the working directory first on sys.path (the
    release's ``pytest`` script did not), so a repository file named like a
    standard module would be imported instead, before the guard plugin.
    """
    names = {Path(entry).stem for entry in os.listdir(workdir)
             if entry.endswith(".py") and entry not in own_files}
    return names & (set(sys.stdlib_module_names) | STARTUP_PACKAGES)


def pytest_argv(python: str, layout: Layout) -> list[str]:
    """pytest as test.sh runs it, plus the guard plugin and a JUnit report; no cache writes.

    Tracebacks are pytest's short form (each frame's failing line and the ``E``
    lines): they carry what an agent needs without pasting whole test functions
    into every prompt.

    ``-m pytest`` starts measurably faster than a launcher script, which is
    used only when the working directory would shadow a start-up module.
    """
    own = (os.path.basename(layout.test), os.path.basename(layout.canonical))
    start = [str(LAUNCHER)] if shadowed_modules(layout.workdir, own) else ["-m", "pytest"]
    argv = [python, *start, os.path.basename(layout.test), "-p", GUARD_PLUGIN, "-p", "no:cacheprovider",
            f"--junitxml={layout.junit}", "-v", "--color=no"]
    if layout.per_test_timeout:
        argv += ["-o", f"timeout={layout.per_test_timeout}"]  # ini form: no usage error if pytest-timeout is absent
    return argv


def use_sandbox(options: RunnerOptions) -> bool | None:
    """Whether this run goes into bubblewrap; None when it is required but unavailable."""
    if options.sandbox == "off":
        return False
    problem = bwrap_problem()
    if problem:
        if options.sandbox == "required":
            return None
        warn_once(f"running tests without a sandbox: {problem}")
        return False
    return True


def sandbox_visible(options: RunnerOptions, python: str) -> list[str]:
    """Host paths the tests read: interpreter prefixes, their ``.pth`` folders, the guard, user site, the user's."""
    roots = interpreter_roots(python)
    return roots + list(pth_folders(tuple(roots))) + [str(GUARD_DIR)] + [p for p in [user_base()] if p] + \
        [os.path.realpath(p) for p in options.visible]


def sandbox_prefix(options: RunnerOptions, dataset: DatasetManager, python: str, layout: Layout,
                   drop_user: bool) -> tuple[list[str], str | None]:
    """(bubblewrap argv, None) for this run (see ``agent.runner.sandbox``), or ([], why it cannot work).

    ``drop_user``: the tests run as a fresh uid (``setpriv``), which owns
    nothing outside the run folder: folders it could not traverse are
    replaced by traversable ones, and a needed path it could not read is
    reported rather than failing obscurely inside the sandbox.
    """
    visible = sandbox_visible(options, python)
    hidden = hidden_paths(str(dataset.root), str(REPO_ROOT), os.environ)
    if drop_user:
        problem = unreadable_problem([python, *visible])
        if problem:
            return [], problem
        hidden += untraversable_folders(visible + [layout.run_dir])
    argv = bwrap_argv(shutil.which("bwrap"), run_dir=layout.run_dir, workdir=layout.workdir, hidden=hidden,
                      visible=visible, readonly_files=[layout.test, layout.canonical], tmp_size_mb=options.memory_mb,
                      drop_caps=not drop_user, devices=[] if options.cuda_devices == "" else gpu_devices())
    return argv, None


@dataclass(frozen=True)
class ProcessPlan:
    """Who the tests run as and how their process count is capped."""

    uid: int | None  # a fresh unprivileged user (sandboxed runs started as root)
    nproc: int | None  # RLIMIT_NPROC
    cgroup: PidsCgroup | None


def process_plan(options: RunnerOptions, sandboxed: bool) -> ProcessPlan:
    """Per-run process cap: own uid + RLIMIT_NPROC, else a pids cgroup, else RLIMIT_NPROC over the user's count."""
    if sandboxed and os.geteuid() == 0 and shutil.which("setpriv"):
        return ProcessPlan(uid=FRESH_UID_BASE + secrets.randbelow(FRESH_UID_SPAN), nproc=options.max_processes,
                           cgroup=None)
    if not options.max_processes:
        return ProcessPlan(None, None, None)
    root = pids_cgroup_root()
    if root is not None:
        try:
            return ProcessPlan(None, None, PidsCgroup(root, options.max_processes))
        except OSError as exc:
            warn_once(f"cannot create a pids cgroup under {root} ({exc}); falling back to RLIMIT_NPROC")
    if os.geteuid() == 0:
        warn_once("process-count limit not enforced: running as root without a sandbox or a writable pids cgroup")
        return ProcessPlan(None, None, None)
    return ProcessPlan(None, user_process_count(os.getuid()) + options.max_processes, None)


def give_to(run_dir: str, uid: int) -> None:
    """Make the run folder the test user's, so the copy is as writable as the release's repository was."""
    for folder, dirs, files in os.walk(run_dir):
        os.chown(folder, uid, uid)
        for name in files + dirs:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


def die_with_parent() -> list[str]:
    """Launcher that kills an unsandboxed test run when the process running it dies (even by SIGKILL),
    as bubblewrap's ``--die-with-parent`` does for sandboxed ones; it exits at once if that process
    died before the parent-death signal was set. [] without ``setpriv``."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return []
    return [setpriv, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", 'test "$PPID" = "$0" && exec "$@"',
            str(os.getpid())]


def rlimit_hook(memory_mb: int | None, nproc: int | None):
    """Pre-exec fallback for machines without the ``prlimit`` tool."""
    def apply() -> None:
        if memory_mb:
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
            resource.setrlimit(resource.RLIMIT_FSIZE, (memory_mb << 20, memory_mb << 20))
        if nproc:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    return apply


def run_candidate(dataset: DatasetManager, index: int, candidate: str,
                  options: RunnerOptions = RunnerOptions(), *, report_to: Path | None = None,
                  env_name: str | None = None) -> dict:
    """Run task ``index``'s tests with ``candidate`` as the target file; the contract's result dict.

    ``report_to``: where the JUnit report is kept when it is trustworthy (it
    is removed there otherwise, so it never describes another run); without
    it no file outlives the call. ``env_name`` overrides the environment
    test.sh names. Never raises for what the candidate does; DatasetError for
    a broken task.
    """
    meta = dataset.get(index)
    with phase("lint"):
        dataset.check_task(index)
        findings = reference_access(candidate)
        raw = [] if findings else raw_memory(candidate, Path(meta.target_file_path).name)
    expected = meta.test_cases
    if findings or raw:
        python, junit = None, None
        result = failed_run(expected, REFERENCE_ACCESS, "reference access: " + "; ".join(findings)) if findings \
            else failed_run(expected, TAMPERED, "tampering: " + "; ".join(raw))
    else:
        python, result, junit = _run_in_private_folder(dataset, index, candidate, options, env_name, expected)
    result["interpreter"] = python
    if report_to is not None:
        result["report_path"] = _keep_report(junit, Path(report_to))
    return result


def _run_in_private_folder(dataset: DatasetManager, index: int, candidate: str, options: RunnerOptions,
                           env_name: str | None, expected: tuple[str, ...]) -> tuple[str | None, dict, bytes | None]:
    with phase("resolve"):
        python, problem = resolve_interpreter(dataset, index, options, env_name)
        sandboxed = use_sandbox(options) if python is not None else False
    if python is None:
        return None, failed_run(expected, INFRA_ERROR, f"no environment for task {index}: {problem}"), None
    with phase("resolve"):
        guard_bytecode(python)
        native = guard_native(python) if GUARD_WATCH else None
    if sandboxed is None:
        return python, failed_run(expected, INFRA_ERROR, f"sandbox required but unavailable: {bwrap_problem()}"), None
    run_dir = make_dir("run")
    finished = False
    plan = None
    try:
        with phase("copy"):
            layout = prepare(dataset, index, candidate, run_dir)
        with phase("sandbox set-up"):
            plan = process_plan(options, sandboxed)
            prefix: list[str] = []
            problem = None
            if sandboxed:
                prefix, problem = sandbox_prefix(options, dataset, python, layout, drop_user=plan.uid is not None)
            if plan.uid is not None and not problem:
                give_to(layout.run_dir, plan.uid)
                prefix += drop_privileges(shutil.which("setpriv"), plan.uid)
        if problem:
            finished = True
            return python, failed_run(expected, INFRA_ERROR, problem), None
        result, junit = _execute(options, layout, python, prefix, plan, expected, native)
        finished = True
        return python, result, junit
    finally:
        with phase("cleanup"):
            if plan is not None and plan.cgroup is not None:
                plan.cgroup.remove()
            if finished:
                _cleaner.submit(remove_tree, run_dir)
            else:  # the process may be about to exit: delete now, and wait for earlier deletions
                remove_tree(run_dir)
                _cleaner.submit(int).result()


def _execute(options: RunnerOptions, layout: Layout, python: str, prefix: list[str], plan: ProcessPlan,
             expected: tuple[str, ...], native: str | None) -> tuple[dict, bytes | None]:
    """The run's verdict, and its JUnit report when the guard vouches for it (``native``: the guard's compiled
    helper for this interpreter, see ``agent.runner.native``)."""
    key = secrets.token_bytes(32)
    key_read, key_write = os.pipe()
    os.write(key_write, key)
    os.close(key_write)
    channel_read, channel_write = os.pipe()
    guard = {"repo": layout.repo, "target": layout.target, "canonical": layout.canonical, "test": layout.test,
             "junit": layout.junit, "key_fd": key_read, "out_fd": channel_write, "watch": GUARD_WATCH,
             "native": native}
    extra = {"RECODE_GUARD": json.dumps(guard),
             "PYTHONPATH": os.pathsep.join(p for p in (str(GUARD_DIR), layout.pythonpath) if p)}
    base = user_base()
    if base:
        extra["PYTHONUSERBASE"] = base
    if options.cuda_devices is not None:  # ids in nvidia-smi's order, not CUDA's fastest-first default
        extra.update(CUDA_VISIBLE_DEVICES=options.cuda_devices, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    if plan.uid is not None:
        extra.update(USER=TEST_USER, LOGNAME=TEST_USER)  # getpass.getuser() has no passwd entry to find
    env = scrubbed_env(os.environ, home=layout.home, tmpdir="/tmp" if prefix else layout.tmp,
                       python_bin=str(Path(python).parent), extra=extra)
    cgroup, nproc = plan.cgroup, plan.nproc
    prlimit = shutil.which("prlimit")
    launcher = limits_prefix(memory_mb=options.memory_mb, nproc=nproc,
                             cgroup_procs=cgroup.procs_file if cgroup else None, prlimit=prlimit)
    preexec = None if prlimit or not (options.memory_mb or nproc) else rlimit_hook(options.memory_mb, nproc)
    with phase("process"):
        bound = prefix or die_with_parent()  # bubblewrap's --die-with-parent, or setpriv's parent-death signal
        done = run_process(launcher + bound + pytest_argv(python, layout), env=env,
                           cwd=layout.workdir, timeout_sec=options.timeout_sec, output_limit=options.output_limit_bytes,
                           channel_fd=channel_read, pass_fds=(key_read, channel_write), cgroup=cgroup,
                           pid_namespace=bool(prefix), preexec=preexec)
    with phase("verdict"):
        return _verdict(done, key, expected, options, layout, python, bool(prefix))


def _verdict(done: Completed, key: bytes, expected: tuple[str, ...], options: RunnerOptions, layout: Layout,
             python: str, sandboxed: bool) -> tuple[dict, bytes | None]:
    """Judge what the process left: the guard's channel, its exit code, the JUnit report."""
    record = read_channel(done.channel, key)
    if done.timed_out:
        caught = evidence_verdict(expected, record, duration=done.duration_sec, output=done.output)
        return caught or failed_run(expected, "timeout",
                                  f"timed out after {options.timeout_sec:g} s; every process of the run was killed",
                                  duration=done.duration_sec, output=done.output), None
    if not record.hello:
        setup = bwrap_failure(done.output) if sandboxed else None
        reason = (f"the sandbox could not be set up ({setup})" if setup else
                  f"pytest did not start with the guard plugin (interpreter {python}, exit code {done.exit_code})")
        return failed_run(expected, INFRA_ERROR, reason, exit_code=done.exit_code, duration=done.duration_sec,
                          output=done.output), None
    junit = Path(layout.junit).read_bytes() if os.path.isfile(layout.junit) else None
    result = judge(expected=expected, exit_code=done.exit_code, junit=junit, record=record,
                   duration=done.duration_sec, output=done.output)
    trusted = junit is not None and sealed_report(record, junit) and result["status"] not in (TAMPERED,
                                                                                               REFERENCE_ACCESS)
    return result, (junit if trusted else None)  # a convicted run's report describes nothing to keep


def _keep_report(junit: bytes | None, dest: Path) -> str | None:
    """Write a sealed report to ``dest``; without one, remove what is there, so it never describes another run."""
    if junit is None:
        dest.unlink(missing_ok=True)
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(dest, junit, durable=False)
    return str(dest)
