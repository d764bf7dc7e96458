"""Scaled and vanilla pass@1 over constructed result pickles and a map file; missing results are not failures."""
from __future__ import annotations

import json
import pickle

import pytest
from metrics_helpers import MODEL, passed, run_dir, turn

from metric_scaled_pass import (
    PassScore, SnippetRow, last_turn_passed, main, read_map, scaled_pass_at_1, score,
)

MAP = [
    {"index": 1, "paper": "A", "file": "a.py", "snippet": "s1", "code_lines": 3},
    {"index": 2, "paper": "A", "file": "a.py", "snippet": "s2", "code_lines": 1},
    {"index": 3, "paper": "A", "file": "a.py", "snippet": "s3", "code_lines": 4},
    {"index": 4, "paper": "B", "file": "b.py", "snippet": "s4", "code_lines": 2},
    {"index": 5, "paper": "B", "file": "b.py", "snippet": "s5", "code_lines": 5},
]


@pytest.fixture()
def results(tmp_path):
    map_path = tmp_path / "researchcodebench_map.jsonl"
    map_path.write_text("".join(json.dumps(row) + "\n" for row in MAP))
    folder = run_dir(tmp_path / "results", 0, setting="snippet")
    trajectories = {1: [passed(0)], 2: [turn(0, failures=1, status="failed")], 3: [passed(0)],
                    5: [turn(0, errors=1, status="failed"), passed(1)]}
    for task, turns in trajectories.items():
        (folder / f"task_{task}_result.pkl").write_bytes(pickle.dumps(turns))
    return tmp_path / "results", map_path


def test_success_is_decided_by_the_last_turn():
    assert last_turn_passed([passed(0)])
    assert last_turn_passed([turn(0, failures=1), passed(1)])
    assert not last_turn_passed([passed(0), turn(1, failures=1)])
    assert not last_turn_passed([turn(0, skipped=1)])
    assert not last_turn_passed([turn(0, tests=0)])
    assert not last_turn_passed([turn(0, status="infra_error")])
    assert not last_turn_passed([])


def test_score_counts_missing_separately():
    rows = [SnippetRow(**row) for row in MAP]
    result = score(rows, {1: True, 2: False, 3: True, 5: True})
    assert result == PassScore(passed=3, scored=4, lines_passed=12, lines_scored=13, missing=1)
    assert result.scaled == pytest.approx(12 / 13) and result.vanilla == pytest.approx(3 / 4)
    assert score(rows, {}).scaled is None and score(rows, {}).missing == 5


def test_api_overall_and_per_paper(results):
    result_dir, map_path = results
    scores = scaled_pass_at_1(MODEL, map_path, result_dir)
    assert (scores["overall"].scaled, scores["overall"].vanilla) == (pytest.approx(12 / 13), pytest.approx(0.75))
    assert scores["papers"]["A"] == PassScore(passed=2, scored=3, lines_passed=7, lines_scored=8, missing=0)
    assert scores["papers"]["B"] == PassScore(passed=1, scored=1, lines_passed=5, lines_scored=5, missing=1)


def test_cli_json_and_markdown_state_the_missing_count(results, capsys):
    result_dir, map_path = results
    base = ["--output-dir", str(result_dir), "--map", str(map_path)]
    assert main(base + ["--format", "json"]) == 0
    overall, papers = json.loads(capsys.readouterr().out)
    assert overall["rows"] == [["org_model-a", 0, 12 / 13, 0.75, 3, 4, 12, 13, 1]]  # discovered: folder spelling
    assert [row[2] for row in papers["rows"]] == ["A", "B"]
    assert main(base + ["--model", MODEL, "--guidance-level", "0"]) == 0
    text = capsys.readouterr().out
    assert "| org/model-a | 0 | 92.3 | 75.0 | 3 | 4 | 12 | 13 | 1 |" in text
    assert "computed over the 4 of 5 snippets with a usable result file; 1 missing and 0 corrupt are left out, " \
           "not counted as failures" in text
    assert "the map lists 5 snippets, 15 code lines" in text


@pytest.mark.parametrize("make_args, message", [
    (lambda d, m: ["--output-dir", str(d), "--map", str(m.parent / "nope.jsonl")], "map file"),
    (lambda d, m: ["--output-dir", str(d / "absent"), "--map", str(m)], "results folder"),
    (lambda d, m: ["--output-dir", str(d), "--map", str(m), "--evaluation-setting", "agent"], "no 'agent_*"),
])
def test_cli_user_errors_are_one_line(results, capsys, make_args, message):
    assert main(make_args(*results)) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_bad_map_row_names_file_and_line(tmp_path):
    path = tmp_path / "map.jsonl"
    path.write_text(json.dumps(MAP[0]) + "\n" + json.dumps({**MAP[1], "code_lines": "3"}) + "\n")
    with pytest.raises(Exception, match=r"map.jsonl:2: 'code_lines'"):
        read_map(path)
