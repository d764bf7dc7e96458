"""Overhead of the contained test runner, and the cost of an environment-cache hit.

For every sample task (environments warmed first) it times, side by side in
one run and alternating order, (a) ``run_candidate`` on canonical.py and (b)
bare ``pytest`` on the same files in the same environment, as test.sh runs
it. It prints the median of each and their ratio (target <= 1.15), then the
median time of ``resolve_python`` on a warm environment (target <= 50 ms).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import os
import statistics
import subprocess
import tempfile
import time

from agent.clean_test_runner import Layout, RunnerOptions, prepare, resolve_interpreter, run_candidate
from agent.env_cache import resolve_python
from agent.runner.sandbox import SANDBOX_MODES
from agent.utils import DatasetError, DatasetManager

DEFAULT_DATASET = Path(__file__).resolve().parents[1] / "work_dir" / "dataset"
RATIO_TARGET = 1.15
HIT_TARGET_MS = 50.0


def bare_pytest(dataset: DatasetManager, index: int, python: str, folder: Path) -> tuple[list[str], Layout]:
    """Prepare a plain copy and return the command test.sh would run there (cwd: its workdir)."""
    layout = prepare(dataset, index, dataset.canonical(index), folder)
    argv = [python, "-m", "pytest", os.path.basename(layout.test), "-v", "-p", "no:cacheprovider"]
    timeout = layout.per_test_timeout
    return (argv + [f"--timeout={timeout}"] if timeout else argv), layout


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def bench_task(dataset: DatasetManager, index: int, options: RunnerOptions, repeats: int) -> tuple[float, float]:
    """(median runner seconds, median bare pytest seconds) for one task."""
    python, problem = resolve_interpreter(dataset, index, options)
    if python is None:
        raise DatasetError(problem)
    canonical = dataset.canonical(index)
    with tempfile.TemporaryDirectory(prefix="recode-bench-") as tmp:
        argv, layout = bare_pytest(dataset, index, python, Path(tmp))
        env = dict(os.environ, PYTHONPATH=layout.pythonpath or "", PYTHONDONTWRITEBYTECODE="1")

        def bare() -> None:
            subprocess.run(argv, cwd=layout.workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False)

        def runner() -> None:
            result = run_candidate(dataset, index, canonical, options)
            if result["status"] != "passed":
                raise DatasetError(f"task {index}: canonical did not pass under the runner ({result['status']})")

        runner(), bare()  # warm file caches
        runs, bares = [], []
        for turn in range(repeats):
            first, second = (runner, bare) if turn % 2 == 0 else (bare, runner)
            a, b = timed(first), timed(second)
            runs.append(a if first is runner else b)
            bares.append(b if first is runner else a)
    return statistics.median(runs), statistics.median(bares)


def cache_hit_ms(dataset: DatasetManager, index: int, backend: str | None, repeats: int = 50) -> float:
    resolve_python(dataset, index, backend)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        resolve_python(dataset, index, backend, build=False)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset-dir", default=str(DEFAULT_DATASET))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--env-backend", default=None, help="conda, uv, venv or current (default: auto)")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto")
    args = parser.parse_args(argv)
    options = RunnerOptions(sandbox=args.sandbox, env_backend=args.env_backend)
    try:
        dataset = DatasetManager(args.dataset_dir)
        tasks = dataset.runnable()
        if not tasks:
            raise DatasetError(f"no runnable task in {dataset.meta_path}")
        print(f"{'task':>4}  {'runner s':>9}  {'pytest s':>9}  {'ratio':>6}  {'cache hit ms':>12}")
        ratios, hits = [], []
        for meta in tasks:
            run, bare = bench_task(dataset, meta.index, options, args.repeats)
            hit = cache_hit_ms(dataset, meta.index, args.env_backend)
            ratios.append(run / bare)
            hits.append(hit)
            print(f"{meta.index:>4}  {run:>9.3f}  {bare:>9.3f}  {run / bare:>6.3f}  {hit:>12.3f}")
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ratio, hit = statistics.median(ratios), statistics.median(hits)
    print(f"runner / bare pytest (median over tasks): {ratio:.3f}  (target <= {RATIO_TARGET})")
    print(f"environment cache hit (median): {hit:.3f} ms  (target <= {HIT_TARGET_MS:g} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
