"""What a run was: config (no secrets), protocol and the texts it used, harness commit, package versions, dataset
fingerprint, command.

Written to ``<output_dir>/run_metadata/<timestamp>_<pid>.json`` when the run
starts and rewritten when it ends (status and summary added), so a number in a
paper can be traced to the exact code, data and settings that produced it.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from agent.common.atomic_file import atomic_write_text
from agent.common.version import harness_version
from agent.config import RunConfig
from agent.protocols.release_texts import load_release_texts
from agent.task.dataset import DatasetManager

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("openai", "anthropic", "google-genai", "junitparser", "pyyaml", "tenacity", "filelock", "tqdm",
            "pytest", "uv", "ray")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (None when not installed)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(repo: Path = REPO_ROOT) -> dict[str, Any]:
    """Commit of the harness and whether the work tree differs from it (None when not a git checkout)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip() if commit else None, "dirty": None if status is None else bool(status.strip())}


def build_metadata(cfg: RunConfig, argv: list[str]) -> dict[str, Any]:
    """The record written at the start of a run."""
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "status": "running",
        "command": [sys.executable, *argv],
        "cwd": os.getcwd(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "harness": {"version": harness_version(), **git_state()},
        "packages": package_versions(),
        "dataset": {"path": str(cfg.work_dir), "fingerprint": DatasetManager(cfg.work_dir).fingerprint()},
        "protocol": protocol_record(cfg),
        "config": cfg.public_dict(),
    }


def protocol_record(cfg: RunConfig) -> dict[str, Any]:
    """The protocol and, for the release's, where its texts came from: "ours", or the checkout named by
    ``release-prompts`` with the sha256 of each file read."""
    if cfg.protocol != "release":
        return {"name": cfg.protocol}
    texts = load_release_texts(cfg.release_prompts)
    return {"name": cfg.protocol, "texts": texts.origin, "files": texts.hashes}


def metadata_path(cfg: RunConfig) -> Path:
    return cfg.output_dir / "run_metadata" / f"{time.strftime('%Y%m%d-%H%M%S')}_{os.getpid()}.json"


def write_metadata(path: Path, record: dict[str, Any]) -> None:
    """Atomic write (temp file + rename), so the record is never half-written."""
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
