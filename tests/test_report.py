"""The HTML report and the one-command analysis: tables, figures, trajectories, diffs, hostile text, bad input."""
from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metrics_helpers import REPO
from tests.report_helpers import (CORRUPT_TASK, HOSTILE, MODEL, RELEASE_TASK, PageScan, build_results, trajectory,
                                  write_run)
from tests.metrics_helpers import write_dataset
from analysis import main_analysis
from result_files import run_folder_name

PAGE = "trajectories/{folder}__task_{task}.html"


def page_name(model: str, guidance_type: str, level: int, task: int) -> str:
    folder = run_folder_name("memory_agent", model, guidance_type, level)
    return PAGE.format(folder=folder, task=task)


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The documented command, run once on the scenario of tests/report_helpers.py."""
    root = tmp_path_factory.mktemp("report")
    dataset, results = build_results(root)
    out = root / "out"
    command = [sys.executable, "scripts/analyze_results.py", "--output-dir", str(results), "--dataset-dir",
               str(dataset), "--skip", "codebert,codebleu", "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    return done, results, out


def read(out: Path, name: str) -> str:
    return (out / name).read_text(encoding="utf-8")


def test_command_prints_every_table_and_says_where_the_files_are(cli_run) -> None:
    done, results, out = cli_run
    assert done.returncode == 0, done.stderr
    for section in ("memory_agent · fixed", "memory_agent · dynamic"):
        assert f"## [{section}] Unit-test pass rate, Recall@10 (% of tasks)" in done.stdout
        assert f"## [{section}] Test-case pass rate, best turn (% of test cases)" in done.stdout
        assert f"## [{section}] Cost and effort" in done.stdout
    assert "| org_model-a | 0.0 | 100.0 |" in done.stdout        # Recall@10, fixed L0 and L2
    assert f"report: {out / 'index.html'}" in done.stderr
    assert "figures: 9 figures (PNG and SVG)" in done.stderr   # 3 by level, 2 by turn for each of 3 series
    assert f"task_{CORRUPT_TASK}_result.pkl" in done.stderr         # the corrupt file is named
    assert (out / "tables.md").read_text() == done.stdout
    assert (out / "index.html").is_file() and (out / "tables.json").is_file()


def test_index_holds_tables_accounting_figures_and_a_map_of_outcomes(cli_run) -> None:
    _, results, out = cli_run
    index = PageScan(read(out, "index.html"))
    text = index.text
    assert "Runs: memory_agent · fixed" in text and "Runs: memory_agent · dynamic" in text
    assert "Unit-test pass rate, Recall@10 (% of tasks)" in text
    corrupt = results / run_folder_name("memory_agent", "org_model-a", "fixed", 0) / f"task_{CORRUPT_TASK}_result.pkl"
    assert f"corrupt: {corrupt}: not a loadable pickle" in text
    assert "missing in memory_agent_org_model-a_feedback_fixed_guidance_2: tasks 2" in text
    assert "✓ turn 2" in text and "✗ 3 turns, best 50%" in text      # fixed L2 task 1; L0 task 1
    assert "20260101-000000_1.json" in text and '"command": ["python", "agent/research_code_generation.py"]' in text
    images = index.attrs("img", "src")
    assert len(images) == 9 and all(src.startswith("data:image/png;base64,") for src in images)
    assert {"plots/recall_vs_level.png", "plots/testcase_vs_level.svg", "plots/cost_vs_level.svg",
            "plots/testcase_by_turn_memory_agent_fixed_org_model-a.png"} <= set(index.attrs("a", "href"))
    # what the tables cover: the run record here has no config, so the defaults say where they come from
    assert "max-turn 10 (the release's default; no run record says): Recall@10" in text
    assert "3 tasks (every runnable task of the meta file): 1, 2, 3" in text
    assert "levels L0, L2 (the run folders found)" in text
    assert "tokens and cost: every stored result in the folder" in text
    # the list of every trajectory (data the page script draws from), with the filters' choices
    block = re.search(r'<script type="application/json" id="trajectory-data">(.*?)</script>', read(out, "index.html"))
    rows = json.loads(block.group(1))
    assert len(rows) == 12 and {row["status"] for row in rows} == {"solved", "not solved"}
    assert {row["model"] for row in rows} == {"org_model-a", "vendor_model-b"}   # models as found on disk
    solved = next(row for row in rows if row["href"] == page_name("org_model-a", "fixed", 2, 1))
    assert solved["cells"][5] == ["✓ turn 2", 2] and solved["cells"][7] == ["100%", 1.0]
    assert {"org_model-a", "L2", "solved", "memory_agent · dynamic"} <= set(index.attrs("option", "value"))


def test_pages_are_self_contained_and_every_link_opens(cli_run) -> None:
    _, _, out = cli_run
    pages = sorted(out.rglob("*.html"))
    assert len(pages) == 1 + 2 + 2 + 2 + 3 + 3    # index + loaded (run, task) pairs
    for path in pages:
        html = path.read_text(encoding="utf-8")
        scan = PageScan(html)
        assert not [tag for tag, _ in scan.elements if tag in ("iframe", "object", "embed", "link")]
        assert not [name for _, attrs in scan.elements for name in attrs if name.startswith("on")]
        policies = [a["content"] for tag, a in scan.elements if tag == "meta" and a.get("http-equiv")]
        assert policies and "default-src 'none'" in policies[0]
        # one inline script, the report's own, and the policy lets run only a script with exactly its hash
        # (the index also holds a JSON data block, which is never run)
        scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
        data = len(re.findall(r'<script type="application/json" id="trajectory-data">', html))
        assert len(scripts) == 1 and html.count("<script") == 1 + data and data == (path.name == "index.html")
        digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
        assert f"script-src 'sha256-{digest}'" in policies[0]
        assert scripts[0] == (REPO / "metrics" / "report_viewer.js").read_text(encoding="utf-8")
        for href in scan.attrs("a", "href"):
            if href.startswith("#"):
                continue
            assert not re.match(r"^[a-z]+:|^//", href), href           # relative links only
            assert (path.parent / href.split("#")[0]).is_file(), href


def test_trajectory_shows_diff_digest_feedback_tokens_and_cost(cli_run) -> None:
    _, _, out = cli_run
    html = read(out, page_name("org_model-a", "fixed", 2, 1))
    scan = PageScan(html)
    assert '<span class="del">-    return x.sum(axis=0)</span>' in html
    assert '<span class="add">+    return x.sum(axis=1)</span>' in html
    assert "--- the initial file" in scan.text                           # turn 0 is diffed against init_content
    assert "FAILED test_b" in scan.text and "PASS test_b" in scan.text   # digests of a failing and the passing turn
    assert "Description: wrong axis (turn 0)" in scan.text               # the feedback shown at L2
    assert "Raw feedback records (1, source llm)" in scan.text
    assert "$0.0120" in scan.text and "Wall time: 1.5 s." in scan.text
    assert "Solved at turn 2" in scan.text and "reflect: try 1" in scan.text
    assert [turn for turn in ("turn-0", "turn-1", "turn-2", "turn-3") if f'id="{turn}"' in html] == \
        ["turn-0", "turn-1", "turn-2"]


def test_hostile_model_output_is_shown_as_text(cli_run) -> None:
    _, _, out = cli_run
    html = read(out, page_name("org_model-a", "fixed", 0, 1))
    scan = PageScan(html)
    assert HOSTILE in scan.text                       # visible, character for character
    assert html.count("<script") == 1 and "<img src=x" not in html   # the one script is the report's own
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in html


def test_release_format_records_render_with_what_they_have(cli_run) -> None:
    _, _, out = cli_run
    scan = PageScan(read(out, page_name("org_model-a", "fixed", 0, RELEASE_TASK)))
    assert "Formatted feedback: not recorded in this result file (release format)." in scan.text
    assert "Actions: not recorded in this result file (release format)." in scan.text
    assert "Tests: 2 run, 1 failed, 0 errors, 0 skipped." in scan.text
    assert "No state file (release results" in scan.text and "Not solved" in scan.text
    assert "unknown" in scan.text                     # tokens without a price: the cost is not made up


def test_figures_left_out_without_matplotlib_and_the_report_still_written(tmp_path: Path, monkeypatch, capsys) -> None:
    dataset, results = build_results(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    _, analysis = main_analysis("", ["--output-dir", str(results), "--dataset-dir", str(dataset),
                                     "--model", MODEL, "--guidance-type", "fixed", "--skip", "codebert,codebleu"])
    assert analysis.plots == [] and analysis.index.is_file()
    note = next(note for note in analysis.notes if note.startswith("figures left out"))
    assert "matplotlib" in note and "\n" not in note
    assert note in capsys.readouterr().err
    scan = PageScan(analysis.index.read_text(encoding="utf-8"))
    assert note in scan.text and not scan.attrs("img", "src")
    assert "Runs: memory_agent · dynamic" not in scan.text and "org/model-a" in scan.text


@pytest.mark.parametrize("args, message", [
    (["--output-dir", "{tmp}/nowhere"], "error: results folder {tmp}/nowhere not found; pass --output-dir DIR"),
    (["--output-dir", "{tmp}", "--evaluation-setting", "agent"], "error: no 'agent_*_feedback_*_guidance_*' runs under {tmp}"),
])
def test_user_errors_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    command = [sys.executable, "scripts/report.py"] + [arg.format(tmp=tmp_path) for arg in args]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message.format(tmp=tmp_path))
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_job_stopped_for_missing_feedback_is_reported_incomplete(tmp_path: Path, capsys) -> None:
    """Neither solved nor unsolved: out of the tables' averages, marked in the map and on its page."""
    dataset = write_dataset(tmp_path / "ds", {1: 1, 2: 1})
    stopped = trajectory(2, 2, None, turns=2)
    stopped[-1]["stop_reason"] = "feedback_missing"
    folder = write_run(tmp_path / "res", MODEL, "fixed", 2, {1: trajectory(1, 2, 0), 2: stopped})
    (folder / "task_2_state.json").write_text('{"finished": false, "error": "no feedback", '
                                              '"stop_reason": "feedback_missing"}')
    _, analysis = main_analysis("", ["--output-dir", str(tmp_path / "res"), "--dataset-dir", str(dataset),
                                     "--guidance-level", "2", "--skip", "codebert,codebleu,cost", "--out", str(tmp_path / "out")])
    recall = next(t for t in analysis.tables() if t.title.startswith("Unit-test pass rate, Recall@10"))
    assert [row[1:] for row in recall.rows] == [[1.0]]
    assert any("1/2 tasks used" in note and "incomplete 1 (feedback_missing 1;" in note for note in recall.notes)
    index = PageScan(analysis.index.read_text(encoding="utf-8")).text
    assert "incomplete: feedback_missing" in index
    page = PageScan((tmp_path / "out" / page_name(MODEL, "fixed", 2, 2)).read_text(encoding="utf-8")).text
    assert "Incomplete (feedback_missing): neither solved nor unsolved" in page and "job stopped: feedback_missing" in page


def test_a_tampered_turn_makes_its_job_incomplete(tmp_path: Path) -> None:
    """A turn the guard graded tampered: the job is neither solved nor unsolved, and its page names the status."""
    dataset = write_dataset(tmp_path / "ds", {1: 1, 2: 1})
    hacked = trajectory(2, 2, 1, turns=2)
    hacked[0]["status"] = hacked[0]["execution_result"]["status"] = "tampered"
    hacked[0]["execution_result"]["failure_messages"] = ["session: tampering: target.py:3 sets sys.settrace"]
    write_run(tmp_path / "res", MODEL, "fixed", 2, {1: trajectory(1, 2, 0), 2: hacked})
    _, analysis = main_analysis("", ["--output-dir", str(tmp_path / "res"), "--dataset-dir", str(dataset),
                                     "--guidance-level", "2", "--skip", "codebert,codebleu,cost", "--out", str(tmp_path / "out")])
    recall = next(t for t in analysis.tables() if t.title.startswith("Unit-test pass rate, Recall@10"))
    assert [row[1:] for row in recall.rows] == [[1.0]]
    assert any("1/2 tasks used" in note and "incomplete 1 (tampered 1;" in note for note in recall.notes)
    assert "incomplete: tampered" in PageScan(analysis.index.read_text(encoding="utf-8")).text
    page = PageScan((tmp_path / "out" / page_name(MODEL, "fixed", 2, 2)).read_text(encoding="utf-8")).text
    assert "Incomplete (tampered): neither solved nor unsolved" in page and page.count("tampered") >= 2
