"""A results folder someone sends you never runs code: a crafted result or seed pickle that would write a
marker file when unpickled is refused by the metrics, the report and (once the job loop uses the shared
restricted loader as well) the main command resuming on it, each naming the file in one line."""
from __future__ import annotations

import os
import pickle
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.run_support import REPO, SOLVE_AT, STANDARD_RUN, cli_env, run_cli, write_config, write_scripts

pytestmark = pytest.mark.slow  # a finished run copied per test

RUN = {**STANDARD_RUN, "task-ids": [1, 2], "guidance-level": [0], "max-turn": 2}
CRAFTED = {"result": "*_guidance_0/task_1_result.pkl", "seed": "init_seed/coder_task1_init.pkl"}


class _WritesMarker:
    """Unpickled by plain pickle.load, this runs a shell command (what the issue's crafted file did)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished run (config and results) to copy; its folder name has a space, as users' paths may."""
    root = tmp_path_factory.mktemp("sent") / "sent run"
    config = write_config(root / "run.yaml", write_scripts(root / "scripts", SOLVE_AT), root / "out", **RUN)
    assert run_cli(config).returncode == 0
    return root


def craft(finished: Path, tmp_path: Path, kind: str) -> tuple[Path, Path, Path]:
    """(run folder, crafted file, marker) in a private copy of the finished run, its ``kind`` file crafted."""
    root = tmp_path / "sent run"
    shutil.copytree(finished, root)
    config = root / "run.yaml"
    config.write_text(config.read_text().replace(str(finished), str(root)))
    [target] = (root / "out").glob(CRAFTED[kind])
    if kind == "seed":  # the job starts again from its seed
        for done in (root / "out").glob("*_guidance_0/task_1_*"):
            done.unlink()
    marker = tmp_path / "marker"
    target.write_bytes(pickle.dumps([{"turn": _WritesMarker(marker)}]))
    return root, target, marker


def test_metrics_and_the_report_refuse_a_crafted_result(finished: Path, tmp_path: Path) -> None:
    root, target, marker = craft(finished, tmp_path, "result")
    for script in ("analyze_results.py", "report.py"):
        done = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--output-dir", str(root / "out"),
                               "--skip", "codebert"], cwd=REPO, env=cli_env(), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert not marker.exists()
        named = [line for line in done.stderr.splitlines() if str(target) in line]
        assert len(named) == 1 and "refused global posix.system" in named[0], done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("kind", sorted(CRAFTED))
def test_resuming_on_a_crafted_file_never_runs_it(finished: Path, tmp_path: Path, kind: str) -> None:
    root, target, marker = craft(finished, tmp_path, kind)
    done = run_cli(root / "run.yaml")
    assert not marker.exists()
    assert done.returncode == 1 and "Traceback" not in done.stderr
    named = [line for line in (done.stdout + done.stderr).splitlines() if str(target) in line]
    assert named and all("move it away" in line or "overwrite: true" in line for line in named), named
