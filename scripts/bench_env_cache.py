#!/usr/bin/env python3
"""Time resolve_python cache hits against the 50 ms target (environments must be built first).

    bash install_all_benchmark_envs.sh --backend uv && python scripts/bench_env_cache.py --env-backend uv

"cold" is the first call in a process (parse test.sh, hash requirements, stat
the marker); "warm" is a memoised call. Ratios below 1.0 meet the target.
"""
from __future__ import annotations

import argparse
import statistics
import importlib.util
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from agent.common.setup_hint import name_missing_modules  # noqa: E402

name_missing_modules()

import agent.envs.cache as env_cache  # noqa: E402
from agent.envs.cache import EnvError, resolve_python  # noqa: E402
from agent.task.dataset import DatasetError, DatasetManager  # noqa: E402
from agent.envs.cli import add_backend_argument  # noqa: E402
from metrics.cli_flags import Parser, add_dataset_dirs, add_renamed, dataset_dir  # noqa: E402

TARGET_SEC = 0.050


def time_call(dataset: DatasetManager, index: int, backend: str | None, cold: bool) -> float:
    if cold:
        env_cache._MEMO.clear()
    start = time.perf_counter()
    resolve_python(dataset, index, backend=backend, build=False)
    return time.perf_counter() - start


def main() -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_dirs(parser)
    add_backend_argument(parser)
    parser.add_argument("--repeats", type=int, default=200, help="calls timed per kind (cold, warm)")
    add_renamed(parser, "--repeat", "--repeats")
    args = parser.parse_args()
    dataset = DatasetManager(dataset_dir(parser, args, _CHECKOUT / "work_dir" / "dataset"))
    try:
        tasks = [meta.index for meta in dataset.runnable()]
        samples = {
            kind: [time_call(dataset, tasks[i % len(tasks)], args.backend, kind == "cold") for i in range(args.repeats)]
            for kind in ("cold", "warm")
        } if tasks else {}
    except (DatasetError, EnvError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not samples:
        print(f"error: {dataset.meta_path} lists no runnable task", file=sys.stderr)
        return 2
    for kind, values in samples.items():
        median, worst = statistics.median(values), max(values)
        print(
            f"{kind}: median {median * 1000:.3f} ms (ratio to 50 ms target {median / TARGET_SEC:.4f}), "
            f"max {worst * 1000:.3f} ms (ratio {worst / TARGET_SEC:.4f}) over {len(values)} calls, {len(tasks)} tasks"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
