"""Tiny on-disk datasets for the environment tests (tmp_path based, nothing shared)."""
from __future__ import annotations

import json
from pathlib import Path

from agent.utils import DatasetManager

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
