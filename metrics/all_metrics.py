"""Print every metric's tables for the selected runs, loading each result file once.

A metric whose optional extra is missing (codebleu, transformers + a CodeBERT
model) is reported on stderr and left out; the others still print.

Usage: python metrics/all_metrics.py --output-dir DIR --model m1,m2 [--skip codebert] [--format json]
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable

import interval_tables
import metric_codebert
import metric_codebleu
import metric_cost
import metric_huamfeedback
import metric_MRR
import metric_passrate_testcase
import metric_passrate_unitest
from metric_cli import USER_ERRORS, Context, base_parser, build_context
from metric_tables import Table, emit
from optional_extras import ExtraUnavailable
from result_files import warn_stderr

METRICS = {
    "testcase": metric_passrate_testcase,
    "unitest": metric_passrate_unitest,
    "mrr": metric_MRR,
    "codebleu": metric_codebleu,
    "codebert": metric_codebert,
    "feedback": metric_huamfeedback,
    "cost": metric_cost,
}


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(METRICS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown metric(s) {', '.join(unknown)}; choose from {', '.join(METRICS)}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--skip`` and the options of metrics that take their own (CodeBERT model, the intervals' bootstrap)."""
    parser.add_argument("--skip", type=_names, default=[], help=f"metrics to leave out: {','.join(METRICS)}")
    metric_codebert.add_arguments(parser)
    interval_tables.add_arguments(parser)


def collect_tables(ctx: Context, skip: Iterable[str] = (), warn: Callable[[str], None] = warn_stderr) -> list[Table]:
    """Every metric's tables except ``skip``; a metric whose optional extra is missing is named via ``warn``."""
    tables: list[Table] = []
    for name, module in METRICS.items():
        if name in skip:
            continue
        try:
            tables += module.tables(ctx)
        except ExtraUnavailable as exc:
            warn(f"{name} left out: {exc}")
    return tables


def main(argv: Iterable[str] | None = None) -> int:
    parser = base_parser(__doc__)
    add_arguments(parser)
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        emit(collect_tables(build_context(args), args.skip), args.format)
    except USER_ERRORS as exc:
        parser.exit(2, f"error: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
