"""CodeBLEU with the pinned codebleu/tree-sitter versions, on the last turn and on turn 0."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.metrics_helpers import MODEL, passed, turn, write_dataset, write_result

pytest.importorskip("codebleu", reason="optional extra codebleu not installed (pip install -r requirements-extras.txt)")

import metric_codebleu

REFERENCE = '''import math


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def scale(self, values):
        if not values:
            return []
        return [math.sqrt(v) * self.factor for v in values if v >= 0]
'''
OTHER = "def unrelated(a):\n    while a:\n        a -= 1\n    return a\n"


def test_identical_code_scores_one_and_different_code_less() -> None:
    assert metric_codebleu.code_bleu(REFERENCE, REFERENCE) == pytest.approx(1.0)
    assert metric_codebleu.code_bleu(OTHER, REFERENCE) < 0.5


def test_last_turn_and_turn_zero_against_canonical(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "ds", {1: 1, 2: 1, 3: 1}, {1: REFERENCE, 2: REFERENCE})
    result_dir = tmp_path / "res"
    write_result(result_dir, 0, 1, [turn(0, code=OTHER), passed(1, code=REFERENCE)])
    write_result(result_dir, 0, 2, [turn(0, code="")])
    write_result(result_dir, 0, 3, [turn(0, code=REFERENCE)])
    kwargs = {"dataset_dir": dataset, "levels": [0]}
    other = metric_codebleu.code_bleu(OTHER, REFERENCE)
    # task 2's empty file scores 0 (not codebleu's 0.25); task 3 has no canonical.py and is left out
    assert metric_codebleu.get_model_code_bleu(MODEL, [1, 2, 3], result_dir, **kwargs) == [pytest.approx(0.5)]
    assert metric_codebleu.get_init_model_code_bleu(MODEL, [1, 2, 3], result_dir, **kwargs) == [
        pytest.approx(other / 2)]
