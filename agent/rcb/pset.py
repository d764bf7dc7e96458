"""Reading a ResearchCodeBench problem set: ``papers.yaml`` (the authoritative index) and paper folders.

Only what papers.yaml names is a challenge; the legacy per-paper
``paper2code.yaml`` is ignored, as the release ignores it. Problems a user can
fix (missing folder, missing paper or test file, a path leaving the paper)
raise :class:`PsetError` with a one-line message.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

INDEX_FILE = "papers.yaml"
TEST_FILE = "paper2code_test.py"
PAPER_FILES = ("paper2code_paper.tex", "paper2code_paper.md")
LEGACY_FILE = "paper2code.yaml"
REF_SUFFIX = "_ref.py"


class PsetError(Exception):
    """A problem with the problem-set folder; one line naming the file and the fix."""


@dataclass(frozen=True)
class PaperSpec:
    """One paper of the index, with paths checked to exist inside its folder."""

    paper_id: str
    root: Path
    title: str
    annotated_files: tuple[str, ...]
    context_files: tuple[str, ...]
    paper_file: Path
    test_file: Path


def is_reference(path: str) -> bool:
    """``*_ref.py`` files are untouched copies the tests compare against: never challenges."""
    return path.endswith(REF_SUFFIX)


def _as_list(value: object, key: str, where: str) -> list[str]:
    """papers.yaml writes a single path as a string, several as a list, none as null."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise PsetError(f"{where}: '{key}' must be a path or a list of paths, got {type(value).__name__}")


def _entries(data: object, index: Path) -> list[tuple[str, dict]]:
    """(id, entry) pairs from a list of entries with ``id`` or a mapping id -> entry (optionally under ``papers``)."""
    if isinstance(data, dict) and "papers" in data:
        data = data["papers"]
    if isinstance(data, dict):
        pairs = [(str(key), value) for key, value in data.items()]
    elif isinstance(data, list):
        pairs = [(str(entry.get("id", "")) if isinstance(entry, dict) else "", entry) for entry in data]
    else:
        raise PsetError(f"{index}: expected a list of papers or a mapping of paper ids, got {type(data).__name__}")
    for position, (paper_id, entry) in enumerate(pairs, start=1):
        if not isinstance(entry, dict) or not paper_id:
            raise PsetError(f"{index}: paper entry {position} must be a mapping with an 'id'")
    return pairs


def _inside(root: Path, relative: str, where: str) -> Path:
    path = (root / relative).resolve()
    if path != root and root not in path.parents:
        raise PsetError(f"{where}: path '{relative}' leaves the paper folder")
    return path


def _paper(pset: Path, index: Path, paper_id: str, entry: dict) -> PaperSpec:
    where = f"{index} (paper '{paper_id}')"
    root = (pset / paper_id).resolve()
    if not root.is_dir():
        raise PsetError(f"{where}: paper folder {root} not found")
    annotated = _as_list(entry.get("annotated_file_paths"), "annotated_file_paths", where)
    if not annotated:
        raise PsetError(f"{where}: 'annotated_file_paths' is empty; name at least one annotated file")
    context = _as_list(entry.get("context_file_paths"), "context_file_paths", where)
    for relative in annotated + context:
        if not _inside(root, relative, where).is_file():
            raise PsetError(f"{where}: file '{relative}' not found in {root}")
    paper_file = next((root / name for name in PAPER_FILES if (root / name).is_file()), None)
    if paper_file is None:
        raise PsetError(f"{where}: no {' or '.join(PAPER_FILES)} in {root}")
    test_file = root / TEST_FILE
    if not test_file.is_file():
        raise PsetError(f"{where}: test entry point {test_file} not found")
    return PaperSpec(paper_id=paper_id, root=root, title=str(entry.get("title") or paper_id),
                     annotated_files=tuple(p for p in annotated if not is_reference(p)),
                     context_files=tuple(context), paper_file=paper_file, test_file=test_file)


def load_pset(pset_dir: str | Path, only: list[str] | None = None) -> list[PaperSpec]:
    """The papers of ``pset_dir/papers.yaml`` in index order (or just the ids in ``only``)."""
    pset = Path(pset_dir).expanduser().resolve()
    index = pset / INDEX_FILE
    try:
        data = yaml.safe_load(index.read_text(encoding="utf-8"))
    except OSError:
        raise PsetError(f"{index} not found; pass --pset the ResearchCodeBench 'pset' folder") from None
    except yaml.YAMLError as exc:
        raise PsetError(f"{index} is not valid YAML ({str(exc).splitlines()[0]})") from None
    entries = _entries(data, index)
    known = [paper_id for paper_id, _ in entries]
    unknown = [paper_id for paper_id in only or [] if paper_id not in known]
    if unknown:
        raise PsetError(f"unknown paper id(s) {', '.join(unknown)}; {index} lists {', '.join(known)}")
    return [_paper(pset, index, paper_id, entry) for paper_id, entry in entries if not only or paper_id in only]
