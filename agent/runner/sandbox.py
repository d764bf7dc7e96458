"""What surrounds a test process: scrubbed environment, bubblewrap command line, resource-limit launcher.

Everything here builds argument lists and dictionaries from plain inputs, so
the exact commands are unit-tested without running them; the only side
effects are the cached probes that look at this machine (``bwrap_problem``,
``pids_cgroup_root``).

Under bubblewrap the test process sees the host read-only (``--ro-bind / /``),
a private ``/tmp``, fresh ``/dev`` (GPU device nodes passed through) with a private writable ``/dev/shm``
(multiprocessing's semaphores and shared memory), and
``/proc`` of its own PID namespace (so no ``/proc/<ppid>/environ`` of the
caller), no network, no capabilities (as root it also becomes a fresh
unprivileged uid through ``setpriv``), a new session, and dies with the
runner. The caller's home directory, the harness checkout and the dataset
are hidden behind empty tmpfs mounts (API keys in dotfiles, canonical.py of
every task). What the tests need is mounted back read-only wherever it lives
(under /tmp, a home folder, /root or a network mount): the interpreter's
prefix and base installation, folders its ``.pth`` files add, the guard
plugin and any folder the user names. A folder on the way that the
unprivileged test user could not traverse (``/root`` is 0700) is replaced by
a traversable empty one with just those paths inside. Only the run's private
folder is writable, and within it canonical.py, the test file and the working
directory's ``__pycache__`` are read-only.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Mapping

from agent.runner.options import SANDBOX_MODES  # noqa: F401 (re-exported for the runner)
ENV_ALLOWLIST = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
)
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
CGROUP_V1_PIDS = Path("/sys/fs/cgroup/pids")
CGROUP_V2 = Path("/sys/fs/cgroup")


def scrubbed_env(environ: Mapping[str, str], *, home: str, tmpdir: str, python_bin: str,
                 extra: Mapping[str, str]) -> dict[str, str]:
    """Allow-listed variables only; anything that looks like a credential is dropped even if listed.

    The interpreter's bin folder goes first on PATH, as ``conda activate`` does.
    """
    env = {k: v for k, v in environ.items() if k in ENV_ALLOWLIST and not SECRET_NAME.search(k)}
    env["PATH"] = os.pathsep.join([python_bin, env.get("PATH", DEFAULT_PATH)])
    env.setdefault("LANG", "C.UTF-8")
    env.update({"HOME": home, "TMPDIR": tmpdir, "PYTHONDONTWRITEBYTECODE": "1"})
    env.update(extra)
    return env


def interpreter_roots(python: str) -> list[str]:
    """Folders a task interpreter needs to see: its (venv) prefix and the base installation behind it."""
    unresolved = Path(python).absolute()
    roots = {str(unresolved.parent.parent), str(Path(os.path.realpath(python)).parent.parent)}
    cfg = unresolved.parent.parent / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                roots.add(str(Path(os.path.realpath(value.strip())).parent))
    return sorted(roots)


@functools.lru_cache(maxsize=None)
def pth_folders(roots: tuple[str, ...]) -> tuple[str, ...]:
    """Existing folders named by the ``.pth`` files of the site-packages under ``roots`` (editable installs).

    Cached per process: environments do not change under a running harness.
    """
    found = set()
    for root in roots:
        for site in glob.glob(os.path.join(root, "lib", "python*", "site-packages")) + \
                glob.glob(os.path.join(root, "lib", "site-packages")):
            for pth in glob.glob(os.path.join(site, "*.pth")):
                try:
                    lines = Path(pth).read_text(encoding="utf-8", errors="replace").splitlines()
                except OSError:
                    continue
                for line in lines:
                    line = line.strip()
                    if line and not line.startswith(("#", "import ", "import\t")):
                        folder = os.path.realpath(os.path.join(site, line))
                        if os.path.isdir(folder):
                            found.add(folder)
    return tuple(sorted(found))


def untraversable_folders(paths: list[str]) -> list[str]:
    """Folders above ``paths`` that a user with no ownership or group (the fresh test uid) cannot enter.

    They are hidden behind a traversable tmpfs, into which the paths are mounted back.
    """
    blocked = set()
    for path in paths:
        for parent in Path(path).parents:
            if str(parent) != "/" and os.path.isdir(parent) and not os.stat(parent).st_mode & 0o001:
                blocked.add(str(parent))
    return sorted(blocked)


def unreadable_problem(paths: list[str]) -> str | None:
    """One line naming a path the fresh test uid could not read even once mounted, or None.

    Only the top of each folder (and a file itself) is checked: that is where a
    private mode (``umask 077``, a 0700 venv) shows, and a deep walk would cost
    every run.
    """
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            return f"{path} cannot be made visible in the sandbox: {exc.strerror}"
        need = 0o005 if os.path.isdir(path) else 0o004
        if mode & need != need:
            return (f"{path} cannot be made visible in the sandbox: its mode {mode & 0o777:04o} lets the unprivileged "
                    f"test user not read it; run 'chmod -R o+rX {path}' or run the harness as a normal user")
    return None


def bwrap_failure(output: str) -> str | None:
    """bubblewrap's own message when it could not set the sandbox up (it names the path and the reason)."""
    for line in output.splitlines():
        if line.startswith("bwrap: "):
            return line.strip()
    return None


def _inside(path: str, parents: list[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in parents)


def _parent_dirs(path: str, tmpfs_roots: list[str]) -> list[str]:
    """``--dir`` arguments for the folders between the tmpfs covering ``path`` and ``path`` itself.

    bubblewrap would create them with mode 0700, which an unprivileged test
    user could not traverse; they are made 0755 explicitly.
    """
    root = max((r for r in tmpfs_roots if _inside(path, [r]) and path != r), key=len, default=None)
    if root is None:
        return []
    args = []
    parts = Path(path).relative_to(root).parts[:-1]
    for depth in range(1, len(parts) + 1):
        args += ["--perms", "0755", "--dir", str(Path(root, *parts[:depth]))]
    return args


def gpu_devices() -> list[str]:
    """Accelerator device nodes to pass through: ``--dev /dev`` alone would hide them (CUDA tests skip)."""
    return sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/dri") + glob.glob("/dev/kfd"))


def bwrap_argv(bwrap: str, *, run_dir: str, workdir: str, hidden: list[str], visible: list[str],
               readonly_files: list[str], tmp_size_mb: int | None, drop_caps: bool = True,
               devices: list[str] = ()) -> list[str]:
    """bubblewrap command line (up to and including ``--``) for one run.

    Mount order matters: hide first, then mount back what must stay visible,
    then the writable run folder, then read-only files inside it. The private
    /tmp lives in memory, so it gets the memory budget as its size.
    ``drop_caps`` is False when the command starts with ``setpriv`` (see
    ``drop_privileges``), which needs them to switch user and then drops them all.
    """
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for device in devices:
        argv += ["--dev-bind", device, device]
    argv += ["--perms", "1777"]
    if tmp_size_mb and bwrap_supports_size(bwrap):
        argv += ["--size", str(tmp_size_mb << 20)]
    argv += ["--tmpfs", "/tmp", "--perms", "1777"]
    if tmp_size_mb and bwrap_supports_size(bwrap):
        argv += ["--size", str(tmp_size_mb << 20)]
    argv += ["--tmpfs", "/dev/shm"]  # POSIX semaphores and shared memory: multiprocessing's locks and queues
    outer: list[str] = []
    for path in sorted(set(hidden), key=len):
        if os.path.isdir(path) and not _inside(path, outer + ["/tmp"]):  # the private /tmp hides its own
            outer.append(path)
            argv += ["--perms", "0755", "--tmpfs", path]
    tmpfs_roots = outer + ["/tmp"]
    for path in sorted(set(visible), key=len):
        if os.path.exists(path) and _inside(path, tmpfs_roots):
            argv += _parent_dirs(path, tmpfs_roots) + ["--ro-bind", path, path]
    argv += _parent_dirs(run_dir, tmpfs_roots) + ["--bind", run_dir, run_dir]
    for path in readonly_files:
        argv += ["--ro-bind", path, path]
    pycache = os.path.join(workdir, "__pycache__")
    argv += ["--tmpfs", pycache, "--remount-ro", pycache, "--unshare-pid", "--unshare-net"]
    if drop_caps:
        argv += ["--cap-drop", "ALL"]
    return argv + ["--new-session", "--die-with-parent", "--chdir", workdir, "--"]


def drop_privileges(setpriv: str, uid: int) -> list[str]:
    """Run the rest as ``uid`` (no groups, no capabilities at all): RLIMIT_NPROC then counts for it alone.

    As root, RLIMIT_NPROC is not enforced; a fresh unprivileged id per run
    makes it a per-run process cap without a cgroup (moving a process into a
    cgroup v1 costs a ~15 ms RCU wait per run).
    """
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--"]


def limits_prefix(*, memory_mb: int | None, nproc: int | None, cgroup_procs: str | None,
                  prlimit: str | None) -> list[str]:
    """Launcher that joins the pids cgroup and sets rlimits, then execs the rest of the command.

    Both happen before bubblewrap forks, so every process of the run inherits
    them. The memory budget also caps the size of any file written (an
    output flood into pytest's capture file in the in-memory /tmp). Returns
    [] when there is nothing to apply (or no ``prlimit``: the runner then
    falls back to a pre-exec hook).
    """
    prefix: list[str] = []
    if cgroup_procs:
        prefix += ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', cgroup_procs]
    limits = []
    if memory_mb:
        limits += [f"--as={memory_mb << 20}", f"--fsize={memory_mb << 20}"]
    if nproc:
        limits.append(f"--nproc={nproc}")
    if limits and prlimit:
        prefix += [prlimit, *limits, "--"]
    return prefix


@functools.lru_cache(maxsize=None)
def bwrap_supports_size(bwrap: str) -> bool:
    """``--size`` for tmpfs exists from bubblewrap 0.8 on."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in done.stdout + done.stderr


@functools.lru_cache(maxsize=None)
def bwrap_problem(bwrap: str | None = None) -> str | None:
    """None when bubblewrap works here, else one line saying why not (probed once per process)."""
    bwrap = bwrap or shutil.which("bwrap")
    if not bwrap:
        return "bubblewrap (bwrap) is not installed; install it (e.g. apt-get install bubblewrap)"
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
             "--unshare-net", "--cap-drop", "ALL", "--die-with-parent", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return (f"bubblewrap cannot create namespaces here ({last}); "
                "enable unprivileged user namespaces or run with --sandbox off")
    return None


@functools.lru_cache(maxsize=None)
def pids_cgroup_root() -> Path | None:
    """A cgroup folder where this process may create per-run children with ``pids.max``, or None.

    cgroup v1 has a ``pids`` hierarchy; on v2 the pids controller must be
    enabled for children of the root we can write to.
    """
    candidates = [CGROUP_V1_PIDS]
    v2 = CGROUP_V2 / "cgroup.subtree_control"
    if v2.is_file() and "pids" in v2.read_text().split():
        candidates.append(CGROUP_V2)
    for root in candidates:
        if root.is_dir() and os.access(root, os.W_OK) and (root / "cgroup.procs").is_file():
            return root
    return None


def user_process_count(uid: int) -> int:
    """Processes this user already runs: RLIMIT_NPROC counts them too, so the limit adds to it."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                continue
    return count


def hidden_paths(dataset_root: str, repo_root: str, environ: Mapping[str, str]) -> list[str]:
    """Folders a candidate has no business reading: home (keys in dotfiles), the harness, the dataset."""
    paths = [dataset_root, repo_root]
    home = environ.get("HOME")
    if home and os.path.realpath(home) != "/":
        paths.append(os.path.realpath(home))
    return [os.path.realpath(p) for p in paths]


def user_base() -> str | None:
    """The caller's user-site base (``~/.local``): passed on explicitly since HOME changes."""
    base = os.environ.get("PYTHONUSERBASE") or os.path.expanduser("~/.local")
    return os.path.realpath(base) if os.path.isdir(base) else None
