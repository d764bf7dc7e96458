"""The README and the docs pages say what works: their links resolve, and their runnable commands run as written.

A fenced block whose info string is ``bash runnable`` is a command a reader is told to run; the slow test runs
every such block of each page, in order, from a fresh clone in a path with a space.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
SCRIPT = re.compile(r"\b(?:python|bash)\s+((?:agent|scripts|metrics|ablation)/[\w/]+\.py|[\w/]+\.sh)\b")


def runnable_blocks(page: Path) -> list[str]:
    """The ``bash runnable`` blocks of a page, in order."""
    return [body for info, body in FENCE.findall(page.read_text()) if info.split()[:2] == ["bash", "runnable"]]


def all_blocks(page: Path) -> list[str]:
    return [body for info, body in FENCE.findall(page.read_text()) if info.split()[:1] in (["bash"], ["sh"])]


def test_the_readme_is_a_front_door() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "python3 -m venv" in text and "python -m pytest" in text
    assert "huggingface-cli download mcy98/RECODE-H --repo-type dataset --local-dir work_dir/dataset" in text
    assert runnable_blocks(REPO / "README.md"), "the README marks its main commands runnable"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_of_a_page_resolves(page: Path) -> None:
    missing = [target for target in LINK.findall(page.read_text())
               if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_of_a_page_names_a_real_script_and_parses(page: Path) -> None:
    for block in all_blocks(page):
        for script in SCRIPT.findall(block):
            assert (REPO / script).is_file(), f"{page.name} runs {script}, which is not in the checkout"
    for block in runnable_blocks(page):
        checked = subprocess.run(["bash", "-n"], input=block, text=True, capture_output=True)
        assert checked.returncode == 0, f"{page.name}: {checked.stderr}"


def _fresh_clone(tmp_path: Path) -> Path:
    clone = tmp_path / "a clone" / "recode h"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    shutil.rmtree(clone / "work_dir" / "envs", ignore_errors=True)
    return clone


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if runnable_blocks(p)], ids=lambda p: p.name)
def test_the_runnable_commands_run_as_written_from_a_fresh_clone(page: Path, tmp_path: Path) -> None:
    """Each page's runnable blocks, in order, in one shell: later blocks may use what earlier ones made."""
    clone = _fresh_clone(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "RECODE_ENV_DIR": os.environ.get("RECODE_ENV_DIR", str(tmp_path / "envs"))}
    script = "set -euo pipefail\n" + "\n".join(runnable_blocks(page))
    done = subprocess.run(["bash", "-c", script], cwd=clone, env=env, text=True, capture_output=True, timeout=2400)
    assert done.returncode == 0, f"{page.name}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
