"""One analysis of a results folder: every metric's tables, the figures and the HTML report, for each
selected (setting, guidance type). Shared by scripts/analyze_results.py and scripts/report.py.

``--evaluation-setting`` and ``--guidance-type`` take comma-separated lists; without
``--guidance-type`` every guidance type found for the setting is analysed
(fixed first), so dynamic runs appear beside fixed ones. Each result file is
loaded once and feeds the tables, the figures and the trajectory pages.

Defaults come from what was run: ``--max-turn`` (the n of Recall@n) and
``--task-ids`` from the run records (metrics/run_settings.py), levels from the
run folders present. A level, model or guidance type asked for that has no
results is refused with one line before anything is written, so a typo never
replaces a good report with an empty one.
"""
from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import all_metrics
from interval_tables import bootstrap_options
from cli_flags import add_flag
from metric_cli import DEFAULT_MAX_TURNS, USER_ERRORS, Context, UsageError, base_parser, build_context
from metric_tables import Table, render
from optional_extras import ExtraUnavailable
from plots import Plot, Series, series_from_runs, write_plots
from report_index import Section, write_report
from result_files import DEFAULT_GUIDANCE_TYPE, LEVELS, folder_model_name, warn_stderr
from run_settings import RunSettings, read_run_settings
from task_meta import count_test_cases

REPORT_DIR = "report"
T = TypeVar("T")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    all_metrics.add_arguments(parser)
    add_flag(parser, "--out", help=f"report folder (default: OUTPUT_DIR/{REPORT_DIR})")
    parser.set_defaults(guidance_type=None, levels=None, max_turns=None)


def split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def run_folders(result_dir: Path | str, setting: str) -> list[tuple[str, str, int]]:
    """(model as in folder names, guidance type, level) of every run folder of ``setting``."""
    pattern = re.compile(rf"^{re.escape(setting)}_(.+)_feedback_([A-Za-z0-9]+)_guidance_(\d+)$")
    root = Path(result_dir)
    return [(match.group(1), match.group(2), int(match.group(3)))
            for path in (root.iterdir() if root.is_dir() else ()) if path.is_dir() and (match := pattern.match(path.name))]


def runs_found(result_dir: Path | str, setting: str, models: list[str] | None) -> dict[str, list[int]]:
    """Guidance type -> levels with a run folder of this setting (and of one of ``models``); fixed first."""
    wanted = {folder_model_name(model) for model in models} if models else None
    found: dict[str, set[int]] = {}
    for model, guidance_type, level in run_folders(result_dir, setting):
        if wanted is None or model in wanted:
            found.setdefault(guidance_type, set()).add(level)
    order = sorted(found, key=lambda name: (name != DEFAULT_GUIDANCE_TYPE, name))
    return {name: sorted(found[name]) for name in order}


def _listed(values: Iterable[object]) -> str:
    return ", ".join(map(str, values)) or "none"


def check_selection(args: argparse.Namespace, setting: str, models: list[str] | None) -> dict[str, list[int]]:
    """The run folders of ``setting`` (type -> levels); raises UsageError for an asked model, guidance type
    or level that has none."""
    found = runs_found(args.result_dir, setting, models)
    present = sorted({model for model, _, _ in run_folders(args.result_dir, setting)})
    for model in models or []:
        if folder_model_name(model) not in present:
            raise UsageError(f"no results for model {model} ({setting}) under {args.result_dir}; models with "
                             f"results: {_listed(present)}")
    for guidance_type in split(args.guidance_type) if args.guidance_type else []:
        if guidance_type not in found:
            raise UsageError(f"no results for guidance type {guidance_type} ({setting}) under {args.result_dir}; "
                             f"types with results: {_listed(found)}")
        missing = [level for level in args.levels or [] if level not in found[guidance_type]]
        if missing:
            raise UsageError(f"no results for level(s) {_listed(missing)} ({setting}, {guidance_type}) under "
                             f"{args.result_dir}; levels with results: {_listed(found[guidance_type])}")
    if args.levels and not args.guidance_type:
        have = {level for levels in found.values() for level in levels}
        missing = [level for level in args.levels if level not in have]
        if missing:
            raise UsageError(f"no results for level(s) {_listed(missing)} ({setting}) under {args.result_dir}; "
                             f"levels with results: {_listed(sorted(have))}")
    return found


def build_contexts(args: argparse.Namespace) -> list[Context]:
    """One metric Context per selected (setting, guidance type); raises UsageError when nothing matches or an
    asked level, model or type has no results.

    Without ``--guidance-type`` / ``--guidance-level`` the types and levels are those that have run folders; without
    ``--max-turn`` / ``--task-ids``, those of the run records; ``ctx.args.covers`` says what was used and why.
    """
    if not Path(args.result_dir).is_dir():
        raise UsageError(f"results folder {args.result_dir} not found; pass --output-dir DIR")
    models = args.models or None
    contexts = []
    for setting in split(args.setting):
        found = check_selection(args, setting, models)
        types = split(args.guidance_type) if args.guidance_type else list(found)
        for guidance_type in types:
            settings = read_run_settings(args.result_dir, setting, guidance_type)
            levels = args.levels or found.get(guidance_type) or list(LEVELS)
            max_turns, turns_from = _turns_source(args, settings)
            tasks, tasks_from = _tasks_source(args, settings)
            ctx = build_context(argparse.Namespace(**{
                **vars(args), "setting": setting, "guidance_type": guidance_type, "levels": levels,
                "max_turns": max_turns, "task_ids": tasks}))
            sources = {"turns": turns_from, "tasks": tasks_from,
                       "levels": "from --guidance-level" if args.levels else "the run folders found"}
            ctx.args.covers = coverage(ctx, sources, settings)
            contexts.append(ctx)
    if not contexts:
        raise UsageError(f"no '{args.setting}_*_feedback_*_guidance_*' runs under {args.result_dir}; "
                         "pass --model, --evaluation-setting or --guidance-type")
    return contexts


def _turns_source(args: argparse.Namespace, settings: RunSettings) -> tuple[int, str]:
    if args.max_turns:
        return args.max_turns, "from --max-turn"
    if settings.max_turn:
        return settings.max_turn, "from the run records"
    return DEFAULT_MAX_TURNS, "the release's default; no run record says"


def _tasks_source(args: argparse.Namespace, settings: RunSettings) -> tuple[list[int] | None, str]:
    if args.task_ids:
        return args.task_ids, "from --task-ids"
    if settings.task_ids is not None:
        return settings.task_ids, "from the run records"
    return None, "every runnable task of the meta file"


def coverage(ctx: Context, sources: dict[str, str], settings: RunSettings) -> list[str]:
    """What a section covers and where each setting came from (a flag, the run records or a default)."""
    ids = ctx.task_ids
    asked = f"; the run records asked for {_listed(f'L{lv}' for lv in settings.levels)}" if settings.levels else ""
    records = f"{len(settings.records)} run record(s): {_listed(settings.records[-3:])}" if settings.records \
        else "no run record (pass --max-turn and --task-ids if they differ from the defaults)"
    return [
        f"max-turn {ctx.args.max_turns} ({sources['turns']}): Recall@{ctx.args.max_turns}",
        f"{len(ids)} tasks ({sources['tasks']}): {_listed(ids[:40])}{' ...' if len(ids) > 40 else ''}",
        f"levels {_listed(f'L{level}' for level in ctx.levels)} ({sources['levels']}{asked})",
        f"models {_listed(ctx.models)}; {records}",
        "tokens and cost: every stored result in the folder (the end-of-run summary counts what one command spent)",
        *settings.notes,
    ]


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
                             ctx.args.max_turns, **bootstrap_options(ctx.args)) for model in ctx.models]


def analyze(args: argparse.Namespace, warn: Callable[[str], None] = warn_stderr,
            stage: Callable[[str], None] = lambda text: None) -> Analysis:
    """Tables, figures (when matplotlib is installed) and the report under ``args.out``; ``stage`` hears
    what is being done, for a command's progress lines.

    Raises the metric CLI's user errors (``metric_cli.USER_ERRORS``).
    """
    out = Path(args.out) if args.out else Path(args.result_dir) / REPORT_DIR
    notes: list[str] = []

    def note(message: str) -> None:
        warn(message)
        if message not in notes:
            notes.append(message)

    stage("reading the results")
    contexts = build_contexts(args)
    sections, seen = [], []
    for number, ctx in enumerate(contexts, start=1):
        stage(f"computing the tables ({number} of {len(contexts)} result sets)")
        tables = [table for table in all_metrics.collect_tables(ctx, args.skip, note) if table not in seen]
        sections.append(Section(ctx, tables))
        seen += tables
    stage("drawing the figures")
    try:
        max_turns = max(ctx.args.max_turns for ctx in contexts)
        plots = write_plots([item for ctx in contexts for item in series_of(ctx)], out / "plots", max_turns)
    except ExtraUnavailable as exc:
        plots = []
        note(f"figures left out: {exc}")
    index = write_report(out, args.result_dir, sections, plots, notes, stage)
    analysis = Analysis(sections, plots, notes, out, index)
    for fmt, suffix in (("markdown", "md"), ("json", "json")):
        (out / f"tables.{suffix}").write_text(render(analysis.tables(), fmt), encoding="utf-8")
    return analysis


def analysis_parser(description: str) -> argparse.ArgumentParser:
    parser = base_parser(description)
    add_arguments(parser)
    return parser


def guarded(parser: argparse.ArgumentParser, work: Callable[[], T]) -> T:
    """``work()``; a user error prints one line and exits with status 2."""
    try:
        return work()
    except USER_ERRORS as exc:
        parser.exit(2, f"error: {exc}\n")


def main_analysis(description: str, argv: Iterable[str] | None = None,
                  stage: Callable[[str], None] = lambda text: None) -> tuple[argparse.Namespace, Analysis]:
    """Parse the command line and analyse; a user error prints one line and exits with status 2."""
    parser = analysis_parser(description)
    args = parser.parse_args(None if argv is None else list(argv))
    return args, guarded(parser, lambda: analyze(args, stage=stage))
