"""The release's prompt texts: read from a checkout by parsing (never running) it, every slot found or a
one-line error, and none of its sentences inside the project."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.config import ConfigError
from agent.protocols.release_texts import FILES, SLOTS, ReleaseTextsError, load_release_texts, parse_quietly
from tests.loop_config import REPO, make_config

RELEASE = REPO.parent / "shared" / "recode_release"
needs_release = pytest.mark.skipif(not RELEASE.is_dir(), reason=f"the authors' release is not at {RELEASE}")
MIN_WORDS = 6


@needs_release
def test_every_slot_is_found_in_the_release_with_its_fields_and_the_files_are_hashed() -> None:
    texts = load_release_texts(RELEASE)
    assert set(texts.texts) == set(SLOTS) and texts.origin == str(RELEASE)
    assert set(texts.hashes) == set(FILES) and all(len(h) == 64 for h in texts.hashes.values())
    for name, slot in SLOTS.items():
        filled = texts.fill(name, **{field: f"<{field}>" for field in slot.fields})
        assert all(f"<{field}>" in filled for field in slot.fields), name
    assert texts.texts != load_release_texts(None).texts


@needs_release
def test_a_checkout_that_lacks_a_file_or_a_text_is_a_one_line_error(tmp_path: Path) -> None:
    copy = tmp_path / "release copy"
    shutil.copytree(RELEASE / "agent", copy / "agent")
    (copy / "agent" / "utils.py").unlink()
    with pytest.raises(ReleaseTextsError, match=r"agent/utils.py is missing; point release-prompts at"):
        load_release_texts(copy)
    shutil.copy(RELEASE / "agent" / "utils.py", copy / "agent" / "utils.py")
    agents = copy / "agent" / "agents.py"
    agents.write_text(agents.read_text().replace("def build_history(", "def renamed_history("))
    with pytest.raises(ReleaseTextsError, match=r"the text 'history_empty' was not found in agent/agents.py "
                                                r"CodeAgent.build_history"):
        load_release_texts(copy)
    with pytest.raises(ConfigError, match="history_empty") as error:
        make_config(tmp_path, release_prompts=str(copy))
    assert "\n" not in str(error.value)


@needs_release
def test_the_checkout_is_parsed_never_run(tmp_path: Path) -> None:
    copy = tmp_path / "release"
    shutil.copytree(RELEASE / "agent", copy / "agent")
    marker = tmp_path / "ran"
    for name in FILES:
        path = copy / name
        path.write_text(f"open({str(marker)!r}, 'w').close()\n" + path.read_text())
    assert set(load_release_texts(copy).texts) == set(SLOTS) and not marker.exists()


def _sentences(tree: ast.AST) -> set[str]:
    """Every string of the release of at least MIN_WORDS words, line by line, whitespace collapsed."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for line in node.value.splitlines():
                words = line.split()
                if len(words) >= MIN_WORDS:
                    found.add(" ".join(words))
    return found


@needs_release
def test_no_sentence_of_the_release_is_in_the_project() -> None:
    sentences = set()
    for path in RELEASE.rglob("*.py"):
        sentences |= _sentences(parse_quietly(path.read_text(encoding="utf-8", errors="replace")))
    assert len(sentences) > 300
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True).stdout.split()
    leaks = []
    for name in tracked:
        path = REPO / name
        if not path.is_file() or path.suffix in (".pkl", ".png", ".xml") or "fixtures/rcb" in name:
            continue
        text = " ".join(path.read_text(encoding="utf-8", errors="replace").split())
        leaks += [(name, sentence) for sentence in sentences if sentence in text]
    assert not leaks, leaks[:5]


def test_our_own_texts_are_not_the_release_s() -> None:
    ours = load_release_texts(None)
    assert ours.origin == "ours" and ours.hashes == {}
    assert not [name for name, text in ours.texts.items() if re.search(r"\{\d*\}", text)]  # named fields only
