"""Gold check of a dataset: canonical.py must pass every task's tests and init_content must fail them.

Runs both through the real test runner (private copies, sandbox, the task's
environment, built on first use) and prints one row per task. Exit status:
0 when every task behaves, 1 when any outcome is unexpected, 2 for a broken
dataset or bad arguments (one line, no traceback).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from agent.clean_test_runner import RunnerOptions, run_candidate
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


def parse_ids(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise DatasetError(f"--task-ids must be comma-separated integers, got '{text}'") from None


def check_task(dataset: DatasetManager, index: int, options: RunnerOptions) -> TaskCheck:
    meta = dataset.get(index)
    return TaskCheck(index=index, expected=meta.test_cases,
                     canonical=run_candidate(dataset, index, dataset.canonical(index), options),
                     init=run_candidate(dataset, index, meta.init_content, options))


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset-dir", required=True)
    parser.add_argument("--task-ids", help="comma-separated ids (default: every runnable task)")
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--timeout-sec", type=float, default=RunnerOptions.timeout_sec)
    parser.add_argument("--env-backend", default=None, help="conda, uv, venv or current (default: auto)")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto")
    args = parser.parse_args(argv)
    try:
        dataset = DatasetManager(args.dataset_dir)
        tasks = dataset.select(parse_ids(args.task_ids))
        if not tasks:
            raise DatasetError(f"no runnable task in {dataset.meta_path}")
        for meta in tasks:
            dataset.check_task(meta.index)
            dataset.test_sh(meta.index)
        options = RunnerOptions(timeout_sec=args.timeout_sec, sandbox=args.sandbox, env_backend=args.env_backend)
        with ThreadPoolExecutor(max_workers=max(1, args.max_workers)) as pool:
            checks = list(pool.map(lambda meta: check_task(dataset, meta.index, options), tasks))
    except (DatasetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(checks))
    bad = [c.index for c in checks if not c.ok]
    print(f"{len(checks) - len(bad)}/{len(checks)} tasks behave as expected"
          + (f"; unexpected: {', '.join(map(str, bad))}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
