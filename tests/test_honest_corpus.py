"""The honest corpus (docs/honest_corpus.md): built from pinned real packages, graded through the real runner.

The default suite builds and grades a two-package slice whose real sdists are
committed (tests/fixtures/honest_corpus), in this interpreter; the slow test
builds the whole pinned corpus with its own environments and is the
acceptance criterion of issue 29: every task whose tests pass bare is graded
``passed`` with the guard on and the sandbox required, on both halves.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from agent.runner.core import RunnerOptions, run_candidate
from agent.runner.sandbox import bwrap_problem
from agent.runner.verdict import parse_junit
from scripts import build_honest_corpus, grade_honest_corpus
from scripts.honest_corpus import (
    COLLECT, MANIFEST, BareRun, CorpusError, bare_outcome, bare_pytest, collected_names, drop_dangling_links,
    load_manifest, stable_names,
)
from tests.runner_testlib import CANONICAL, TEST_CASES, make_task

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "honest_corpus"
needs_sandbox = pytest.mark.skipif(bool(bwrap_problem()), reason=f"bubblewrap unusable: {bwrap_problem()}")
_TOTAL = re.compile(r"^(dev|heldout|all): (\d+)/(\d+) passed \((\d+) tests\)$", re.M)


def totals(out: str) -> dict[str, tuple[int, int, int]]:
    return {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in _TOTAL.finditer(out)}


# Every package whose verdicts have been seen and tuned on (the first dev half and the first five held-out halves):
# development material for good. A held-out package joins this list once its results have been looked at.
TUNED_ON = {"cachetools", "boltons", "toolz", "humanize", "quantities", "pytorch_optimizer", "python-dateutil", "glom",
            "more-itertools", "packaging", "funcy", "attrs", "tabulate", "uncertainties", "semver", "parse",
            "inflection", "torch-optimizer", "pyparsing", "opt_einsum", "pint", "traitlets", "marshmallow",
            "pyrsistent", "tenacity", "click", "diskcache", "tinydb", "transforms3d", "unyt", "mashumaro",
            "jinja2", "pygments", "typer", "fire", "dill", "autograd", "freezegun", "wrapt", "mako", "typeguard",
            "sqlparse", "docopt-ng", "blinker", "tblib", "filelock", "portalocker", "networkx", "lark", "emcee",
            "filterpy", "findiff", "mpmath", "intervaltree", "param", "python-dotenv", "simpy", "tomlkit", "voluptuous",
            "zuko", "babel", "omegaconf", "normflows", "jsonpickle", "deepdiff", "lmfit", "asteval", "inflect",
            "injector", "dogpile.cache", "croniter", "parso", "validators", "array-api-strict", "skorch",
            "pytorch-warmup", "dateparser", "timm", "linear-operator", "joblib", "optuna", "workalendar",
            "markdown", "msgpack", "simplejson", "python-box", "isodate", "emoji", "fastjsonschema", "sqlglot",
            "pyasn1",
            # the extra dev half of the night session (n-z), graded while tuning
            "natsort", "nibabel", "pathspec", "patsy", "schema", "structlog", "tensorly", "tqdm", "transitions",
            "unfoldNd", "vector", "xmltodict"}


def test_the_pinned_manifest_splits_by_package_and_meets_the_issues_sizes() -> None:
    packages = load_manifest(MANIFEST)
    halves = {half: [p for p in packages if p.half == half] for half in ("dev", "heldout")}
    assert not {p.name for p in halves["dev"]} & {p.name for p in halves["heldout"]}
    assert {p.name for p in halves["dev"]} >= TUNED_ON  # nothing seen and tuned on is held out
    assert len(halves["heldout"]) >= 8 and sum(len(p.tasks) for p in halves["heldout"]) >= 24
    assert len(packages) >= 12 and sum(len(p.tasks) for p in packages) >= 40
    assert all(re.fullmatch(r"[0-9][0-9a-z.]*", p.version) for p in packages)  # exact pins only


@pytest.mark.parametrize("change, problem", [
    (lambda data: data["packages"].append(dict(data["packages"][0], half="heldout")), "listed twice"),
    (lambda data: data["packages"][0].update(half="tuning"), "has half 'tuning'"),
    (lambda data: data["packages"][0].pop("version"), "cannot read it"),
])
def test_a_broken_manifest_is_one_line_naming_the_problem(tmp_path: Path, change, problem: str) -> None:
    data = json.loads((FIXTURE / "manifest.json").read_text())
    change(data)
    broken = tmp_path / "my manifest.json"
    broken.write_text(json.dumps(data))
    with pytest.raises(CorpusError, match=problem):
        load_manifest(broken)


def test_collected_names_are_the_junit_names() -> None:
    output = ("tests/test_a.py::TestX::test_one[1-2]\ntests/test_a.py::test_two\n"
              "tests/test_a.py::test_url[https://[::1]:80/]\n\n4 tests collected in 0.1s\n")
    assert collected_names(output) == ["test_one[1-2]", "test_two", "test_url[https://[::1]:80/]"]


@pytest.mark.parametrize("addopts", ["-ra -q", "-v", "-qq"])
def test_collection_prints_node_ids_whatever_the_packages_addopts_say(tmp_path: Path, addopts: str) -> None:
    """lark's addopts hold ``-q`` (a second ``-q`` printed only counts per file), mako's ``-v`` (the tree)."""
    dataset = make_task(tmp_path / "a package")
    (tmp_path / "a package" / "annotations" / "annotation_1" / "toy" / "pkg" / "pytest.ini").write_text(
        f"[pytest]\naddopts = {addopts}\n")
    collected = bare_pytest(dataset, 1, sys.executable, list(COLLECT), timeout_sec=120)
    assert collected_names(collected.output) == sorted(TEST_CASES), collected.output


ODD_IDS_TEST = '''\
import time

import pytest

from pkg.target import add


@pytest.mark.parametrize("text", ["http://[::1]:8329/", "2a00:1450:4001:824::200e/129", "a[b]c", "x::y[z]",
                                  "sp ace", "\\xe9t\\xe9"])
def test_ids(text):
    assert add(len(text), 0) == len(text)


@pytest.mark.parametrize("stamp", [str(time.time_ns())])
def test_clock(stamp):
    assert add(1, 1) == 2
'''


def test_names_with_brackets_and_colons_match_the_report_and_a_clock_id_is_left_out(tmp_path: Path) -> None:
    """Real pytest collects and runs a test whose ids hold ``::``, brackets, a space and non-ASCII, and one whose id
    is the clock: the builder expects exactly the names the report holds in both sessions, and the runner grades
    the task ``passed`` against them."""
    dataset = make_task(tmp_path / "odd ids", test_py=ODD_IDS_TEST)
    collected = bare_pytest(dataset, 1, sys.executable, list(COLLECT), timeout_sec=120)
    run = bare_pytest(dataset, 1, sys.executable, [], timeout_sec=120)
    names, unstable = stable_names(collected_names(collected.output), run)
    assert len(names) == 6 and "test_ids[http://[::1]:8329/]" in names and "test_ids[x::y[z]]" in names, names
    assert "test_ids[\\xe9t\\xe9]" in names and [n.partition("[")[0] for n in unstable] == ["test_clock"]
    graded = make_task(tmp_path / "graded", test_py=ODD_IDS_TEST, test_cases=tuple(names))
    result = run_candidate(graded, 1, CANONICAL, RunnerOptions(sandbox="off", timeout_sec=120))
    assert result["status"] == "passed" and not result["missing_tests"], result["failure_messages"][:3]


def test_a_skip_under_bare_pytest_keeps_the_task_out_of_the_count() -> None:
    junit = (b'<testsuites><testsuite name="pytest"><testcase classname="t" name="a"/>'
             b'<testcase classname="t" name="b"><skipped message="no"/></testcase></testsuite></testsuites>')
    assert len(parse_junit(junit)) == 2
    assert bare_outcome(BareRun(0, "", 1.0, junit)) == ("not passed (exit 0, 1 skipped)", 2)
    assert bare_outcome(BareRun(1, "", 1.0, None)) == ("not passed (exit 1)", 0)


def test_the_builder_counts_only_the_tasks_that_pass_bare() -> None:
    rows = [{"index": 1, "bare": "passed", "bare_tests": 7482}, {"index": 2, "bare": "passed", "bare_tests": 16},
            {"index": 3, "bare": "not passed (exit 0, 1 skipped)", "bare_tests": 100}]
    assert build_honest_corpus.bare_summary("heldout", rows) == \
        "heldout: 2/3 tasks pass bare (7498 tests); not counted: heldout:3"


def test_links_into_what_is_left_out_are_dropped(tmp_path: Path) -> None:
    repo = tmp_path / "a repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    (repo / "README.rst").symlink_to("doc/source/index.rst")  # tenacity's sdist: its docs are not copied
    (repo / "pkg" / "alias.py").symlink_to("mod.py")
    drop_dangling_links(repo)
    assert not (repo / "README.rst").is_symlink() and (repo / "pkg" / "alias.py").read_text() == "x = 1\n"


def _grade(index: int, verdict: str, ratio: float, suspicious: tuple[str, ...] = ()) -> grade_honest_corpus.Grade:
    return grade_honest_corpus.Grade(half="heldout", index=index, package="pkg", version="1.0", module="pkg/m.py",
                                     test_file="tests/test_m.py", tests=10, bare="passed", verdict=verdict,
                                     evidence="", bare_sec=1.0, guard_sec=ratio, off_sec=1.0,
                                     suspicious=suspicious)


def test_the_summary_names_noted_tasks_and_the_cost_against_the_issues_bound() -> None:
    grades = [_grade(1, "passed", 1.1), _grade(2, "passed", 1.3, ("a testing library's flag moved",)),
              _grade(3, "passed", 2.0), _grade(4, "tampered", 9.0)]
    lines = grade_honest_corpus.summary_lines(grades)
    assert "heldout: 3/4 passed (40 tests)" in lines
    assert "with a suspicious note (not a verdict): heldout:2" in lines
    assert any(line.startswith("guard cost (runner guard on / guard off, tasks graded passed): median 1.30x, "
                               "2/3 above 1.25x, worst 2.00x on heldout:3") for line in lines), lines


def test_a_grading_stopped_halfway_keeps_the_tasks_it_graded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hours of grading are not lost to a Ctrl-C or a killed job: the reports are rewritten after each task."""
    graded = iter([_grade(1, "passed", 1.1)])

    def grade_task(*args, **kwargs) -> grade_honest_corpus.Grade:
        try:
            return next(graded)
        except StopIteration:
            raise KeyboardInterrupt from None

    class Meta:
        index, extra = 1, {"half": "heldout", "package": "pkg"}

    monkeypatch.setattr(grade_honest_corpus, "selected", lambda *args: [(None, Meta), (None, Meta)])
    monkeypatch.setattr(grade_honest_corpus, "grade_task", grade_task)
    report, table = tmp_path / "my grades" / "g.json", tmp_path / "my grades" / "g.md"
    report.parent.mkdir()
    with pytest.raises(KeyboardInterrupt):
        grade_honest_corpus.main(["--cache-dir", str(tmp_path), "--json", str(report), "--markdown", str(table)])
    assert [(g["index"], g["verdict"], g["suspicious"]) for g in json.loads(report.read_text())] == [(1, "passed", [])]
    assert "- heldout: 1/1 passed (10 tests)" in table.read_text()
    assert sorted(p.name for p in report.parent.iterdir()) == ["g.json", "g.md"]


@needs_sandbox
def test_the_slice_builds_offline_and_grades_passed_under_the_runner(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """... and both commands say what they are doing while a step runs (a line every HEARTBEAT_SEC)."""
    monkeypatch.setattr("agent.common.progress.HEARTBEAT_SEC", 0.05)
    cache = tmp_path / "corpus cache"
    shutil.copytree(FIXTURE / "sdists", cache / "sdists")
    assert build_honest_corpus.main(["--manifest", str(FIXTURE / "manifest.json"), "--cache-dir", str(cache),
                                     "--env-backend", "current"]) == 0
    assert "still collecting and running the tests of dev task 1 (cachetools) (" in capsys.readouterr().err
    meta = [json.loads(line) for line in (cache / "dev" / "annotation_meta.jsonl").read_text().splitlines()]
    assert [row["target_file_path"] for row in meta] == ["src/cachetools/keys.py"]
    assert all(row["test_cases"] and row["init_content"] == "" for row in meta)
    assert [row["bare"] for row in meta] == ["passed"] and meta[0]["bare_tests"] >= len(meta[0]["test_cases"])
    assert (cache / "dev" / "annotations" / "annotation_1" / "cachetools" / "src" / "cachetools" / "keys.py") \
        .read_text() == ""
    capsys.readouterr()
    report = tmp_path / "grades.json"
    code = grade_honest_corpus.main(["--cache-dir", str(cache), "--env-backend", "current", "--json", str(report)])
    out, err = capsys.readouterr()
    assert re.search(r"^still grading dev:1 \(cachetools\) \(\d+ s; the runner, guard on\)$", err, re.M), err
    found = totals(out)
    assert code == 0, out
    assert found["dev"][:2] == (1, 1) and found["heldout"][:2] == (1, 1), out
    assert found["all"][2] == found["dev"][2] + found["heldout"][2] >= 50
    assert "guard cost (runner guard on / guard off, tasks graded passed): median " in out
    grades = json.loads(report.read_text())
    assert {(g["half"], g["verdict"], g["bare"]) for g in grades} == {("dev", "passed", "passed"),
                                                                      ("heldout", "passed", "passed")}


@pytest.mark.slow
@pytest.mark.corpus
@needs_sandbox
def test_every_honest_task_of_both_halves_is_graded_passed(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29's acceptance check: downloads (once) and builds the pinned corpus with its environments
    (RECODE_CORPUS_CACHE, default work_dir/corpus_cache), then grades every task."""
    cache = os.environ.get("RECODE_CORPUS_CACHE", str(build_honest_corpus.DEFAULT_CACHE))
    assert build_honest_corpus.main(["--cache-dir", cache]) == 0
    capsys.readouterr()
    grade_honest_corpus.main(["--cache-dir", cache, "--json", str(Path(cache) / "grades.json")])
    out = capsys.readouterr().out
    with capsys.disabled():  # the table and the per-half `K/N passed (T tests)` lines, also when it passes
        print(out)
    found = totals(out)
    assert found["all"][1] >= 40 and found["all"][2] >= 2000, out
    assert found["heldout"][1] >= 24 and found["heldout"][2] >= 3000, out
    for half in ("dev", "heldout"):
        passed, tasks, _ = found[half]
        assert passed == tasks, f"{half}: {passed}/{tasks} passed\n{out}"
