"""Every trajectory of the report in one list: the index's searchable, filterable, sortable table, and the
order previous/next follow on the trajectory pages.

The rows travel as JSON in a data block (``<script type="application/json">``, never run) and the page
script draws only the rows shown, a few hundred at a time: a 102-task x 5-level sweep has 510 of them per
model, and drawing them all as HTML cost the index seconds to open. Each row carries what the filters use
(model, level, status, section) and per cell its text and the value it sorts by ("✓ turn 2" sorts as 2).
With the script off, the task x level maps below the list still link every trajectory.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from metric_cost import add_costs, turn_cost
from metric_passrate_testcase import turn_rate
from metric_passrate_unitest import first_success
from plots import file_stem
from report_html import Html, join, tag, text_of, write_page
from report_trajectory import TaskView, cost_text, trajectory_page
from result_files import LevelRun, read_state

PAGES = "trajectories"


@dataclass(frozen=True)
class Entry:
    """One loaded (run, task): where its page goes and what the list shows about it."""

    section: str        # "memory_agent · fixed"
    model: str
    run: LevelRun
    task_id: int
    meta: dict          # the task's meta row ({} when the meta file does not list it)
    n_cases: int | None

    @property
    def href(self) -> str:
        return page_href(self.run, self.task_id)

    @property
    def turns(self) -> list[dict]:
        return self.run.trajectories[self.task_id]

    def status(self) -> tuple[str, str]:
        """(filter value, shown text): solved, not solved, incomplete or unfinished."""
        if self.task_id in self.run.incomplete:
            return "incomplete", f"incomplete: {self.run.incomplete[self.task_id]}"
        first = first_success(self.turns)
        if first is not None:
            return "solved", f"✓ turn {first}"
        if self.task_id in self.run.unfinished:
            return "unfinished", "unfinished"
        return "not solved", "✗ not solved"


def page_href(run: LevelRun, task_id: int) -> str:
    return f"{PAGES}/{file_stem(run.folder.name)}__task_{task_id}.html"


def write_pages(entries: list[Entry], out: Path, index_name: str,
                stage: Callable[[str], None] = lambda text: None) -> None:
    """One page per entry, previous/next in list order; ``stage`` hears which page is being written."""
    for number, entry in enumerate(entries):
        stage(f"writing trajectory page {number + 1} of {len(entries)}")
        view = TaskView(
            title=f"{entry.section} · {entry.model} · L{entry.run.level}", folder=str(entry.run.folder),
            task_id=entry.task_id, n_cases=entry.n_cases, init_content=text_of(entry.meta.get("init_content")),
            state=read_state(entry.run.folder, entry.task_id), index_href=f"../{index_name}",
            prev_href=f"../{entries[number - 1].href}" if number else None,
            next_href=f"../{entries[number + 1].href}" if number + 1 < len(entries) else None,
            position=f"{number + 1} of {len(entries)}",
        )
        write_page(out / entry.href, trajectory_page(view, entry.turns))


def _row(entry: Entry) -> dict:
    """One trajectory as the list's data: filter values and ``[text, sort value]`` per column."""
    status, shown = entry.status()
    turns = entry.turns
    cost = add_costs(turn_cost(turn) for turn in turns)
    best = max(turn_rate(turn, entry.n_cases) for turn in turns) if entry.n_cases else None
    first = first_success(turns)
    where = f"{entry.meta.get('repo_dir_name') or ''} {entry.meta.get('target_file_path') or ''}".strip()
    timed = cost["timed_turns"] > 0
    cells = [
        [f"task {entry.task_id}", entry.task_id], [where, None], [entry.model, None], [entry.section, None],
        [f"L{entry.run.level}", None], [shown, 99 if first is None else first], [str(len(turns)), len(turns)],
        ["-" if best is None else f"{100 * best:.0f}%", best],
        [f"{int(cost['code_input'] + cost['feedback_input']):,}", cost["code_input"] + cost["feedback_input"]],
        [f"{int(cost['code_output'] + cost['feedback_output']):,}", cost["code_output"] + cost["feedback_output"]],
        [cost_text(cost), round(cost["cost_usd"], 6)],
        [f"{cost['wall_time_sec']:.0f}" if timed else "-", round(cost["wall_time_sec"], 1) if timed else None],
    ]
    return {"href": entry.href, "model": entry.model, "level": f"L{entry.run.level}", "status": status,
            "section": entry.section, "css": {"solved": "ok", "not solved": "bad"}.get(status, "warn"),
            "cells": cells}


def data_block(element_id: str, value: object) -> Html:
    """JSON in a ``<script type="application/json">``: a data block is never run, and ``<``, ``>``, ``&``
    are written as escapes, so no text in it can close the element or start markup."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Html(f'<script type="application/json" id="{element_id}">{text}</script>')


COLUMNS = [("task", "num"), ("repository / file", "text"), ("model", "text"), ("runs", "text"),
           ("level", "text"), ("outcome", "num"), ("turns", "num"), ("best test cases", "num"), ("tokens in", "num"),
           ("tokens out", "num"), ("cost", "num"), ("wall s", "num")]


def _select(name: str, label: str, values: list[str]) -> Html:
    options = [tag("option", f"all {label}", value="")] + [tag("option", value, value=value) for value in values]
    return tag("label", f"{label.capitalize()}: ", tag("select", *options, data_filter=name, id=f"f-{name}"))


def list_block(entries: list[Entry]) -> Html:
    """The index's list of every trajectory with its search box, filters and sortable columns."""
    if not entries:
        return Html("")
    unique = lambda values: list(dict.fromkeys(values))  # noqa: E731 - keeps first-seen order
    controls = tag(
        "div",
        tag("label", "Search: ", tag("input", type="search", id="q", placeholder="task id, repository, model...")),
        _select("model", "models", unique(e.model for e in entries)),
        _select("level", "levels", sorted(unique(f"L{e.run.level}" for e in entries))),
        _select("status", "outcomes", ["solved", "not solved", "incomplete", "unfinished"]),
        _select("section", "runs", unique(e.section for e in entries)),
        tag("span", f"{len(entries)} trajectories", id="shown", class_="muted"),
        class_="controls")
    head = tag("thead", tag("tr", *(tag("th", name, data_type=kind, title="click to sort")
                                    for name, kind in COLUMNS)))
    return join([tag("h2", "Trajectories", id="trajectories-list"),
                 tag("p", "Search and filter, click a column to sort; previous/next on a trajectory page follow "
                          "this list as shown.", class_="muted"),
                 tag("p", "The list needs the page's script; the maps of outcomes below link every trajectory.",
                     id="list-off", class_="warn"),
                 controls, tag("div", tag("table", head, tag("tbody"), id="trajectories"), class_="scroll"),
                 tag("button", "show more", type="button", id="more", hidden=True),
                 data_block("trajectory-data", [_row(entry) for entry in entries])])
