"""Cost of one evaluation through our runner against the task's own way of running its test, and where it goes.

    python scripts/bench_runner.py --dataset-dir DIR [--repeats 5] [--papers minp,DyT] [--sandbox auto]

One task per paper (ResearchCodeBench datasets; other datasets: every task),
its canonical answer, environments warm. Each repetition runs, in an order
rotated from one repetition to the next (paired: a slow moment of a shared
machine hits all of them alike), seven commands in the same environment:

  a   the task's own command: ``python paper2code_test.py`` in a copy of the
      paper folder, as the ResearchCodeBench release runs it (other tasks:
      the pytest command of test.sh), bytecode of the paper's files cached
      as a user's repeated runs would have it;
  a0  the same without that cache (our runs never write bytecode);
  p   bare ``python -m pytest`` on the same test file, no bytecode cache;
  g   our runner with the sandbox off: guard plugin, JUnit report, limits;
  b   the in-loop evaluation path (``agent.parallel.slots.run_tests``), sandbox on;
  w   b with the guard's watch off (``agent.runner.core.GUARD_WATCH``: the
      plugin only witnesses and seals; no capability rules, integrity or
      result checks, reference watch);
  c   the CLI ``agent/clean_test_runner.py --canonical --json`` (a second
      interpreter on top of b).

It prints per paper b/a (target <= 1.15), c/a (target <= 1.3) and the watch's
share of an evaluation (b - w) / b (target <= 5 %), medians of the paired
per-repetition ratios; with ``--instructions`` also that share counted in
instructions (b and w once each under valgrind's cachegrind, sandbox off:
the same from run to run whatever the machine's load, where wall time on a
shared machine swings by tens of percent), beside it the same share of the
watch in Python (``RECODE_GUARD_NATIVE=off``: a machine without a C compiler
for the guard's helper, see ``agent/runner/native.py``), and the
breakdown of b - a and c - b in ms, each a median of paired per-repetition
differences or a phase the runner itself timed (``agent.runner.phases``):
bytecode a0-a, pytest p-a0, guard (process time of g)-p, sandbox
(bwrap/setpriv process time b-g, plus host-side set-up), copy, verdict
(channel and JUnit parsing), other (rest of b), cli c-b, watch b-w. Then the
environment-cache hit time (target <= 50 ms) and the machine's load.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from agent.common.setup_hint import name_missing_modules  # noqa: E402

name_missing_modules()

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Callable
from unittest import mock

import agent.runner.core as runner_core
from agent.runner.core import REPO_ROOT, Layout, RunnerOptions, prepare, resolve_interpreter, run_candidate
from agent.envs.cache import resolve_python
from agent.parallel.slots import run_tests
from agent.runner.phases import recording
from agent.runner.sandbox import SANDBOX_MODES
from agent.common.text_table import fixed_width
from agent.task.dataset import DatasetError, DatasetManager, TaskMeta
from metrics.cli_flags import Parser, add_dataset_dirs, add_flag, dataset_dir

DEFAULT_DATASET = REPO_ROOT / "work_dir" / "dataset"
CLI = REPO_ROOT / "agent" / "clean_test_runner.py"
INLOOP_TARGET, CLI_TARGET, WATCH_TARGET = 1.15, 1.3, 0.05
HIT_TARGET_MS = 50.0
RUNNER_PHASES = ("lint", "resolve", "copy", "sandbox set-up", "process", "verdict", "cleanup")
BREAKDOWN = ("bytecode", "pytest", "guard", "sandbox", "copy", "verdict", "other", "cli", "watch")


@dataclass(frozen=True)
class Sample:
    """One repetition of one paper: wall seconds per command, and the phases the runner timed in g and b."""

    wall: dict[str, float]
    phases_g: dict[str, float]
    phases_b: dict[str, float]


def groups(dataset: DatasetManager, papers: list[str] | None) -> list[tuple[str, TaskMeta]]:
    """(name, first task) per paper of a ResearchCodeBench dataset, else (task id, task) per task."""
    chosen: dict[str, TaskMeta] = {}
    for meta in dataset.runnable():
        name = str(meta.extra.get("paper") or meta.index)
        chosen.setdefault(name, meta)
    if papers:
        unknown = sorted(set(papers) - set(chosen))
        if unknown:
            raise DatasetError(f"--papers: not in the dataset: {', '.join(unknown)} (known: {', '.join(chosen)})")
        return [(name, chosen[name]) for name in papers]
    return list(chosen.items())


def own_argv(meta: TaskMeta, python: str, layout: Layout) -> list[str]:
    """The task's own command: the paper's unittest script run directly, else test.sh's pytest line."""
    test = os.path.basename(layout.test)
    if meta.extra.get("benchmark") == "researchcodebench":
        return [python, test]
    return pytest_argv(python, layout)


def pytest_argv(python: str, layout: Layout) -> list[str]:
    argv = [python, "-m", "pytest", os.path.basename(layout.test), "-v", "-p", "no:cacheprovider"]
    return argv + ([f"--timeout={layout.per_test_timeout}"] if layout.per_test_timeout else [])


def command(argv: list[str], layout: Layout, bytecode: bool) -> Callable[[], None]:
    """A timed run of ``argv`` in the layout's working directory with test.sh's PYTHONPATH; must exit 0."""
    env = dict(os.environ, PYTHONPATH=layout.pythonpath or "")
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"

    def run() -> None:
        done = subprocess.run(argv, cwd=layout.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              check=False)
        if done.returncode != 0:
            tail = done.stdout.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise DatasetError(f"{' '.join(argv[1:3])} failed in {layout.workdir} (exit {done.returncode}): "
                               + " | ".join(tail))
    return run


def watch(on: bool) -> contextlib.AbstractContextManager:
    """The guard's watch on or off for the runs inside (this process's runner only)."""
    return mock.patch.object(runner_core, "GUARD_WATCH", on)


def runner_call(dataset: DatasetManager, meta: TaskMeta, options: RunnerOptions,
                sink: list[dict[str, float]], watched: bool = True) -> Callable[[], None]:
    """The in-loop evaluation of the canonical answer (the guard's watch on or off); its phases go to ``sink``."""
    canonical = dataset.canonical(meta.index)

    def run() -> None:
        with recording() as phases, watch(watched):
            result = run_tests(dataset, meta.index, canonical, options)
        if result["status"] != "passed":
            raise DatasetError(f"task {meta.index}: canonical did not pass under the runner ({result['status']}: "
                               f"{(result['failure_messages'] or [''])[0][:200]})")
        sink.append(phases)
    return run


def cli_call(dataset: DatasetManager, meta: TaskMeta, args: argparse.Namespace) -> Callable[[], None]:
    argv = [sys.executable, str(CLI), "--dataset-dir", str(dataset.root), "--task-id", str(meta.index),
            "--canonical", "--json", "--sandbox", args.sandbox, "--env-backend", args.env_backend or "",
            "--env-mode"]

    def run() -> None:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
        try:
            result = json.loads(done.stdout)
        except ValueError:
            raise DatasetError(f"task {meta.index}: the CLI printed no JSON: {done.stderr.strip()[-300:]}") from None
        if result.get("status") != "passed" or not result.get("interpreter"):
            raise DatasetError(f"task {meta.index}: the CLI did not pass ({result.get('status')})")
    return run


def counted(out: str) -> contextlib.AbstractContextManager:
    """The runner's test processes run under valgrind's instruction count, written to ``out``."""
    real = runner_core.pytest_argv

    def argv(python: str, layout: Layout) -> list[str]:
        return [shutil.which("valgrind") or "valgrind", "--tool=cachegrind", "--cache-sim=no",
                f"--cachegrind-out-file={out}", *real(python, layout)]
    return mock.patch.object(runner_core, "pytest_argv", argv)


def instructions(dataset: DatasetManager, meta: TaskMeta, args: argparse.Namespace, watched: bool,
                 native: bool = True) -> int:
    """Instructions the in-loop evaluation's test process executes, the guard's watch on or off (``native``:
    with its compiled helper, else in Python as where no C compiler is found)."""
    options = RunnerOptions(sandbox="off", env_backend=args.env_backend, timeout_sec=3600, memory_mb=None)
    with tempfile.TemporaryDirectory(prefix="recode-bench-ir-") as tmp:
        os.chmod(tmp, 0o777)  # the test process may run as the runner's unprivileged user
        out = os.path.join(tmp, "cachegrind.out")
        with counted(out), mock.patch.dict(os.environ, {} if native else {"RECODE_GUARD_NATIVE": "off"}):
            runner_call(dataset, meta, options, [], watched)()
        found = re.search(r"^summary:\s+(\d+)", Path(out).read_text(), re.MULTILINE)
    if found is None:
        raise DatasetError(f"task {meta.index}: valgrind wrote no instruction count")
    return int(found.group(1))


def counted_shares(dataset: DatasetManager, meta: TaskMeta, args: argparse.Namespace) -> dict[str, float]:
    """The watch's share in instructions, with its compiled helper and in Python; NaN, said on stderr, when the
    tests do not pass at valgrind's pace (tests bounded by time, such as LEN's, complete no iteration 30 times
    slower)."""
    try:
        off = instructions(dataset, meta, args, False)
        on, python = (instructions(dataset, meta, args, True, native) for native in (True, False))
    except DatasetError as exc:
        print(f"not counted in instructions: {exc}".splitlines()[0][:300], file=sys.stderr)
        return dict.fromkeys(COUNTED, math.nan)
    return {"watch Ir%": 100 * (on - off) / on, "python watch Ir%": 100 * (python - off) / python}


def timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def bench_paper(dataset: DatasetManager, meta: TaskMeta, args: argparse.Namespace) -> list[Sample]:
    """Warm everything once, then ``args.repeats`` rotated rounds of the six commands."""
    options = RunnerOptions(sandbox=args.sandbox, env_backend=args.env_backend)
    python, problem = resolve_interpreter(dataset, meta.index, options)
    if python is None:
        raise DatasetError(problem)
    canonical = dataset.canonical(meta.index)
    with tempfile.TemporaryDirectory(prefix="recode-bench-") as tmp:
        cached = prepare(dataset, meta.index, canonical, Path(tmp, "cached"))
        uncached = prepare(dataset, meta.index, canonical, Path(tmp, "uncached"))
        g_phases: list[dict[str, float]] = []
        b_phases: list[dict[str, float]] = []
        w_phases: list[dict[str, float]] = []
        commands = {
            "a": command(own_argv(meta, python, cached), cached, bytecode=True),
            "a0": command(own_argv(meta, python, uncached), uncached, bytecode=False),
            "p": command(pytest_argv(python, uncached), uncached, bytecode=False),
            "g": runner_call(dataset, meta, replace(options, sandbox="off", max_processes=None), g_phases),
            "b": runner_call(dataset, meta, options, b_phases),
            "w": runner_call(dataset, meta, options, w_phases, watched=False),
            "c": cli_call(dataset, meta, args),
        }
        names = list(commands)
        for name in names:  # warm: file caches, the paper's bytecode for a
            commands[name]()
        g_phases.clear(), b_phases.clear(), w_phases.clear()
        samples = []
        for turn in range(args.repeats):
            shift = turn % len(names)
            order = names[shift:] + names[:shift]
            if turn % 2:
                order.reverse()
            wall = {name: timed(commands[name]) for name in order}
            samples.append(Sample(wall=wall, phases_g=g_phases[-1], phases_b=b_phases[-1]))
    return samples


def breakdown(sample: Sample) -> dict[str, float]:
    """Seconds of b - a and c - b by cause, for one repetition (see the module docstring)."""
    wall, pb, pg = sample.wall, sample.phases_b, sample.phases_g
    parts = {
        "bytecode": wall["a0"] - wall["a"],
        "pytest": wall["p"] - wall["a0"],
        "guard": pg["process"] - wall["p"],
        "sandbox": pb["process"] - pg["process"] + pb.get("sandbox set-up", 0.0),
        "copy": pb.get("copy", 0.0),
        "verdict": pb.get("verdict", 0.0),
    }
    parts["other"] = wall["b"] - wall["a"] - sum(parts.values())
    parts["cli"] = wall["c"] - wall["b"]
    parts["watch"] = wall["b"] - wall["w"]
    return parts


def summarise(samples: list[Sample]) -> dict[str, float]:
    """Medians: seconds of a, b, c; the paired ratios; the breakdown in ms."""
    row = {name: statistics.median(s.wall[name] for s in samples) for name in ("a", "b", "c")}
    row["b/a"] = statistics.median(s.wall["b"] / s.wall["a"] for s in samples)
    row["c/a"] = statistics.median(s.wall["c"] / s.wall["a"] for s in samples)
    row["watch%"] = 100 * statistics.median((s.wall["b"] - s.wall["w"]) / s.wall["b"] for s in samples)
    parts = [breakdown(s) for s in samples]
    for name in BREAKDOWN:
        row[name] = 1000 * statistics.median(p[name] for p in parts)
    return row


def cache_hit_ms(dataset: DatasetManager, index: int, backend: str | None, repeats: int = 50) -> float:
    resolve_python(dataset, index, backend)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        resolve_python(dataset, index, backend, build=False)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


COUNTED = ("watch Ir%", "python watch Ir%")
HEADERS = ["paper", "task", "a s", "b s", "c s", "b/a", "c/a", "watch %", *(f"{name} ms" for name in BREAKDOWN)]


def table_row(name: str, task: str, row: dict[str, float]) -> list[str]:
    return [name, task, *(f"{row[k]:.2f}" for k in ("a", "b", "c")),
            *(f"{row[k]:.3f}" for k in ("b/a", "c/a")), f"{row['watch%']:.1f}", *(f"{row[k]:.0f}" for k in BREAKDOWN),
            *(_share(row[key]) for key in COUNTED if key in row)]


def _share(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    add_dataset_dirs(parser)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--papers", help="comma-separated paper names (default: every paper of the dataset)")
    add_flag(parser, "--env-backend", default=None, help="conda, uv, venv or current (default: auto)")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the watch's share in instructions (needs valgrind; slow)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on PATH (apt install valgrind)")
    root = dataset_dir(parser, args, DEFAULT_DATASET)
    print(f"start: {load_line()}", flush=True)
    rows, hits = [], []
    try:
        dataset = DatasetManager(root)
        chosen = groups(dataset, args.papers.split(",") if args.papers else None)
        if not chosen:
            raise DatasetError(f"no runnable task in {dataset.meta_path}")
        for name, meta in chosen:
            row = summarise(bench_paper(dataset, meta, args))
            if args.instructions:
                row.update(counted_shares(dataset, meta, args))
            rows.append((name, str(meta.index), row))
            hits.append(cache_hit_ms(dataset, meta.index, args.env_backend))
            share = f"  in instructions {_share(row['watch Ir%'])}%" if args.instructions else ""
            print(f"{name} (task {meta.index}): b/a {row['b/a']:.3f}  c/a {row['c/a']:.3f}  "
                  f"watch {row['watch%']:.1f}%{share}  [{load_line()}]", flush=True)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    median = {key: statistics.median([r[key] for _, _, r in rows if not math.isnan(r[key])] or [math.nan])
              for key in rows[0][2]}  # a paper whose tests valgrind's pace fails is left out of that median
    table = [table_row(name, task, row) for name, task, row in rows] + [table_row("median", "", median)]
    print("\n".join(fixed_width(HEADERS + (["watch Ir %", "in Python Ir %"] if args.instructions else []), table)))
    print(f"in-loop b / own a (median over papers): {median['b/a']:.3f}  (target <= {INLOOP_TARGET})")
    print(f"CLI c / own a (median over papers): {median['c/a']:.3f}  (target <= {CLI_TARGET})")
    print(f"guard's watch (b - w) / b (median over papers): {median['watch%']:.1f}%  "
          f"(target <= {100 * WATCH_TARGET:g}%)")
    if args.instructions:
        print(f"guard's watch in instructions (valgrind, median over papers): {_share(median['watch Ir%'])}%  "
              f"(target <= {100 * WATCH_TARGET:g}%); in Python, without its compiled helper: "
              f"{_share(median['python watch Ir%'])}%")
    print(f"environment cache hit (median): {statistics.median(hits):.3f} ms  (target <= {HIT_TARGET_MS:g} ms)")
    print(f"end: {load_line()}; {args.repeats} paired repetition(s) per paper, sandbox {args.sandbox}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
