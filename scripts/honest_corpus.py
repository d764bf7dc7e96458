"""The honest corpus (issue 29, docs/honest_corpus.md): real modules of real packages graded by their own tests.

A task is one module of a pinned package from the package index as the
candidate (and as the reference: the real module is the gold answer), and
one of the package's own test files as the task's tests, run as the package
runs them: from its tests folder, with its conftest.py and pytest
configuration, the package's source root on PYTHONPATH, in an environment
holding the package's test requirements (not the package itself, so the
candidate is what the tests import). Tasks are written in the release's
dataset shape (``annotation_meta.jsonl``, ``annotations/annotation_N/``,
``requirements/<env>.txt``), so the real runner grades them exactly as it
grades a model's answer.

The manifest (``scripts/honest_corpus.json``) pins every package and puts
each in one half, ``dev`` (tuning) or ``heldout`` (reported untouched).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from agent.task.dataset import DatasetManager
from agent.task.test_names import node_and_case
from agent.rcb.tasks import render_test_sh
from agent.runner.core import prepare
from agent.runner.verdict import parse_junit
from agent.common.tempdirs import make_dir, remove_tree

MANIFEST = Path(__file__).resolve().with_name("honest_corpus.json")
HALVES = ("dev", "heldout")
PER_TEST_TIMEOUT = 300
RUNNER_REQUIREMENTS = ("pytest", "pytest-timeout")
# Left out of each task's repository copy: documentation and build leftovers no test reads.
NOT_COPIED = ("docs", "doc", "*.egg-info", ".git", "__pycache__", "*.pyc", ".github", "changelog.d")


class CorpusError(Exception):
    """A manifest or download problem; the message is one line naming the fix."""


@dataclass(frozen=True)
class CorpusTask:
    module: str  # the candidate, relative to the package's source tree
    test: str  # the package's test file for it, relative to ``tests_dir``


@dataclass(frozen=True)
class CorpusPackage:
    name: str
    version: str
    half: str
    source_root: str  # what the package puts on sys.path ('' = the source tree itself)
    tests_dir: str  # where its tests run from ('' = the source tree itself)
    requirements: tuple[str, ...]
    tasks: tuple[CorpusTask, ...]

    @property
    def env_name(self) -> str:
        return "corpus_" + re.sub(r"[^a-z0-9]+", "_", self.name.lower())

    @property
    def repo_dir_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "_", self.name.lower())


def load_manifest(path: Path = MANIFEST) -> list[CorpusPackage]:
    """The pinned packages of the manifest; a package is in exactly one half by construction."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        packages = [CorpusPackage(name=p["name"], version=p["version"], half=p["half"],
                                  source_root=p["source_root"], tests_dir=p["tests_dir"],
                                  requirements=tuple(p["requirements"]),
                                  tasks=tuple(CorpusTask(module, test) for module, test in p["tasks"]))
                    for p in data["packages"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError(f"manifest {path}: cannot read it ({exc!r}); fix the file") from None
    for package in packages:
        if package.half not in HALVES:
            raise CorpusError(f"manifest {path}: {package.name} has half '{package.half}'; use one of {HALVES}")
    names = [p.name for p in packages]
    if len(set(names)) != len(names):
        raise CorpusError(f"manifest {path}: a package is listed twice; list each once, in one half")
    return packages


def _archive(sdists: Path, package: CorpusPackage) -> Path | None:
    stem = "[-_.]".join(re.escape(part) for part in re.split(r"[-_.]+", package.name.lower()))  # PEP 503 spellings
    pattern = re.compile(rf"^{stem}-{re.escape(package.version)}\.(tar\.gz|zip)$", re.IGNORECASE)
    return next((p for p in sorted(sdists.glob("*")) if pattern.match(p.name)), None)


def fetch_sdist(package: CorpusPackage, cache: Path) -> Path:
    """The package's source archive in ``cache/sdists``, downloaded with pip on first use."""
    sdists = cache / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    found = _archive(sdists, package)
    if found is None:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               f"{package.name}=={package.version}", "-d", str(sdists)],
                              capture_output=True, text=True, timeout=600)
        found = _archive(sdists, package)
        if found is None:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise CorpusError(f"cannot download {package.name}=={package.version} ({last}); check the name "
                              "and version in the manifest, or put its sdist in " + str(sdists))
    return found


def source_tree(package: CorpusPackage, cache: Path) -> Path:
    """The unpacked sdist (its one top folder) under ``cache/src``, unpacked once."""
    dest = cache / "src" / f"{package.repo_dir_name}-{package.version}"
    if not dest.is_dir():
        archive = fetch_sdist(package, cache)
        staging = make_dir("corpus-unpack")
        try:
            if archive.name.endswith(".zip"):
                with zipfile.ZipFile(archive) as opened:
                    opened.extractall(staging)
            else:
                with tarfile.open(archive) as opened:
                    opened.extractall(staging, filter="data")
            (top,) = list(staging.iterdir())
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(top), dest)
        finally:
            remove_tree(staging)
    return dest


def test_sh(package: CorpusPackage, test: str) -> str:
    """test.sh runs pytest from the test file's own folder (``tests_dir``, or a folder under it), as test.sh
    files of the release do: the runner copies the test file there under its own name."""
    folder = (Path(package.tests_dir) / test).parent.as_posix()
    return render_test_sh(package.repo_dir_name, package.env_name, PER_TEST_TIMEOUT, Path(test).name,
                          tests_dir="" if folder == "." else folder, source_root=package.source_root or "")


def instruction(package: CorpusPackage, task: CorpusTask) -> str:
    return (f"Implement `{task.module}` of {package.name} {package.version} so that the package's own tests "
            f"(`{package.tests_dir or '.'}/{task.test}`) pass. The rest of the package is complete.\n")


def drop_dangling_links(repo: Path) -> None:
    """Remove links into what was left out (tenacity's README.rst points into its docs): no test reads them, and
    the dataset ships no link to nothing (the runner's copy leaves such links out too: agent/task/workspace.py)."""
    for path in sorted(repo.rglob("*")):
        if path.is_symlink() and not path.exists():
            path.unlink()


def write_task(root: Path, index: int, package: CorpusPackage, task: CorpusTask, tree: Path) -> dict:
    """``annotations/annotation_<index>/`` of one task; its meta row (test_cases still empty)."""
    folder = root / "annotations" / f"annotation_{index}"
    if folder.exists():
        shutil.rmtree(folder)
    repo = folder / package.repo_dir_name
    test_path = Path(package.tests_dir) / task.test
    shutil.copytree(tree, repo, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
    drop_dangling_links(repo)
    (repo / test_path).unlink()
    canonical = (tree / task.module).read_text(encoding="utf-8")
    (repo / task.module).write_text("", encoding="utf-8")
    files = {"canonical.py": canonical, "test.py": (tree / test_path).read_text(encoding="utf-8"),
             "test.sh": test_sh(package, task.test), "instruction.txt": instruction(package, task),
             "latex.txt": f"{package.name} {package.version}: {task.module}\n"}
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return {"index": index, "repo_dir_name": package.repo_dir_name, "target_file_path": task.module,
            "if_test": True, "init_content": "", "test_cases": [], "package": package.name,
            "version": package.version, "half": package.half, "test_file": str(test_path)}


def write_requirements(root: Path, package: CorpusPackage) -> None:
    folder = root / "requirements"
    folder.mkdir(parents=True, exist_ok=True)
    lines = list(dict.fromkeys((*RUNNER_REQUIREMENTS, *package.requirements)))
    (folder / f"{package.env_name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_meta(root: Path, rows: list[dict]) -> None:
    text = "".join(json.dumps(row) + "\n" for row in sorted(rows, key=lambda r: r["index"]))
    (root / "annotation_meta.jsonl").write_text(text, encoding="utf-8")


@dataclass(frozen=True)
class BareRun:
    """Bare pytest on a task: its exit code, output, wall time and JUnit report (None if it wrote none)."""

    exit_code: int | None
    output: str
    duration_sec: float
    junit: bytes | None


def bare_pytest(dataset: DatasetManager, index: int, python: str, extra: list[str],
                timeout_sec: float) -> BareRun:
    """pytest as the task's test.sh runs it, on the reference, with no runner around it: a private copy (the
    runner's own ``prepare``), the task's interpreter, working folder and PYTHONPATH; nothing else."""
    run_dir = make_dir("corpus-bare")
    try:
        layout = prepare(dataset, index, dataset.canonical(index), run_dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RECODE_"))}
        env["PYTHONPATH"] = layout.pythonpath or ""
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        argv = [python, "-m", "pytest", os.path.basename(layout.test), "-p", "no:cacheprovider",
                f"--junitxml={layout.junit}", "-o", f"timeout={layout.per_test_timeout or PER_TEST_TIMEOUT}", *extra]
        start = time.monotonic()
        try:
            done = subprocess.run(argv, cwd=layout.workdir, env=env, capture_output=True, text=True,
                                  timeout=timeout_sec)
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            code, output = None, f"timed out after {timeout_sec:g} s\n{partial}"
        duration = time.monotonic() - start
        junit = Path(layout.junit).read_bytes() if os.path.isfile(layout.junit) else None
        return BareRun(code, output, duration, junit)
    finally:
        remove_tree(run_dir)


# Collection printing one node id a line whatever verbosity the package's addopts set: an absolute level, after them,
# where ``-q`` would add to theirs (lark's ``-q`` made ``-qq``: counts per file; mako's ``-v`` made the tree).
COLLECT = ("--collect-only", "--verbosity=-1")


def collected_names(output: str) -> list[str]:
    """Test names as the JUnit report names them, from collection run with ``COLLECT``: each node id cut as pytest's
    JUnit writer cuts it (``agent.task.test_names``: an IPv6 URL's ``[::1]`` is a parameter, not a part)."""
    names = []
    for line in output.splitlines():
        node, case = node_and_case(line.strip())
        if node and not line.startswith((" ", "ERROR", "FAILED")):
            names.append(case)
    return sorted(set(names))


def stable_names(collected: list[str], run: BareRun) -> tuple[list[str], list[str]]:
    """(names, unstable): the collected names the bare run's report also holds, as the runner will read them,
    and the others: ids built from the clock or random values (marshmallow parametrizes with
    ``datetime.now()``) name another test in every session, so the metadata cannot expect them by name."""
    reported = {case.name for case in parse_junit(run.junit)} if run.junit else set()
    return [n for n in collected if n in reported], [n for n in collected if n not in reported]


def bare_outcome(run: BareRun) -> tuple[str, int]:
    """("passed", tests) when every test passed bare (none skipped), else (what happened, tests)."""
    cases = parse_junit(run.junit) if run.junit else []
    bad = {kind: sum(c.outcome == kind for c in cases) for kind in ("failure", "error", "skipped")}
    if run.exit_code == 0 and cases and not any(bad.values()):
        return "passed", len(cases)
    counts = ", ".join(f"{n} {kind}" for kind, n in bad.items() if n)
    return f"not passed (exit {run.exit_code}{', ' + counts if counts else ''})", len(cases)
