"""One analysis of a results folder: every metric's tables, the figures and the HTML report, for each
selected (setting, guidance type). Shared by scripts/analyze_results.py and scripts/report.py.

``--setting`` and ``--guidance-type`` take comma-separated lists; without
``--guidance-type`` every guidance type found for the setting is analysed
(fixed first), so dynamic runs appear beside fixed ones. Each result file is
loaded once and feeds the tables, the figures and the trajectory pages.
"""
from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import all_metrics
from metric_cli import USER_ERRORS, Context, UsageError, base_parser, build_context
from metric_tables import Table, render
from optional_extras import ExtraUnavailable
from plots import Plot, Series, series_from_runs, write_plots
from report_index import Section, write_report
from result_files import DEFAULT_GUIDANCE_TYPE, LEVELS, folder_model_name, warn_stderr
from task_meta import count_test_cases

REPORT_DIR = "report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    all_metrics.add_arguments(parser)
    parser.add_argument("--out", help=f"report folder (default: RESULT_DIR/{REPORT_DIR})")
    parser.set_defaults(guidance_type=None, levels=None)


def split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def runs_found(result_dir: Path | str, setting: str, models: list[str] | None) -> dict[str, list[int]]:
    """Guidance type -> levels with a run folder of this setting (and of one of ``models``); fixed first."""
    pattern = re.compile(rf"^{re.escape(setting)}_(.+)_feedback_([A-Za-z0-9]+)_guidance_(\d+)$")
    wanted = {folder_model_name(model) for model in models} if models else None
    root = Path(result_dir)
    found: dict[str, set[int]] = {}
    for path in root.iterdir() if root.is_dir() else ():
        match = pattern.match(path.name)
        if path.is_dir() and match and (wanted is None or match.group(1) in wanted):
            found.setdefault(match.group(2), set()).add(int(match.group(3)))
    order = sorted(found, key=lambda name: (name != DEFAULT_GUIDANCE_TYPE, name))
    return {name: sorted(found[name]) for name in order}


def build_contexts(args: argparse.Namespace) -> list[Context]:
    """One metric Context per selected (setting, guidance type); raises UsageError when nothing matches.

    Without ``--guidance-type`` / ``--levels`` the types and levels are those that have run folders.
    """
    if not Path(args.result_dir).is_dir():
        raise UsageError(f"result dir {args.result_dir} not found; pass --result-dir DIR")
    models = split(args.models) if args.models else None
    contexts = []
    for setting in split(args.setting):
        found = runs_found(args.result_dir, setting, models)
        types = split(args.guidance_type) if args.guidance_type else list(found)
        for guidance_type in types:
            levels = args.levels or found.get(guidance_type) or list(LEVELS)
            contexts.append(build_context(argparse.Namespace(**{
                **vars(args), "setting": setting, "guidance_type": guidance_type, "levels": levels})))
    if not contexts:
        raise UsageError(f"no '{args.setting}_*_feedback_*_guidance_*' runs under {args.result_dir}; "
                         "pass --models, --setting or --guidance-type")
    return contexts


@dataclass
class Analysis:
    sections: list[Section]
    plots: list[Plot]
    notes: list[str]
    out: Path
    index: Path

    def tables(self) -> list[Table]:
        """Every table; titles name their (setting, guidance type) when several were analysed.

        A table that does not depend on the runs (canonical-file complexity) appears in the first section only.
        """
        if len(self.sections) == 1:
            return list(self.sections[0].tables)
        return [replace(table, title=f"[{section.name}] {table.title}")
                for section in self.sections for table in section.tables]


def series_of(ctx: Context) -> list[Series]:
    cases = count_test_cases(ctx.meta_path)
    selection = ctx.selection
    return [series_from_runs(model, selection.setting, selection.guidance_type, ctx.runs(model), cases,
                             ctx.args.max_turns) for model in ctx.models]


def analyze(args: argparse.Namespace, warn: Callable[[str], None] = warn_stderr) -> Analysis:
    """Tables, figures (when matplotlib is installed) and the report under ``args.out``.

    Raises the metric CLI's user errors (``metric_cli.USER_ERRORS``).
    """
    out = Path(args.out) if args.out else Path(args.result_dir) / REPORT_DIR
    notes: list[str] = []

    def note(message: str) -> None:
        warn(message)
        if message not in notes:
            notes.append(message)

    contexts = build_contexts(args)
    sections, seen = [], []
    for ctx in contexts:
        tables = [table for table in all_metrics.collect_tables(ctx, args.skip, note) if table not in seen]
        sections.append(Section(ctx, tables))
        seen += tables
    try:
        plots = write_plots([item for ctx in contexts for item in series_of(ctx)], out / "plots", args.max_turns)
    except ExtraUnavailable as exc:
        plots = []
        note(f"figures left out: {exc}")
    index = write_report(out, args.result_dir, sections, plots, notes)
    analysis = Analysis(sections, plots, notes, out, index)
    for fmt, suffix in (("markdown", "md"), ("json", "json")):
        (out / f"tables.{suffix}").write_text(render(analysis.tables(), fmt), encoding="utf-8")
    return analysis


def main_analysis(description: str, argv: Iterable[str] | None = None) -> tuple[argparse.Namespace, Analysis]:
    """Parse the command line and analyse; a user error prints one line and exits with status 2."""
    parser = base_parser(description)
    add_arguments(parser)
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        return args, analyze(args)
    except USER_ERRORS as exc:
        parser.exit(2, f"error: {exc}\n")
