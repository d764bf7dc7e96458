"""The release's test-runner command: ``python agent/clean_test_runner.py --work-dir work_dir --task-ids N``
(the release's spelling ``--task-id N`` works too).

Tests the target file as it is on disk in the dataset (or ``--candidate FILE``
/ ``--canonical``) and leaves the JUnit report where the release leaves it,
``annotation_<N>/pytest_report/report.xml``. The runner itself (private copy,
sandbox, limits, verdict; its threat model) is :mod:`agent.runner.core`, whose
public names are re-exported here for code written against this module.
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

from agent.task.dataset import DatasetError, DatasetManager, dataset_in  # noqa: E402
from agent.runner.core import (  # noqa: E402,F401  (re-exported: the release's module name for the runner)
    REPO_ROOT, Layout, RunnerOptions, prepare, resolve_interpreter, run_candidate, sandbox_prefix,
)
from agent.runner.sandbox import SANDBOX_MODES  # noqa: E402
from metrics.cli_flags import Parser, add_dataset_dirs, add_flag, dataset_dir, int_list  # noqa: E402
from metrics.run_status import INFRA_ERROR  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(
        description="Run one task's tests, as the release's test runner does: on the target file as it is on "
                    "disk in the dataset (or --candidate FILE / --canonical). Exit 0 passed, 1 not passed, "
                    "2 the tests could not run or a usage error. --work-dir defaults to work_dir; a relative "
                    "--work-dir is looked up in the current folder, then in the repository root.")
    add_dataset_dirs(parser, default_help="that of --work-dir")
    parser.set_defaults(work_dir="work_dir")
    add_flag(parser, "--task-ids", release=True, dest="task_id", type=_one_task, required=True, metavar="ID",
             help="the task to test: one id (the release's --task-id N works too)")
    parser.add_argument("--timeout-sec", type=float, default=RunnerOptions.timeout_sec,
                        help="wall-clock limit of the whole test run (default %(default)g)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--candidate", help="file to test as the target instead of the one on disk")
    which.add_argument("--canonical", action="store_true", help="test the task's canonical.py (gold check)")
    parser.add_argument("--env-mode", action="store_true",
                        help="run in the task's own environment (the one test.sh activates, built on first use) "
                             "instead of this interpreter")
    add_flag(parser, "--python-version", help="Python of environments built by --env-mode (default: 3.10 "
                                                  "under conda, else the backend's default)")
    parser.add_argument("--env-map-path", help="JSON file task id -> environment name (implies --env-mode)")
    add_flag(parser, "--env-backend", help="conda, uv, venv or current (implies --env-mode unless current)")
    parser.add_argument("--json", action="store_true",
                        help="print the result as one JSON document on stdout (every other line goes to stderr)")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default=RunnerOptions.sandbox)
    parser.add_argument("--memory-mb", type=int, default=RunnerOptions.memory_mb)
    parser.add_argument("--max-processes", type=int, default=RunnerOptions.max_processes)
    parser.add_argument("--visible", action="append", default=[], metavar="PATH",
                        help="host folder the tests may read inside the sandbox (repeatable)")
    args = parser.parse_args(argv)
    args.dataset = dataset_dir(parser, args) if args.dataset_dir else None
    return args


def _one_task(text: str) -> int:
    """The runner tests one task per call, as the release's does."""
    ids = int_list(text)
    if len(ids) != 1:
        raise argparse.ArgumentTypeError(f"the runner tests one task per call; pass one id, got '{text}'")
    return ids[0]


def failure_line(message: str) -> str:
    """A failure's first line, and for an error before any test ran (a collection failure, a broken import)
    its cause, the last ``E`` line of pytest's text: ``No module named 'torch'`` must not be hidden."""
    lines = message.splitlines() or [""]
    causes = [line[1:].strip() for line in lines[1:] if line.startswith("E ")]
    if not causes:
        return lines[0]
    hint = ""
    if causes[-1].startswith("ModuleNotFoundError"):
        hint = " (this interpreter lacks a module the task needs: run it in its environment with --env-mode)"
    return f"{lines[0]}: {causes[-1]}{hint}"


def dataset_folder(work_dir: str) -> Path:
    """The dataset a ``--work-dir`` names: ``<work-dir>/dataset`` as in the release, or the folder itself."""
    given = Path(work_dir).expanduser()
    bases = [Path.cwd()] + ([REPO_ROOT] if not given.is_absolute() and REPO_ROOT != Path.cwd() else [])
    for base in bases:
        found = dataset_in(base / given)
        if found is not None:
            return found
    tried = " and ".join(str(base / given) for base in bases)
    raise DatasetError(f"dataset not found: no dataset/annotation_meta.jsonl or annotation_meta.jsonl under {tried}; "
                       "pass --work-dir as the folder that contains dataset/")


def env_name_from_map(path: str, index: int) -> str:
    """The environment a release env map (JSON task id -> env name) gives task ``index``."""
    try:
        mapping = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"--env-map-path {path}: cannot read it as JSON ({exc})") from None
    name = mapping.get(str(index)) if isinstance(mapping, dict) else None
    if not isinstance(name, str) or not name:
        raise DatasetError(f"--env-map-path {path}: no environment name for task {index}")
    return name


def candidate_text(args: argparse.Namespace, dataset: DatasetManager) -> str:
    if args.candidate:
        path = Path(args.candidate)
        if not path.is_file():
            raise DatasetError(f"candidate file not found: {path}")
        return path.read_text(encoding="utf-8")
    if args.canonical:
        return dataset.canonical(args.task_id)
    target = dataset.target_path(args.task_id)
    if not target.is_file():
        raise DatasetError(f"target file not found: {target} (pass --candidate FILE or --canonical)")
    return target.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env_mode = args.env_mode or bool(args.env_map_path) or args.env_backend not in (None, "current")
    try:
        dataset = DatasetManager(args.dataset or dataset_folder(args.work_dir))
        dataset.check_task(args.task_id)
        candidate = candidate_text(args, dataset)
        env_name = env_name_from_map(args.env_map_path, args.task_id) if args.env_map_path else None
        options = RunnerOptions(timeout_sec=args.timeout_sec, sandbox=args.sandbox, memory_mb=args.memory_mb,
                                max_processes=args.max_processes,
                                env_backend=(args.env_backend or None) if env_mode else "current",
                                python_version=args.python_version, visible=tuple(args.visible))
        report = dataset.task_dir(args.task_id) / "pytest_report" / "report.xml"
        result = run_candidate(dataset, args.task_id, candidate, options, report_to=report, env_name=env_name)
    except (DatasetError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    human = sys.stderr if args.json else sys.stdout
    if args.json:
        print(json.dumps(result, indent=2))
    print(f"task {args.task_id}: {result['status']}  tests={result['tests']} failures={result['failures']} "
          f"errors={result['errors']} skipped={result['skipped']}  ({result['duration_sec']:.2f} s, "
          f"interpreter {result['interpreter']})", file=human)
    for message in result["failure_messages"]:
        print("  " + failure_line(message), file=human)
    if result["report_path"]:
        print(f"JUnit report: {result['report_path']}", file=human)
    if result["status"] == INFRA_ERROR:
        return 2
    return 0 if result["status"] == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
