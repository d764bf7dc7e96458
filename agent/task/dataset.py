"""Reading the RECODE-H dataset: meta rows, task files and the facts of each test.sh.

The loader accepts the published ``annotation_meta.jsonl`` byte for byte and
turns every problem a user can cause into a one-line :class:`DatasetError`.
Nothing here writes to the dataset.
"""
from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from metrics.cli_flags import META_FILE, dataset_in  # noqa: F401  (one lookup of a work dir's dataset, for all)

DOWNLOAD_HINT = (
    "unpack the published dataset into work_dir/dataset as the README's 'The full dataset' section shows, "
    "or point work-dir at a folder holding annotation_meta.jsonl"
)
REQUIRED_KEYS = {
    "index": int,
    "repo_dir_name": str,
    "target_file_path": str,
    "if_test": bool,
    "init_content": str,
    "test_cases": list,
}
TASK_FILES = ("instruction.txt", "latex.txt", "canonical.py", "test.py", "test.sh")
UNHASHED = {"pytest_report", "__pycache__"}  # debugging and interpreter leftovers, not dataset content


class DatasetError(Exception):
    """A problem with the dataset on disk that the user can fix; its message is one line."""


@dataclass(frozen=True)
class TaskMeta:
    """One row of annotation_meta.jsonl. ``extra`` keeps optional keys we add (e.g. paper refs)."""

    index: int
    repo_dir_name: str
    target_file_path: str
    if_test: bool
    init_content: str
    test_cases: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class TestShInfo:
    """What a release-shaped test.sh says, parsed rather than executed.

    ``workdir`` and ``pythonpath_root`` are relative to the repository root
    ('' is the root itself); ``pythonpath_root`` is None when the script sets
    no PYTHONPATH. ``timeout`` is pytest-timeout's per-test limit, if given.
    """

    env_name: str | None
    workdir: str
    pythonpath_root: str | None
    timeout: int | None
    test_file: str = "test.py"


def read_jsonl_lines(path: Path) -> list[tuple[int, str, Any]]:
    """(line number, text, decoded value) of every non-blank line; bad JSON names file and line."""
    decoded = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                decoded.append((lineno, line.rstrip("\r\n"), json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: malformed JSON ({exc.msg}); fix or remove this row") from None
    return decoded


def parse_meta_row(row: Any, source: str, lineno: int) -> TaskMeta:
    """Validate one decoded row of the meta file; errors name the file and line."""
    where = f"{source}:{lineno}"
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for key, kind in REQUIRED_KEYS.items():
        if key not in row:
            raise DatasetError(f"{where}: row is missing the key '{key}'")
        value = row[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise DatasetError(f"{where}: '{key}' must be {kind.__name__}, got {type(value).__name__}")
    if not all(isinstance(name, str) for name in row["test_cases"]):
        raise DatasetError(f"{where}: 'test_cases' must be a list of strings")
    target = row["target_file_path"]
    if Path(target).is_absolute() or ".." in Path(target).parts or ".." in Path(row["repo_dir_name"]).parts:
        raise DatasetError(f"{where}: paths must stay inside the task folder, got '{row['repo_dir_name']}/{target}'")
    extra = {k: v for k, v in row.items() if k not in REQUIRED_KEYS}
    return TaskMeta(
        index=row["index"],
        repo_dir_name=row["repo_dir_name"],
        target_file_path=target,
        if_test=row["if_test"],
        init_content=row["init_content"],
        test_cases=tuple(row["test_cases"]),
        extra=extra,
    )


def load_meta(path: Path) -> list[TaskMeta]:
    """All rows of a meta file, in file order; duplicate indices are an error."""
    if not path.is_file():
        raise DatasetError(f"dataset not found: {path} does not exist; {DOWNLOAD_HINT}")
    rows: list[TaskMeta] = []
    seen: dict[int, int] = {}
    for lineno, _, row in read_jsonl_lines(path):
        meta = parse_meta_row(row, str(path), lineno)
        if meta.index in seen:
            raise DatasetError(f"{path}:{lineno}: index {meta.index} repeats the row on line {seen[meta.index]}")
        seen[meta.index] = lineno
        rows.append(meta)
    return rows


_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def _expand(value: str, variables: dict[str, str]) -> str:
    """Expand ${VAR}/$VAR from the script's own assignments; unknown ones stay as written."""
    return re.sub(
        r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)",
        lambda m: variables.get(m.group(1) or m.group(2), m.group(0)),
        value,
    )


def _relative_to_script(path: str, variables: dict[str, str]) -> str | None:
    """Map a path written in terms of SCRIPT_DIR/TARGET_DIR to one relative to the repo root."""
    expanded = _expand(path.strip().strip("\"'"), variables)
    marker = "@SCRIPT_DIR@"
    if not expanded.startswith(marker):
        return None
    parts = [p for p in expanded[len(marker):].split("/") if p not in ("", ".")]
    return "/".join(parts)


def _repo_relative(rel: str | None, repo_prefix: str) -> str | None:
    """A path relative to test.sh's folder as one relative to the repository (None: outside it)."""
    if rel is None:
        return None
    if rel == repo_prefix:
        return ""
    if rel.startswith(repo_prefix + "/"):
        return rel[len(repo_prefix) + 1:]
    return None


def _pytest_index(words: list[str]) -> int | None:
    """Where pytest is named on a command line: a word that is (or ends in) ``pytest``, or ``-m pytest``."""
    at = next((i for i, w in enumerate(words) if Path(w).name == "pytest" or w == "pytest"), None)
    if at is None and "-m" in words:
        m_at = words.index("-m")
        if m_at + 1 < len(words) and words[m_at + 1] == "pytest":
            at = m_at + 1
    return at


def _pytest_args(args: list[str], variables: dict[str, str]) -> tuple[int | None, str | None]:
    """The ``--timeout`` and the test file that pytest's arguments name (None for what they do not name)."""
    timeout: int | None = None
    test_file: str | None = None
    for i, arg in enumerate(args):
        if arg.startswith("--timeout="):
            timeout = int(arg.split("=", 1)[1])
        elif arg == "--timeout" and i + 1 < len(args):
            timeout = int(args[i + 1])
        elif arg.endswith(".py") and not arg.startswith("-"):
            test_file = Path(_expand(arg, variables)).name
    return timeout, test_file


def parse_test_sh(text: str, repo_dir_name: str) -> TestShInfo:
    """Read env name, working dir, PYTHONPATH root and pytest timeout from a release test.sh.

    Paths come back relative to the repository root. Nothing is executed.
    """
    variables = {"SCRIPT_DIR": "@SCRIPT_DIR@"}
    env_name: str | None = None
    cwd = f"@SCRIPT_DIR@/{repo_dir_name}"
    workdir = ""
    pythonpath: str | None = None
    timeout: int | None = None
    test_file = "test.py"
    repo_prefix = repo_dir_name.strip("/")

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if not words:
            continue
        if words[:2] in (["conda", "activate"], ["source", "activate"]) and len(words) > 2:
            env_name = words[2]
            continue
        match = _ASSIGN.match(line)
        if match and words and "=" in words[0] and len(words) == 1:
            name, value = match.group(1), words[0].split("=", 1)[1]
            if name != "SCRIPT_DIR":
                variables[name] = _expand(value, variables)
            continue
        if words[0] == "cd" and len(words) > 1:
            target = _expand(words[1], variables)
            if target.startswith("@SCRIPT_DIR@"):
                cwd = target.rstrip("/")
            elif not target.startswith("/") and not target.startswith("$"):
                cwd = f"{cwd}/{target}".rstrip("/")
            rel = _repo_relative(_relative_to_script(cwd, variables), repo_prefix)
            if rel is not None:
                workdir = rel
            continue
        pytest_at = _pytest_index(words)
        if pytest_at is not None:
            for word in words[:pytest_at]:
                if word.startswith("PYTHONPATH="):
                    first = word.split("=", 1)[1].split(":")[0]
                    pythonpath = _repo_relative(_relative_to_script(first, variables), repo_prefix)
            found_timeout, found_file = _pytest_args(words[pytest_at + 1:], variables)
            timeout = timeout if found_timeout is None else found_timeout
            test_file = found_file or test_file
    return TestShInfo(env_name=env_name, workdir=workdir, pythonpath_root=pythonpath, timeout=timeout, test_file=test_file)


class DatasetManager:
    """Read-only view of one dataset folder (``annotation_meta.jsonl`` + ``annotations/``)."""

    def __init__(self, dataset_dir: str | Path, meta_file: str = META_FILE) -> None:
        self.root = Path(dataset_dir).expanduser().resolve()
        self.meta_path = self.root / meta_file
        self.annotations_dir = self.root / "annotations"

    @cached_property
    def rows(self) -> list[TaskMeta]:
        """Every meta row, runnable or not."""
        return load_meta(self.meta_path)

    @cached_property
    def _by_index(self) -> dict[int, TaskMeta]:
        return {row.index: row for row in self.rows}

    def runnable(self) -> list[TaskMeta]:
        """Rows with ``if_test: true``: the tasks of the benchmark."""
        return [row for row in self.rows if row.if_test]

    def select(self, task_ids: list[int] | None) -> list[TaskMeta]:
        """Runnable tasks, or the given ids in the given order (each must exist)."""
        if not task_ids:
            return self.runnable()
        return [self.get(i) for i in task_ids]

    def get(self, index: int) -> TaskMeta:
        try:
            return self._by_index[index]
        except KeyError:
            known = sorted(self._by_index)
            span = f"{known[0]}..{known[-1]}" if known else "none"
            raise DatasetError(f"unknown task id {index} (this dataset has ids {span}; see {self.meta_path})") from None

    def task_dir(self, index: int) -> Path:
        self.get(index)
        return self.annotations_dir / f"annotation_{index}"

    def repo_dir(self, index: int) -> Path:
        return self.task_dir(index) / self.get(index).repo_dir_name

    def target_path(self, index: int) -> Path:
        return self.repo_dir(index) / self.get(index).target_file_path

    def task_file(self, index: int, name: str) -> Path:
        """Path of one of TASK_FILES; a missing file is a DatasetError naming it."""
        path = self.task_dir(index) / name
        if not path.is_file():
            raise DatasetError(f"task {index} is missing {path}; re-download or repair the dataset")
        return path

    def read(self, index: int, name: str) -> str:
        return self.task_file(index, name).read_text(encoding="utf-8")

    def instruction(self, index: int) -> str:
        return self.read(index, "instruction.txt")

    def latex(self, index: int) -> str:
        return self.read(index, "latex.txt")

    def canonical(self, index: int) -> str:
        return self.read(index, "canonical.py")

    def test_sh(self, index: int) -> TestShInfo:
        return parse_test_sh(self.read(index, "test.sh"), self.get(index).repo_dir_name)

    def check_task(self, index: int) -> None:
        """Raise DatasetError unless every file the harness needs for this task exists."""
        for name in TASK_FILES:
            self.task_file(index, name)
        if not self.repo_dir(index).is_dir():
            raise DatasetError(f"task {index} is missing its repository folder {self.repo_dir(index)}")

    def fingerprint(self) -> str:
        """sha256 identifying the dataset a run used, for run metadata: the meta file and the
        :meth:`task_fingerprint` of each runnable task."""
        digest = hashlib.sha256(self.meta_path.read_bytes())
        for meta in self.runnable():
            digest.update(self.task_fingerprint(meta.index).encode())
        return digest.hexdigest()

    def task_fingerprint(self, index: int) -> str:
        """sha256 identifying one task as its jobs see it (part of their identity, agent/job/fingerprint.py).

        Covers its meta row, its own files and its repository's python sources
        byte for byte; other repository files (data, checkpoints: gigabytes in
        the published set) by name and size, so computing it for every job
        stays cheap.
        """
        digest = hashlib.sha256(repr(self.get(index)).encode())
        task_dir = self.task_dir(index)
        for path in sorted(p for p in task_dir.rglob("*") if p.is_file() and not UNHASHED & set(p.parts)):
            digest.update(str(path.relative_to(self.root)).encode())
            if path.suffix == ".py" or path.parent == task_dir:
                digest.update(path.read_bytes())
            else:
                digest.update(str(path.stat().st_size).encode())
        return digest.hexdigest()

