"""scripts/verify_envs_via_test_sh.py: canonical must pass, init_content must fail, errors are one line."""
from __future__ import annotations

import subprocess
import sys
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


def test_user_errors_are_one_line(tmp_path: Path, capsys) -> None:
    dataset = make_task(tmp_path / "dataset")
    assert verify.main(["--dataset-dir", str(dataset.root), "--task-ids", "5"]) == 2
    err = capsys.readouterr().err
    assert "unknown task id 5" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as usage:  # a usage mistake: argparse's exit, in one line too
        verify.main(["--dataset-dir", str(dataset.root), "--task-ids", "1,two"])
    err = capsys.readouterr().err
    assert usage.value.code == 2 and "task ids like 1,2 or 1 2" in err and len(err.strip().splitlines()) == 1


def test_release_flags_and_keep_modified(tmp_path: Path, capsys) -> None:
    """The release's spellings: --task-ids 1,2, --max-workers, --timeout-sec, --keep-modified; ours as aliases."""
    dataset = make_task(tmp_path / "dataset")
    keep = tmp_path / "kept"
    argv = ["--work-dir", str(tmp_path), "--task-ids", "1", "--max-workers", "1", "--timeout-sec", "30",
            "--keep-modified", "--keep-dir", str(keep), "--env-backend", "current"]
    assert verify.main(argv) == 0
    out = capsys.readouterr().out
    repo = keep / "annotation_1" / "ws" / dataset.get(1).repo_dir_name
    workdir = repo / "pkg"
    assert f"task 1: modified copy kept in {workdir}" in out
    assert (repo / dataset.get(1).target_file_path).read_text() == dataset.canonical(1)
    assert (workdir / "canonical.py").is_file() and (workdir / "test.py").is_file()
    assert dataset.target_path(1).read_text() != dataset.canonical(1), "the dataset itself is never modified"
    assert verify.main(argv) == 2
    assert "already exists; choose another --keep-dir" in capsys.readouterr().err


def test_defaults_are_the_releases() -> None:
    shown = subprocess.run([sys.executable, verify.__file__, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "(default: 1)" in shown and "(default: 600)" in shown and "--keep-modified" in shown
    assert "default: work_dir/dataset" in shown


def test_missing_task_file_is_a_broken_dataset(tmp_path: Path, capsys) -> None:
    dataset = make_task(tmp_path / "dataset")
    (dataset.task_dir(1) / "test.py").unlink()
    assert verify.main(["--dataset-dir", str(dataset.root)]) == 2
    assert "missing" in capsys.readouterr().err
