"""The code is where its name says: the release's module names re-export their new homes, every file a
comment or a document names exists, and entry files edit sys.path only when the package is not importable."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENTRY_FILES = sorted(str(p.relative_to(REPO)) for folder in ("agent", "scripts", "ablation") for p in
                     (REPO / folder).glob("*.py") if "sys.path.insert(0, str(_CHECKOUT))" in p.read_text())
# A path of this repository named in code or documentation: agent/..., metrics/..., docs/... ending in .py or .md.
_NAMED = re.compile(r"(?<![\w/.])((?:agent|metrics|ablation|scripts|docs|config|tests)/[\w/]*\w\.(?:py|md|yaml))\b")


def test_the_release_module_names_re_export_their_new_homes() -> None:
    import agent.action
    import agent.agents
    import agent.constants
    import agent.env_cache
    import agent.inference
    import agent.utils
    from agent.job.agents import CodeAgent
    from agent.task.action import parse_answer
    from agent.task.dataset import DatasetManager
    from agent.envs.cache import resolve_python
    from agent.models.build import build_model
    from agent.protocols.prompts import AGENT_SYSTEM

    assert agent.utils.DatasetManager is DatasetManager and agent.inference.build_model is build_model
    assert agent.env_cache.resolve_python is resolve_python and agent.constants.AGENT_SYSTEM is AGENT_SYSTEM
    assert agent.action.parse_answer is parse_answer and agent.agents.CodeAgent is CodeAgent
    for module in (agent.action, agent.agents, agent.constants, agent.env_cache, agent.inference, agent.utils):
        assert len(Path(module.__file__).read_text().splitlines()) == 2  # a docstring and one import


def test_every_file_named_in_code_or_documents_exists() -> None:
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True).stdout.split()
    missing = []
    for name in tracked:
        if not name.endswith((".py", ".md", ".yaml")) or name.startswith("tests/"):  # tests write their own
            continue
        for match in _NAMED.finditer((REPO / name).read_text(encoding="utf-8", errors="replace")):
            named = match.group(1)
            if not (REPO / named).exists() and "<" not in named:
                missing.append(f"{name} names {named}")
    assert not missing, missing


@pytest.mark.parametrize("entry", ENTRY_FILES)
def test_entry_files_edit_sys_path_only_without_the_package(entry: str, tmp_path: Path) -> None:
    probe = ("import runpy, sys; before = list(sys.path); "
             f"runpy.run_path({str(REPO / entry)!r}, run_name='probe'); "
             "print(sys.path[:len(sys.path) - len(before)] if len(sys.path) > len(before) else [])")
    with_package = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                                  timeout=120)
    assert with_package.returncode == 0, with_package.stderr
    assert with_package.stdout.strip().splitlines()[-1] == "[]"
    elsewhere = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                               timeout=120)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert elsewhere.stdout.strip().splitlines()[-1] == str([str(REPO)])
