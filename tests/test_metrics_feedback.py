"""Complexity statistics of canonical files and statistics of the feedback given."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.metrics_helpers import MODEL, turn, write_dataset, write_result
import metric_huamfeedback as feedback

SOURCE = '''import os

# a comment


class Loader:
    def load(self, paths):
        for path in paths:
            if os.path.exists(path) and path.endswith(".py"):
                yield path


def pick(values):
    try:
        return [v for v in values if v] or None
    except TypeError:
        return None if values else []
'''


def record(category: str, description: str = "desc", **fields: str) -> dict:
    return {"interface": "f", "category": category, "description": description, "analysis": "why",
            "actionable_feedback": "do", "direct_code_feedback": "code", **fields}


def test_code_complexity_by_hand() -> None:
    stats = feedback.code_complexity(SOURCE)
    # decisions: for, if, `and`, comprehension (+ its if), `or`, except, if-expression = 8
    assert stats == {"lines": 17, "code_lines": 11, "functions": 2, "classes": 1, "cyclomatic": 9}


def test_canonical_complexity_skips_missing_and_unparsable(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "ds", {1: 1, 2: 1, 3: 1}, {1: SOURCE, 2: "def broken(:\n"})
    report = feedback.get_canonical_complexity([1, 2, 3], dataset)
    assert list(report.per_task) == [1]
    assert report.skipped[2].startswith("canonical.py does not parse")
    assert report.skipped[3] == "canonical.py not found"
    assert feedback.describe([1, 2, 6]) == {"mean": 3.0, "median": 2.0, "min": 1.0, "max": 6.0, "total": 9.0}


def test_feedback_statistics_per_level(tmp_path: Path) -> None:
    result_dir = tmp_path / "res"
    write_result(result_dir, 2, 1, [
        turn(0, feedback_items=[record("T1"), record("T2", description="longer text")], feedback_text="x" * 30),
        turn(1, feedback_items=[record("T2")], feedback_text="x" * 10),
        turn(2, feedback_items=[], feedback_text=""),  # solved or last turn: no feedback generated
    ])
    write_result(result_dir, 2, 2, [turn(0, feedback_items=[record("T9"), "not a record"], feedback_text="y" * 20)])
    write_result(result_dir, 0, 1, [turn(0)])  # release pickle: no feedback keys
    level0, level2 = feedback.get_model_feedback_stats(MODEL, [1, 2], result_dir, levels=[0, 2])
    assert level2["feedback_turns"] == 3 and level2["items"] == 4
    assert level2["items_per_turn"] == pytest.approx(4 / 3)
    assert level2["categories"] == pytest.approx({"T0": 0, "T1": 0.25, "T2": 0.5, "T3": 0, "T4": 0, "other": 0.25})
    assert level2["field_length"]["description"] == pytest.approx((4 + 11 + 4 + 4) / 4)
    assert level2["shown_length"] == pytest.approx(20.0)
    assert level0["feedback_turns"] == 0 and level0["items_per_turn"] is None
    assert level0["categories"]["T2"] is None


def test_feedback_tables_note_release_results(tmp_path: Path, capsys) -> None:
    dataset = write_dataset(tmp_path / "ds", {1: 1}, {1: SOURCE})
    write_result(tmp_path / "res", 0, 1, [turn(0)])
    args = ["--output-dir", str(tmp_path / "res"), "--dataset-dir", str(dataset), "--guidance-level", "0"]
    assert feedback.main(args) == 0
    out = capsys.readouterr().out
    assert "| cyclomatic | 9.0 | 9.0 | 9.0 | 9.0 | 9.0 |" in out
    assert "| org_model-a | L0 | 0 | 0 | - |" in out
    assert "no feedback_items in these results" in out
