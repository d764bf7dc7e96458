"""ResearchCodeBench environments and gold check: requirement derivation, stubs, --requirements, progress,
weak tests, the release's error-marker rule, and hidden reference files."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

import scripts.verify_envs_via_test_sh as verify
from agent.task.action import parse_answer
from agent.runner.core import RunnerOptions, run_candidate
from agent.rcb.answers import answer_rules, reference_block
from agent.rcb.gold import BROKEN, EXPECTED, UNRUNNABLE, WEAK, classify
from agent.rcb.imports import scan_paper
from agent.rcb.pset import is_reference
from agent.rcb.requirements import (
    PaperNeeds, derive_needs, distribution_of, group_papers, stubs_for, without,
)
from agent.rcb.snippet import complete_file, load_snippet_task
from agent.task.dataset import DatasetManager
from scripts.import_researchcodebench import main as import_main
from tests.runner_testlib import make_task

REPO = Path(__file__).resolve().parents[1]
_SAMPLES = [REPO.parent / "shared" / "rcb_pset_sample", REPO.parents[1] / "shared" / "rcb_pset_sample"]
SAMPLE = next((path for path in _SAMPLES if path.is_dir()), _SAMPLES[0])  # a clone beside shared/, or a worktree
OPTIONS = RunnerOptions(timeout_sec=120, env_backend="current")
INDEX = """\
- id: {paper}
  title: A fixture paper
  annotated_file_paths: model.py
  context_file_paths: null
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_import_name_mapping():
    assert [distribution_of(m) for m in ("sklearn", "PIL", "yaml", "cv2", "hydra", "meltingpot", "Foo_Bar")] == [
        "scikit-learn", "pillow", "pyyaml", "opencv-python", "hydra-core", "dm-meltingpot", "foo-bar"]


def test_scan_follows_local_imports_and_separates_stdlib_local_and_optional(tmp_path):
    root = write(tmp_path / "p", {
        "paper2code_test.py": "import unittest\nfrom pkg.model import f\nimport helper\n",
        "pkg/__init__.py": "",
        "pkg/model.py": "import os\nimport numpy as np\nfrom .layers import g\nfrom sklearn.svm import SVC\n"
                        "def later():\n    import debugpy\n",
        "pkg/layers.py": "try:\n    import apex\nexcept ImportError:\n    apex = None\nimport PIL.Image\n",
        "helper.py": "import yaml\n",
    })
    found = scan_paper(root, ["paper2code_test.py"])
    assert sorted(found.needed) == ["PIL", "numpy", "sklearn", "yaml"]
    assert sorted(found.optional) == ["apex", "debugpy"]
    assert sorted(found.local_files) == ["helper.py", "paper2code_test.py", "pkg/__init__.py", "pkg/layers.py",
                                         "pkg/model.py"]


def test_needs_from_imports_add_call_extras_and_runner_packages(tmp_path):
    root = write(tmp_path / "p", {
        "paper2code_test.py": "import model\n",
        "model.py": "import pandas as pd\nimport cv2\ndef load(p):\n    return pd.read_parquet(p)\n",
    })
    needs = derive_needs("p", root, ["paper2code_test.py"])
    assert needs.source == "imports"
    assert needs.requirements == ("opencv-python", "pandas", "pyarrow", "pytest", "pytest-timeout")
    assert needs.modules == {"cv2": "opencv-python", "pandas": "pandas"}


def test_own_requirements_file_wins_torch_pins_go_and_vcs_lines_are_unavailable(tmp_path):
    root = write(tmp_path / "p", {
        "paper2code_test.py": "import model\n",
        "model.py": "import torch\nimport mmcv\n",
        "requirements.txt": "torch==2.2.2\nnumpy==1.26.4  # pinned\n"
                            "git+https://example.org/mmcv.git#egg=mmcv\n",
    })
    needs = derive_needs("p", root, ["paper2code_test.py"])
    assert needs.source == "requirements.txt"
    assert needs.requirements == ("numpy==1.26.4", "pytest", "pytest-timeout", "torch")
    assert list(needs.unavailable) == ["mmcv"] and "outside the package index" in needs.unavailable["mmcv"]
    assert any("shared torch/torchvision pair" in note for note in needs.notes)
    assert stubs_for(needs) == {"mmcv": f"mmcv: {needs.unavailable['mmcv']}"}


def test_uninstallable_distribution_becomes_a_stub_of_its_imports():
    needs = PaperNeeds("p", "imports", ("dm-meltingpot", "numpy", "pytest"), {"meltingpot": "dm-meltingpot",
                       "numpy": "numpy"}, {}, ())
    reduced = without(needs, {"dm-meltingpot": "no usable wheels"})
    assert reduced.requirements == ("numpy", "pytest")
    assert stubs_for(reduced) == {"meltingpot": "dm-meltingpot: no usable wheels"}


def test_papers_share_unless_pins_conflict_or_the_resolver_vetoes():
    def needs(paper, *lines):
        return PaperNeeds(paper, "imports", lines, {}, {}, ())

    groups = group_papers([needs("a", "numpy==1.26.4", "torch"), needs("b", "numpy==2.1", "scipy"),
                           needs("c", "torch", "scipy"), needs("d", "numpy==2.1")])
    assert [g.papers for g in groups] == [("a", "c"), ("b", "d")]
    assert groups[0].requirements == ("numpy==1.26.4", "scipy", "torch")
    vetoed = group_papers([needs("a", "torch"), needs("b", "jax")], joinable=lambda group, lines: False)
    assert [g.papers for g in vetoed] == [("a",), ("b",)]
    assert len({g.name for g in vetoed}) == 2


def fixture_pset(tmp_path: Path, test_body: str, model: str) -> Path:
    pset = tmp_path / "pset"
    write(pset, {
        "papers.yaml": INDEX.format(paper="stubby"),
        "stubby/paper2code_paper.tex": "A paper.\n",
        "stubby/model.py": model,
        "stubby/model_ref.py": model,
        "stubby/paper2code_test.py": "import unittest\nimport model\nimport model_ref\n\n\n"
                                     "class TestModel(unittest.TestCase):\n" + test_body,
    })
    return pset


MODEL = """\
import numpy as np
from not_installable_xyz import simulator


def double(x):
    # <paper2code name="double">
    return 2 * np.asarray(x)
    # </paper2code name="double">
"""


@pytest.fixture
def import_with_stub(tmp_path, monkeypatch):
    """Import the fixture paper, its uninstallable import found so as the resolver would report it."""
    import agent.rcb.environments as environments

    real = environments.derive_needs
    monkeypatch.setattr(environments, "derive_needs", lambda paper, root, files: without(
        real(paper, root, files), {"not-installable-xyz": "no usable wheels (fixture)"}))

    def run(test_body: str) -> DatasetManager:
        out = tmp_path / "ds"
        assert import_main(["--pset", str(fixture_pset(tmp_path, test_body, MODEL)), "--out", str(out),
                            "--no-resolve"]) == 0
        return DatasetManager(out)
    return run


def test_stub_lets_an_unused_import_load_and_is_recorded(import_with_stub):
    dataset = import_with_stub("    def test_double(self):\n"
                                         "        assert (model.double([1, 2]) == model_ref.double([1, 2])).all()\n")
    meta = dataset.get(1)
    assert meta.extra["stubs"] == {"not_installable_xyz": "not-installable-xyz: no usable wheels (fixture)"}
    reference = run_candidate(dataset, 1, dataset.canonical(1), OPTIONS)
    start = run_candidate(dataset, 1, meta.init_content, OPTIONS)
    assert reference["status"] == "passed", reference["failure_messages"]
    assert classify(reference, start, meta.extra["stubs"]).kind == EXPECTED


def test_a_test_that_uses_a_stub_is_unrunnable_with_the_reason(import_with_stub):
    dataset = import_with_stub("    def test_sim(self):\n        model.simulator.build('x')\n")
    meta = dataset.get(1)
    reference = run_candidate(dataset, 1, dataset.canonical(1), OPTIONS)
    start = run_candidate(dataset, 1, meta.init_content, OPTIONS)
    verdict = classify(reference, start, meta.extra["stubs"])
    assert (verdict.kind, "not_installable_xyz.simulator.build" in verdict.reason) == (UNRUNNABLE, True)
    assert "no usable wheels (fixture)" in verdict.reason


def test_error_marker_in_the_output_fails_a_passing_test(import_with_stub):
    dataset = import_with_stub("    def test_double(self):\n"
                                         "        print('Traceback (most recent call last): caught and ignored')\n"
                                         "        assert (model.double([1]) == model_ref.double([1])).all()\n")
    result = run_candidate(dataset, 1, dataset.canonical(1), OPTIONS)
    assert result["status"] == "failed"
    assert "error marker" in "\n".join(result["failure_messages"]) and "'Traceback'" in result["failure_messages"][0]


def test_no_repository_holds_a_reference_file(import_with_stub):
    dataset = import_with_stub("    def test_double(self):\n        model_ref.double([1])\n")
    repo = dataset.repo_dir(1)
    assert sorted(p.name for p in repo.rglob("*") if p.is_file()) == ["model.py"]
    assert dataset.get(1).extra["hidden_references"] == ["model_ref.py"]


def classified(reference: str, start: str, message: str = "") -> str:
    def result(status):
        return {"status": status, "failure_messages": [message] if status != "passed" else [], "output": ""}

    return classify(result(reference), result(start)).kind


def test_classification():
    assert classified("passed", "failed") == EXPECTED
    assert classified("passed", "timeout") == EXPECTED
    assert classified("passed", "passed") == WEAK
    assert classified("failed", "failed", "test_x: urllib.error.URLError: <urlopen error [Errno -3] "
                      "Temporary failure in name resolution>") == UNRUNNABLE
    assert classified("failed", "failed", "test_x: AssertionError") == BROKEN
    assert classified("passed", "infra_error") == BROKEN


def test_gold_check_prints_progress_rows_and_summary(tmp_path, capsys):
    dataset = make_task(tmp_path / "dataset")
    assert verify.main(["--dataset-dir", str(dataset.root), "--timeout-sec", "60", "--env-backend", "current"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("gold check: 1/1 task(s) done (")  # off a terminal: lines, not a bar
    assert "%|" not in captured.err and "\r" not in captured.err
    lines = captured.out.splitlines()
    assert lines[0].split()[:2] == ["task", "paper"] and lines[1].split()[0] == "1" and lines[1].endswith("as expected")
    assert "(all)" in captured.out and "1/1 tasks behave as expected, 0 weak test(s)" in captured.out


def test_gold_check_reports_weak_tests_and_still_exits_zero(tmp_path, capsys):
    dataset = make_task(tmp_path / "dataset")
    meta = dataset.meta_path
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    rows[0]["init_content"] = dataset.canonical(1)
    meta.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert verify.main(["--dataset-dir", str(dataset.root), "--timeout-sec", "60", "--env-backend", "current"]) == 0
    out = capsys.readouterr().out
    assert "0/1 tasks behave as expected, 1 weak test(s)" in out and "weak test: task 1" in out


def test_requirements_override_works_on_a_fresh_folder(tmp_path, capsys):
    requirements = tmp_path / "reqs.txt"
    requirements.write_text("numpy\npytest\n")
    out = tmp_path / "fresh" / "dataset"
    pset = REPO / "tests" / "fixtures" / "rcb" / "pset"
    assert import_main(["--pset", str(pset), "--out", str(out), "--requirements", str(requirements)]) == 0
    assert (out / "requirements" / "recode_rcb.txt").read_text() == "numpy\npytest\n"
    assert DatasetManager(out).test_sh(1).env_name == "recode_rcb"
    assert import_main(["--pset", str(pset), "--out", str(out), "--requirements", str(tmp_path / "none.txt")]) == 2
    assert "fix --requirements" in capsys.readouterr().err


def test_scripted_reference_answers_rebuild_canonical(import_with_stub):
    dataset = import_with_stub("    def test_double(self):\n        model_ref.double([1])\n")
    task = load_snippet_task(dataset, 1)
    assert reference_block(task.masked_file, dataset.canonical(1), "double") == "    return 2 * np.asarray(x)\n"
    rule = answer_rules([(task, dataset.canonical(1))], "reference")[0]
    assert complete_file(task, rule["responses"][0]) == dataset.canonical(1)
    placeholder = answer_rules([(task, dataset.canonical(1))], "placeholder")[0]
    assert complete_file(task, placeholder["responses"][0]) == task.masked_file
    submit, replace = answer_rules([(task, dataset.canonical(1))], "reference", "agent")
    assert parse_answer(replace["responses"][0]).code == dataset.canonical(1)
    assert re.search(replace["when"], dataset.instruction(1))  # the task's own instruction names its file
    assert parse_answer(submit["responses"][0]).name == "SUBMIT"
    assert re.search(submit["when"], "## Result of your last action (REPLACE)\nwritten")


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the ResearchCodeBench sample (../shared/rcb_pset_sample) is absent")
def test_sample_import_hides_every_reference(tmp_path):
    out = tmp_path / "rcb"
    assert import_main(["--pset", str(SAMPLE), "--out", str(out), "--no-resolve"]) == 0
    dataset = DatasetManager(out)
    for meta in dataset.select(None):
        repo = dataset.repo_dir(meta.index)
        assert [p.name for p in repo.rglob("*.py") if is_reference(p.name)] == []
        assert all(not (repo / rel).exists() for rel in meta.extra["hidden_references"])
    hidden = {dataset.get(m.index).extra["paper"]: dataset.get(m.index).extra["hidden_references"]
              for m in dataset.select(None)}
    assert hidden["hyla"] == ["attention_ref.py"] and hidden["llm-sci-use"] == ["src/MLE_ref.py"]


@pytest.mark.slow
@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the ResearchCodeBench sample (../shared/rcb_pset_sample) is absent")
def test_sample_derivation_with_the_index_stubs_meltingpot(tmp_path, capsys):
    out = tmp_path / "rcb"
    assert import_main(["--pset", str(SAMPLE), "--out", str(out), "--papers", "advantage-alignment,DyT"]) == 0
    dataset = DatasetManager(out)
    stubs = {dataset.get(m.index).extra["paper"]: dataset.get(m.index).extra["stubs"] for m in dataset.select(None)}
    assert list(stubs["advantage-alignment"]) == ["meltingpot"] and stubs["DyT"] == {}
    constraints = (out / "requirements" / "rcb_constraints.txt").read_text()
    assert "torch==" in constraints and "torchvision==" in constraints
