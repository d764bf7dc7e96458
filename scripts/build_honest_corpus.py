"""Rebuild the honest corpus (docs/honest_corpus.md) from the pinned manifest, one dataset per half.

    python scripts/build_honest_corpus.py [--cache-dir DIR] [--halves dev heldout] [--packages a,b]

Downloads each pinned sdist once into ``<cache>/sdists`` (pip; reruns are
offline), writes ``<cache>/<half>/`` in the release's dataset shape, builds
each package's environment through the harness's environment cache (its
test requirements, not the package), records each task's test names from
pytest's own collection in that environment, and runs bare pytest on each
task's reference: the meta row says whether every test passed (``bare``,
``bare_tests``, ``bare_sec``), and ``<half>: K/N tasks pass bare (T tests)``
closes each half (only those K tasks count).
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
import shutil  # noqa: E402
import time  # noqa: E402

from agent.task.dataset import DatasetManager  # noqa: E402
from agent.envs.cache import resolve_python  # noqa: E402
from agent.envs.spec import EnvError  # noqa: E402
from agent.common.progress import still_running, to_stderr  # noqa: E402
from agent.runner.core import REPO_ROOT  # noqa: E402
from metrics.cli_flags import Parser  # noqa: E402
from scripts.honest_corpus import (  # noqa: E402
    COLLECT, HALVES, MANIFEST, CorpusError, CorpusPackage, bare_outcome, bare_pytest, collected_names,
    load_manifest, source_tree, stable_names, write_meta, write_requirements, write_task,
)

DEFAULT_CACHE = REPO_ROOT / "work_dir" / "corpus_cache"
BARE_TIMEOUT = 1800  # one task's whole bare run (the largest suite, 7,482 tests, takes about 45 s unloaded)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="pinned manifest (default %(default)s)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help="downloads and built halves (default %(default)s)")
    parser.add_argument("--halves", nargs="+", choices=HALVES, default=list(HALVES))
    parser.add_argument("--packages", help="comma-separated package names: build only these (for a quick look)")
    parser.add_argument("--env-backend", help="environment backend (default: the harness's; 'current' = this "
                                              "interpreter, which then must hold the test requirements)")
    return parser.parse_args(argv)


def record_task(dataset: DatasetManager, row: dict, backend: str | None) -> None:
    """The task's test names from pytest's collection, then bare pytest's outcome on the reference: a task
    counts only when every one of its tests passes bare (none skipped), and the row says whether it does."""
    with still_running(f"collecting and running the tests of {row['half']} task {row['index']} ({row['package']})",
                       to_stderr):
        python = resolve_python(dataset, row["index"], backend)
        collected = bare_pytest(dataset, row["index"], python, list(COLLECT), timeout_sec=600)
        time.sleep(1.0)  # the run's session then starts in another second: an id made from the clock differs
        run = bare_pytest(dataset, row["index"], python, [], timeout_sec=BARE_TIMEOUT)
    row["test_cases"], unstable = stable_names(collected_names(collected.output), run)
    row["bare"], row["bare_tests"] = bare_outcome(run)
    row["bare_sec"] = round(run.duration_sec, 1)
    print(f"{row['half']} task {row['index']}: {row['package']} {row['target_file_path']} / {row['test_file']}: "
          f"{len(row['test_cases'])} tests collected" +
          ("" if collected.exit_code == 0 else f" (collection exit code {collected.exit_code})") +
          (f" ({len(unstable)} more named differently by the run, not expected by name: {', '.join(unstable[:3])})"
           if unstable else "") +
          f"; bare pytest: {row['bare']}, {row['bare_tests']} tests in {run.duration_sec:.1f} s", flush=True)


def bare_summary(half: str, rows: list[dict]) -> str:
    """``<half>: K/N tasks pass bare (T tests)``, T counting the tests of the tasks that pass."""
    honest = [row for row in rows if row["bare"] == "passed"]
    line = f"{half}: {len(honest)}/{len(rows)} tasks pass bare ({sum(r['bare_tests'] for r in honest)} tests)"
    failing = [f"{half}:{row['index']}" for row in rows if row["bare"] != "passed"]
    return line + (f"; not counted: {', '.join(failing)}" if failing else "")


def build_half(packages: list[CorpusPackage], cache: Path, half: str, backend: str | None) -> Path:
    """``<cache>/<half>``: every task of the half's packages, with the test names its environment collects
    and bare pytest's outcome."""
    root = cache / half
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    rows = []
    for package in (p for p in packages if p.half == half):
        with still_running(f"fetching {package.name}=={package.version}", to_stderr):
            tree = source_tree(package, cache)
        write_requirements(root, package)
        for task in package.tasks:
            rows.append(write_task(root, len(rows) + 1, package, task, tree))
    write_meta(root, rows)
    dataset = DatasetManager(root)
    for row in rows:
        record_task(dataset, row, backend)
        write_meta(root, rows)
    print(bare_summary(half, rows))
    return root


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        packages = load_manifest(args.manifest)
        if args.packages:
            wanted = {name.strip() for name in args.packages.split(",")}
            packages = [p for p in packages if p.name in wanted]
        for half in args.halves:
            root = build_half(packages, args.cache_dir.resolve(), half, args.env_backend)
            print(f"{half}: {root}", flush=True)
    except (CorpusError, EnvError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
