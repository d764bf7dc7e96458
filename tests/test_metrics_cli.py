"""The metric scripts' command line: table formats, skip accounting under the table, user errors."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metrics_helpers import REPO, passed, turn, write_dataset, write_result
import all_metrics
import metric_passrate_unitest
import metric_passrate_testcase

SECOND = "vendor/model-b"


@pytest.fixture()
def cli_args(tmp_path: Path) -> list[str]:
    """Two models; model-a L0 has task 1 solved at turn 1, task 2 unsolved, task 3 missing, task 4 corrupt."""
    dataset = write_dataset(tmp_path / "ds", {1: 2, 2: 2, 3: 2, 4: 2}, {1: "x = 1\n", 2: "y = 2\n"})
    result_dir = tmp_path / "res"
    for level in (0, 1):
        write_result(result_dir, level, 1, [turn(0, tests=2, failures=1, status="failed"), passed(1, tests=2)])
        write_result(result_dir, level, 2, [turn(0, tests=2, failures=1, status="failed")])
        write_result(result_dir, level, 1, [passed(0, tests=2)], model=SECOND)
        write_result(result_dir, level, 2, [passed(0, tests=2)], model=SECOND)
    (result_dir / "memory_agent_org_model-a_feedback_fixed_guidance_0" / "task_4_result.pkl").write_bytes(b"junk")
    return ["--output-dir", str(result_dir), "--dataset-dir", str(dataset), "--guidance-level", "0,1"]


def test_markdown_table_with_counts_underneath(cli_args: list[str], capsys) -> None:
    assert metric_passrate_unitest.main(cli_args + ["--model", f"org/model-a,{SECOND}"]) == 0
    out, err = capsys.readouterr()
    assert "| model | L0 | L1 |" in out
    assert "| org/model-a | 50.0 | 50.0 |" in out
    assert f"| {SECOND} | 100.0 | 100.0 |" in out
    assert "org/model-a L0: 2/4 tasks used, missing 1, corrupt 1 (named on stderr)" in out
    assert "org/model-a L1: 2/4 tasks used, missing 2" in out
    assert err.count("task_4_result.pkl") == 1  # named once although two tables read it


def test_csv_is_parseable_and_notes_go_to_stderr(cli_args: list[str], capsys) -> None:
    assert metric_passrate_testcase.main(cli_args + ["--model", "org/model-a", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    blocks = [block for block in out.split("\n\n") if block.strip()]
    rows = list(csv.reader(io.StringIO(blocks[0].split("\n", 1)[1])))
    assert blocks[0].startswith("# Test-case pass rate, best turn")
    assert rows == [["model", "L0", "L1"], ["org/model-a", "75.0", "75.0"]]
    assert "missing 1" in err and "|" not in out


def test_json_keeps_raw_fractions_and_per_turn_curves(cli_args: list[str], capsys) -> None:
    args = cli_args + ["--format", "json", "--per-turn", "--max-turn", "3"]
    assert metric_passrate_unitest.main(args) == 0
    tables = json.loads(capsys.readouterr().out)
    by_title = {table["title"]: table for table in tables}
    recall = by_title["Unit-test pass rate, Recall@3 (% of tasks)"]
    assert recall["rows"] == [["org_model-a", 0.5, 0.5], ["vendor_model-b", 1.0, 1.0]]
    curve = by_title["Cumulative unit-test pass rate by turn (% of tasks)"]
    assert curve["columns"] == ["model", "level", "t0", "t1", "t2"]
    assert curve["rows"][0] == ["org_model-a", "L0", 0.0, 0.5, 0.5]


@pytest.mark.parametrize("override, message", [
    (["--output-dir", "nowhere"], "results folder nowhere not found"),
    (["--dataset-dir", "nowhere"], "meta file not found: nowhere/annotation_meta.jsonl"),
    (["--evaluation-setting", "baseline"], "no 'baseline_*_feedback_fixed_guidance_*' runs"),
])
def test_user_errors_are_one_line_and_exit_2(cli_args: list[str], capsys, override: list, message: str) -> None:
    with pytest.raises(SystemExit) as info:
        metric_passrate_unitest.main(cli_args + override)  # a repeated option: the last one wins
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_all_metrics_prints_every_table_and_leaves_out_unusable_extras(cli_args: list[str], capsys,
                                                                       monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RECODE_CODEBERT_MODEL", str(tmp_path / "no-model"))
    assert all_metrics.main(cli_args + ["--skip", "codebleu", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    titles = [table["title"] for table in json.loads(out)]
    for expected in ("Test-case pass rate, best turn", "Unit-test pass rate, Recall@10", "MRR of the first passing",
                     "Complexity of the canonical files", "Feedback items per turn", "Cost and effort"):
        assert any(title.startswith(expected) for title in titles), expected
    assert not any("CodeBLEU" in title or "CodeBERT" in title for title in titles)
    assert "codebert left out: CodeBERT model folder" in err


def test_all_metrics_rejects_unknown_metric_names(cli_args: list[str], capsys) -> None:
    with pytest.raises(SystemExit):
        all_metrics.main(cli_args + ["--skip", "bleu"])
    assert "unknown metric(s) bleu" in capsys.readouterr().err


def test_scripts_run_from_the_shell(cli_args: list[str]) -> None:
    for script in ("metrics/all_metrics.py", "scripts/cost_report.py"):
        args = [sys.executable, script, *cli_args, "--format", "json"]
        if script.startswith("metrics"):
            args += ["--skip", "codebleu,codebert"]
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)
