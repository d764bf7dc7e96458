"""Scaled and vanilla pass@1 of ResearchCodeBench snippet tasks, overall and per paper.

Usage: python metrics/metric_scaled_pass.py --output-dir DIR --map DATASET/researchcodebench_map.jsonl
           [--model m1,m2] [--evaluation-setting snippet] [--guidance-type fixed] [--guidance-level 0,2] [--format markdown|csv|json]

scaled pass@1  = 100 x code lines of passed snippets / code lines of the snippets scored
vanilla pass@1 = 100 x passed snippets / snippets scored
A snippet passed when the LAST turn of its result (the only turn of a one-shot
run) ran tests with no error, failure or skip. Snippets without a result file
are NOT counted as failures: they are left out and counted as missing, and
every table says over how many snippets its numbers are computed.
The map file is written by scripts/import_researchcodebench.py.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from cli_flags import Parser
from metric_cli import add_selection
from metric_passrate_unitest import turn_success
from metric_tables import FORMATS, Table, emit
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_RESULT_DIR, LEVELS, LevelRun, RunSelection, discover_models, load_run
from task_meta import read_jsonl_objects

DEFAULT_SETTING = "snippet"
MAP_KEYS = {"index": int, "paper": str, "file": str, "snippet": str, "code_lines": int}


class ScaledPassError(Exception):
    """A command-line or map-file problem; one line naming the fix."""


@dataclass(frozen=True)
class SnippetRow:
    index: int
    paper: str
    file: str
    snippet: str
    code_lines: int


@dataclass(frozen=True)
class PassScore:
    """Counts behind one cell; ``scaled``/``vanilla`` are fractions (None when nothing was scored)."""

    passed: int
    scored: int
    lines_passed: int
    lines_scored: int
    missing: int

    @property
    def scaled(self) -> float | None:
        return self.lines_passed / self.lines_scored if self.lines_scored else None

    @property
    def vanilla(self) -> float | None:
        return self.passed / self.scored if self.scored else None


def read_map(path: Path | str) -> list[SnippetRow]:
    """Rows of researchcodebench_map.jsonl; errors name the file and line."""
    path = Path(path)
    rows = []
    missing = (f"map file {path} not found; pass --map DATASET/researchcodebench_map.jsonl "
               "(written by scripts/import_researchcodebench.py)")
    for number, row in read_jsonl_objects(path, ScaledPassError, missing):
        bad = [key for key, kind in MAP_KEYS.items()
               if not isinstance(row, dict) or not isinstance(row.get(key), kind) or isinstance(row.get(key), bool)]
        if bad:
            raise ScaledPassError(f"{path}:{number}: '{bad[0]}' missing or of the wrong type; re-run the importer")
        rows.append(SnippetRow(**{key: row[key] for key in MAP_KEYS}))
    if not rows:
        raise ScaledPassError(f"map file {path} has no rows; import papers first")
    return rows


def last_turn_passed(turns: list[dict]) -> bool:
    """Success of the run: its last turn passed (a feedback run stops at its first success)."""
    return bool(turns) and turn_success(turns[-1])


def score(rows: Iterable[SnippetRow], outcomes: dict[int, bool]) -> PassScore:
    """Pass counts of ``rows``; a row whose index is not in ``outcomes`` is missing, not failed."""
    rows = list(rows)
    scored = [row for row in rows if row.index in outcomes]
    passed = [row for row in scored if outcomes[row.index]]
    return PassScore(passed=len(passed), scored=len(scored), lines_passed=sum(r.code_lines for r in passed),
                     lines_scored=sum(r.code_lines for r in scored), missing=len(rows) - len(scored))


def by_paper(rows: list[SnippetRow], outcomes: dict[int, bool]) -> dict[str, PassScore]:
    papers = sorted({row.paper for row in rows})
    return {paper: score([r for r in rows if r.paper == paper], outcomes) for paper in papers}


def run_outcomes(run: LevelRun) -> dict[int, bool]:
    """Task id -> passed, for every complete task whose result file loaded (incomplete ones are neither)."""
    return {task: last_turn_passed(turns) for task, turns in run.trajectories.items() if task not in run.incomplete}


def scaled_pass_at_1(model: str, map_path: Path | str, result_dir: Path | str = DEFAULT_RESULT_DIR, *,
                     setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
                     level: int = 0) -> dict:
    """Notebook API: {"overall": PassScore, "papers": {paper: PassScore}} of one (model, level) run."""
    rows = read_map(map_path)
    run = load_run(model, level, [r.index for r in rows], RunSelection(result_dir, setting, guidance_type, (level,)))
    outcomes = run_outcomes(run)
    return {"overall": score(rows, outcomes), "papers": by_paper(rows, outcomes)}


def _cells(s: PassScore) -> list:
    return [s.scaled, s.vanilla, s.passed, s.scored, s.lines_passed, s.lines_scored, s.missing]


CELL_COLUMNS = ["scaled pass@1", "vanilla pass@1", "passed", "snippets scored", "lines passed", "lines scored",
                "missing"]


def run_notes(run: LevelRun, total: int) -> list[str]:
    """What the cells of one run rest on, stated explicitly."""
    label = f"{run.model} L{run.level}"
    used = len(run.trajectories) - len(set(run.trajectories) & set(run.incomplete))
    if used == total:
        notes = [f"{label}: all {total} snippets have a result file"]
    else:
        notes = [f"{label}: computed over the {used} of {total} snippets with a usable result file; "
                 f"{len(run.missing)} missing and {len(run.corrupt)} corrupt are left out, not counted as failures"]
    if run.incomplete:
        notes.append(f"{label}: {len(run.incomplete)} incomplete run(s) (infrastructure error, budget, missing "
                     "feedback) left out, neither passed nor failed (rerun them)")
    if run.unfinished:
        notes.append(f"{label}: {len(run.unfinished)} unfinished run(s) scored on their last stored turn")
    return notes


def tables(rows: list[SnippetRow], runs: list[LevelRun]) -> list[Table]:
    overall = Table("ResearchCodeBench pass@1 (%), overall", ["model", "level"] + CELL_COLUMNS, scale=100.0, digits=1)
    papers = Table("ResearchCodeBench pass@1 (%), per paper", ["model", "level", "paper"] + CELL_COLUMNS,
                   scale=100.0, digits=1)
    for run in runs:
        outcomes = run_outcomes(run)
        overall.rows.append([run.model, run.level] + _cells(score(rows, outcomes)))
        papers.rows += [[run.model, run.level, paper] + _cells(s) for paper, s in by_paper(rows, outcomes).items()]
        overall.notes += run_notes(run, len(rows))
    total = f"the map lists {len(rows)} snippets, {sum(r.code_lines for r in rows)} code lines"
    overall.notes.append(total)
    papers.notes.append(total + "; missing snippets are excluded per paper too")
    return [overall, papers]


def parse_args(argv: Iterable[str] | None) -> argparse.Namespace:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_selection(parser, levels_help="every level with a folder", setting=DEFAULT_SETTING)
    parser.add_argument("--map", required=True, help="researchcodebench_map.jsonl of the imported dataset")
    parser.add_argument("--format", choices=FORMATS, default="markdown")
    return parser.parse_args(None if argv is None else list(argv))


def load_selected_runs(args: argparse.Namespace, rows: list[SnippetRow]) -> list[LevelRun]:
    selection = RunSelection(args.result_dir, args.setting, args.guidance_type, tuple(args.levels or LEVELS))
    if not Path(args.result_dir).is_dir():
        raise ScaledPassError(f"results folder {args.result_dir} not found; pass --output-dir DIR")
    models = args.models or discover_models(selection)
    if not models:
        raise ScaledPassError(f"no '{args.setting}_*_feedback_{args.guidance_type}_guidance_*' runs under "
                              f"{args.result_dir}; pass --model, --evaluation-setting or --guidance-type")
    ids = [row.index for row in rows]
    runs = [load_run(model, level, ids, selection) for model in models for level in selection.levels
            if args.levels or selection.folder(model, level).is_dir()]
    if not runs:
        raise ScaledPassError(f"no result folders for {', '.join(models)} under {args.result_dir}; pass --guidance-level")
    return runs


def main(argv: Iterable[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        rows = read_map(args.map)
        emit(tables(rows, load_selected_runs(args, rows)), args.format)
    except ScaledPassError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
