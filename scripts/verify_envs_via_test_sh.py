"""Gold check of a dataset: canonical.py must pass every task's tests and init_content must fail them.

    python scripts/verify_envs_via_test_sh.py [--dataset-dir work_dir/dataset] [--task-ids 1,2]
        [--max-workers 1] [--timeout-sec 600] [--keep-modified [--keep-dir DIR]] [--backend NAME]

Runs both through the real test runner (private copies, sandbox, the task's
environment, built on first use) and prints one row per task. The dataset is
never modified: ``--keep-modified`` keeps, per task, a copy of its repository
in the state the canonical check ran (canonical code as the target file,
test.py and canonical.py beside it) under ``--keep-dir``. Exit status: 0 when
every task behaves, 1 when any outcome is unexpected, 2 for a broken dataset
or bad arguments (one line, no traceback).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from agent.clean_test_runner import RunnerOptions, prepare, run_candidate
from agent.envs.cli import (
    add_backend_argument,
    add_dataset_arguments,
    add_task_ids_argument,
    dataset_dir,
    parse_task_ids,
)
from agent.runner.sandbox import SANDBOX_MODES
from agent.utils import DatasetError, DatasetManager

INIT_MAY_END = ("failed", "error")


@dataclass(frozen=True)
class TaskCheck:
    """Outcome of one task's gold check."""

    index: int
    expected: tuple[str, ...]
    canonical: dict
    init: dict

    @property
    def ok(self) -> bool:
        return self.canonical["status"] == "passed" and self.init["status"] in INIT_MAY_END

    def problem(self) -> str:
        """First line explaining an unexpected outcome ('' when fine)."""
        if self.canonical["status"] != "passed":
            first = (self.canonical["failure_messages"] or ["no message"])[0].splitlines()[0]
            return f"canonical {self.canonical['status']}: {first}"[:160]
        if self.init["status"] not in INIT_MAY_END:
            return f"init_content ended '{self.init['status']}' (expected a failure)"
        return ""


def check_task(dataset: DatasetManager, index: int, options: RunnerOptions) -> TaskCheck:
    meta = dataset.get(index)
    return TaskCheck(index=index, expected=meta.test_cases,
                     canonical=run_candidate(dataset, index, dataset.canonical(index), options),
                     init=run_candidate(dataset, index, meta.init_content, options))


def keep_modified(dataset: DatasetManager, index: int, keep_dir: Path) -> Path:
    """A copy of task ``index``'s repository as the canonical check ran it; returns its working folder."""
    return Path(prepare(dataset, index, dataset.canonical(index), keep_dir / f"annotation_{index}").workdir)


def _cell(result: dict, expected: tuple[str, ...]) -> str:
    passed = sum(bool(result["test_summary"].get(name)) for name in expected)
    return f"{result['status']} {passed}/{len(expected)}"


def render(checks: list[TaskCheck]) -> str:
    rows = [("task", "canonical", "init_content", "seconds", "verdict")]
    for check in checks:
        seconds = check.canonical["duration_sec"] + check.init["duration_sec"]
        rows.append((str(check.index), _cell(check.canonical, check.expected), _cell(check.init, check.expected),
                     f"{seconds:.1f}",
                     "ok" if check.ok else "UNEXPECTED: " + check.problem()))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4]
                     for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_arguments(parser)
    add_task_ids_argument(parser)
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
    try:
        dataset = DatasetManager(dataset_dir(args))
        tasks = dataset.select(parse_task_ids(args.task_ids))
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
        with ThreadPoolExecutor(max_workers=args.max_workers) as pool:
            checks = list(pool.map(lambda meta: check_task(dataset, meta.index, options), tasks))
    except (DatasetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(checks))
    if keep_dir is not None:
        for check in checks:
            print(f"task {check.index}: modified copy kept in {keep_modified(dataset, check.index, keep_dir)}")
    bad = [c.index for c in checks if not c.ok]
    print(f"{len(checks) - len(bad)}/{len(checks)} tasks behave as expected"
          + (f"; unexpected: {', '.join(map(str, bad))}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
