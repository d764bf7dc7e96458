"""The static HTML report of a results folder: an index page (what the runs covered, tables, figures, a
searchable list of every trajectory, file accounting, a task x level map of outcomes) linking to one
trajectory page per (run, task). Opens from disk, no server; reads fully with the script off.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from metric_cli import Context
from metric_passrate_testcase import turn_rate
from metric_passrate_unitest import first_success
from metric_tables import Table
from plots import Plot
from report_html import (Cell, Html, bullet_list, cell, details, image_data_uri, join, metric_table, page, pre, table,
                         tag, write_page)
from report_list import Entry, list_block, page_href, write_pages
from result_files import LevelRun
from run_settings import RUN_RECORDS
from run_status import REQUEST_REFUSED, TAMPERED_STOP
from task_meta import count_test_cases, read_meta_rows

INDEX = "index.html"
MAX_LISTED_IDS = 40
MAX_RUN_RECORDS = 30


@dataclass
class Section:
    """The runs of one (setting, guidance type) and the metric tables computed on them."""

    ctx: Context
    tables: list[Table]

    @property
    def name(self) -> str:
        return f"{self.ctx.selection.setting} · {self.ctx.selection.guidance_type}"

    @property
    def covers(self) -> list[str]:
        """What the section's tables cover (max-turn, tasks, levels, models) and where each came from."""
        return list(getattr(self.ctx.args, "covers", []))

    def entries(self) -> list[Entry]:
        """Every loaded (run, task), by model, level and task."""
        ctx = self.ctx
        cases, rows = count_test_cases(ctx.meta_path), read_meta_rows(ctx.meta_path)
        return [Entry(self.name, model, run, task_id, rows.get(task_id, {}), cases.get(task_id))
                for model in ctx.models for run in ctx.runs(model) for task_id in sorted(run.trajectories)]


def ids_text(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:MAX_LISTED_IDS]))
    return shown + (f" ... ({len(ids) - MAX_LISTED_IDS} more)" if len(ids) > MAX_LISTED_IDS else "")


def outcome_cell(run: LevelRun, task_id: int, n_cases: int | None) -> Cell:
    """Solved at turn t / best test-case rate / incomplete / missing / corrupt, linked to the trajectory when loaded."""
    if task_id in run.corrupt:
        return cell("corrupt", "warn", title=run.corrupt[task_id])
    turns = run.trajectories.get(task_id)
    if task_id in run.incomplete:
        text = f"incomplete: {run.incomplete[task_id]}"
        content = text if turns is None else tag("a", text, href=page_href(run, task_id))
        return cell(content, "warn", title=run.errors.get(task_id) or "neither solved nor unsolved")
    if turns is None:
        return cell("missing", "none", title=run.errors.get(task_id))
    first = first_success(turns)
    partial = " (unfinished)" if task_id in run.unfinished else ""
    if first is not None:
        text, css = f"✓ turn {first}{partial}", "ok"
    else:
        best = max(turn_rate(turn, n_cases) for turn in turns) if n_cases else None
        text = f"✗ {len(turns)} turns" + (f", best {100 * best:.0f}%" if best is not None else "") + partial
        css = "bad"
    return cell(tag("a", text, href=page_href(run, task_id)), css)


def outcome_map(ctx: Context, model: str, cases: dict[int, int]) -> Html:
    runs = ctx.runs(model)
    rows = [[task_id] + [outcome_cell(run, task_id, cases.get(task_id)) for run in runs] for task_id in ctx.task_ids]
    return join([tag("h3", f"Trajectories: {model}"), table(["task"] + [f"L{run.level}" for run in runs], rows)])


def files_block(ctx: Context) -> Html:
    """Per run: what was loaded and what was not, with every corrupt file and stopping error named."""
    rows, named = [], []
    for model in ctx.models:
        for run in ctx.runs(model):
            present = run.folder.is_dir()
            rows.append([model, f"L{run.level}", run.folder.name, len(run.trajectories),
                         cell(len(run.missing), "warn" if run.missing else None),
                         cell(len(run.corrupt), "warn" if run.corrupt else None), len(run.unfinished),
                         len(run.errors), len(run.infra_errors),
                         cell(len(run.incomplete), "warn" if run.incomplete else None)])
            if not present:
                named.append(f"no results folder {run.folder}")
            elif run.missing:
                named.append(f"missing in {run.folder.name}: tasks {ids_text(run.missing)}")
            named += [f"corrupt: {run.folder / f'task_{task}_result.pkl'}: {why}" for task, why in run.corrupt.items()]
            named += [f"stopped by an error: {run.folder.name} task {task}: {why}" for task, why in run.errors.items()]
    columns = ["model", "level", "folder", "loaded", "missing", "corrupt", "unfinished", "errored", "infra errors",
               "incomplete"]
    return join([tag("h3", "Result files"), table(columns, rows), bullet_list(named)])


ANSWER_STOPS = (("length", "truncated"), ("refusal", "refused"), ("content_filter", "filtered"))


def stop_row(run: LevelRun) -> list[int]:
    """Answers cut off, refused and filtered over the run's loaded turns; jobs stopped by a request too long for
    the model's context, by a request refused as sent for another reason, and by a turn graded tampered."""
    entries = [entry.get("reason") for turns in run.trajectories.values() for turn in turns
               for entry in turn.get("answer_stops") or [] if isinstance(entry, dict)]
    reasons = list(run.incomplete.values())
    return [*(entries.count(reason) for reason, _ in ANSWER_STOPS), reasons.count("context_length"),
            sum(reason in REQUEST_REFUSED and reason != "context_length" for reason in reasons),
            reasons.count(TAMPERED_STOP)]


def stops_block(ctx: Context) -> Html:
    """Per run, beside its scores: what the providers cut off or refused, and the jobs stopped apart (never
    scored); nothing when the runs had none."""
    rows = [[model, f"L{run.level}", *(cell(n, "warn" if n else None) for n in counts)]
            for model in ctx.models for run in ctx.runs(model) if any(counts := stop_row(run))]
    if not rows:
        return Html("")
    columns = ["model", "level", *(label for _, label in ANSWER_STOPS), "context-limit stops", "requests refused",
               "tampered stops"]
    note = ("Answers: code and feedback answers the provider cut off at the output limit, the model refused, or "
            "the provider's safety filter stopped. Stops: jobs ended before their last turn, neither solved nor "
            "unsolved (the outcome map names each).")
    return join([tag("h3", "Truncations, refusals and refused requests"), table(columns, rows), tag("p", note)])


def figures_block(plots: list[Plot], out: Path) -> Html:
    figures = []
    for plot in plots:
        links = [tag("a", fmt.upper(), href=Path(os.path.relpath(path, out)).as_posix()) for fmt, path in
                 plot.files.items()]
        # PNG in the page (decodes far faster than matplotlib's SVG; the index opens with many figures), and
        # loaded lazily; the SVG is linked beside it
        image = tag("img", src=image_data_uri(plot.files["png"]), alt=plot.title, loading="lazy", decoding="async")
        figures.append(tag("figure", image, tag("figcaption", "Files: ", *_spaced(links))))
    if not figures:
        return Html("")
    return join([tag("h2", "Figures", id="figures"), tag("div", *figures, class_="figures")])


def _spaced(items: list[Html]) -> list[object]:
    return [part for i, item in enumerate(items) for part in ((" · ", item) if i else (item,))]


def section_block(number: int, section: Section, pages: int) -> Html:
    ctx = section.ctx
    cases = count_test_cases(ctx.meta_path)
    return join([
        tag("h2", f"Runs: {section.name}", id=f"section-{number}"),
        tag("p", f"{pages} trajectory pages. This report covers:"), bullet_list(section.covers),
        *(metric_table(item) for item in section.tables),
        stops_block(ctx),
        files_block(ctx),
        *(outcome_map(ctx, model, cases) for model in ctx.models),
    ])


def run_records_block(result_dir: Path) -> Html:
    """The run records (config without secrets, commit, versions) the harness left, newest first, collapsed."""
    records = sorted((result_dir / RUN_RECORDS).glob("*.json"), reverse=True)
    if not records:
        return Html("")
    blocks = []
    for path in records[:MAX_RUN_RECORDS]:
        try:
            blocks.append(details(path.name, pre(path.read_text(encoding="utf-8", errors="replace"))))
        except OSError as exc:
            blocks.append(tag("p", f"{path.name}: unreadable ({exc.strerror or exc})", class_="warn"))
    more = [tag("p", f"{len(records) - MAX_RUN_RECORDS} older records in {result_dir / RUN_RECORDS}.")] \
        if len(records) > MAX_RUN_RECORDS else []
    return join([tag("h2", "Run records", id="run-records"), *blocks, *more])


def contents(sections: list[Section], has_figures: bool, has_records: bool) -> Html:
    links = [tag("a", "Figures", href="#figures")] if has_figures else []
    links.append(tag("a", "Trajectories (search, filter, sort)", href="#trajectories-list"))
    links += [tag("a", f"Runs: {section.name}", href=f"#section-{number}") for number, section in enumerate(sections)]
    if has_records:
        links.append(tag("a", "Run records", href="#run-records"))
    return tag("nav", bullet_list(links, class_="contents"))


def write_report(out: Path | str, result_dir: Path | str, sections: list[Section], plots: list[Plot],
                 notes: list[str], stage: Callable[[str], None] = lambda text: None) -> Path:
    """Write ``out/index.html`` and the trajectory pages; returns the index path. ``stage`` hears what is
    being done (a full sweep's report writes thousands of pages)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    facts = [f"Results folder: {Path(result_dir).resolve()}", f"Written {time.strftime('%Y-%m-%d %H:%M:%S %z')}"]
    records = run_records_block(Path(result_dir))
    per_section = [section.entries() for section in sections]
    entries = [entry for group in per_section for entry in group]
    write_pages(entries, out, INDEX, stage)
    stage("writing the index page")
    body = [tag("h1", "RECODE-H run report"), bullet_list(facts + notes),
            contents(sections, bool(plots), bool(records)), figures_block(plots, out), list_block(entries)]
    body += [section_block(number, section, len(group))
             for number, (section, group) in enumerate(zip(sections, per_section))] + [records]
    index = out / INDEX
    write_page(index, page("RECODE-H run report", *body))
    return index
