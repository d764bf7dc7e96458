"""The report in a real browser (headless Debian chromium), opened from disk with file:// and no server, driven
as a person would (tests/cdp.py: real clicks and typing): search, filter, sort, open a trajectory, read a prompt
and the feedback conversation, unfold repeated text, previous/next. Screenshots go to $RECODE_SCREENS when set.

Skipped when chromium is not installed (``apt-get install -y chromium``).
"""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from tests.cdp import CHROMIUM, Browser, Page
from tests.report_helpers import FEEDBACK_SYSTEM, HOSTILE, MODEL, SYSTEM_PROMPT, build_results
from tests.synthetic_run import write_run
from analysis import main_analysis
from result_files import run_folder_name

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
PLOT_BLUE = (31, 119, 180)  # matplotlib's first line colour
VISIBLE_ROWS = "Array.from(document.querySelectorAll('#trajectories tbody tr')).filter(r => !r.hidden)"


def screens(tmp_path: Path) -> Path:
    return Path(os.environ.get("RECODE_SCREENS") or tmp_path)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    dataset, results = build_results(root)
    _, analysis = main_analysis("", ["--output-dir", str(results), "--dataset-dir", str(dataset), "--model", MODEL,
                                     "--skip", "codebert,codebleu", "--out", str(root / "report")])
    return analysis.out


@pytest.fixture(scope="module")
def browser():
    with Browser(width=1280, height=900) as driver:
        yield driver.page()


def rows(browser: Page) -> list[list[str]]:
    """(task, model, runs, level, outcome) of each visible row of the list, in order."""
    return browser.evaluate(f"{VISIBLE_ROWS}.map(r => [0, 2, 3, 4, 5].map(i => r.cells[i].textContent))")


def test_hostile_code_stays_text_in_the_rendered_dom(report: Path, browser: Page) -> None:
    folder = run_folder_name("memory_agent", MODEL, "fixed", 0)
    browser.open(report / "trajectories" / f"{folder}__task_1.html")
    assert browser.evaluate("document.documentElement.dataset.ready") == "1"   # the report's script ran
    assert browser.evaluate("document.title").startswith("Task 1 · memory_agent · fixed · org/model-a · L0")
    assert browser.evaluate("document.querySelectorAll('img').length") == 0
    assert browser.evaluate("document.scripts.length") == 1
    assert HOSTILE in browser.evaluate("document.body.textContent")


def test_search_filter_and_sort_the_trajectory_list(report: Path, browser: Page) -> None:
    browser.open(report / "index.html")
    assert browser.evaluate("document.getElementById('shown').textContent") == "6 trajectories"
    browser.type("#q", "task 3")
    assert {row[0] for row in rows(browser)} == {"task 3"} and len(rows(browser)) == 2
    browser.type("#q", "")
    browser.evaluate("(s => { s.value = 'L2'; s.dispatchEvent(new Event('change')); })"
                     "(document.getElementById('f-level'))")
    assert [row[0] for row in rows(browser)] == ["task 1", "task 3"]
    assert browser.evaluate("document.getElementById('shown').textContent") == "2 of 6 trajectories"
    browser.evaluate("(s => { s.value = ''; s.dispatchEvent(new Event('change')); })"
                     "(document.getElementById('f-level'))")
    browser.evaluate("(s => { s.value = 'not solved'; s.dispatchEvent(new Event('change')); })"
                     "(document.getElementById('f-status'))")
    assert {row[4] for row in rows(browser)} == {"✗ not solved"} and len(rows(browser)) == 3
    browser.evaluate("(s => { s.value = ''; s.dispatchEvent(new Event('change')); })"
                     "(document.getElementById('f-status'))")
    browser.click("#trajectories th:nth-child(6)")            # outcome: solved earliest first, unsolved last
    outcomes = [row[4] for row in rows(browser)]
    assert outcomes[:2] == ["✓ turn 1", "✓ turn 2"] and outcomes[-1] == "✗ not solved"
    browser.click("#trajectories th:nth-child(6)")            # again: the other way round
    assert [row[4] for row in rows(browser)][-1] == "✓ turn 1"
    browser.click("#trajectories th:nth-child(1)")
    browser.screenshot(screens(report) / "list_sorted.png")


def test_open_a_trajectory_read_prompt_and_feedback_and_step_through(report: Path, browser: Page) -> None:
    browser.open(report / "index.html")
    browser.type("#q", "")
    browser.evaluate("(s => { s.value = 'L2'; s.dispatchEvent(new Event('change')); })"
                     "(document.getElementById('f-level'))")
    browser.click_and_wait("#trajectories tbody tr:not([hidden]) a")
    assert browser.evaluate("document.title").startswith("Task 1 · memory_agent · fixed · org/model-a · L2")
    assert browser.evaluate("document.querySelector('nav.pager .position').textContent") == \
        "1 of 2 (as filtered and sorted in the report)"
    assert browser.evaluate("document.querySelector('nav.pager a[rel=prev]').hasAttribute('href')") is False
    # the overview's link opens the folded turn; the call opens on a click and shows what the model saw
    browser.click("a[href='#turn-0']")
    browser.wait_for("document.getElementById('turn-0').open")
    browser.click("#call-1 > summary")
    browser.click("#call-1 details.msg > summary")
    seen = browser.evaluate("document.getElementById('call-1').innerText")
    assert SYSTEM_PROMPT in seen and "Parameters: temperature=0, top_p=1" in seen
    assert "reflect: try 0" in seen                                          # the answer, open by default
    browser.click("#call-2 > summary")                                       # turn 0's feedback call
    browser.click("#call-2 details.msg > summary")
    feedback = browser.evaluate("document.getElementById('call-2').innerText")
    assert FEEDBACK_SYSTEM in feedback and '"category": "T2"' in feedback
    browser.screenshot(screens(report) / "trajectory_small.png")
    browser.click_and_wait("nav.pager a[rel=next]")
    assert browser.evaluate("document.title").startswith("Task 3 · memory_agent · fixed · org/model-a · L2")
    assert browser.evaluate("document.querySelector('nav.pager a[rel=next]').hasAttribute('href')") is False, \
        browser.evaluate("JSON.stringify([location.href, document.querySelector('nav.pager .position').textContent, "
                         "Object.keys(localStorage)])")
    browser.navigating(lambda: browser.press("p"))                           # keyboard: previous
    assert browser.evaluate("document.title").startswith("Task 1 · memory_agent · fixed · org/model-a · L2")


def test_index_renders_tables_and_figures_from_disk(report: Path, browser: Page) -> None:
    browser.open(report / "index.html")
    text = browser.evaluate("document.body.innerText")
    assert "Unit-test pass rate, Recall@10 (% of tasks)" in text and "Runs: memory_agent · dynamic" in text
    browser.evaluate("document.getElementById('figures').scrollIntoView()")
    visible = "Array.from(document.images).filter(i => i.getBoundingClientRect().top < innerHeight)"
    browser.wait_for(f"{visible}.every(i => i.complete && i.naturalWidth > 0)")  # the figures load lazily
    browser.evaluate(f"Promise.all({visible}.map(i => i.decode())).then(() => new Promise("  # decoded and painted
                     "done => requestAnimationFrame(() => requestAnimationFrame(done))))")
    shot = browser.screenshot(screens(report) / "figures.png")
    image = pytest.importorskip("PIL.Image").open(shot).convert("RGB")
    blue = sum(count for count, pixel in image.getcolors(1 << 24)
               if all(abs(a - b) <= 12 for a, b in zip(pixel, PLOT_BLUE)))
    assert blue > 200, "the figures (data URIs under the page's CSP) did not paint"


def test_repeated_text_unfolds_to_exactly_what_the_model_saw(tmp_path: Path, browser: Page) -> None:
    """A 10-turn run with the paper in every prompt: a folded prompt, unfolded in the page, equals the record."""
    write_run(tmp_path / "res", tmp_path / "ds", tasks=3, levels=[0, 2], turns=10, model="org/gpt-x",
              paper_chars=20_000)
    _, analysis = main_analysis("", ["--output-dir", str(tmp_path / "res"), "--dataset-dir", str(tmp_path / "ds"),
                                     "--skip", "codebert,codebleu", "--out", str(tmp_path / "report")])
    folder = tmp_path / "res" / run_folder_name("memory_agent", "org/gpt-x", "fixed", 2)
    turns = pickle.loads((folder / "task_2_result.pkl").read_bytes())
    assert turns[0]["feedback_conversation"]     # turn 0: calls 1-3, its feedback call 4; turn 1 starts at 5
    prompt = turns[1]["code_calls"][1]["messages"][1]["content"]                # turn 1, step 2: call 6
    browser.open(analysis.out / "index.html")
    browser.screenshot(screens(tmp_path) / "report_index.png", full_page=True)
    browser.type("#q", "repo-2")
    browser.evaluate("(s => { s.value = 'L2'; s.dispatchEvent(new Event('change')); })"
                     "(document.getElementById('f-level'))")
    browser.click_and_wait("#trajectories tbody tr:not([hidden]) a")
    browser.click("a[href='#turn-1']")
    browser.click("#call-6 > summary")
    browser.click("#call-6 details.msg:nth-of-type(2) > summary")
    assert browser.evaluate("document.querySelectorAll('#c6-m1 a.same').length") >= 1
    browser.screenshot(screens(tmp_path) / "trajectory_folded.png")
    browser.click("button.expand-all[data-target='c6-m1']")
    browser.wait_for("document.querySelectorAll('#c6-m1 a.same').length === 0")  # every fold opened
    shown = browser.evaluate("Array.from(document.querySelectorAll('#c6-m1 > pre')).map(p => p.textContent)"
                             ".join('\\n')")
    assert shown == prompt
    assert browser.evaluate("document.querySelectorAll('#c6-m1 .hl').length") == 0   # prompts are not code
    browser.evaluate("document.getElementById('c6-a').scrollIntoView()")            # the REPLACE answer's code
    browser.wait_for("document.querySelectorAll('#c6-a code.py.hl span.k').length > 0")
    browser.screenshot(screens(tmp_path) / "trajectory.png")
    (screens(tmp_path) / "trajectory.json").write_text(json.dumps({"page": browser.evaluate("location.href")}))
