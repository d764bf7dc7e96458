#!/usr/bin/env python3
"""Build, check or list the per-task environments of a dataset.

Idempotent and resumable: an environment is built only when its completion
marker is missing, so a second run with nothing changed does nothing, and a
run interrupted or partly failed is finished by running it again. One failing
environment does not stop the others; each failure names its build log.
Environments built before packages were precompiled get their bytecode on the
next run.

    python scripts/manage_envs.py                          # build what is missing for work_dir/dataset
    python scripts/manage_envs.py --work-dir work_dir --python-version 3.10 --max-workers 2   # the release's flags
    python scripts/manage_envs.py --env-backend uv --task-ids 1,2 --cpu
    python scripts/manage_envs.py --list
    python scripts/manage_envs.py --dry-run --task-ids 3   # what each build installs, how big, its commands
    python scripts/manage_envs.py --rebuild --task-ids 3

Backends: conda (default where installed), uv (default otherwise), venv,
current (this interpreter; nothing to build). Environment variables:
RECODE_ENV_BACKEND, RECODE_ENV_DIR, RECODE_ENV_PYTHON, RECODE_ENV_CPU,
RECODE_REQUIREMENTS_MAP, RECODE_REQUIREMENTS_DIR, RECODE_TORCH_INDEX_URL and
RECODE_PYG_WHEEL_URL (mirrors of the PyTorch and PyG wheel sites).
Exit status: 0 all ready, 1 some environment or task failed, 2 bad usage or dataset.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from agent.common.setup_hint import name_missing_modules  # noqa: E402

name_missing_modules()

from agent.envs.backends import require_tool  # noqa: E402
from agent.envs.cli import add_backend_argument  # noqa: E402
from agent.envs.size import announcement  # noqa: E402
from agent.envs.cache import (  # noqa: E402
    BuildResult,
    EnvError,
    EnvSettings,
    PlannedEnv,
    build_commands,
    ensure_env,
    env_python,
    env_root,
    env_settings,
    env_status,
    plan_envs,
    reachable_torch_index,
)
from agent.task.dataset import DatasetError, DatasetManager  # noqa: E402
from metrics.cli_flags import Parser, add_dataset_dirs, add_flag, add_task_ids, dataset_dir  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_dirs(parser)
    add_backend_argument(parser)
    add_task_ids(parser)
    parser.add_argument("--source", nargs="?", metavar="DIR",
                        help="folder holding the release's requirements_*.txt (default: the dataset folder; "
                             "RECODE_REQUIREMENTS_DIR)")
    add_flag(parser, "--python-version", metavar="X.Y",
                        help="python of new environments (default: 3.10 for conda as the release, else this interpreter's)")
    parser.add_argument("--max-workers", type=int, default=1, metavar="N", help="environments built at once (default: 1)")
    builds = parser.add_mutually_exclusive_group()
    builds.add_argument("--cpu", dest="cpu", action="store_true", default=None,
                        help="CPU builds of the PyTorch wheels (default on a machine without a GPU; RECODE_ENV_CPU=1)")
    builds.add_argument("--cuda", dest="cpu", action="store_false",
                        help="the CUDA builds the requirements pin (default on a machine with a GPU; RECODE_ENV_CPU=0)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the selected environments even if they are ready")
    parser.add_argument("--list", action="store_true", help="show the environments and their status; build nothing")
    parser.add_argument("--dry-run", action="store_true", help="print the commands each missing environment's build runs; run nothing")
    parser.add_argument("--env-dir", help="where environments live (default: RECODE_ENV_DIR or work_dir/envs)")
    parser.add_argument("--requirements-map", help="YAML env name -> requirements file (default: <dataset>/requirements/env_map.yaml)")
    args = parser.parse_args(argv)
    if args.max_workers < 1:
        parser.error(f"--max-workers must be at least 1, got {args.max_workers}")
    args.dataset_dir = dataset_dir(parser, args, _CHECKOUT / "work_dir" / "dataset")
    return args


def describe(entry: PlannedEnv) -> str:
    tasks = ", ".join(str(t) for t in entry.tasks)
    return f"{entry.spec.name} ({'; '.join(entry.env_names)}; task{'s' if len(entry.tasks) > 1 else ''} {tasks})"


def list_envs(planned: list[PlannedEnv], settings: EnvSettings) -> None:
    print(f"environments in {settings.env_dir} (backend {settings.backend}, python {settings.python_version}):")
    for entry in planned:
        status = env_status(entry.spec, settings)
        where = env_python(entry.spec, settings) if status == "ready" else env_root(entry.spec, settings) / "build.log"
        requirements = entry.spec.requirements_file or f"built-in default ({', '.join(entry.spec.requirements)})"
        print(f"  {describe(entry)}: {status}\n      requirements: {requirements}\n      {where}")


def dry_run(planned: list[PlannedEnv], settings: EnvSettings, rebuild: bool) -> None:
    for entry in planned:
        if not rebuild and env_status(entry.spec, settings) == "ready":
            print(f"# {describe(entry)}: ready; nothing to run")
            continue
        print(f"# {describe(entry)}")
        print(f"# {announcement(entry.spec, settings.torch_fallback)}")
        for line in build_commands(entry.spec, settings):
            print(line)


def build_envs(planned: list[PlannedEnv], settings: EnvSettings, rebuild: bool, max_workers: int = 1) -> list[str]:
    """Ensure every planned environment, ``max_workers`` at once; returns the failure messages."""
    failures: list[str] = []
    counts = {"up to date": 0, "built": 0, "bytecode compiled": 0}
    printing = threading.Lock()

    def one(number: int, entry: PlannedEnv) -> None:
        prefix = f"[{number}/{len(planned)}] {describe(entry)}"
        try:
            result: BuildResult = ensure_env(entry.spec, settings, rebuild=rebuild)
        except EnvError as exc:
            with printing:
                failures.append(str(exc))
                print(f"{prefix}: FAILED: {exc}", flush=True)
            return
        detail = f" in {result.duration_sec:.1f} s" if result.status != "up to date" else ""
        with printing:
            counts[result.status] += 1
            print(f"{prefix}: {result.status}{detail}", flush=True)

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        for future in [pool.submit(one, number, entry) for number, entry in enumerate(planned, start=1)]:
            future.result()
    total = f"{len(planned)} environment{'' if len(planned) == 1 else 's'}"
    if counts["up to date"] == len(planned):
        print(f"all {total} up to date; nothing to do")
    else:
        print(f"{total}: {counts['up to date']} up to date, {counts['built']} built, "
              f"{counts['bytecode compiled']} bytecode compiled, {len(failures)} failed")
    return failures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        task_ids = args.task_ids
        dataset = DatasetManager(args.dataset_dir)
        settings = env_settings(args.backend, args.env_dir, args.requirements_map, args.python_version,
                                cpu=args.cpu, release_dir=args.source)
        if settings.backend == "current":
            count = len(dataset.select(task_ids))
            print(f"backend 'current' runs all {count} tasks with {sys.executable}; nothing to build")
            return 0
        planned, task_errors = plan_envs(dataset, task_ids, settings)
        if not planned and not task_errors:
            raise DatasetError(f"{dataset.meta_path} lists no runnable task (if_test: true); check the dataset")
        if not args.list:
            require_tool(settings.backend)
            missing = [entry.spec for entry in planned if args.rebuild or env_status(entry.spec, settings) != "ready"]
            if (chosen := reachable_torch_index(settings, missing)) is not settings:
                settings = chosen
                planned, task_errors = plan_envs(dataset, task_ids, settings)
    except (DatasetError, EnvError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for index, message in task_errors.items():
        print(f"task {index}: skipped: {message}")
    if args.list:
        list_envs(planned, settings)
        return 1 if task_errors else 0
    if args.dry_run:
        dry_run(planned, settings, args.rebuild)
        return 1 if task_errors else 0
    try:
        failures = build_envs(planned, settings, args.rebuild, args.max_workers)
    except KeyboardInterrupt:
        print("interrupted; run the same command again to finish (finished environments are kept)", file=sys.stderr)
        return 130
    if failures or task_errors:
        print(f"{len(failures)} environment(s) and {len(task_errors)} task(s) failed; see the messages above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
