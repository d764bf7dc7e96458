"""Analyse a results folder in one command: print every metric's table, write the figures and the HTML report.

Usage (from the repo root):
    python scripts/analyze_results.py --output-dir experiment_results --model m1,m2 [--evaluation-setting S] [--out DIR]
    python scripts/analyze_results.py --compare RESULTS_A RESULTS_B [--guidance-level 0,4] [--model m]
Tables go to stdout (--format markdown|csv|json); where the files went goes to stderr. The report folder
(--out, default OUTPUT_DIR/report) holds index.html, tables.md, tables.json and plots/*.png|svg. --evaluation-setting and
--guidance-type take comma lists; without --guidance-type every type found (fixed, dynamic) is analysed.
Other options are those of metrics/all_metrics.py (--dataset-dir, --guidance-level, --task-ids, --skip codebert, ...).
--compare prints, per model and level present in both folders, Recall@n and the test-case pass rate of A and
B with 95 % intervals, A - B with its paired interval on the common tasks, the paired test's p-value and
whether the two can be told apart (docs/metrics.md); it writes no report.
"""
import sys
from collections.abc import Iterable
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_CHECKOUT / "metrics"), str(_CHECKOUT)]  # the metric modules by name; this checkout's agent/

from analysis import analysis_parser, analyze, guarded  # noqa: E402
from agent.common.progress import still_running, to_stderr  # noqa: E402
from compare_runs import compare_folders  # noqa: E402
from metric_tables import emit  # noqa: E402


def main(argv: Iterable[str] | None = None) -> int:
    parser = analysis_parser(__doc__)
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"),
                        help="compare two result folders task by task instead of analysing --output-dir")
    args = parser.parse_args(None if argv is None else list(argv))
    if args.compare:
        emit(guarded(parser, lambda: compare_folders(args, *args.compare)), args.format)
        return 0
    with still_running("analysing the results", to_stderr) as step:
        analysis = guarded(parser, lambda: analyze(args, stage=step.now))
    emit(analysis.tables(), args.format)
    print(f"report: {analysis.index}", file=sys.stderr)
    print(f"tables: {analysis.out / 'tables.md'}, {analysis.out / 'tables.json'}", file=sys.stderr)
    figures = f"{len(analysis.plots)} figures (PNG and SVG) in {analysis.out / 'plots'}" if analysis.plots \
        else "no figures (see the note above)"
    print(f"figures: {figures}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
