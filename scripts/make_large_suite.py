"""Write a one-task dataset whose test is a large parametrized suite, to measure what the guard costs there.

    python scripts/make_large_suite.py --out /tmp/large_suite --tests 7000
    python scripts/bench_runner.py --dataset-dir /tmp/large_suite/dataset --env-backend current --repeats 3

Real packages ship suites of thousands of parametrized cases that each take well under a millisecond; a
per-test cost of the guard that is invisible on the sample tasks dominates there. bench_runner prints bare
pytest (``p``), the runner with the guard's watch off (``w``) and on (``b``) side by side.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

CANDIDATE = '''\
import numpy as np


def add(a, b):
    return a + b


def scale(values, k):
    return np.asarray(values, dtype=np.float64) * k
'''

TEST = '''\
import numpy as np
import pytest

import canonical
from pkg.target import add, scale

TOLERANCE = {{"rtol": 1e-12, "atol": 0.0}}


@pytest.mark.parametrize("i", range({half}))
def test_add(i):
    assert add(i, 2 * i) == canonical.add(i, 2 * i)


@pytest.mark.parametrize("i", range({half}))
def test_scale(i):
    np.testing.assert_allclose(scale([1.0, 2.0, 3.0], i), canonical.scale([1.0, 2.0, 3.0], i), **TOLERANCE)
'''

TEST_SH = '''\
#!/bin/bash
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TARGET_DIR="${SCRIPT_DIR}/large"
cd "${TARGET_DIR}/pkg"
cp "${SCRIPT_DIR}/canonical.py" ./canonical.py
cp "${SCRIPT_DIR}/test.py" ./test.py
PYTHONPATH="${TARGET_DIR}" pytest test.py -v
rm -f ./canonical.py ./test.py
'''


def write(out: Path, tests: int) -> Path:
    """The dataset folder: task 1, repository ``large``, target ``pkg/target.py``, ``tests`` test cases."""
    half = tests // 2
    dataset = out / "dataset"
    task = dataset / "annotations" / "annotation_1"
    (task / "large" / "pkg").mkdir(parents=True, exist_ok=True)
    (task / "large" / "pkg" / "target.py").write_text(CANDIDATE)
    for name, text in {"canonical.py": CANDIDATE, "test.py": TEST.format(half=half), "test.sh": TEST_SH,
                       "instruction.txt": "Implement add and scale.\n", "latex.txt": "$a+b$\n"}.items():
        (task / name).write_text(text)
    cases = [f"test_{kind}[{i}]" for kind in ("add", "scale") for i in range(half)]
    row = {"index": 1, "repo_dir_name": "large", "target_file_path": "pkg/target.py", "if_test": True,
           "init_content": "", "test_cases": cases}
    (dataset / "annotation_meta.jsonl").write_text(json.dumps(row) + "\n")
    return dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tests", type=int, default=7000)
    args = parser.parse_args()
    print(write(args.out, args.tests))


if __name__ == "__main__":
    main()
