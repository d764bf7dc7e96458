"""A tiny release-shaped task in tmp_path for the runner tests, plus a dataset checksum."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from agent.task.dataset import DatasetManager

CANONICAL = '''\
def add(a, b):
    return a + b


def scale(values, k):
    return [v * k for v in values]
'''

WRONG = '''\
def add(a, b):
    return a - b


def scale(values, k):
    return list(values)
'''

TEST_PY = '''\
from pkg.target import add, scale
import canonical


def test_add():
    assert add(2, 3) == canonical.add(2, 3)


def test_scale():
    assert scale([1, 2], 3) == canonical.scale([1, 2], 3)
'''

TEST_SH = '''\
#!/bin/bash
source "$(conda info --base)/etc/profile.d/conda.sh"
conda activate recode_toy
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TARGET_DIR="${SCRIPT_DIR}/toy"
cd "${TARGET_DIR}/pkg"
cp "${SCRIPT_DIR}/canonical.py" ./canonical.py
cp "${SCRIPT_DIR}/test.py" ./test.py
PYTHONPATH="${TARGET_DIR}" pytest test.py -v --timeout=20
rm -f ./canonical.py ./test.py
'''

TEST_CASES = ("test_add", "test_scale")


def make_task(root: Path, *, test_py: str = TEST_PY, canonical: str = CANONICAL,
              test_cases: tuple[str, ...] = TEST_CASES, conftest: str | None = None) -> DatasetManager:
    """Dataset with task 1: repo ``toy``, target ``pkg/target.py`` blanked, tests run from ``pkg`` (with
    ``conftest`` as its conftest.py, if given)."""
    task = root / "annotations" / "annotation_1"
    (task / "toy" / "pkg").mkdir(parents=True)
    (task / "toy" / "pkg" / "target.py").write_text("")
    (task / "toy" / "pkg" / "helper.py").write_text("HELP = 1\n")
    if conftest is not None:
        (task / "toy" / "pkg" / "conftest.py").write_text(conftest)
    for name, text in {"canonical.py": canonical, "test.py": test_py, "test.sh": TEST_SH,
                       "instruction.txt": "Implement add and scale.\n", "latex.txt": "$a+b$\n"}.items():
        (task / name).write_text(text)
    row = {"index": 1, "repo_dir_name": "toy", "target_file_path": "pkg/target.py", "if_test": True,
           "init_content": "", "test_cases": list(test_cases)}
    (root / "annotation_meta.jsonl").write_text(json.dumps(row) + "\n")
    return DatasetManager(root)


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (and the set of names), to prove nothing changed."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
