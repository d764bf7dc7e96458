"""Confidence intervals and paired comparisons of the metrics (docs/metrics.md).

The fixture's outcomes are written from plain dicts, and the tests recompute what the intervals should be
from those dicts with their own bootstrap (stdlib ``random``, not numpy), so the checks do not go through
the code under test twice.
"""
from __future__ import annotations

import json
import math
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.metrics_helpers import MODEL, REPO, passed, run_dir, turn, write_dataset, write_outcomes, write_result
import metric_MRR
import metric_passrate_testcase
import metric_passrate_unitest
import plots
from analysis import main_analysis
from result_format import state_path
from uncertainty import bootstrap_interval, mcnemar_exact, paired_comparison, sign_flip_p_value

SECOND = "vendor/model-b"
TASKS = list(range(1, 41))
UNTRUSTED = [41, 42, 43, 44, 45, 46]
WEAK = {task: (0 if task % 5 == 0 else None) for task in TASKS}           # 8 of 40 solved, at turn 0
STRONG = {task: (task % 3 if task % 5 != 4 else None) for task in TASKS}  # 32 of 40 solved, turns 0-2


def write_untrusted(result_dir: Path, level: int) -> None:
    """Jobs whose results must not count: all tests pass, yet each is infra, reference access, tampered,
    stopped for budget or missing feedback, or stopped by a provider's request-fatal error."""
    for task, status in zip(UNTRUSTED[:3], ("infra_error", "reference_access", "tampered")):
        write_result(result_dir, level, task, [turn(0, status=status)])
    write_result(result_dir, level, UNTRUSTED[3], [passed(0, stop_reason="budget")])
    write_result(result_dir, level, UNTRUSTED[4], [passed(0, stop_reason="feedback_missing")])
    write_result(result_dir, level, UNTRUSTED[5], [passed(0)])
    state_path(run_dir(result_dir, level), UNTRUSTED[5]).write_text(
        json.dumps({"finished": False, "error": "RequestFatal: 400 the request was refused"}))


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """A: model-a weak at L0, strong at L4 (plus six untrusted jobs at L4, no file at L0); model-b weak at both.
    B: the same, except model-a is weak at L4 too and has no result for tasks 38-40 there."""
    root = tmp_path_factory.mktemp("intervals") / "two sweeps"
    dataset = write_dataset(root / "dataset", {task: 4 for task in TASKS + UNTRUSTED})
    for name, strong in (("A", STRONG), ("B", {t: WEAK[t] for t in TASKS if t < 38})):
        results = root / name
        write_outcomes(results, 0, WEAK)
        write_outcomes(results, 4, strong)
        for level in (0, 4):
            write_outcomes(results, level, WEAK, model=SECOND)
        write_untrusted(results, 4)
    return {"A": root / "A", "B": root / "B", "dataset": dataset}


def solved(outcomes: dict[int, int | None], n: int | None = None) -> dict[int, float]:
    return {task: float(first is not None and (n is None or first < n)) for task, first in outcomes.items()}


def case_rate(task: int, first: int | None) -> float:
    return 1.0 if first is not None else 1 - (1 + task % 3) / 4


def direct_bootstrap(values: list[float], resamples: int = 20_000) -> tuple[float, float, float]:
    """(2.5 %, 97.5 %) percentile and standard deviation of resampled means, with the standard library."""
    rng = random.Random(2024)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(resamples))
    average = sum(means) / resamples
    sd = math.sqrt(sum((m - average) ** 2 for m in means) / (resamples - 1))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1], sd


def args(folders: dict[str, Path], name: str = "A") -> dict:
    return {"result_dir": folders[name], "levels": (0, 4)}


def test_intervals_agree_with_a_direct_bootstrap_and_keep_the_release_values(folders) -> None:
    ids = TASKS + UNTRUSTED
    recall = metric_passrate_unitest.get_model_passrates_ci(MODEL, ids, **args(folders))
    cases = metric_passrate_testcase.get_model_passrates_ci(MODEL, ids, **args(folders),
                                                            dataset_dir=folders["dataset"])
    assert [i.value for i in recall] == metric_passrate_unitest.get_model_passrates(MODEL, ids, **args(folders))
    assert [i.value for i in cases] == metric_passrate_testcase.get_model_passrates(
        MODEL, ids, **args(folders), dataset_dir=folders["dataset"])
    expected = {
        "recall L0": (recall[0], list(solved(WEAK).values())),  # tasks 41-46 have no result file at L0
        "recall L4": (recall[1], list(solved(STRONG).values())),  # the six untrusted jobs are left out
        "cases L4": (cases[1], [case_rate(task, first) for task, first in STRONG.items()]),
    }
    for name, (interval, values) in expected.items():
        low, high, sd = direct_bootstrap(values)
        assert interval.n == len(values), name
        assert interval.value == pytest.approx(sum(values) / len(values)), name
        step = 1 / len(values) if set(values) <= {0.0, 1.0} else 0.01  # a share moves by whole tasks
        assert interval.low == pytest.approx(low, abs=step + 1e-9), name
        assert interval.high == pytest.approx(high, abs=step + 1e-9), name
        assert interval.se == pytest.approx(sd, rel=0.05), name
        assert interval.low <= interval.value <= interval.high, name
    share = 32 / 40
    assert recall[1].se == pytest.approx(math.sqrt(share * (1 - share) / 40), rel=0.05)  # binomial standard error


def test_mrr_interval_keeps_the_release_value(folders) -> None:
    intervals = metric_MRR.get_model_mmr_ci(MODEL, TASKS, **args(folders))
    assert [i.value for i in intervals] == metric_MRR.get_model_mmr(MODEL, TASKS, **args(folders))
    assert intervals[1].low < intervals[1].value < intervals[1].high


def test_the_seed_makes_intervals_reproducible(folders) -> None:
    def run(seed: int) -> list:
        return metric_passrate_testcase.get_model_passrates_ci(MODEL, TASKS, **args(folders), seed=seed,
                                                               dataset_dir=folders["dataset"])

    assert run(7) == run(7)
    assert [(i.low, i.high, i.se) for i in run(7)] != [(i.low, i.high, i.se) for i in run(8)]
    command = [sys.executable, "metrics/metric_passrate_unitest.py", "--output-dir", str(folders["A"]),
               "--dataset-dir", str(folders["dataset"]), "--guidance-level", "0,4", "--seed", "3"]
    first, second = (subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60) for _ in "ab")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout and "with 95 % interval" in first.stdout


@pytest.mark.parametrize("only_a, only_b, p_value", [
    (1, 6, 2 * (1 + 7) / 2 ** 7),   # P(X <= 1), X ~ Bin(7, 1/2), doubled: 0.125
    (0, 6, 2 / 2 ** 6),             # 0.03125: six discordant tasks all one way are enough
    (0, 5, 2 / 2 ** 5),             # 0.0625: five are not
    (3, 3, 1.0), (0, 0, 1.0),
])
def test_mcnemar_exact_against_hand_computed_binomials(only_a: int, only_b: int, p_value: float) -> None:
    assert mcnemar_exact(only_a, only_b) == pytest.approx(p_value)
    a = {task: 1.0 for task in range(only_a)} | {100 + task: 0.0 for task in range(only_b)} | {200: 1.0, 201: 0.0}
    b = {task: 0.0 for task in range(only_a)} | {100 + task: 1.0 for task in range(only_b)} | {200: 1.0, 201: 0.0}
    comparison = paired_comparison(a, b, binary=True)
    assert comparison.test.discordant == (only_a, only_b)
    assert comparison.test.p_value == pytest.approx(p_value)
    assert comparison.distinguishable == (p_value < 0.05)
    assert comparison.difference.value == pytest.approx((only_a - only_b) / len(a))


def test_sign_flip_test_against_hand_counted_assignments() -> None:
    # three tasks all better on A: of the 8 sign assignments only all-plus and all-minus reach |sum| = 1.0
    assert sign_flip_p_value([0.5, 0.25, 0.25, 0.0]) == pytest.approx(2 / 8)
    # [0.5, -0.25, 0.25]: |sum| = 0.5 is reached by 6 of the 8 (all but +0.5 with both 0.25 against it, and mirror)
    assert sign_flip_p_value([0.5, -0.25, 0.25]) == pytest.approx(6 / 8)
    assert sign_flip_p_value([0.0, 0.0]) == 1.0
    # on 0/1 outcomes the sign-flip test is McNemar's, exactly (enumerated) and within Monte Carlo error beyond
    for only_a, only_b in ((5, 1), (9, 2), (14, 6)):
        differences = [1.0] * only_a + [-1.0] * only_b
        tolerance = 0 if only_a + only_b <= 16 else 0.02
        assert sign_flip_p_value(differences) == pytest.approx(mcnemar_exact(only_a, only_b), abs=tolerance + 1e-12)
    many = [0.1 * (k % 4) - 0.05 for k in range(40)]
    assert sign_flip_p_value(many, seed=1) == sign_flip_p_value(many, seed=1)


def test_pairs_use_the_common_tasks_and_say_how_many(folders) -> None:
    a = {1: 1.0, 2: 0.0, 3: 1.0, 4: 1.0}
    b = {2: 1.0, 3: 1.0, 4: 0.0, 5: 0.0, 6: 1.0}
    comparison = paired_comparison(a, b, binary=True)
    assert (comparison.tasks.common, comparison.tasks.only_a, comparison.tasks.only_b) == (3, 1, 2)
    assert (comparison.a.value, comparison.b.value) == (2 / 3, 2 / 3)
    assert paired_comparison({1: 1.0}, {2: 1.0}, binary=True) is None
    assert bootstrap_interval([]) is None


def compare(folders: dict[str, Path], *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "scripts/analyze_results.py", "--compare", str(folders["A"]), str(folders["B"]),
               "--dataset-dir", str(folders["dataset"]), *extra]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_compare_tells_a_real_difference_from_noise(folders) -> None:
    done = compare(folders, "--format", "json")
    assert done.returncode == 0, done.stderr
    recall, cases = json.loads(done.stdout)
    assert recall["title"] == "A vs B: Recall@10 (% of tasks)"
    rows = {(row[0], row[1]): dict(zip(recall["columns"], row)) for row in recall["rows"]}
    assert set(rows) == {(m, lv) for m in ("org_model-a", "vendor_model-b") for lv in ("L0", "L4")}
    strong = rows[("org_model-a", "L4")]
    # on tasks 1-37: A solves the 30 STRONG solves, B the 7 WEAK solves; every WEAK solve is a STRONG one
    only_a = sum(1 for t in range(1, 38) if STRONG[t] is not None and WEAK[t] is None)
    assert strong["tasks"] == {"common": 37, "only_a": 3, "only_b": 0}
    assert strong["p-value (paired test)"]["discordant"] == [only_a, 0]
    assert strong["p-value (paired test)"]["p_value"] == pytest.approx(2 / 2 ** only_a)
    assert strong["A - B"]["value"] == pytest.approx(only_a / 37)
    assert strong["A - B"]["low"] > 0 and strong["verdict"] == "can be told apart at 95 %"
    for key in (("org_model-a", "L0"), ("vendor_model-b", "L0"), ("vendor_model-b", "L4")):
        assert rows[key]["A - B"]["value"] == 0 and rows[key]["p-value (paired test)"]["p_value"] == 1.0
        assert rows[key]["verdict"] == "cannot be told apart at 95 %"
    assert any("A: org_model-a L4: 40/46 tasks used, incomplete 6" in note for note in recall["notes"])
    case_rows = {(row[0], row[1]): row for row in cases["rows"]}
    assert case_rows[("org_model-a", "L4")][-1] == "can be told apart at 95 %"
    assert case_rows[("org_model-a", "L0")][-1] == "cannot be told apart at 95 %"


def test_compare_prints_values_intervals_difference_p_and_verdict(folders) -> None:
    done = compare(folders, "--model", MODEL, "--guidance-level", "4")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith(f"| {MODEL} | L4 |"))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    number = r"-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]"
    assert all(re.fullmatch(number, cell) for cell in cells[2:5]), cells
    assert cells[5] == "37 (only A 3, only B 0)"
    assert cells[6].endswith("(McNemar exact; A only 23, B only 0)")
    assert cells[7] == "can be told apart at 95 %"
    assert f"| {MODEL} | L0 |" not in done.stdout and "vendor" not in done.stdout


def test_compare_pairs_the_only_models_or_refuses_what_cannot_be_paired(folders, tmp_path: Path) -> None:
    write_outcomes(tmp_path / "C", 0, WEAK, model="third/model")
    write_outcomes(tmp_path / "D", 0, STRONG, model="fourth/model")

    def run(a: str, b: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "scripts/analyze_results.py", "--compare", a, b, "--dataset-dir",
                               str(folders["dataset"]), "--format", "json"],
                              cwd=REPO, capture_output=True, text=True, timeout=60)

    alone = run(str(tmp_path / "C"), str(tmp_path / "D"))
    assert alone.returncode == 0, alone.stderr
    row = json.loads(alone.stdout)[0]["rows"][0]
    assert row[:2] == ["third_model vs fourth_model", "L0"] and row[-1] == "can be told apart at 95 %"
    write_outcomes(tmp_path / "C", 0, WEAK, model="fifth/model")
    for a, b, message in ((str(folders["A"]), str(tmp_path / "C"), "A and B share no model"),
                          (str(folders["A"]), str(tmp_path / "nowhere"), "--compare: result folder")):
        done = run(a, b)
        assert done.returncode == 2
        assert message in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_report_and_tables_show_the_intervals(folders, tmp_path: Path) -> None:
    out = tmp_path / "report out"
    _, analysis = main_analysis("", ["--output-dir", str(folders["A"]), "--dataset-dir", str(folders["dataset"]),
                                     "--skip", "codebert,codebleu,feedback,cost", "--out", str(out)])
    titles = [table.title for table in analysis.tables()]
    assert "Recall@10 with 95 % interval (% of tasks)" in titles
    assert "Test-case pass rate, best turn, paired differences (points of % of test cases)" in titles
    index = (out / "index.html").read_text(encoding="utf-8")
    recall = metric_passrate_unitest.get_model_passrates_ci(MODEL, TASKS + UNTRUSTED, **args(folders))[1]
    shown = f"{100 * recall.value:.1f} [{100 * recall.low:.1f}, {100 * recall.high:.1f}]"
    assert shown in index and shown in (out / "tables.md").read_text(encoding="utf-8")
    assert "org_model-a: L4 vs L0" in index and "McNemar exact" in index
    assert "Recall@10 by guidance level (bars: 95 % interval)" in [plot.title for plot in analysis.plots]
    runs = analysis.sections[0].ctx.runs("org_model-a")
    series = plots.series_from_runs("org_model-a", "memory_agent", "fixed", runs, {}, 10)
    assert series.recall_interval[1] == recall  # the figure's error bar is the table's interval


SPEC = REPO.parent / "shared" / "docs" / "SPEC.md"


def published_recall() -> dict[tuple[str, str], float]:
    """The paper's Recall@10 table (% of 102 tasks) as SPEC.md gives it."""
    spec = SPEC.read_text(encoding="utf-8")
    section = spec.split("## 6. Published numbers", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in rows[0]]
    return {(row[0].strip(), level): float(value) for row in rows[1:] for level, value in zip(header[1:], row[1:])}


@pytest.mark.skipif(not SPEC.is_file(), reason="the specification (../shared/docs/SPEC.md) is absent")
def test_published_numbers_over_102_tasks_have_a_standard_error_near_4_5_points() -> None:
    published = published_recall()
    assert len(published) == 15
    solved_counts = {key: round(value * 102 / 100) for key, value in published.items()}
    assert all(abs(100 * k / 102 - published[key]) < 0.05 for key, k in solved_counts.items())  # whole tasks
    l4 = {model: bootstrap_interval([1.0] * solved_counts[(model, "L4")] + [0.0] * (102 - solved_counts[(model, "L4")]))
          for model in ("GPT-5", "DeepSeek-V3.1")}
    assert solved_counts[("GPT-5", "L4")] - solved_counts[("DeepSeek-V3.1", "L4")] == 1  # one task apart
    for interval in l4.values():
        assert 100 * interval.se == pytest.approx(4.5, abs=0.15)
        assert interval.high - interval.low > 0.15  # about +-9 points
    # however the 73 and 72 solved tasks overlap, one more task solved by A than by B is never significant
    for only_b in range(0, 30):
        assert mcnemar_exact(only_b + 1, only_b) == 1.0


def test_intervals_cover_and_tests_hold_their_level_on_simulated_sweeps() -> None:
    """The claims themselves, on seeded simulations (scripts/bench_intervals.py prints the full table)."""
    from scripts import bench_intervals

    rng = np.random.default_rng(7)
    assert 0.90 <= bench_intervals.coverage(102, 0.7, 300, 1000, rng) <= 0.99
    binary, rates = bench_intervals.false_positives(12, 1000, 200, rng)  # 12 tasks: both tests enumerate exactly
    assert binary <= 0.067 and rates <= 0.067  # 0.05 + 2.5 standard errors of a share over 1000 simulations


def test_compare_asks_which_recall_when_the_sweeps_ran_different_max_turns(folders, tmp_path: Path) -> None:
    shorter = tmp_path / "short sweep"
    shutil.copytree(folders["B"], shorter)
    (shorter / "run_metadata").mkdir()
    (shorter / "run_metadata" / "20260101-000000_1.json").write_text(json.dumps({"config": {"max_turn": 2}}))
    base = [sys.executable, "scripts/analyze_results.py", "--compare", str(folders["A"]), str(shorter),
            "--dataset-dir", str(folders["dataset"]), "--format", "json"]
    refused = subprocess.run(base, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "A was run with max-turn 10 and B with 2; pass --max-turn N" in refused.stderr
    chosen = subprocess.run(base + ["--max-turn", "2"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert chosen.returncode == 0, chosen.stderr
    recall = json.loads(chosen.stdout)[0]
    assert recall["title"] == "A vs B: Recall@2 (% of tasks)"
    row = next(row for row in recall["rows"] if row[:2] == ["org_model-a", "L4"])
    solved_by_turn_2 = solved({t: STRONG[t] for t in range(1, 38)}, 2)
    assert row[2]["value"] == pytest.approx(sum(solved_by_turn_2.values()) / 37)
