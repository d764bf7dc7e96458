"""On-disk datasets for the environment tests, made under tmp_path: tiny ones, and a replica of the published layout;
package indexes on 127.0.0.1; builds that make an interpreter without installing anything."""
from __future__ import annotations

import http.server
import json
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

import agent.envs.cache as env_cache
from agent.task.dataset import DatasetManager
from agent.envs.backends import BuildPlan

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


class LocalIndex:
    """An HTTP server on 127.0.0.1 standing for a package index; it counts the connections it accepts."""

    def __init__(self) -> None:
        self.connections = 0
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def setup(self) -> None:
                index.connections += 1
                super().setup()

            def do_GET(self) -> None:
                self.send_response(404)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/torch"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, at_least: int = 0, wait_sec: float = 2.0) -> int:
        """Connections accepted, once at least ``at_least`` (or ``wait_sec`` passed): the kernel completes a
        connect before the server's thread handles it."""
        deadline = time.monotonic() + wait_sec
        while self.connections < at_least and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.connections

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """An index URL on a port of 127.0.0.1 nobody listens on: a connect is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/torch"


def fake_builds(monkeypatch: pytest.MonkeyPatch, pause_sec: float = 0.0) -> list[str]:
    """Builds that take ``pause_sec`` and make an interpreter (this one, through a wrapper: a symlink would leave
    its venv) instead of installing anything; returns the requirements text of each build planned."""
    built: list[str] = []

    def plan(backend: str, prefix: Path, requirements: Path, python_version: str, indexes: tuple = ()) -> BuildPlan:
        built.append(requirements.read_text(encoding="utf-8"))
        python = prefix / "bin" / "python"
        script = (f"import os, time; time.sleep({pause_sec}); os.makedirs({str(prefix / 'bin')!r}); "
                  f"open({str(python)!r}, 'w').write('#!/bin/sh\\nexec \"{sys.executable}\" \"$@\"\\n'); "
                  f"os.chmod({str(python)!r}, 0o755)")
        return BuildPlan(commands=((sys.executable, "-c", script),))

    monkeypatch.setattr(env_cache, "build_plan", plan)
    monkeypatch.setattr(env_cache, "compile_bytecode", lambda python, log, env, done=None: {"site_packages": []})
    return built
