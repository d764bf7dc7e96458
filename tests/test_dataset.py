"""Dataset access: the published meta file, our sample dataset and every user error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.task.dataset import DatasetError, DatasetManager, load_meta, parse_test_sh

REPO = Path(__file__).resolve().parents[1]
PUBLISHED_META = REPO.parent / "shared" / "recode_h" / "annotation_meta.jsonl"


@pytest.mark.skipif(not PUBLISHED_META.is_file(), reason="published meta file not beside the checkout")
def test_published_meta_loads_unchanged() -> None:
    rows = load_meta(PUBLISHED_META)
    runnable = [r for r in rows if r.if_test]
    assert len(rows) == 104
    assert len(runnable) == 102
    assert sum(len(r.test_cases) for r in runnable) == 715
    assert sum(1 for r in runnable if r.init_content.strip()) == 18  # task 38 keeps a lone newline


def test_missing_dataset_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="README"):
        DatasetManager(tmp_path).rows


def _write_meta(tmp_path: Path, lines: list[str]) -> DatasetManager:
    (tmp_path / "annotation_meta.jsonl").write_text("\n".join(lines) + "\n")
    return DatasetManager(tmp_path)


def test_malformed_row_names_file_and_line(tmp_path: Path) -> None:
    good = json.dumps({"index": 1, "repo_dir_name": "r", "target_file_path": "a.py", "if_test": True,
                       "init_content": "", "test_cases": ["test_a"]})
    dm = _write_meta(tmp_path, [good, "{not json"])
    with pytest.raises(DatasetError, match=r"annotation_meta.jsonl:2: malformed JSON"):
        dm.rows


@pytest.mark.parametrize(
    "row, message",
    [
        ({"index": "1"}, "'index' must be int"),
        ({"if_test": 1}, "'if_test' must be bool"),
        ({"test_cases": [1]}, "list of strings"),
        ({"target_file_path": "../canonical.py"}, "must stay inside"),
    ],
)
def test_bad_row_types(tmp_path: Path, row: dict, message: str) -> None:
    base = {"index": 1, "repo_dir_name": "r", "target_file_path": "a.py", "if_test": True,
            "init_content": "", "test_cases": ["test_a"]}
    dm = _write_meta(tmp_path, [json.dumps({**base, **row})])
    with pytest.raises(DatasetError, match=message):
        dm.rows


def test_missing_key_and_duplicates(tmp_path: Path) -> None:
    base = {"index": 1, "repo_dir_name": "r", "target_file_path": "a.py", "if_test": True,
            "init_content": "", "test_cases": []}
    dm = _write_meta(tmp_path, [json.dumps({k: v for k, v in base.items() if k != "test_cases"})])
    with pytest.raises(DatasetError, match="missing the key 'test_cases'"):
        dm.rows
    dm = _write_meta(tmp_path, [json.dumps(base), json.dumps(base)])
    with pytest.raises(DatasetError, match="repeats the row on line 1"):
        dm.rows


def test_unknown_task_and_missing_file(tmp_path: Path) -> None:
    base = {"index": 7, "repo_dir_name": "r", "target_file_path": "a.py", "if_test": True,
            "init_content": "", "test_cases": [], "paper": "x"}
    dm = _write_meta(tmp_path, [json.dumps(base)])
    assert dm.get(7).extra == {"paper": "x"}
    with pytest.raises(DatasetError, match="unknown task id 3"):
        dm.get(3)
    with pytest.raises(DatasetError, match="missing .*instruction.txt"):
        dm.instruction(7)


def test_parse_release_test_sh() -> None:
    script = """#!/bin/bash
source ~/miniconda3/etc/profile.d/conda.sh
conda activate recode_torch
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TARGET_DIR="${SCRIPT_DIR}/MyRepo"
cd "${TARGET_DIR}/src/models"
cp "${SCRIPT_DIR}/canonical.py" ./canonical.py
cp "${SCRIPT_DIR}/test.py" ./test.py
PYTHONPATH="${TARGET_DIR}/src" pytest test.py -v --timeout=120
rm -f ./canonical.py ./test.py
"""
    info = parse_test_sh(script, "MyRepo")
    assert info.env_name == "recode_torch"
    assert info.workdir == "src/models"
    assert info.pythonpath_root == "src"
    assert info.timeout == 120
    assert info.test_file == "test.py"


def test_parse_minimal_test_sh() -> None:
    script = 'SCRIPT_DIR=$(dirname "$0")\ncd "$SCRIPT_DIR/Repo"\npython -m pytest test.py\n'
    info = parse_test_sh(script, "Repo")
    assert (info.env_name, info.workdir, info.pythonpath_root, info.timeout) == (None, "", None, None)


def test_fingerprint_follows_code_and_sizes_but_not_leftovers(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(REPO / "work_dir" / "dataset", tmp_path / "ds", ignore=shutil.ignore_patterns("pytest_report"))
    dm = DatasetManager(tmp_path / "ds")
    before = dm.fingerprint()
    (dm.repo_dir(1) / "__pycache__").mkdir(exist_ok=True)
    (dm.repo_dir(1) / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (dm.task_dir(1) / "pytest_report").mkdir()
    (dm.task_dir(1) / "pytest_report" / "report.xml").write_text("<x/>")
    assert dm.fingerprint() == before
    data = dm.repo_dir(1) / "weights.bin"
    data.write_bytes(b"a" * 10)
    with_data = dm.fingerprint()
    assert with_data != before
    data.write_bytes(b"b" * 10)
    assert dm.fingerprint() == with_data  # data files count by name and size only
    source = dm.repo_dir(1) / "dpo" / "trainer.py"
    source.write_text(source.read_text() + "\n# edited\n")
    assert dm.fingerprint() != with_data
