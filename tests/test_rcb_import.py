"""Importing ResearchCodeBench papers: layout, meta and map rows, reference handling, idempotence, errors."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.rcb.annotations import is_tag_like, split_lines
from agent.rcb.tasks import DEFAULT_TIMEOUT, adapt_test, collect_test_cases, reference_module_names
from agent.rcb.snippet import load_snippet_task
from agent.task.dataset import DatasetError, DatasetManager
from scripts.import_researchcodebench import main as import_main

REPO = Path(__file__).resolve().parents[1]
PSET = REPO / "tests" / "fixtures" / "rcb" / "pset"
SCRIPT = REPO / "scripts" / "import_researchcodebench.py"
EXPECTED_MAP = [
    ("tiny-norm", "tiny_norm/layers.py", "init params", 3),
    ("tiny-norm", "tiny_norm/layers.py", "forward", 2),
    ("tiny-norm", "tiny_norm/layers.py", "squash", 1),
    ("tiny-norm", "tiny_norm/layers.py", "affine", 1),
    ("tiny-norm", "tiny_norm/layers.py", "input check", 2),
    ("tiny-norm", "tiny_norm/layers.py", "rms", 2),
    ("temp-softmax", "softmax.py", "scale logits", 1),
    ("temp-softmax", "softmax.py", "stable exp", 2),
]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_import(out: Path, *extra: str, pset: Path = PSET) -> int:
    """Import without asking the package index (the derivation itself is covered in test_rcb_envs.py)."""
    return import_main(["--pset", str(pset), "--out", str(out), "--no-resolve", *extra])


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rcb") / "dataset"
    assert run_import(out) == 0
    return out


def test_map_rows_one_per_snippet_with_code_lines(imported):
    rows = read_jsonl(imported / "researchcodebench_map.jsonl")
    assert [(r["paper"], r["file"], r["snippet"], r["code_lines"]) for r in rows] == EXPECTED_MAP
    assert [r["index"] for r in rows] == list(range(1, 9))


def test_meta_rows_load_and_carry_paper_references(imported):
    dataset = DatasetManager(imported)
    assert [m.index for m in dataset.runnable()] == list(range(1, 9))
    meta = dataset.get(4)
    assert (meta.repo_dir_name, meta.target_file_path) == ("tiny-norm", "tiny_norm/layers.py")
    assert meta.test_cases == ("test_forward_matches_reference", "test_parameters_match_reference",
                               "test_rms_matches_reference")
    assert {k: meta.extra[k] for k in ("benchmark", "paper", "file", "snippet", "line", "context_files")} == {
        "benchmark": "researchcodebench", "paper": "tiny-norm", "file": "tiny_norm/layers.py", "snippet": "affine",
        "line": 20, "context_files": ["tiny_norm/utils.py"]}
    assert dataset.get(7).extra["context_files"] == []
    for index in range(1, 9):
        dataset.check_task(index)


def test_task_files_placeholder_and_canonical(imported):
    dataset = DatasetManager(imported)
    masked = dataset.get(4).init_content
    assert dataset.target_path(4).read_text() == masked
    lines = masked.splitlines()
    assert lines[19:21] == ['        # TODO: Implement block "affine"', "        # Approximately 1 line(s) of code."]
    assert "return z * self.gamma" not in masked and "z = np.tanh" in masked
    canonical = dataset.canonical(4)
    assert "return z * self.gamma + self.beta  # per-feature affine map" in canonical
    annotated = split_lines((PSET / "tiny-norm" / "tiny_norm" / "layers.py").read_text())
    assert canonical == "".join(line for line in annotated if not is_tag_like(line))
    assert len(split_lines(canonical)) == len(annotated) - 12
    assert dataset.latex(7).startswith("# Tempered softmax")
    instruction = dataset.instruction(4)
    for fragment in ('"affine"', "`tiny_norm/layers.py`", "line 20", "ScaledTanh.__call__", "- tiny_norm/utils.py"):
        assert fragment in instruction
    info = dataset.test_sh(4)
    assert (info.workdir, info.pythonpath_root, info.timeout, info.test_file) == ("", "", DEFAULT_TIMEOUT, "paper2code_test.py")
    assert info.env_name == dataset.get(4).extra["environment"] and info.env_name.startswith("rcb_")
    requirements = (imported / "requirements" / f"{info.env_name}.txt").read_text().splitlines()
    assert {"numpy", "pytest", "pytest-timeout"} <= set(requirements)


def test_no_tag_line_in_any_produced_file(imported):
    offenders = [str(p) for p in imported.rglob("*") if p.is_file()
                 and any(is_tag_like(line) for line in split_lines(p.read_text(errors="replace")))]
    assert offenders == []


def test_reference_copy_and_test_files_never_ship_in_the_repository(imported):
    repo = DatasetManager(imported).repo_dir(1)
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()) == [
        "tiny_norm/__init__.py", "tiny_norm/layers.py", "tiny_norm/utils.py"]
    test_py = (imported / "annotations" / "annotation_1" / "test.py").read_text()
    assert "_RECODE_FROM_CANONICAL = ('tiny_norm.layers_ref',)" in test_py
    assert test_py.index("_RecodeReferenceFinder") < test_py.index("from tiny_norm.layers import")
    assert DatasetManager(imported).get(1).extra["hidden_references"] == ["tiny_norm/layers_ref.py"]


def test_reference_that_differs_is_served_from_the_test_file(tmp_path):
    pset = tmp_path / "pset"
    shutil.copytree(PSET, pset)
    ref = pset / "temp-softmax" / "softmax_ref.py"
    ref.write_text(ref.read_text().replace("weights / weights.sum", "weights / (weights.sum"))
    ref.write_text(ref.read_text().replace("keepdims=True)\n", "keepdims=True))\n", 1))
    assert run_import(tmp_path / "ds", "--papers", "temp-softmax", pset=pset) == 0
    dataset = DatasetManager(tmp_path / "ds")
    assert not (dataset.repo_dir(1) / "softmax_ref.py").exists()
    test_py = dataset.read(1, "test.py")
    assert "_RECODE_FROM_CANONICAL = ()" in test_py and "weights / (weights.sum" in test_py


def test_reimport_replaces_rows_keeps_ids_and_other_rows(tmp_path):
    out = tmp_path / "ds"
    foreign = {"index": 1, "repo_dir_name": "r", "target_file_path": "a.py", "if_test": True, "init_content": "",
               "test_cases": ["test_a"], "method": "kept verbatim"}
    out.mkdir()
    (out / "annotation_meta.jsonl").write_text(json.dumps(foreign, indent=None, separators=(",", ":")) + "\n")
    (out / "annotations" / "annotation_1").mkdir(parents=True)
    assert run_import(out) == 0
    first = (out / "annotation_meta.jsonl").read_text()
    first_map = (out / "researchcodebench_map.jsonl").read_text()
    assert first.splitlines()[0] == json.dumps(foreign, separators=(",", ":"))
    assert [r["index"] for r in read_jsonl(out / "researchcodebench_map.jsonl")] == list(range(2, 10))
    (out / "annotations" / "annotation_5" / "stale.txt").write_text("left by an older import")
    assert run_import(out) == 0
    assert (out / "annotation_meta.jsonl").read_text() == first
    assert (out / "researchcodebench_map.jsonl").read_text() == first_map
    assert not (out / "annotations" / "annotation_5" / "stale.txt").exists()
    assert run_import(out, "--papers", "temp-softmax") == 0
    rows = read_jsonl(out / "annotation_meta.jsonl")
    assert len(rows) == 9 and len({r["index"] for r in rows}) == 9
    assert sorted(p.name for p in (out / "annotations").iterdir()) == sorted(f"annotation_{i}" for i in range(1, 10))
    assert not (out / ".rcb_import_staging").exists()


def test_start_index_and_collisions(tmp_path, capsys):
    out = tmp_path / "ds"
    assert run_import(out, "--papers", "temp-softmax", "--start-index", "100") == 0
    assert [r["index"] for r in read_jsonl(out / "annotation_meta.jsonl")] == [100, 101]
    assert run_import(out, "--papers", "tiny-norm", "--start-index", "95") == 2
    assert "task id 100 is already used" in capsys.readouterr().err
    assert len(read_jsonl(out / "annotation_meta.jsonl")) == 2


def test_broken_paper_is_a_one_line_error_and_writes_nothing(tmp_path):
    pset = tmp_path / "pset"
    shutil.copytree(PSET, pset)
    layers = pset / "tiny-norm" / "tiny_norm" / "layers.py"
    text = layers.read_text()
    layers.write_text(text.replace('    # </paper2code name="rms">\n', ""))
    start = text.splitlines().index('    # <paper2code name="rms">') + 1
    out = tmp_path / "ds"
    done = subprocess.run([sys.executable, str(SCRIPT), "--pset", str(pset), "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {layers.resolve()}:{start}: snippet 'rms' is never closed; add # </paper2code name=\"rms\">"]
    assert "Traceback" not in done.stderr
    assert not (out / "annotation_meta.jsonl").exists()


@pytest.mark.parametrize("edit, message", [
    (lambda p: (p / "papers.yaml").write_text("tiny-norm: {annotated_file_paths: missing.py}\n"),
     "file 'missing.py' not found"),
    (lambda p: (p / "temp-softmax" / "paper2code_paper.md").unlink(), "no paper2code_paper.tex or paper2code_paper.md"),
    (lambda p: (p / "papers.yaml").write_text("[1, 2\n"), "is not valid YAML"),
])
def test_bad_pset_errors(tmp_path, capsys, edit, message):
    pset = tmp_path / "pset"
    shutil.copytree(PSET, pset)
    edit(pset)
    assert run_import(tmp_path / "ds", pset=pset) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_mapping_shaped_index_and_paper_filter(tmp_path):
    pset = tmp_path / "pset"
    shutil.copytree(PSET, pset)
    (pset / "papers.yaml").write_text("temp-softmax:\n  title: T\n  annotated_file_paths: [softmax.py]\n")
    assert run_import(tmp_path / "ds", pset=pset) == 0
    assert [r["snippet"] for r in read_jsonl(tmp_path / "ds" / "researchcodebench_map.jsonl")] == [
        "scale logits", "stable exp"]


def test_collect_test_cases_statically():
    source = '''
import unittest
class Mixin:
    def test_from_mixin(self): pass
class Checks(Mixin, unittest.TestCase):
    def test_b(self): pass
    def helper(self): pass
class TestPlain:
    def test_c(self): pass
class Helper:
    def test_not_collected(self): pass
def test_a(): pass
'''
    assert collect_test_cases(source) == ["test_a", "test_b", "test_c", "test_from_mixin"]


def test_reference_module_names():
    source = "import a.b_ref\nfrom c import b_ref\nfrom d.b_ref import f\nimport importlib\n" \
             "importlib.import_module('e.b_ref')\n'''docs mention b_ref in prose'''\n"
    assert reference_module_names(source, "b_ref") == (["a.b_ref", "c.b_ref", "d.b_ref", "e.b_ref"], False)
    assert reference_module_names("open('x/b_ref.py')\n", "b_ref") == ([], True)


def test_adapted_test_keeps_future_imports_first_and_compiles():
    source = '"""Doc."""\nfrom __future__ import annotations\nimport x_ref\n'
    adapted = adapt_test(source, ["x_ref"])
    compile(adapted, "paper2code_test.py", "exec")
    assert adapted.index("from __future__") < adapted.index("_RecodeReferenceFinder") < adapted.index("import x_ref")


def test_snippet_task_reads_context_files_and_refuses_other_tasks(imported, tmp_path):
    task = load_snippet_task(DatasetManager(imported), 4)
    assert (task.block, task.file_path) == ("affine", "tiny_norm/layers.py")
    assert [path for path, _ in task.context_files] == ["tiny_norm/utils.py"]
    assert "def check_features" in task.context_files[0][1]
    row = {"index": 1, "repo_dir_name": "r", "target_file_path": "a.py", "if_test": True, "init_content": "",
           "test_cases": ["test_a"]}
    (tmp_path / "annotation_meta.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match="not a ResearchCodeBench snippet task"):
        load_snippet_task(DatasetManager(tmp_path), 1)
