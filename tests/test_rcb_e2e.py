"""End to end: import the fixture papers, then run their tests through the real runner (current interpreter).

Gold passes and the placeholder fails on both papers (one target below the
paper root with package-relative imports, one at the root), a verbatim
mis-indented block fails where the re-indented one passes, the weak-test
report flags exactly the snippet the fixture's tests do not exercise, and a
candidate that imports the paper's reference module does not pass.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.runner.core import RunnerOptions, run_candidate
from agent.rcb.importer import plan_paper
from agent.rcb.pset import load_pset
from agent.rcb.snippet import complete_file, load_snippet_task
from agent.task.dataset import DatasetManager
from scripts.import_researchcodebench import main as import_main, report_weak

PSET = Path(__file__).resolve().parent / "fixtures" / "rcb" / "pset"
OPTIONS = RunnerOptions(timeout_sec=120, env_backend="current")
AFFINE, INPUT_CHECK, SCALE_LOGITS, STABLE_EXP = 4, 5, 7, 8


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> DatasetManager:
    out = tmp_path_factory.mktemp("rcb_e2e") / "dataset"
    assert import_main(["--pset", str(PSET), "--out", str(out), "--no-resolve"]) == 0
    return DatasetManager(out)


@pytest.mark.parametrize("index", [AFFINE, STABLE_EXP])
def test_gold_passes(dataset, index):
    result = run_candidate(dataset, index, dataset.canonical(index), OPTIONS)
    assert result["status"] == "passed", result["failure_messages"]
    assert sorted(result["test_summary"]) == sorted(dataset.get(index).test_cases)


def test_placeholder_fails(dataset):
    result = run_candidate(dataset, AFFINE, dataset.get(AFFINE).init_content, OPTIONS)
    assert result["status"] == "failed"
    assert result["failures"] + result["errors"] >= 1


def test_snippet_answer_verbatim_versus_reindented(dataset):
    task = load_snippet_task(dataset, AFFINE)
    answer = "The affine map:\n```python\nreturn z * self.gamma + self.beta\n```"
    verbatim = run_candidate(dataset, AFFINE, complete_file(task, answer), OPTIONS)
    reindented = run_candidate(dataset, AFFINE, complete_file(task, answer, reindent=True), OPTIONS)
    assert verbatim["status"] != "passed"
    assert reindented["status"] == "passed", reindented["failure_messages"]


@pytest.mark.slow
def test_report_weak_flags_the_untested_snippet(dataset, capsys):
    plans = {(p.file, p.snippet): p for paper in load_pset(PSET) for p in plan_paper(paper)[0]}
    chosen = [plans[("tiny_norm/layers.py", "input check")], plans[("softmax.py", "scale logits")]]
    assert [dataset.get(i).extra["snippet"] for i in (INPUT_CHECK, SCALE_LOGITS)] == [p.snippet for p in chosen]
    assert report_weak(dataset.root, [INPUT_CHECK, SCALE_LOGITS], chosen, "current", 120) == [INPUT_CHECK]
    assert "weak tests: 1 of 2" in capsys.readouterr().out


def test_candidate_importing_the_reference_module_does_not_pass(dataset):
    cheat = "from softmax_ref import tempered_softmax  # noqa: F401\n"
    result = run_candidate(dataset, STABLE_EXP, cheat, OPTIONS)
    assert result["status"] == "reference_access"
    assert "loads the reference module softmax_ref" in result["failure_messages"][0].splitlines()[0]
