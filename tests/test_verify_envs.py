"""scripts/verify_envs_via_test_sh.py: canonical must pass, init_content must fail, errors are one line."""
from __future__ import annotations

from pathlib import Path

import pytest

import scripts.verify_envs_via_test_sh as verify
from tests.runner_testlib import make_task

BROKEN = "def add(a, b):\n    raise ValueError('broken')\n\n\ndef scale(values, k):\n    raise ValueError('broken')\n"


def test_healthy_dataset_passes(tmp_path: Path, capsys) -> None:
    dataset = make_task(tmp_path / "dataset")
    assert verify.main(["--dataset-dir", str(dataset.root), "--timeout-sec", "30"]) == 0
    out = capsys.readouterr().out
    assert "passed 2/2" in out and "failed 0/2" in out and "1/1 tasks behave as expected" in out


def test_broken_canonical_is_unexpected(tmp_path: Path, capsys) -> None:
    dataset = make_task(tmp_path / "dataset", canonical=BROKEN)
    assert verify.main(["--dataset-dir", str(dataset.root), "--task-ids", "1", "--timeout-sec", "30"]) == 1
    out = capsys.readouterr().out
    assert "BROKEN: task 1: canonical failed" in out and "1 broken" in out


@pytest.mark.parametrize("args, message", [
    (["--task-ids", "1,two"], "comma-separated integers"),
    (["--task-ids", "5"], "unknown task id 5"),
])
def test_user_errors_are_one_line(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    dataset = make_task(tmp_path / "dataset")
    assert verify.main(["--dataset-dir", str(dataset.root), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_missing_task_file_is_a_broken_dataset(tmp_path: Path, capsys) -> None:
    dataset = make_task(tmp_path / "dataset")
    (dataset.task_dir(1) / "test.py").unlink()
    assert verify.main(["--dataset-dir", str(dataset.root)]) == 2
    assert "missing" in capsys.readouterr().err
