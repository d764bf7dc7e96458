"""Gold check of a dataset: canonical.py must pass every task's tests and init_content must fail them.

Runs both through the real test runner (private copies, sandbox, the task's
environment, built on first use). A progress bar (elapsed / remaining) runs
on stderr; each task's row is printed as soon as it finishes; a summary by
paper (ResearchCodeBench tasks) or for the whole dataset closes the output.
Each task is one of: as expected; weak test (init_content passes too: the
tests cannot tell it from the answer); unrunnable (the canonical run failed
on something this machine cannot provide offline, e.g. a stubbed import or
the network, with the evidence); BROKEN (anything else). Exit status: 0 when
no task is broken, 1 otherwise, 2 for a broken dataset or bad arguments (one
line, no traceback).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from tqdm import tqdm

from agent.clean_test_runner import RunnerOptions
from agent.rcb.gold import BROKEN, EXPECTED, KINDS, UNRUNNABLE, WEAK, TaskCheck, check_task
from agent.runner.sandbox import SANDBOX_MODES
from agent.text_table import fixed_width
from agent.utils import DatasetError, DatasetManager

ROW_COLUMNS = ("task", "paper", "canonical", "init_content", "seconds", "stubs", "verdict")


def parse_ids(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise DatasetError(f"--task-ids must be comma-separated integers, got '{text}'") from None


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
    print(format_row(ROW_COLUMNS), flush=True)
    with tqdm(total=len(task_ids), desc="gold check", unit="task", file=sys.stderr, mininterval=1.0,
              bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]") as bar, \
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(check_task, dataset, index, options) for index in task_ids]
        for future in as_completed(futures):
            check = future.result()
            checks.append(check)
            bar.write(format_row(row(check)), file=sys.stdout)
            sys.stdout.flush()
            bar.update(1)
    return sorted(checks, key=lambda c: c.index)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset-dir", required=True)
    parser.add_argument("--task-ids", help="comma-separated ids (default: every runnable task)")
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--timeout-sec", type=float, default=RunnerOptions.timeout_sec)
    parser.add_argument("--env-backend", default=None, help="conda, uv, venv or current (default: auto)")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        dataset = DatasetManager(args.dataset_dir)
        tasks = dataset.select(parse_ids(args.task_ids))
        if not tasks:
            raise DatasetError(f"no runnable task in {dataset.meta_path}")
        for meta in tasks:
            dataset.check_task(meta.index)
            dataset.test_sh(meta.index)
        options = RunnerOptions(timeout_sec=args.timeout_sec, sandbox=args.sandbox, env_backend=args.env_backend)
        checks = run_checks(dataset, [meta.index for meta in tasks], options, args.max_workers)
    except (DatasetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
