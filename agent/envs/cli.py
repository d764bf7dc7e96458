"""Arguments the environment scripts share, spelled one way (old and release spellings kept as aliases).

``--dataset-dir DIR`` or the release's ``--work-dir DIR`` (the folder that
contains ``dataset/``); ``--task-ids 1,2`` or ``--task-ids 1 2``;
``--backend NAME`` (alias ``--env-backend``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from agent.envs.backends import BACKENDS
from agent.dataset import META_FILE, DatasetError, dataset_in

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATASET = REPO_ROOT / "work_dir" / "dataset"


def add_dataset_arguments(parser: argparse.ArgumentParser, dataset_flags: tuple[str, ...] = ("--dataset-dir",)) -> None:
    """``--dataset-dir`` (plus any release alias in ``dataset_flags``) and ``--work-dir``, mutually exclusive."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(*dataset_flags, dest="dataset_dir", metavar="DIR",
                       help="dataset folder, holding annotation_meta.jsonl (default: work_dir/dataset)")
    group.add_argument("--work-dir", metavar="DIR", help="the folder that contains dataset/ (the release's spelling)")


def dataset_dir(args: argparse.Namespace) -> Path:
    """The dataset folder the arguments name; one-line DatasetError when ``--work-dir`` holds no dataset."""
    if args.dataset_dir:
        return Path(args.dataset_dir).expanduser().resolve()
    if not args.work_dir:
        return DEFAULT_DATASET
    work = Path(args.work_dir).expanduser().resolve()
    found = dataset_in(work)
    if found is not None:
        return found
    raise DatasetError(f"--work-dir {args.work_dir} (resolved to {work}) holds neither dataset/{META_FILE} nor {META_FILE}; "
                       "point it at the folder that contains dataset/")


def add_task_ids_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task-ids", nargs="+", metavar="ID",
                        help="only these tasks: 1,2 or 1 2 (default: every runnable task)")


def parse_task_ids(values: list[str] | None) -> list[int] | None:
    """Ids from ``--task-ids`` words, each comma-separated or not; None when not given."""
    if not values:
        return None
    words = [part.strip() for value in values for part in value.split(",") if part.strip()]
    try:
        return [int(word) for word in words] or None
    except ValueError:
        raise DatasetError(f"--task-ids must be task ids like 1,2 or 1 2, got '{' '.join(values)}'") from None


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", "--env-backend", dest="backend", choices=BACKENDS,
                        help="conda, uv, venv or current (default: RECODE_ENV_BACKEND, else conda if installed, else uv)")
