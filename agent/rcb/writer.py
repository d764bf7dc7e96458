"""Write ResearchCodeBench task plans into a dataset folder, replacing an earlier import of the same papers.

Layout written (the dataset layout of README.md, "The full dataset", plus two optional files):
``annotations/annotation_<id>/{instruction.txt, latex.txt, canonical.py, test.py, test.sh, <paper id>/...}``,
rows appended to ``annotation_meta.jsonl`` (the rows of other tasks are kept
byte for byte) and ``researchcodebench_map.jsonl`` beside it (index, paper,
file, snippet, code_lines) for the scaled metric. Task folders are built in a
staging folder first and the two JSONL files are replaced atomically last.
Indices of (paper, file, snippet) keys seen in the earlier import are reused,
so results of earlier runs keep pointing at the same snippets.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from agent.common.atomic_file import atomic_write_text
from agent.rcb.annotations import strip_tag_lines
from agent.rcb.importer import TaskPlan
from agent.rcb.pset import LEGACY_FILE, PAPER_FILES, TEST_FILE
from agent.task.dataset import META_FILE, DatasetError, read_jsonl_lines

MAP_FILE = "researchcodebench_map.jsonl"
BENCHMARK = "researchcodebench"
STAGING = ".rcb_import_staging"
_NOT_COPIED = {TEST_FILE, LEGACY_FILE, *PAPER_FILES}
_NEVER_COPIED = {"__pycache__", ".git", ".pytest_cache"}


@dataclass(frozen=True)
class JsonlRow:
    """One line of a JSONL file: its text (kept verbatim when the row survives) and the parsed object."""

    text: str
    row: dict


def read_jsonl(path: Path) -> list[JsonlRow]:
    """Rows of an existing JSONL file ([] when absent); a malformed line is a one-line DatasetError."""
    if not path.exists():
        return []
    rows = []
    for number, line, row in read_jsonl_lines(path):
        if not isinstance(row, dict) or not isinstance(row.get("index"), int):
            raise DatasetError(f"{path}:{number}: expected an object with an integer 'index'")
        rows.append(JsonlRow(line, row))
    return rows


def task_key(row: dict) -> tuple[str, str, str]:
    return (str(row.get("paper")), str(row.get("file")), str(row.get("snippet")))


def is_replaced(row: dict, papers: set[str]) -> bool:
    """Rows of an earlier import of one of ``papers``: the only rows an import removes."""
    return row.get("benchmark") == BENCHMARK and row.get("paper") in papers


def assign_indices(plans: list[TaskPlan], kept: set[int], previous: dict[tuple[str, str, str], int],
                   start_index: int | None) -> list[int]:
    """Task ids for ``plans``: consecutive from ``start_index`` when given, else earlier ids per key and
    fresh ids after every id in use. Colliding with a task that stays is a one-line error."""
    if start_index is not None:
        indices = list(range(start_index, start_index + len(plans)))
    else:
        reused = [previous.get((p.paper, p.file, p.snippet)) for p in plans]
        following = max(kept | {i for i in reused if i is not None}, default=0) + 1
        indices = []
        for index in reused:
            if index is None:
                index, following = following, following + 1
            indices.append(index)
    clash = sorted(set(indices) & kept)
    if clash:
        raise DatasetError(f"task id {clash[0]} is already used by another task of this dataset; "
                           "pass --start-index with a free range")
    return indices


def meta_row(index: int, plan: TaskPlan) -> dict:
    return {
        "index": index, "repo_dir_name": plan.paper, "target_file_path": plan.file, "if_test": True,
        "init_content": plan.init_content, "test_cases": list(plan.test_cases), "benchmark": BENCHMARK,
        "paper": plan.paper, "file": plan.file, "snippet": plan.snippet, "line": plan.line,
        "context_files": list(plan.context_files), "environment": plan.env_name, "stubs": dict(plan.stubs),
        "hidden_references": list(plan.drop),
    }


def map_row(index: int, plan: TaskPlan) -> dict:
    return {"index": index, "paper": plan.paper, "file": plan.file, "snippet": plan.snippet,
            "code_lines": plan.code_lines}


def copy_paper_repo(plan: TaskPlan, dest: Path) -> None:
    """The paper folder minus test, paper and dropped files, every tag line stripped, target = init_content."""
    source = plan.repo_source
    dropped = {(source / rel).resolve() for rel in plan.drop}

    def ignore(directory: str, names: list[str]) -> list[str]:
        here = Path(directory).resolve()
        return [name for name in names if name in _NEVER_COPIED or (here / name).resolve() in dropped
                or (here == source and name in _NOT_COPIED)]

    shutil.copytree(source, dest, ignore=ignore)
    for path in dest.rglob("*"):
        if path.is_file() and not path.is_symlink() and b"paper2code" in path.read_bytes():
            try:
                path.write_text(strip_tag_lines(path.read_text(encoding="utf-8")), encoding="utf-8")
            except UnicodeDecodeError:
                continue
    (dest / plan.file).write_text(plan.init_content, encoding="utf-8")


def write_task(task_dir: Path, plan: TaskPlan) -> None:
    task_dir.mkdir(parents=True)
    files = {"instruction.txt": plan.instruction, "latex.txt": plan.latex, "canonical.py": plan.canonical,
             "test.py": plan.test_py, "test.sh": plan.test_sh}
    for name, text in files.items():
        (task_dir / name).write_text(text, encoding="utf-8")
    os.chmod(task_dir / "test.sh", 0o755)
    copy_paper_repo(plan, task_dir / plan.paper)


def write_jsonl_atomic(path: Path, lines: list[str]) -> None:
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def import_plans(out: Path, plans: list[TaskPlan], papers: list[str], start_index: int | None = None) -> list[int]:
    """Write ``plans`` (the tasks of ``papers``) into dataset folder ``out``; returns their task ids in order."""
    out.mkdir(parents=True, exist_ok=True)
    annotations = out / "annotations"
    meta = read_jsonl(out / META_FILE)
    mapping = read_jsonl(out / MAP_FILE)
    paper_set = set(papers)
    replaced = [r.row for r in meta if is_replaced(r.row, paper_set)]
    kept = [r for r in meta if not is_replaced(r.row, paper_set)]
    indices = assign_indices(plans, {r.row["index"] for r in kept}, {task_key(r): r["index"] for r in replaced},
                             start_index)
    old = {r["index"] for r in replaced}
    orphans = [i for i in indices if i not in old and (annotations / f"annotation_{i}").exists()]
    if orphans:
        raise DatasetError(f"{annotations / f'annotation_{orphans[0]}'} exists but no meta row names it; "
                           "remove it or pass --start-index with a free range")
    staging = out / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for index, plan in zip(indices, plans):
            write_task(staging / f"annotation_{index}", plan)
        annotations.mkdir(exist_ok=True)
        for index in old:
            shutil.rmtree(annotations / f"annotation_{index}", ignore_errors=True)
        for index in indices:
            os.replace(staging / f"annotation_{index}", annotations / f"annotation_{index}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    new_meta = [json.dumps(meta_row(i, p)) for i, p in zip(indices, plans)]
    new_map = [json.dumps(map_row(i, p)) for i, p in zip(indices, plans)]
    write_jsonl_atomic(out / META_FILE, [r.text for r in kept] + new_meta)
    write_jsonl_atomic(out / MAP_FILE, [r.text for r in mapping if r.row.get("paper") not in paper_set] + new_map)
    return indices
