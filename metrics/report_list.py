"""Every trajectory of the report in one list: the index's searchable, filterable, sortable table, and the
order previous/next follow on the trajectory pages.

The table is plain HTML (it reads with the script off); each row carries ``data-*`` attributes the page
script filters on (model, level, status, section); the search matches the row's text. Sort values sit in
``data-v`` so "✓ turn 2" sorts as 2. Rows are kept lean: a 102-task x 5-level sweep lists 510 of them.
"""
from __future__ import annotations

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


def write_pages(entries: list[Entry], out: Path, index_name: str) -> None:
    """One page per entry, previous/next in list order."""
    for number, entry in enumerate(entries):
        view = TaskView(
            title=f"{entry.section} · {entry.model} · L{entry.run.level}", folder=str(entry.run.folder),
            task_id=entry.task_id, n_cases=entry.n_cases, init_content=text_of(entry.meta.get("init_content")),
            state=read_state(entry.run.folder, entry.task_id), index_href=f"../{index_name}",
            prev_href=f"../{entries[number - 1].href}" if number else None,
            next_href=f"../{entries[number + 1].href}" if number + 1 < len(entries) else None,
            position=f"{number + 1} of {len(entries)}",
        )
        write_page(out / entry.href, trajectory_page(view, entry.turns))


def _td(content: object, value: object = None, class_: str | None = None) -> Html:
    """A cell; ``value`` (data-v) is what the column sorts by when the text would sort wrongly."""
    return tag("td", content, class_=class_, data_v=value)


def _row(number: int, entry: Entry) -> Html:
    status, shown = entry.status()
    turns = entry.turns
    cost = add_costs(turn_cost(turn) for turn in turns)
    best = max(turn_rate(turn, entry.n_cases) for turn in turns) if entry.n_cases else None
    first = first_success(turns)
    where = f"{entry.meta.get('repo_dir_name') or ''} {entry.meta.get('target_file_path') or ''}".strip()
    timed = cost["timed_turns"] > 0
    cells = [
        _td(tag("a", f"task {entry.task_id}", href=entry.href), entry.task_id), _td(where), _td(entry.model),
        _td(entry.section), _td(f"L{entry.run.level}"),
        _td(shown, 99 if first is None else first, {"solved": "ok", "not solved": "bad"}.get(status, "warn")),
        _td(len(turns), class_="num"),
        _td("-" if best is None else f"{100 * best:.0f}%", "" if best is None else f"{best:.4f}", "num"),
        _td(int(cost["code_input"] + cost["feedback_input"]), class_="num"),
        _td(int(cost["code_output"] + cost["feedback_output"]), class_="num"),
        _td(cost_text(cost), f"{cost['cost_usd']:.6f}", "num"),
        _td(f"{cost['wall_time_sec']:.0f}" if timed else "-", f"{cost['wall_time_sec']:.1f}" if timed else "", "num"),
    ]
    return tag("tr", *cells, data_model=entry.model, data_level=f"L{entry.run.level}", data_status=status,
               data_section=entry.section, data_order=number)


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
    body = tag("tbody", *(_row(number, entry) for number, entry in enumerate(entries)))
    return join([tag("h2", "Trajectories", id="trajectories-list"),
                 tag("p", "Search and filter, click a column to sort; previous/next on a trajectory page follow "
                          "this list as shown.", class_="muted"),
                 controls, tag("div", tag("table", head, body, id="trajectories"), class_="scroll")])
