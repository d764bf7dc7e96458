"""Figures: values come from the metric task scores; PNG and SVG files are written; fixed and dynamic side by side."""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.report_helpers import MODEL, SECOND, build_results
import plots
from optional_extras import ExtraUnavailable
from result_files import RunSelection, load_runs
from task_meta import count_test_cases

pytest.importorskip("matplotlib", reason="plots need the optional extra matplotlib (pip install matplotlib)")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> tuple[Path, Path]:
    return build_results(tmp_path_factory.mktemp("plots"))


def series(scenario: tuple[Path, Path], model: str, guidance_type: str, levels: tuple[int, ...]) -> plots.Series:
    dataset, results = scenario
    selection = RunSelection(results, "memory_agent", guidance_type, levels)
    runs = load_runs(model, [1, 2, 3], selection, warn=lambda message: None)
    cases = count_test_cases(dataset / "annotation_meta.jsonl")
    return plots.series_from_runs(model, "memory_agent", guidance_type, runs, cases, max_turns=4)


def test_series_values_follow_the_metric_definitions(scenario) -> None:
    fixed = series(scenario, MODEL, "fixed", (0, 2))
    # L0: task 1 never solved (best 1 of 2 cases), release task 2 unsolved (1 of 2), task 3 corrupt -> skipped.
    # L2: task 1 solved at turn 2, task 3 at turn 1, task 2 missing.
    assert fixed.levels == [0, 2]
    assert fixed.recall == [0.0, 1.0]
    assert fixed.testcase == [0.5, 1.0]
    assert fixed.per_turn == {0: [0.0] * 4, 2: [0.0, 0.5, 1.0, 1.0]}
    # best-so-far test-case rate by turn: L0 task 1 and release task 2 pass 1 of 2 cases from turn 0;
    # L2 task 1 solves at turn 2, task 3 at turn 1 (each passing 1 of 2 before)
    assert fixed.testcase_per_turn == {0: [0.5] * 4, 2: [0.5, 0.75, 1.0, 1.0]}
    # dollars per loaded task: our records price every turn (0.01 code + 0.002 feedback when there was some);
    # the release task of L0 has no price, so L0 is the known part over its 2 loaded tasks
    assert fixed.cost[1] == pytest.approx((0.01 * 3 + 0.002 * 2 + 0.01 * 2 + 0.002) / 2)
    dynamic = series(scenario, MODEL, "dynamic", (0, 1))
    assert dynamic.recall == [0.5, None]      # no folder for start level 1: no value, no curve
    assert list(dynamic.per_turn) == [0]


def test_png_and_svg_written_for_every_figure(scenario, tmp_path: Path) -> None:
    items = [series(scenario, MODEL, "fixed", (0, 2)), series(scenario, SECOND, "fixed", (0, 2)),
             series(scenario, MODEL, "dynamic", (0,))]
    written = plots.write_plots(items, tmp_path / "figs", max_turns=4)
    assert [plot.name for plot in written[:3]] == ["recall_vs_level", "testcase_vs_level", "cost_vs_level"]
    assert len(written) == 3 + 2 * len(items)    # per series: cumulative Recall and test-case rate by turn
    for plot in written:
        assert set(plot.files) == {"png", "svg"}
        assert plot.files["png"].read_bytes().startswith(PNG_SIGNATURE)
        assert plot.files["png"].stat().st_size > 5_000
        root = ElementTree.parse(plot.files["svg"]).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    legend = written[0].files["svg"].read_text()
    # fixed and dynamic runs of the same model share the figure, told apart by the label
    assert "org_model-a (fixed)" not in legend  # the series use the names given, not folder names
    assert "org/model-a (fixed)" in legend and "org/model-a (dynamic)" in legend
    assert "vendor/model-b (fixed)" in legend
    for prefix in ("cumulative_recall", "testcase_by_turn"):
        turns = next(p for p in written if p.name.startswith(f"{prefix}_memory_agent_fixed_org_model-a"))
        assert "<!-- L0 -->" in turns.files["svg"].read_text() and "<!-- L2 -->" in turns.files["svg"].read_text()
    cost = written[2].files["svg"].read_text()
    assert "dollars per task" in cost and "org/model-a (fixed)" in cost


def test_svg_is_reproducible_and_names_are_shown_literally(tmp_path: Path) -> None:
    tricky = plots.Series("_cost$5$ {x}", "memory_agent", "fixed", [0, 1], [0.1, None], [0.2, 0.3], {0: [0.1, 0.2]})
    first = plots.write_plots([tricky], tmp_path / "a", max_turns=2)
    second = plots.write_plots([tricky], tmp_path / "b", max_turns=2)
    for one, two in zip(first, second):
        assert one.files["svg"].read_bytes() == two.files["svg"].read_bytes()
    assert "_cost$5$ {x}" in first[0].files["svg"].read_text()  # not parsed as mathtext, not hidden from the legend


def test_missing_matplotlib_is_one_clear_line(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ExtraUnavailable) as caught:
        plots.write_plots([], tmp_path, max_turns=10)
    message = str(caught.value)
    assert "\n" not in message and "matplotlib" in message and "pip install" in message
