"""On-disk datasets for the environment tests, made under tmp_path: tiny ones, and a replica of the published layout."""
from __future__ import annotations

import json
from pathlib import Path

from agent.task.dataset import DatasetManager

REPO = "repo"


def test_sh(env_name: str | None) -> str:
    """A release-shaped test.sh; ``None`` leaves out the conda lines."""
    activate = (
        f'source "$(conda info --base)/etc/profile.d/conda.sh"\nconda activate {env_name}\n' if env_name else ""
    )
    return (
        "#!/bin/bash\n"
        + activate
        + 'SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
        + f'TARGET_DIR="${{SCRIPT_DIR}}/{REPO}"\ncd "${{TARGET_DIR}}"\n'
        + 'PYTHONPATH="${TARGET_DIR}" pytest test.py -v --timeout=60\n'
    )


def make_dataset(root: Path, tasks: dict[int, str | None], requirements: dict[str, str]) -> DatasetManager:
    """Dataset with one task per ``tasks`` item (id -> env name) and requirements/<name> files."""
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for index, env_name in tasks.items():
        task_dir = root / "annotations" / f"annotation_{index}"
        (task_dir / REPO).mkdir(parents=True)
        (task_dir / "test.sh").write_text(test_sh(env_name), encoding="utf-8")
        rows.append({
            "index": index, "repo_dir_name": REPO, "target_file_path": "target.py",
            "if_test": True, "init_content": "", "test_cases": ["test_x"],
        })
    (root / "annotation_meta.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (root / "requirements").mkdir(exist_ok=True)
    for name, text in requirements.items():
        (root / "requirements" / name).write_text(text, encoding="utf-8")
    return DatasetManager(root)


def published_dir() -> Path | None:
    """The published dataset's meta and requirements files (``shared/recode_h`` beside the checkout), if present."""
    repo = Path(__file__).resolve().parents[1]
    for base in (repo.parent, repo.parent.parent):
        candidate = base / "shared" / "recode_h"
        if (candidate / "annotation_meta.jsonl").is_file():
            return candidate
    return None


RELEASE_ENV_ORDER = ("test_newtransformer1", "test_281", "test_191", "test_common1",
                     "test_151", "test_511", "test_631", "test_981")


def release_test_sh(env_name: str, repo: str, sub: str) -> str:
    """A test.sh in the published runners' shape (activate, cd, copy, pytest with PYTHONPATH and timeout, clean up)."""
    workdir = f"${{TARGET_DIR}}/{sub}" if sub else "${TARGET_DIR}"
    return (
        "#!/bin/bash\n"
        'eval "$(conda shell.bash hook)"\n'
        f"conda activate {env_name}\n"
        'SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
        f'TARGET_DIR="${{SCRIPT_DIR}}/{repo}"\n'
        f'cd "{workdir}"\n'
        'cp "${SCRIPT_DIR}/canonical.py" .\ncp "${SCRIPT_DIR}/test.py" .\n'
        f'PYTHONPATH="{workdir}" pytest test.py -v --timeout=600\n'
        "rm -f canonical.py test.py\n"
    )


def make_release_dataset(root: Path, source: Path) -> tuple[DatasetManager, dict[int, str]]:
    """A replica of the published layout: the real meta and requirements_*.txt at the root, and for each
    runnable task a test.sh of ours naming one of the eight envs (round robin). Returns (dataset, task -> env)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "annotation_meta.jsonl").write_bytes((source / "annotation_meta.jsonl").read_bytes())
    for requirements in source.glob("requirements_*.txt"):
        (root / requirements.name).write_bytes(requirements.read_bytes())
    dataset = DatasetManager(root)
    assignment: dict[int, str] = {}
    for number, meta in enumerate(dataset.runnable()):
        env_name = RELEASE_ENV_ORDER[number % len(RELEASE_ENV_ORDER)]
        task_dir = root / "annotations" / f"annotation_{meta.index}"
        parent = str(Path(meta.target_file_path).parent)
        sub = "" if parent == "." else parent
        (task_dir / meta.repo_dir_name / sub).mkdir(parents=True, exist_ok=True)
        (task_dir / "test.sh").write_text(release_test_sh(env_name, meta.repo_dir_name, sub), encoding="utf-8")
        assignment[meta.index] = env_name
    return dataset, assignment
