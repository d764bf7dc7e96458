"""The few dataset facts metrics need: runnable task ids, test-case counts and canonical files.

Metrics must not import the harness (``agent``), so this reads
``annotation_meta.jsonl`` and ``annotations/annotation_<id>/canonical.py``
directly, with one-line errors a user can act on.
"""
from __future__ import annotations

import json
from pathlib import Path

DEFAULT_WORK_DIR = "work_dir"
DEFAULT_DATASET_DIR = f"{DEFAULT_WORK_DIR}/dataset"
META_FILE = "annotation_meta.jsonl"


class MetaError(Exception):
    """The meta file is missing or malformed; the message names the file and the fix."""


def meta_path_for(dataset_dir: Path | str = DEFAULT_DATASET_DIR, meta_path: Path | str | None = None) -> Path:
    """The explicit meta path, else ``<dataset_dir>/annotation_meta.jsonl``."""
    return Path(meta_path) if meta_path is not None else Path(dataset_dir) / META_FILE


def read_jsonl_objects(path: Path, error: type[Exception], missing_message: str) -> list[tuple[int, object]]:
    """(line number, decoded value) of every non-blank line; a missing file or bad JSON raises ``error``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        raise error(missing_message) from None
    decoded = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            decoded.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{lineno}: malformed JSON ({exc.msg})") from None
    return decoded


def read_meta_rows(path: Path | str) -> dict[int, dict]:
    """Meta rows keyed by task index; only ``index`` and ``test_cases`` are checked here."""
    path = Path(path)
    rows: dict[int, dict] = {}
    for lineno, row in read_jsonl_objects(
            path, MetaError, f"meta file not found: {path}; pass --meta PATH or --dataset-dir DIR"):
        if not isinstance(row, dict) or not isinstance(row.get("index"), int):
            raise MetaError(f"{path}:{lineno}: expected an object with an integer 'index'")
        rows[row["index"]] = row
    return rows


def load_task_ids_from_jsonl(jsonl_path: Path | str | None = None) -> list[int]:
    """Indices of the runnable tasks (``if_test`` true) of a meta file, in file order.

    The default is the release's, ``work_dir/dataset/annotation_meta.jsonl`` from the working folder.
    """
    return [index for index, row in read_meta_rows(meta_path_for(meta_path=jsonl_path)).items()
            if row.get("if_test") is True]


def count_test_cases(path: Path | str) -> dict[int, int]:
    """len(test_cases) per task: the denominator of the test-case pass rate (docs/ARCHITECTURE.md, "Metrics")."""
    return {index: len(row.get("test_cases") or []) for index, row in read_meta_rows(path).items()}


def canonical_path(dataset_dir: Path | str, task_id: int) -> Path:
    return Path(dataset_dir) / "annotations" / f"annotation_{task_id}" / "canonical.py"


def canonical_text(dataset_dir: Path | str, task_id: int) -> str | None:
    """The reference file of a task, or None when the dataset does not have it."""
    try:
        return canonical_path(dataset_dir, task_id).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def dataset_of(work_dir: Path | str | None) -> Path:
    """The dataset folder of a release ``work_dir`` (the folder holding ``dataset/``), or the dataset folder itself."""
    folder = Path(work_dir if work_dir is not None else DEFAULT_WORK_DIR)
    return folder if (folder / META_FILE).is_file() or (folder / "annotations").is_dir() else folder / "dataset"


def read_canonical(task_id: int, word_dir: Path | str | None = None) -> str:
    """The release's notebook call: task ``task_id``'s canonical.py under ``word_dir`` (default ``work_dir``).

    A missing file raises FileNotFoundError naming the path.
    """
    return canonical_path(dataset_of(word_dir), task_id).read_text(encoding="utf-8")
