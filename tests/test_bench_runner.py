"""scripts/bench_runner.py on an imported fixture paper: every command passes, ratios and breakdown are printed."""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import pytest

from agent.task.dataset import DatasetManager
from agent.runner.phases import phase, recording
from scripts import bench_runner
from scripts.import_researchcodebench import main as import_main

PSET = Path(__file__).resolve().parent / "fixtures" / "rcb" / "pset"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "dataset"
    assert import_main(["--pset", str(PSET), "--out", str(out), "--no-resolve", "--papers", "temp-softmax"]) == 0
    return out


@pytest.mark.slow
def test_bench_prints_ratios_and_breakdown_per_paper(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = bench_runner.main(["--dataset-dir", str(dataset), "--repeats", "2", "--env-backend", "current"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("paper"))
    for column in ("a s", "b s", "c s", "b/a", "c/a", "watch %", "copy ms", "sandbox ms", "guard ms", "pytest ms",
                   "verdict ms", "cli ms", "watch ms"):
        assert column in header
    row = next(line.split() for line in lines if line.split()[:2] == ["temp-softmax", "1"])  # the table's row
    a, b, c, inloop, cli = (float(v) for v in row[2:7])
    assert 0 < a and 0 < b < c and inloop == pytest.approx(b / a, rel=0.5) and cli > inloop
    assert any(line.startswith("in-loop b / own a (median over papers):") for line in lines)
    assert any(line.startswith("CLI c / own a (median over papers):") for line in lines)
    assert any(line.startswith("guard's watch (b - w) / b (median over papers):") for line in lines)
    assert lines[0].startswith("start: load average") and lines[-1].startswith("end: load average")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_watch_share_is_counted_in_instructions_the_same_each_time(dataset: Path) -> None:
    manager = DatasetManager(dataset)
    meta = manager.runnable()[0]
    args = argparse.Namespace(env_backend="current")
    on, again, off = (bench_runner.instructions(manager, meta, args, watched) for watched in (True, True, False))
    assert off > 10**8 and on > off  # a whole interpreter and pytest; the watch adds work
    assert abs(on - again) < 0.02 * on  # what wall time on a shared machine cannot give: the same figure twice
    in_python = bench_runner.instructions(manager, meta, args, True, native=False)
    assert in_python > on  # the compiled helper makes the same watch cheaper


def test_unknown_paper_is_a_one_line_error(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_runner.main(["--dataset-dir", str(dataset), "--papers", "nope", "--env-backend", "current"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --papers: not in the dataset: nope") and "Traceback" not in err


def test_runner_phases_are_recorded_only_inside_recording() -> None:
    with phase("copy"):
        pass  # nothing records: no error, no state
    with recording() as outer:
        for _ in range(2):
            with phase("copy"):
                time.sleep(0.01)
    assert list(outer) == ["copy"] and outer["copy"] >= 0.02  # the two blocks add up
    with recording() as again:
        pass
    assert again == {}
