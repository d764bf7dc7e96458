"""Cost and effort report per model and guidance level (tokens, dollars, turns, wall time, infra errors).

A thin entry point over metrics/metric_cost.py; run from the repo root:
python scripts/cost_report.py --output-dir experiment_results --model gpt-5
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metrics"))

from metric_cost import main

if __name__ == "__main__":
    sys.exit(main())
