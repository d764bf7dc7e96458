"""The shared command line of the metric scripts: options, run loading, models x levels tables.

Each ``metric_*.py`` exposes ``tables(ctx) -> list[Table]`` (and optionally
``add_arguments(parser)``); :func:`run_cli` turns that into a script, and
``all_metrics.py`` runs every module over one :class:`Context` so each result
file is loaded (and a corrupt one reported) only once.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cli_flags import (Parser, add_dataset_dirs, add_flag, add_idle, add_levels, add_models, add_output_dir,
                       add_task_ids, dataset_dir)
from metric_aggregate import LevelSummary, TaskScore, coverage_notes, summarize
from metric_tables import FORMATS, Table, emit
from optional_extras import ExtraUnavailable
from result_files import (DEFAULT_GUIDANCE_TYPE, DEFAULT_RESULT_DIR, DEFAULT_SETTING, LEVELS, LevelRun, RunSelection,
                          discover_models, load_runs)
from task_meta import DEFAULT_DATASET_DIR, MetaError, load_task_ids_from_jsonl, meta_path_for

DEFAULT_MAX_TURNS = 10
TURN_OPTIONS = ("--max-turn", "--per-turn")  # what a metric's tables may depend on besides the selection


class UsageError(Exception):
    """A command-line choice that cannot work (no results folder, no models...); one line."""


USER_ERRORS = (UsageError, MetaError, ExtraUnavailable)


class _Parser(Parser):
    """Resolves ``--dataset-dir`` / ``--work-dir`` into ``args.dataset_dir`` (a Path) as it parses."""

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed = super().parse_args(args, namespace)
        parsed.dataset_dir = dataset_dir(self, parsed, DEFAULT_DATASET_DIR)
        return parsed


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return int(text)


def add_selection(parser: argparse.ArgumentParser, levels: list[int] | None = None,
                  levels_help: str = "0,1,2,3,4", setting: str = DEFAULT_SETTING) -> None:
    """Which run folders to read: the results folder, models, setting, guidance type and levels."""
    add_output_dir(parser, f"default: {DEFAULT_RESULT_DIR}", dest="result_dir", default=DEFAULT_RESULT_DIR)
    add_models(parser, "the models to read (default: every model found)", dest="models")
    add_flag(parser, "--evaluation-setting", dest="setting", default=setting,
             help="evaluation setting in the folder names")
    parser.add_argument("--guidance-type", default=DEFAULT_GUIDANCE_TYPE, help="guidance type in the folder names")
    add_levels(parser, levels_help, dest="levels", default=levels)


def base_parser(description: str, turn_options: tuple[str, ...] = TURN_OPTIONS,
                table_format: bool = True) -> argparse.ArgumentParser:
    """The options every metric takes; of ``TURN_OPTIONS`` only those in ``turn_options`` (the ones its tables
    use) are offered, the others are accepted with a note that they are ignored. ``table_format``: the
    command prints tables (``--format markdown|csv|json``)."""
    parser = _Parser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_selection(parser, list(LEVELS))
    add_task_ids(parser, "the runnable tasks of the meta file")
    add_dataset_dirs(parser)
    add_flag(parser, "--meta", help="annotation_meta.jsonl (default: DATASET_DIR/annotation_meta.jsonl)")
    if "--max-turn" in turn_options:
        add_flag(parser, "--max-turn", dest="max_turns", type=positive_int, default=DEFAULT_MAX_TURNS,
                 help="n of Recall@n and curve length")
    else:
        for flag in ("--max-turn", "--max-turns"):
            add_idle(parser, flag, "this script's tables do not depend on it")
    if "--per-turn" in turn_options:
        parser.add_argument("--per-turn", action="store_true", help="also print per-turn curves")
    else:
        add_idle(parser, "--per-turn", "this script has no per-turn table", nargs=0)
    if table_format:
        parser.add_argument("--format", choices=FORMATS, default="markdown")
    return parser


@dataclass
class Context:
    """Everything a metric module needs to build its tables; runs are loaded once per model."""

    args: argparse.Namespace
    selection: RunSelection
    models: list[str]
    task_ids: list[int]
    dataset_dir: Path
    meta_path: Path
    _runs: dict[str, list[LevelRun]] = field(default_factory=dict)

    @property
    def levels(self) -> list[int]:
        return list(self.selection.levels)

    def runs(self, model: str) -> list[LevelRun]:
        if model not in self._runs:
            self._runs[model] = load_runs(model, self.task_ids, self.selection)
        return self._runs[model]

    def summaries(self, task_score: TaskScore) -> dict[str, list[LevelSummary]]:
        return {model: [summarize(run, task_score) for run in self.runs(model)] for model in self.models}


def build_context(args: argparse.Namespace) -> Context:
    """Resolve the command line into a Context; user mistakes raise one-line errors."""
    selection = RunSelection(args.result_dir, args.setting, args.guidance_type, tuple(args.levels))
    if not Path(args.result_dir).is_dir():
        raise UsageError(f"results folder {args.result_dir} not found; pass --output-dir DIR")
    models = args.models or discover_models(selection)
    if not models:
        raise UsageError(
            f"no '{args.setting}_*_feedback_{args.guidance_type}_guidance_*' runs under {args.result_dir}; "
            "pass --model, --evaluation-setting or --guidance-type"
        )
    meta_path = meta_path_for(args.dataset_dir, args.meta)
    task_ids = args.task_ids if args.task_ids else load_task_ids_from_jsonl(meta_path)
    return Context(args, selection, models, task_ids, Path(args.dataset_dir), meta_path)


def level_columns(ctx: Context) -> list[str]:
    return ["model"] + [f"L{level}" for level in ctx.levels]


def level_table(ctx: Context, title: str, task_score: TaskScore, *, scale: float = 100.0, digits: int = 1) -> Table:
    """Models x levels table of one metric, with the skip accounting underneath."""
    summaries = ctx.summaries(task_score)
    rows = [[model] + [s.value for s in summaries[model]] for model in ctx.models]
    notes = coverage_notes([s for model in ctx.models for s in summaries[model]])
    return Table(title, level_columns(ctx), rows, notes, scale, digits)


def turn_table(ctx: Context, title: str, task_score: TaskScore, *, scale: float = 100.0, digits: int = 1) -> Table:
    """(model, level) x turn table of a per-turn curve metric."""
    summaries = ctx.summaries(task_score)
    turns = [f"t{t}" for t in range(ctx.args.max_turns)]
    rows = [[model, f"L{s.level}"] + (s.value or [None] * len(turns)) for model in ctx.models for s in summaries[model]]
    notes = coverage_notes([s for model in ctx.models for s in summaries[model]])
    return Table(title, ["model", "level"] + turns, rows, notes, scale, digits)


TablesFn = Callable[[Context], list[Table]]
AddArgumentsFn = Callable[[argparse.ArgumentParser], None]


def run_cli(
    description: str, tables: TablesFn, add_arguments: AddArgumentsFn | None = None, argv: Iterable[str] | None = None,
    turn_options: tuple[str, ...] = TURN_OPTIONS,
) -> int:
    """Parse, build the tables, print them; a user error prints one line and returns 2."""
    parser = base_parser(description, turn_options)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        ctx = build_context(args)
        emit(tables(ctx), args.format)
    except USER_ERRORS as exc:
        parser.exit(2, f"error: {exc}\n")
    return 0
