"""Figures of a results folder: Recall@n and test-case pass rate (with 95 % bootstrap intervals as error bars)
and cost per task against guidance level;
per series, cumulative Recall and the test-case pass rate by turn for each level.

A *series* is one (setting, guidance type, model) group of runs, so dynamic
runs (whose folder level is the start level) plot beside fixed ones. Values
come from the metric modules' task scores, so a figure and its table never
disagree. matplotlib is a core dependency, imported only when drawing (a
broken install still gets the tables and the report), and drawn through
``matplotlib.figure.Figure`` (no pyplot state, no display).

Usage from a notebook::

    sys.path.insert(0, "metrics")
    import plots
    series = [plots.series_from_runs(model, setting, "fixed", runs, cases, 10) for ...]
    plots.write_plots(series, "figures", max_turns=10)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from metric_aggregate import summarize
from metric_cost import level_cost
from metric_passrate_testcase import best_rate, best_so_far
from metric_passrate_unitest import cumulative_solved, solved_within
from optional_extras import import_extra
from result_files import LevelRun
from uncertainty import RESAMPLES, SEED, Interval, bootstrap_interval

FORMATS = ("png", "svg")
LEVEL_MARKERS = "osD^v"  # distinct shapes, shrinking with the level, keep coinciding level curves visible


@dataclass
class Series:
    """The plotted values of one (setting, guidance type, model) group; fractions, None where no task."""

    model: str
    setting: str
    guidance_type: str
    levels: list[int]
    recall: list[float | None]
    testcase: list[float | None]
    per_turn: dict[int, list[float]] = field(default_factory=dict)            # cumulative Recall by turn
    testcase_per_turn: dict[int, list[float]] = field(default_factory=dict)   # best-so-far test-case rate
    cost: list[float | None] = field(default_factory=list)                    # dollars per task (known prices)
    recall_interval: list[Interval | None] = field(default_factory=list)      # 95 % bootstrap over tasks
    testcase_interval: list[Interval | None] = field(default_factory=list)

    def label(self, vary_setting: bool, vary_type: bool) -> str:
        """The model name, plus the setting and guidance type when the figure mixes several."""
        extra = [part for part, varies in ((self.setting, vary_setting), (self.guidance_type, vary_type)) if varies]
        return f"{self.model} ({', '.join(extra)})" if extra else self.model


@dataclass(frozen=True)
class Plot:
    """One written figure: a title for captions and the path of each format."""

    name: str
    title: str
    files: dict[str, Path]


def series_from_runs(
    model: str, setting: str, guidance_type: str, runs: list[LevelRun], cases: dict[int, int], max_turns: int,
    *, seed: int = SEED, resamples: int = RESAMPLES,
) -> Series:
    """Score one model's level runs with the metric modules' task scores (Recall@n, best test-case rate with
    their bootstrap intervals, their per-turn curves) and metric_cost's totals (dollars per loaded task; None
    when no price is known)."""
    curves = {run.level: summarize(run, cumulative_solved(max_turns)).value for run in runs}
    rates = {run.level: summarize(run, best_so_far(cases, max_turns)).value for run in runs}
    costs = [level_cost(run) for run in runs]
    recall = [summarize(run, solved_within(max_turns)) for run in runs]
    testcase = [summarize(run, best_rate(cases, max_turns)) for run in runs]
    return Series(
        model, setting, guidance_type, [run.level for run in runs],
        [summary.value for summary in recall], [summary.value for summary in testcase],
        {level: curve for level, curve in curves.items() if curve is not None},
        {level: curve for level, curve in rates.items() if curve is not None},
        [cost["cost_usd"] / cost["tasks"] if cost["tasks"] and cost["priced"] else None for cost in costs],
        [bootstrap_interval(list(s.per_task.values()), seed=seed, resamples=resamples) for s in recall],
        [bootstrap_interval(list(s.per_task.values()), seed=seed, resamples=resamples) for s in testcase],
    )


def plot_text(text: str) -> str:
    """Text matplotlib shows literally: ``$`` would start mathtext, a leading ``_`` hides a legend entry."""
    return re.sub(r"^_", " _", text.replace("$", r"\$"))


def file_stem(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_") or "series"


def _percent(values: list[float | None]) -> list[float]:
    return [math.nan if value is None else 100.0 * value for value in values]


def _error_bars(intervals: list[Interval | None]) -> list[list[float]]:
    """Matplotlib's (below, above) distances, in points of %, from each value to its interval's ends."""
    below = [math.nan if i is None else 100.0 * (i.value - i.low) for i in intervals]
    above = [math.nan if i is None else 100.0 * (i.high - i.value) for i in intervals]
    return [below, above]


def _new_axes(title: str, xlabel: str, ylabel: str, percent: bool = True):
    import_extra("matplotlib", "plots")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.0, 4.2), layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(plot_text(title))
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if percent:
        axes.set_ylim(-2, 102)
    axes.grid(True, alpha=0.3)
    return figure, axes


def _save(figure, out_dir: Path, name: str, title: str) -> Plot:
    """Write every format; no date and a fixed id salt, so reruns give identical SVG files."""
    matplotlib = import_extra("matplotlib", "plots")
    files = {}
    with matplotlib.rc_context({"svg.hashsalt": "recode-h"}):
        for fmt in FORMATS:
            path = out_dir / f"{name}.{fmt}"
            metadata = {"Date": None} if fmt == "svg" else {"Software": None}
            figure.savefig(path, format=fmt, dpi=120, metadata=metadata)
            files[fmt] = path
    return Plot(name, title, files)


def level_plot(series: list[Series], attribute: str, title: str, ylabel: str, out_dir: Path, name: str) -> Plot:
    """One line per series: a metric (``recall``, ``testcase`` or ``cost``) against the guidance level."""
    vary_setting = len({s.setting for s in series}) > 1
    vary_type = len({s.guidance_type for s in series}) > 1
    xlabel = "guidance level (start level for dynamic runs)" if any(s.guidance_type == "dynamic" for s in series) \
        else "guidance level"
    dollars = attribute == "cost"
    figure, axes = _new_axes(title, xlabel, ylabel, percent=not dollars)
    for item in series:
        style = "--" if item.guidance_type == "dynamic" else "-"
        values = getattr(item, attribute) or [None] * len(item.levels)
        shown = [math.nan if v is None else v for v in values] if dollars else _percent(values)
        label = plot_text(item.label(vary_setting, vary_type))
        intervals = getattr(item, f"{attribute}_interval", None)
        if intervals:
            axes.errorbar(item.levels, shown, yerr=_error_bars(intervals), fmt=style, marker="o", capsize=3,
                          label=label)
        else:
            axes.plot(item.levels, shown, style, marker="o", label=label)
    if dollars:
        axes.set_ylim(bottom=0)
    levels = sorted({level for item in series for level in item.levels})
    axes.set_xticks(levels, [f"L{level}" for level in levels])
    if series:
        axes.legend(fontsize="small")
    return _save(figure, out_dir, name, title)


TURN_FIGURES = {  # attribute -> (file name prefix, title, y label)
    "per_turn": ("cumulative_recall", "Cumulative Recall by turn", "tasks solved by this turn (%)"),
    "testcase_per_turn": ("testcase_by_turn", "Test-case pass rate by turn (best so far)", "test cases passed (%)"),
}


def turn_plot(item: Series, max_turns: int, out_dir: Path, attribute: str = "per_turn") -> Plot:
    """A per-turn curve (cumulative Recall@(t+1), or the test-case pass rate) against turn t, one line per
    guidance level of one series."""
    prefix, heading, ylabel = TURN_FIGURES[attribute]
    title = f"{heading}: {item.model} ({item.setting}, {item.guidance_type})"
    figure, axes = _new_axes(title, "turn", ylabel)
    curves = getattr(item, attribute)
    for level, curve in sorted(curves.items()):
        axes.plot(range(len(curve)), _percent(curve), marker=LEVEL_MARKERS[level % len(LEVEL_MARKERS)],
                  markersize=max(4, 9 - level), linewidth=1.2, label=f"L{level}")
    axes.set_xticks(range(max_turns))
    if curves:
        axes.legend(fontsize="small", title="guidance level")
    name = f"{prefix}_{file_stem(item.setting)}_{file_stem(item.guidance_type)}_{file_stem(item.model)}"
    return _save(figure, out_dir, name, title)


def write_plots(series: list[Series], out_dir: Path | str, max_turns: int) -> list[Plot]:
    """Every figure of the report as PNG and SVG under ``out_dir``; raises ExtraUnavailable without matplotlib."""
    import_extra("matplotlib", "plots")  # before any folder is made: no empty plots/ without matplotlib
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = [
        level_plot(series, "recall", f"Recall@{max_turns} by guidance level (bars: 95 % interval)",
                   "tasks solved (%)", out, "recall_vs_level"),
        level_plot(series, "testcase", "Test-case pass rate by guidance level (best turn; bars: 95 % interval)",
                   "test cases passed (%)", out, "testcase_vs_level"),
        level_plot(series, "cost", "Cost per task by guidance level (all results; known prices)", "dollars per task",
                   out, "cost_vs_level"),
    ]
    return plots + [turn_plot(item, max_turns, out, attribute) for item in series for attribute in TURN_FIGURES]
