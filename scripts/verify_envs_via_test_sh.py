"""Gold check of a dataset: canonical.py must pass every task's tests and init_content must fail them.

    python scripts/verify_envs_via_test_sh.py [--dataset-dir work_dir/dataset] [--task-ids 1,2]
        [--max-workers 1] [--timeout-sec 600] [--keep-modified [--keep-dir DIR]] [--env-backend NAME]

Runs both through the real test runner (private copies, sandbox, the task's
environment, built on first use). A progress bar (elapsed / remaining) runs
on stderr; each task's row is printed as soon as it finishes; a summary by
paper (ResearchCodeBench tasks) or for the whole dataset closes the output.
Each task is one of: as expected; weak test (init_content passes too: the
tests cannot tell it from the answer); unrunnable (the canonical run failed
on something this machine cannot provide offline, e.g. a stubbed import or
the network, with the evidence); BROKEN (anything else). The dataset is never
modified: ``--keep-modified`` keeps, per task, a copy of its repository in the
state the canonical check ran under ``--keep-dir``. Exit status: 0 when
no task is broken, 1 otherwise, 2 for a broken dataset or bad arguments (one
line, no traceback).
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
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor

from tqdm import tqdm

from agent.common.progress import drain
from agent.runner.core import RunnerOptions, prepare
from agent.envs.cli import add_backend_argument
from agent.rcb.gold import BROKEN, EXPECTED, KINDS, UNRUNNABLE, WEAK, TaskCheck, check_task
from agent.runner.sandbox import SANDBOX_MODES
from agent.common.text_table import fixed_width
from agent.task.dataset import DatasetError, DatasetManager
from metrics.cli_flags import Parser, add_dataset_dirs, add_task_ids, dataset_dir

ROW_COLUMNS = ("task", "paper", "canonical", "init_content", "seconds", "stubs", "verdict")


def keep_modified(dataset: DatasetManager, index: int, keep_dir: Path) -> Path:
    """A copy of task ``index``'s repository as the canonical check ran it; returns its working folder."""
    return Path(prepare(dataset, index, dataset.canonical(index), keep_dir / f"annotation_{index}").workdir)


def _cell(result: dict, expected: tuple[str, ...]) -> str:
    passed = sum(bool(result["test_summary"].get(name)) for name in expected)
    return f"{result['status']} {passed}/{len(expected)}"


def row(check: TaskCheck) -> tuple[str, ...]:
    verdict = check.verdict.kind + (f": {check.verdict.reason}" if check.verdict.kind != EXPECTED else "")
    return (str(check.index), check.paper or "-", _cell(check.reference, check.expected),
            _cell(check.start, check.expected), f"{check.seconds:.1f}", ",".join(sorted(check.stubs)) or "-", verdict)


def format_row(cells: tuple[str, ...]) -> str:
    widths = (5, 20, 13, 13, 7, 12)
    return "  ".join(cell.ljust(width) for cell, width in zip(cells[:-1], widths)) + "  " + cells[-1]


def summary(checks: list[TaskCheck]) -> str:
    """Counts of each verdict per paper (one 'all tasks' row for datasets without papers) and in total."""
    papers = sorted({c.paper for c in checks})
    rows = []
    for paper in papers + ["(all)"]:
        mine = [c for c in checks if paper == "(all)" or c.paper == paper]
        counts = [sum(c.verdict.kind == kind for c in mine) for kind in KINDS]
        stubs = sorted({name for c in mine for name in c.stubs})
        rows.append([paper or "(no paper)", str(len(mine)), *map(str, counts), ", ".join(stubs) or "-",
                     f"{sum(c.seconds for c in mine):.0f}"])
    return "\n".join(fixed_width(["paper", "tasks", *KINDS, "stubs", "test seconds"], rows))


def run_checks(dataset: DatasetManager, task_ids: list[int], options: RunnerOptions, workers: int) -> list[TaskCheck]:
    """Check every task, printing each row as it finishes under a progress bar."""
    checks: list[TaskCheck] = []
    started = time.monotonic()
    print(format_row(ROW_COLUMNS), flush=True)
    with tqdm(total=len(task_ids), desc="gold check", unit="task", file=sys.stderr, mininterval=1.0,
              disable=not sys.stderr.isatty(),
              bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]") as bar, \
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        def finished(future: Future) -> None:
            check = future.result()
            checks.append(check)
            bar.write(format_row(row(check)), file=sys.stdout)
            sys.stdout.flush()
            bar.update(1)

        futures = [pool.submit(check_task, dataset, index, options) for index in task_ids]
        drain(futures, finished, lambda done: f"gold check: {done}/{len(task_ids)} task(s) done "
                                              f"({time.monotonic() - started:.0f} s)")
    return sorted(checks, key=lambda c: c.index)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_dirs(parser)
    add_task_ids(parser)
    parser.add_argument("--max-workers", type=int, default=1, help="tasks checked at once (default: 1)")
    parser.add_argument("--timeout-sec", type=float, default=600, help="per test run (default: 600)")
    parser.add_argument("--keep-modified", action="store_true",
                        help="keep each task's repository copy as the canonical check ran it (under --keep-dir)")
    parser.add_argument("--keep-dir", help="where --keep-modified puts the copies (default: a new temporary folder)")
    add_backend_argument(parser)
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto")
    args = parser.parse_args(argv)
    if args.max_workers < 1:
        parser.error(f"--max-workers must be at least 1, got {args.max_workers}")
    root = dataset_dir(parser, args, _CHECKOUT / "work_dir" / "dataset")
    started = time.monotonic()
    try:
        dataset = DatasetManager(root)
        tasks = dataset.select(args.task_ids)
        if not tasks:
            raise DatasetError(f"no runnable task in {dataset.meta_path}")
        for meta in tasks:
            dataset.check_task(meta.index)
            dataset.test_sh(meta.index)
        keep_dir = None
        if args.keep_modified:
            keep_dir = Path(args.keep_dir).resolve() if args.keep_dir else Path(tempfile.mkdtemp(prefix="recode-verify-"))
            taken = [str(keep_dir / f"annotation_{meta.index}") for meta in tasks if (keep_dir / f"annotation_{meta.index}").exists()]
            if taken:
                raise DatasetError(f"{taken[0]} already exists; choose another --keep-dir")
        options = RunnerOptions(timeout_sec=args.timeout_sec, sandbox=args.sandbox, env_backend=args.backend)
        checks = run_checks(dataset, [meta.index for meta in tasks], options, args.max_workers)
    except (DatasetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if keep_dir is not None:
        for check in checks:
            print(f"task {check.index}: modified copy kept in {keep_modified(dataset, check.index, keep_dir)}")
    print()
    print(summary(checks))
    counts = {kind: [c.index for c in checks if c.verdict.kind == kind] for kind in KINDS}
    print(f"{len(counts[EXPECTED])}/{len(checks)} tasks behave as expected, {len(counts[WEAK])} weak test(s), "
          f"{len(counts[UNRUNNABLE])} unrunnable offline, {len(counts[BROKEN])} broken; "
          f"wall time {time.monotonic() - started:.0f} s")
    for kind in (WEAK, UNRUNNABLE, BROKEN):
        for check in (c for c in checks if c.verdict.kind == kind):
            print(f"{kind}: task {check.index}{f' ({check.paper})' if check.paper else ''}: {check.verdict.reason}")
    return 1 if counts[BROKEN] else 0


if __name__ == "__main__":
    sys.exit(main())
