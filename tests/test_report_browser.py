"""The report in a real browser (headless Debian chromium), opened from disk with file:// and no server.

Skipped when chromium is not installed (``apt-get install -y chromium``).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.report_helpers import HOSTILE, MODEL, PageScan, build_results
from analysis import main_analysis
from result_files import run_folder_name

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
PLOT_BLUE = (31, 119, 180)  # matplotlib's first line colour


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    dataset, results = build_results(root)
    _, analysis = main_analysis("", ["--result-dir", str(results), "--dataset-dir", str(dataset), "--models", MODEL,
                                     "--skip", "codebert,codebleu", "--out", str(root / "report")])
    return analysis.out


def chromium(tmp_path: Path, page: Path, *mode: str) -> subprocess.CompletedProcess:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run",
               f"--user-data-dir={tmp_path / 'profile'}", *mode, page.resolve().as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_hostile_code_stays_text_in_the_rendered_dom(report: Path, tmp_path: Path) -> None:
    folder = run_folder_name("memory_agent", MODEL, "fixed", 0)
    done = chromium(tmp_path, report / "trajectories" / f"{folder}__task_1.html", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = PageScan(done.stdout)
    assert [tag for tag, _ in dom.elements if tag in ("script", "img")] == []
    assert HOSTILE in dom.text
    title = dom.text.split("Task 1", 1)[1]
    assert title.startswith(" · memory_agent · fixed · org/model-a · L0")   # document.title never rewritten
    assert "Turn 2" in dom.text and "Code: change from turn 1" in dom.text


def test_index_renders_tables_and_figures_from_disk(report: Path, tmp_path: Path) -> None:
    dom = PageScan(chromium(tmp_path, report / "index.html", "--dump-dom").stdout)
    assert "Unit-test pass rate, Recall@10 (% of tasks)" in dom.text
    assert "Runs: memory_agent · dynamic" in dom.text
    shot = tmp_path / "index.png"
    done = chromium(tmp_path, report / "index.html", f"--screenshot={shot}", "--window-size=1280,2000")
    assert done.returncode == 0 and shot.read_bytes().startswith(b"\x89PNG")
    if not (report / "plots").is_dir():
        pytest.skip("figures need matplotlib; the screenshot was taken without them")
    image = pytest.importorskip("PIL.Image").open(shot).convert("RGB")
    blue = sum(count for count, pixel in image.getcolors(1 << 24)
               if all(abs(a - b) <= 12 for a, b in zip(pixel, PLOT_BLUE)))
    assert blue > 200, "the SVG figures (data URIs under the page's CSP) did not paint"
