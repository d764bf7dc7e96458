"""Analyse a results folder in one command: print every metric's table, write the figures and the HTML report.

Usage (from the repo root):
    python scripts/analyze_results.py --output-dir experiment_results --model m1,m2 [--evaluation-setting S] [--out DIR]
Tables go to stdout (--format markdown|csv|json); where the files went goes to stderr. The report folder
(--out, default OUTPUT_DIR/report) holds index.html, tables.md, tables.json and plots/*.png|svg. --evaluation-setting and
--guidance-type take comma lists; without --guidance-type every type found (fixed, dynamic) is analysed.
Other options are those of metrics/all_metrics.py (--dataset-dir, --guidance-level, --task-ids, --skip codebert, ...).
"""
import sys
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metrics"))

from analysis import main_analysis  # noqa: E402
from metric_tables import emit  # noqa: E402


def main(argv: Iterable[str] | None = None) -> int:
    args, analysis = main_analysis(__doc__, argv)
    emit(analysis.tables(), args.format)
    print(f"report: {analysis.index}", file=sys.stderr)
    print(f"tables: {analysis.out / 'tables.md'}, {analysis.out / 'tables.json'}", file=sys.stderr)
    figures = f"{len(analysis.plots)} figures (PNG and SVG) in {analysis.out / 'plots'}" if analysis.plots \
        else "no figures (see the note above)"
    print(f"figures: {figures}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
