"""Private copies of a task repository, the agent's view of one (RepoWorkspace), and the path confinement every action obeys.

The release wrote candidates into the dataset itself; here every attempt lives
in its own real copy (no hard links, so nothing written there can reach the
dataset), and every path an action names is resolved inside that copy.
"""
from __future__ import annotations

import shutil
from functools import cached_property
from pathlib import Path

from agent.common.atomic_file import atomic_write_text
from agent.task.dataset import DatasetManager
from agent.task.retrieval import SKIPPED_DIRS, FunctionIndex, collect_functions


class PathEscapeError(ValueError):
    """A path that would leave the workspace (absolute, '..' or a symlink pointing out)."""


def resolve_inside(root: Path, relative: str) -> Path:
    """Resolve ``relative`` under ``root``, refusing anything that ends up outside it.

    Symlinks are followed before the check, so a link inside the repo that
    points at the task folder (where canonical.py lives) is refused too.
    """
    text = relative.strip().strip("'\"`")
    if not text:
        raise PathEscapeError("empty path")
    candidate = Path(text)
    if candidate.is_absolute():
        raise PathEscapeError(f"absolute paths are not allowed: {text}")
    base = root.resolve()
    resolved = (base / candidate).resolve()
    if resolved != base and base not in resolved.parents:
        raise PathEscapeError(f"path leaves the repository: {text}")
    return resolved


def _copy_file(src: str, dst: str) -> str:
    """Copy data and mode but never metadata links: a real, independent file."""
    return shutil.copy2(src, dst, follow_symlinks=True)


def copy_repo(source: Path, dest: Path) -> Path:
    """Real copy of a repository tree; symlinks are materialised only if they stay inside it, and a link to
    nothing (a repository's docs link left dangling by its packaging) is left out rather than failing the copy."""
    source = source.resolve()

    def ignore(directory: str, names: list[str]) -> list[str]:
        skipped = []
        for name in names:
            path = Path(directory) / name
            if path.is_symlink():
                target = path.resolve()
                if not target.exists() or (target != source and source not in target.parents):
                    skipped.append(name)
            elif name in ("__pycache__", ".pytest_cache"):
                skipped.append(name)
        return skipped

    shutil.copytree(source, dest, symlinks=False, ignore=ignore, copy_function=_copy_file)
    return dest


def make_workspace(dataset: DatasetManager, index: int, parent: Path, content: str | None = None) -> Path:
    """Create ``parent/<repo_dir_name>``: a private copy of task ``index`` with its target set.

    ``content`` defaults to the task's ``init_content`` (the blanked file).
    Returns the repository root of the copy.
    """
    meta = dataset.get(index)
    dataset.check_task(index)
    parent.mkdir(parents=True, exist_ok=True)
    repo = copy_repo(dataset.repo_dir(index), parent / Path(meta.repo_dir_name).name)
    write_target(repo, meta.target_file_path, meta.init_content if content is None else content)
    return repo


def write_target(repo: Path, target_file_path: str, content: str) -> Path:
    """Atomically replace the target file of a workspace."""
    target = resolve_inside(repo, target_file_path)
    atomic_write_text(target, content, durable=False)
    return target


class RepoWorkspace:
    """The agent's view of its private repository copy: the target file plus read-only browsing."""

    def __init__(self, repo: Path, target: str) -> None:
        self.repo = repo.resolve()
        self.target = target
        self.target_path = resolve_inside(self.repo, target)

    @property
    def code(self) -> str:
        return self.target_path.read_text(encoding="utf-8") if self.target_path.exists() else ""

    def write_code(self, content: str) -> None:
        write_target(self.repo, self.target, content)

    def files(self) -> list[str]:
        """Repository files, relative and sorted; caches and symlinks that leave the repo are hidden."""
        listed = []
        for path in sorted(self.repo.rglob("*")):
            rel = path.relative_to(self.repo)
            if SKIPPED_DIRS.intersection(rel.parts) or not path.is_file():
                continue
            try:
                resolve_inside(self.repo, rel.as_posix())
            except PathEscapeError:
                continue
            listed.append(rel.as_posix())
        return listed

    @cached_property
    def index(self) -> FunctionIndex:
        """Functions of the repository except the target (the agent already sees that file)."""
        return FunctionIndex(collect_functions(self.repo, exclude={Path(self.target).as_posix()}))
