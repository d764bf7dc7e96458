"""The libraries the test imports are imported before the watch starts (pytest_guard/recode_guard_preload.py):
only the test's and the reference's top-level imports, never from the repository, never a name the repository
could provide, and the warnings they raise reach pytest's collection as if the test had imported them."""
from __future__ import annotations

import ast
import sys
import warnings
from pathlib import Path

from agent.runner.core import GUARD_DIR, RunnerOptions, run_candidate
from tests.guard_testlib import SANDBOX
from tests.runner_testlib import CANONICAL, make_task

sys.path.insert(0, str(GUARD_DIR))
import recode_guard_preload as preload  # noqa: E402

OBSERVING_TEST = '''\
import sys
SEEN_FIRST = {name: name in sys.modules for name in ("wave", "yaml")}  # before this file's own imports
import wave
import yaml
from pkg.target import add
import canonical


def test_libraries_were_preloaded():
    assert SEEN_FIRST["wave"]


def test_the_repository_module_is_the_one_imported():
    assert not SEEN_FIRST["yaml"] and yaml.LOCAL


def test_add():
    assert add(2, 3) == canonical.add(2, 3)
'''


def test_top_level_imports_are_the_absolute_names_of_top_level_statements() -> None:
    source = ("import os, numpy.linalg as la\nfrom torch.nn import functional\nfrom . import sibling\n"
              "try:\n    import scipy\nexcept ImportError:\n    pass\n"
              "def f():\n    import json\n")
    assert preload.top_level_imports(ast.parse(source)) == ["os", "numpy.linalg", "torch.nn"]


def test_files_are_parsed_once_and_unreadable_ones_not_at_all(tmp_path: Path) -> None:
    good, broken = tmp_path / "good test.py", tmp_path / "broken.py"
    good.write_text("import json\n")
    broken.write_text("def broken(:\n")
    assert preload.parse(str(good)) is preload.parse(str(good))
    assert preload.parse(str(broken)) is None and preload.parse(str(tmp_path / "missing.py")) is None


def test_repository_names_cover_modules_and_folders(tmp_path: Path) -> None:
    repo = tmp_path / "my repo"
    (repo / "pkg" / "sub").mkdir(parents=True)
    (repo / "pkg" / "sub" / "torch.py").write_text("")
    (repo / "native.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (repo / "notes.txt").write_text("")
    (repo / ".venv" / "numpy").mkdir(parents=True)
    assert preload.repository_names(str(repo)) == {"pkg", "sub", "torch", "native"}


def test_the_test_sees_its_libraries_preloaded_and_its_repository_modules_its_own(tmp_path: Path) -> None:
    dataset = make_task(tmp_path / "a dataset", test_py=OBSERVING_TEST, test_cases=(
        "test_libraries_were_preloaded", "test_the_repository_module_is_the_one_imported", "test_add"))
    package = Path(dataset.root) / "annotations" / "annotation_1" / "toy" / "pkg"
    (package / "yaml.py").write_text("LOCAL = True\n")  # shadows the installed PyYAML
    result = run_candidate(dataset, 1, CANONICAL, RunnerOptions(sandbox=SANDBOX))
    assert result["status"] == "passed", result["failure_messages"]


def test_warnings_of_preloaded_imports_are_raised_again_once_with_their_module(tmp_path: Path, monkeypatch) -> None:
    library, repo = tmp_path / "site packages", tmp_path / "repo"
    library.mkdir()
    repo.mkdir()
    for name, category in (("warns_at_import", "DeprecationWarning"), ("warns_too", "UserWarning")):
        (library / f"{name}.py").write_text(
            f"import warnings\nfor _ in range(3):\n    warnings.warn('{name}', {category})\n")
        monkeypatch.delitem(sys.modules, name, raising=False)
    (library / "local_name.py").write_text("")  # installed, but the repository has one too: left to the test
    (repo / "local_name.py").write_text("")
    test = repo / "test.py"
    test.write_text("import warns_at_import\nimport local_name\nimport not_installed_anywhere\nimport warns_too\n")
    monkeypatch.syspath_prepend(str(library))
    monkeypatch.syspath_prepend(str(repo))
    with warnings.catch_warnings(record=True) as during:
        warnings.simplefilter("always")
        assert preload.preload([str(test)], str(repo) + "/", str(repo / "target.py")) == [
            "warns_at_import", "warns_too"]
    assert during == []  # held back until pytest collects
    assert str(repo) in sys.path and "local_name" not in sys.modules  # the path is restored
    with warnings.catch_warnings(record=True) as replayed:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", module="warns_at_import")  # a filter naming the module that warned
        preload.replay()
        preload.replay()
    assert [(str(w.message), w.category, Path(w.filename).name) for w in replayed] == [
        ("warns_too", UserWarning, "warns_too.py")]
