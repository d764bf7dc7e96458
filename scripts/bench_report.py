"""Benchmark of the HTML report on a synthetic run of a full sweep's size, beside the report before the viewer.

Writes a run of TASKS tasks x LEVELS levels x TURNS turns (default 102 x 5 x 10, three calls per turn,
prompts of tens of KB: the whole paper in every call as the release's protocol does; tests/synthetic_run.py),
builds the report with this checkout and with the report of BASELINE (a git revision, default the last one
before the viewer, extracted with ``git archive``), then prints side by side: build time, index size, the
trajectory pages' sizes (median, 95th percentile, max, total) and load times measured in headless Chromium
(file://, to the load event; for the viewer also until its script is ready, and one search in the list).

    python scripts/bench_report.py [--task-count 102] [--guidance-level 0,1,2,3,4] [--max-turn 10] [--paper-kb 30]
        [--baseline REV] [--keep DIR] [--pages 12]

Needs chromium and a git checkout. Prints measurements; asserts nothing (timings depend on the machine).
"""
from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cdp import Browser  # noqa: E402
from tests.synthetic_run import write_run  # noqa: E402
from metrics.cli_flags import add_flag, add_levels, add_renamed  # noqa: E402

BASELINE = "84211b0"  # the report before the viewer (static pages, prompts not shown)
MODEL = "org/model-bench"


def extract(revision: str, into: Path) -> Path:
    """The metrics/ and scripts/ folders of ``revision`` under ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", revision, "metrics", "scripts"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def build(checkout: Path, results: Path, dataset: Path, out: Path) -> float:
    """Seconds to build the report with ``checkout``'s scripts/report.py."""
    start = time.monotonic()
    subprocess.run([sys.executable, str(checkout / "scripts" / "report.py"), "--result-dir", str(results),
                    "--dataset-dir", str(dataset), "--skip", "codebert,codebleu", "--out", str(out)],
                   check=True, capture_output=True, cwd=checkout)
    return time.monotonic() - start


def sizes(out: Path) -> dict:
    pages = sorted(path.stat().st_size for path in (out / "trajectories").glob("*.html"))
    total = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    return {"index": (out / "index.html").stat().st_size, "pages": len(pages), "median": statistics.median(pages),
            "p95": pages[int(0.95 * (len(pages) - 1))], "max": pages[-1], "total": total}


def sample_pages(out: Path, count: int) -> list[str]:
    """The largest pages and a fixed random sample of the rest (names, the same for both reports)."""
    pages = sorted((out / "trajectories").glob("*.html"), key=lambda p: p.stat().st_size, reverse=True)
    rest = pages[count // 2:]
    random.Random(0).shuffle(rest)
    return [path.name for path in pages[:count // 2] + rest[:count - count // 2]]


def load_times(outs: dict[str, Path], names: list[str]) -> dict[str, dict]:
    """Per report: median seconds to the load event of the index (3 opens) and of the sampled pages (each
    opened once), the two reports alternating so a busy machine weighs on both alike; for the viewer also the
    time until its script is ready and one search in the list."""
    times: dict[str, dict] = {name: {"index": [], "pages": [], "ready": [], "search": None} for name in outs}
    with Browser(width=1280, height=900, timeout=300) as driver:
        browser = driver.page()
        for _ in range(3):
            for name, out in outs.items():
                times[name]["index"].append(browser.open(out / "index.html"))
        browser.wait_for("document.documentElement.dataset.ready")
        start = time.monotonic()
        browser.type("#q", "task 1")
        browser.wait_for("document.getElementById('shown').textContent.includes(' of ')")
        times["new"]["search"] = time.monotonic() - start
        for page in names:
            for name, out in outs.items():
                times[name]["pages"].append(browser.open(out / "trajectories" / page))
                if name == "new":
                    times[name]["ready"].append(browser.evaluate("performance.now()") / 1000)
    return {name: {"index": statistics.median(t["index"]), "search": t["search"],
                   "page_median": statistics.median(t["pages"]), "page_max": max(t["pages"]),
                   "ready_median": statistics.median(t["ready"]) if t["ready"] else None}
            for name, t in times.items()}


def row(label: str, old: object, new: object) -> str:
    return f"{label:<38} {old!s:>16} {new!s:>16}"


def kb(value: float) -> str:
    return f"{value / 1024:,.0f} KB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task-count", type=int, default=102, help="tasks of the synthetic run")
    add_levels(parser, "0,1,2,3,4", dest="levels", default=[0, 1, 2, 3, 4])
    add_flag(parser, "--max-turn", type=int, default=10, help="turns per task of the synthetic run")
    add_renamed(parser, "--turns", "--max-turn")
    parser.add_argument("--paper-kb", type=int, default=30, help="paper LaTeX in every prompt (KB)")
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the report to compare with")
    parser.add_argument("--pages", type=int, default=12, help="trajectory pages opened in the browser")
    parser.add_argument("--keep", help="build everything in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    levels = args.levels
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        results, dataset = root / "results", root / "dataset"
        start = time.monotonic()
        write_run(results, dataset, tasks=args.task_count, levels=levels, turns=args.max_turn, model=MODEL,
                  paper_chars=args.paper_kb * 1024)
        pickles = sum(path.stat().st_size for path in results.rglob("*.pkl"))
        print(f"synthetic run: {args.task_count} tasks x {len(levels)} levels x up to {args.max_turn} turns, 3 calls per "
              f"turn, paper {args.paper_kb} KB; pickles {pickles / 2**20:,.0f} MB; written in "
              f"{time.monotonic() - start:.0f} s", flush=True)
        baseline = extract(args.baseline, root / "baseline")
        built = {"old": build(baseline, results, dataset, root / "report_old"),
                 "new": build(REPO, results, dataset, root / "report_new")}
        measured = {name: sizes(root / f"report_{name}") for name in ("old", "new")}
        names = sample_pages(root / "report_new", args.pages)
        loads = load_times({"old": root / "report_old", "new": root / "report_new"}, names)
        old, new = measured["old"], measured["new"]
        lines = [row("", f"before ({args.baseline})", "viewer"),
                 row("report build (s)", f"{built['old']:.0f}", f"{built['new']:.0f}"),
                 row("index.html", kb(old["index"]), kb(new["index"])),
                 row("trajectory pages", old["pages"], new["pages"]),
                 row("page size median", kb(old["median"]), kb(new["median"])),
                 row("page size 95th percentile", kb(old["p95"]), kb(new["p95"])),
                 row("page size max", kb(old["max"]), kb(new["max"])),
                 row("report folder total", f"{old['total'] / 2**20:,.0f} MB", f"{new['total'] / 2**20:,.0f} MB"),
                 row("index load (s, median of 3)", f"{loads['old']['index']:.2f}", f"{loads['new']['index']:.2f}"),
                 row("search in the list (s)", "-", f"{loads['new']['search']:.2f}"),
                 row(f"page load median of {len(names)} (s)", f"{loads['old']['page_median']:.2f}",
                     f"{loads['new']['page_median']:.2f}"),
                 row(f"page load max of {len(names)} (s)", f"{loads['old']['page_max']:.2f}",
                     f"{loads['new']['page_max']:.2f}"),
                 row("page script ready, median (s)", "-", f"{loads['new']['ready_median']:.2f}")]
        print("\n".join(lines))
        print(f"load average during the run (1, 5, 15 min): {', '.join(f'{v:.1f}' for v in os.getloadavg())} "
              f"on {os.cpu_count()} CPUs")
        print(f"ratios viewer/before: page median size {new['median'] / old['median']:.2f}, total "
              f"{new['total'] / old['total']:.2f}, page load {loads['new']['page_median'] / loads['old']['page_median']:.2f}, "
              f"index load {loads['new']['index'] / loads['old']['index']:.2f}; pickles / viewer folder "
              f"{pickles / new['total']:.1f}")
        if args.keep:
            print(f"kept in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
