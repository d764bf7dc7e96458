#!/usr/bin/env python3
"""Build, check or list the per-task environments of a dataset.

Idempotent and resumable: an environment is built only when its completion
marker is missing, so a second run with nothing changed does nothing, and a
run interrupted or partly failed is finished by running it again. One failing
environment does not stop the others; each failure names its build log.

    python scripts/manage_envs.py                          # build what is missing for work_dir/dataset
    python scripts/manage_envs.py --backend uv --task-ids 1 2
    python scripts/manage_envs.py --list
    python scripts/manage_envs.py --rebuild --task-ids 3

Backends: conda (default where installed), uv (default otherwise), venv,
current (this interpreter; nothing to build). Environment variables:
RECODE_ENV_BACKEND, RECODE_ENV_DIR, RECODE_ENV_PYTHON, RECODE_REQUIREMENTS_MAP.
Exit status: 0 all ready, 1 some environment or task failed, 2 bad usage or dataset.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.envs.backends import BACKENDS, require_tool  # noqa: E402
from agent.env_cache import (  # noqa: E402
    EnvError,
    EnvSettings,
    PlannedEnv,
    ensure_env,
    env_python,
    env_root,
    env_settings,
    env_status,
    plan_envs,
)
from agent.utils import DatasetError, DatasetManager  # noqa: E402

DEFAULT_DATASET = Path(__file__).resolve().parents[1] / "work_dir" / "dataset"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset-dir", default=str(DEFAULT_DATASET), help="dataset folder (default: work_dir/dataset)")
    parser.add_argument("--backend", choices=BACKENDS, help="default: RECODE_ENV_BACKEND, else conda if installed, else uv")
    parser.add_argument("--task-ids", nargs="+", type=int, metavar="ID", help="only these tasks (default: every runnable task)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the selected environments even if they are ready")
    parser.add_argument("--list", action="store_true", help="show the environments and their status; build nothing")
    parser.add_argument("--env-dir", help="where environments live (default: RECODE_ENV_DIR or work_dir/envs)")
    parser.add_argument("--requirements-map", help="YAML env name -> requirements file (default: <dataset>/requirements/env_map.yaml)")
    parser.add_argument("--python", help="python version X.Y of new environments (default: 3.10 for conda, else this interpreter's)")
    return parser.parse_args(argv)


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


def build_envs(planned: list[PlannedEnv], settings: EnvSettings, rebuild: bool) -> list[str]:
    """Ensure every planned environment; returns the failure messages."""
    failures: list[str] = []
    counts = {"up to date": 0, "built": 0}
    for number, entry in enumerate(planned, start=1):
        prefix = f"[{number}/{len(planned)}] {describe(entry)}"
        try:
            result = ensure_env(entry.spec, settings, rebuild=rebuild)
        except EnvError as exc:
            failures.append(str(exc))
            print(f"{prefix}: FAILED: {exc}", flush=True)
            continue
        counts[result.status] += 1
        detail = f" in {result.duration_sec:.1f} s" if result.status == "built" else ""
        print(f"{prefix}: {result.status}{detail}", flush=True)
    total = f"{len(planned)} environment{'' if len(planned) == 1 else 's'}"
    if counts["up to date"] == len(planned):
        print(f"all {total} up to date; nothing to do")
    else:
        print(f"{total}: {counts['up to date']} up to date, {counts['built']} built, {len(failures)} failed")
    return failures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        settings = env_settings(args.backend, args.env_dir, args.requirements_map, args.python)
        dataset = DatasetManager(args.dataset_dir)
        if settings.backend == "current":
            count = len(dataset.select(args.task_ids))
            print(f"backend 'current' runs all {count} tasks with {sys.executable}; nothing to build")
            return 0
        planned, task_errors = plan_envs(dataset, args.task_ids, settings)
        if not planned and not task_errors:
            raise DatasetError(f"{dataset.meta_path} lists no runnable task (if_test: true); check the dataset")
        if not args.list:
            require_tool(settings.backend)
    except (DatasetError, EnvError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for index, message in task_errors.items():
        print(f"task {index}: skipped: {message}")
    if args.list:
        list_envs(planned, settings)
        return 1 if task_errors else 0
    try:
        failures = build_envs(planned, settings, args.rebuild)
    except KeyboardInterrupt:
        print("interrupted; run the same command again to finish (finished environments are kept)", file=sys.stderr)
        return 130
    if failures or task_errors:
        print(f"{len(failures)} environment(s) and {len(task_errors)} task(s) failed; see the messages above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
