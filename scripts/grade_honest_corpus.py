"""Grade the honest corpus (docs/honest_corpus.md): bare pytest against the real runner, guard on, sandbox required.

    python scripts/grade_honest_corpus.py [--cache-dir DIR] [--halves dev heldout] [--only dev:3,heldout:1]
                                          [--no-cost] [--cost-repeats N] [--json FILE] [--markdown FILE]

Each task's reference (the package's real module) is graded three ways in
its own environment: bare ``python -m pytest`` as test.sh runs it; the
runner as a real evaluation of a model's answer runs it (guard on,
``--sandbox required``); and, for the guard's cost, the runner with the
guard's watch off (``agent.runner.core.GUARD_WATCH``, as
scripts/bench_runner.py measures it). Prints one row per task, ``K/N passed
(T tests)`` per half and in all, and the worst cost ratio (guard on / off).
Exit 0 when every task whose tests pass bare is graded ``passed``, else 1.
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

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from unittest import mock  # noqa: E402

import agent.runner.core as runner_core  # noqa: E402
from agent.task.dataset import DatasetError, DatasetManager, TaskMeta  # noqa: E402
from agent.envs.cache import resolve_python  # noqa: E402
from agent.envs.spec import EnvError  # noqa: E402
from agent.common.progress import still_running, to_stderr  # noqa: E402
from agent.runner.core import RunnerOptions, run_candidate  # noqa: E402
from agent.common.text_table import fixed_width  # noqa: E402
from metrics.cli_flags import Parser  # noqa: E402
from scripts.build_honest_corpus import DEFAULT_CACHE  # noqa: E402
from scripts.honest_corpus import HALVES, BareRun, bare_outcome, bare_pytest  # noqa: E402

COST_BOUND = 1.25  # issue 29: the guard costs at most 25 % on every task of the corpus
COLUMNS = ("half", "task", "package", "version", "module", "test file", "tests", "bare", "verdict", "cost",
           "evidence")


@dataclass(frozen=True)
class Grade:
    """One task's grading: bare pytest's outcome, the runner's verdict and its evidence, and the times."""

    half: str
    index: int
    package: str
    version: str
    module: str
    test_file: str
    tests: int
    bare: str  # "passed", or what went wrong under bare pytest
    verdict: str
    evidence: str  # the runner's first failure line when not passed
    bare_sec: float
    guard_sec: float
    off_sec: float | None  # the runner with the guard's watch off (None with --no-cost)
    suspicious: tuple[str, ...] = ()  # what the guard noticed but no exact rule decides (never the verdict)

    @property
    def ratio(self) -> float | None:
        return self.guard_sec / self.off_sec if self.off_sec else None


def runner_result(dataset: DatasetManager, meta: TaskMeta, options: RunnerOptions, watch: bool) -> dict:
    with mock.patch.object(runner_core, "GUARD_WATCH", watch):
        return run_candidate(dataset, meta.index, dataset.canonical(meta.index), options)


def paired_times(dataset: DatasetManager, meta: TaskMeta, options: RunnerOptions, repeats: int,
                 guarded: dict) -> tuple[float, float]:
    """(guard on, guard off) in seconds, the pair whose ratio is the median of ``repeats`` pairs run back to
    back in alternating order (a busy moment of a shared machine hits both alike); ``guarded`` is the first
    guard-on run."""
    def timed(watch: bool) -> float:
        return runner_result(dataset, meta, options, watch=watch)["duration_sec"]

    pairs = []
    for repeat in range(max(repeats, 1)):
        if repeat % 2:  # off first
            off = timed(False)
            pairs.append((timed(True), off))
        else:  # on first (the first guard-on run is the graded one)
            on = guarded["duration_sec"] if repeat == 0 else timed(True)
            pairs.append((on, timed(False)))
    pairs.sort(key=lambda pair: pair[0] / pair[1] if pair[1] else 0.0)
    return pairs[len(pairs) // 2]


def grade_task(dataset: DatasetManager, meta: TaskMeta, options: RunnerOptions, cost: bool, repeats: int = 1,
               stage: Callable[[str], None] = lambda text: None) -> Grade:
    """The runs of one task; ``stage`` hears which is running (each may take minutes)."""
    stage("its environment")
    python = resolve_python(dataset, meta.index, options.env_backend)
    stage("bare pytest")
    bare_run = bare_pytest(dataset, meta.index, python, [], timeout_sec=options.timeout_sec)
    bare, tests = bare_outcome(bare_run)
    stage("the runner, guard on")
    guarded = runner_result(dataset, meta, options, watch=True)
    if not cost:
        return _grade(meta, bare_run, tests, bare, guarded, guarded["duration_sec"], None)
    stage("the runner, guard on and off in pairs")
    return _grade(meta, bare_run, tests, bare, guarded, *paired_times(dataset, meta, options, repeats, guarded))


def _grade(meta: TaskMeta, bare_run: BareRun, tests: int, bare: str, guarded: dict, on_sec: float,
           off_sec: float | None) -> Grade:
    evidence = "" if guarded["status"] == "passed" else \
        (guarded["failure_messages"] or ["(no message)"])[0].splitlines()[0]
    return Grade(half=meta.extra.get("half", "?"), index=meta.index, package=meta.extra.get("package", "?"),
                 version=meta.extra.get("version", "?"), module=meta.target_file_path,
                 test_file=meta.extra.get("test_file", "?"), tests=tests, bare=bare, verdict=guarded["status"],
                 evidence=evidence, bare_sec=bare_run.duration_sec, guard_sec=on_sec, off_sec=off_sec,
                 suspicious=tuple(guarded.get("suspicious", ())))


def row(grade: Grade) -> list[str]:
    cost = f"{grade.ratio:.2f}x" if grade.ratio else "-"
    return [grade.half, str(grade.index), grade.package, grade.version, grade.module, grade.test_file,
            str(grade.tests), grade.bare, grade.verdict, cost, grade.evidence[:200]]


def totals(grades: list[Grade]) -> str:
    """``K/N passed (T tests)``: N the tasks whose tests pass bare, K those of them graded passed."""
    honest = [g for g in grades if g.bare == "passed"]
    passed = sum(g.verdict == "passed" for g in honest)
    return f"{passed}/{len(honest)} passed ({sum(g.tests for g in honest)} tests)"


def summary_lines(grades: list[Grade]) -> list[str]:
    lines = [f"{half}: {totals([g for g in grades if g.half == half])}"
             for half in HALVES if any(g.half == half for g in grades)]
    lines.append(f"all: {totals(grades)}")
    unclean = [g for g in grades if g.bare != "passed"]
    if unclean:
        lines.append("not counted (tests do not pass bare): " + ", ".join(f"{g.half}:{g.index}" for g in unclean))
    noted = [g for g in grades if g.suspicious]
    if noted:
        lines.append("with a suspicious note (not a verdict): " + ", ".join(f"{g.half}:{g.index}" for g in noted))
    costed = [g for g in grades if g.ratio and g.verdict == "passed"]  # a conviction may end a run early
    if costed:
        worst = max(costed, key=lambda g: g.ratio or 0.0)
        above = sum((g.ratio or 0.0) > COST_BOUND for g in costed)
        lines.append(f"guard cost (runner guard on / guard off, tasks graded passed): median "
                     f"{statistics.median(g.ratio or 0.0 for g in costed):.2f}x, {above}/{len(costed)} above "
                     f"{COST_BOUND:.2f}x, worst {worst.ratio:.2f}x on {worst.half}:{worst.index} {worst.package} "
                     f"{worst.test_file} ({worst.guard_sec:.1f} s / {worst.off_sec:.1f} s)")
    return lines


def markdown(grades: list[Grade]) -> str:
    """The table and the totals as Markdown (for notes and closing reports)."""
    cells = [[cell.replace("|", "\\|") for cell in row(g)] for g in grades]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(line) + " |" for line in cells]
    return "\n".join(lines + [""] + [f"- {line}" for line in summary_lines(grades)]) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help="where scripts/build_honest_corpus.py built the halves (default %(default)s)")
    parser.add_argument("--halves", nargs="+", choices=HALVES, default=list(HALVES))
    parser.add_argument("--only", dest="tasks", metavar="HALF:INDEX,...",
                        help="only these tasks of the halves, e.g. dev:3,dev:7")
    parser.add_argument("--env-backend", help="environment backend (default: the harness's)")
    parser.add_argument("--timeout-sec", type=float, default=1800, help="per run (default %(default)g)")
    parser.add_argument("--no-cost", action="store_true", help="skip the guard-off run (no cost column)")
    parser.add_argument("--cost-repeats", type=int, default=1, metavar="N",
                        help="guard on/off pairs per task for the cost column, the median pair's ratio is shown "
                             "(default %(default)s)")
    parser.add_argument("--json", type=Path, help="also write every task's grading to this JSON file")
    parser.add_argument("--markdown", type=Path, help="also write the table and totals to this Markdown file")
    return parser.parse_args(argv)


def selected(cache: Path, halves: list[str], tasks: str | None) -> list[tuple[DatasetManager, TaskMeta]]:
    wanted = {tuple(item.split(":", 1)) for item in tasks.split(",")} if tasks else None
    chosen = []
    for half in halves:
        dataset = DatasetManager(cache / half)
        chosen += [(dataset, meta) for meta in dataset.runnable()
                   if wanted is None or (half, str(meta.index)) in wanted]
    return chosen


def write_reports(args: argparse.Namespace, grades: list[Grade]) -> None:
    """The JSON and Markdown files asked for, as they stand (each replaced whole, never half written)."""
    for path, text in ((args.json, lambda: json.dumps([asdict(g) for g in grades], indent=1)),
                       (args.markdown, lambda: markdown(grades))):
        if path:
            partial = path.with_name(path.name + ".partial")
            partial.write_text(text(), encoding="utf-8")
            partial.replace(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = RunnerOptions(sandbox="required", env_backend=args.env_backend, timeout_sec=args.timeout_sec)
    grades = []
    try:
        for dataset, meta in selected(args.cache_dir.resolve(), args.halves, args.tasks):
            what = f"grading {meta.extra.get('half', '?')}:{meta.index} ({meta.extra.get('package', '?')})"
            with still_running(what, to_stderr) as step:
                grades.append(grade_task(dataset, meta, options, cost=not args.no_cost, repeats=args.cost_repeats,
                                         stage=step.now))
            print(" | ".join(row(grades[-1])), file=sys.stderr, flush=True)
            write_reports(args, grades)  # after each task: a grading stopped halfway keeps what it measured
    except (DatasetError, EnvError) as exc:
        print(f"error: {exc} (build the corpus first: python scripts/build_honest_corpus.py)", file=sys.stderr)
        return 2
    print("\n".join(fixed_width(COLUMNS, [row(g) for g in grades])))
    print("\n".join(summary_lines(grades)))
    honest = [g for g in grades if g.bare == "passed"]
    return 0 if honest and all(g.verdict == "passed" for g in honest) else 1


if __name__ == "__main__":
    sys.exit(main())
