"""Static HTML report of a results folder: metric tables, figures, and every task's trajectory turn by turn
(code diff, test digest, feedback at its level, tokens, cost, status). Opens from disk in a browser.

Usage (from the repo root):
    python scripts/report.py --output-dir experiment_results [--out DIR] [--model m1,m2] [--evaluation-setting S]
Writes DIR/index.html (default OUTPUT_DIR/report/index.html). Options of metrics/all_metrics.py apply
(--dataset-dir, --guidance-level, --task-ids, --skip codebert, ...); --evaluation-setting and --guidance-type take comma lists.
"""
import sys
from collections.abc import Iterable
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_CHECKOUT / "metrics"), str(_CHECKOUT)]  # the metric modules by name; this checkout's agent/

from analysis import main_analysis  # noqa: E402
from agent.common.progress import still_running, to_stderr  # noqa: E402


def main(argv: Iterable[str] | None = None) -> int:
    with still_running("writing the report", to_stderr) as step:
        _, analysis = main_analysis(__doc__, argv, stage=step.now)
    print(f"report: {analysis.index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
