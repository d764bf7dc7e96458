"""``recode-export --format inspect``: the logs are read back by the real Inspect package (optional extra)."""
from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metrics_helpers import REPO
from tests.report_helpers import HOSTILE, MODEL, SYSTEM_PROMPT, build_results
from tests.synthetic_run import write_run
from result_files import run_folder_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the TOML reader pytest itself uses there
    import tomli as tomllib

log_api = pytest.importorskip("inspect_ai.log", reason="the Inspect export needs the optional extra inspect_ai "
                                                      "(pip install inspect_ai)")


def export(results: Path, dataset: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/export.py", "--format", "inspect", "--output-dir", str(results),
                           "--dataset-dir", str(dataset), "--out", str(out), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_run_read_back_by_inspect(tmp_path: Path) -> None:
    results, dataset = tmp_path / "my results" / "res", tmp_path / "ds"       # a path with a space, as users have
    write_run(results, dataset, tasks=3, levels=[0, 2], turns=4, model="org/gpt-x", paper_chars=6_000)
    done = export(results, dataset, tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    assert "2 Inspect log(s)" in done.stdout and "covers: max-turn 4 (from the run records): Recall@4" in done.stderr
    folder = results / run_folder_name("memory_agent", "org/gpt-x", "fixed", 2)
    log = log_api.read_eval_log(str(tmp_path / "logs" / f"recode-h_{folder.name}.eval"))
    assert log.status == "success" and log.eval.task == "recode-h" and log.eval.model == "org_gpt-x"
    assert log.eval.task_args == {"setting": "memory_agent", "guidance_type": "fixed", "guidance_level": 2,
                                  "max_turn": 4}
    assert [sample.id for sample in log.samples] == [1, 2, 3]
    solved = []
    for sample in log.samples:
        turns = pickle.loads((folder / f"task_{sample.id}_result.pkl").read_bytes())
        calls = [call for turn in turns for call in turn["code_calls"]]
        # messages: the system prompt once, then each call's request and answer, tagged with turn and step
        assert [m.role for m in sample.messages] == ["system"] + ["user", "assistant"] * len(calls)
        assert sample.messages[0].text == calls[0]["messages"][0]["content"]
        assert [m.text for m in sample.messages[1::2]] == [c["messages"][1]["content"] for c in calls]
        assert [m.text for m in sample.messages[2::2]] == [c["answer"] for c in calls]
        assert sample.messages[-1].metadata == {"turn": len(turns) - 1, "step": 3, "purpose": "step"}
        # scores as the report's tables: solved within max-turn, best test-case pass rate
        first = next((t["turn_number"] for t in turns if t["status"] == "passed"), None)
        assert sample.scores["solved"].value == (1.0 if first is not None else 0.0)
        best = max(t["execution_result"]["tests"] - t["execution_result"]["failures"] for t in turns) / 10
        assert sample.scores["test_case_pass_rate"].value == pytest.approx(best)
        solved.append(sample.scores["solved"].value)
        # usage: the code model's and the feedback model's tokens and dollars
        code = [u for t in turns for u in t["code_usage"]]
        feedback = [u for t in turns for u in t["feedback_usage"]]
        assert sample.role_usage["code"].input_tokens == sum(u["input_tokens"] for u in code)
        assert sample.role_usage["code"].total_cost == pytest.approx(sum(u["cost_usd"] for u in code))
        if feedback:
            assert sample.role_usage["feedback"].output_tokens == sum(u["output_tokens"] for u in feedback)
        assert sample.model_usage["gpt-x"].input_tokens == sum(u["input_tokens"] for u in code + feedback)
        assert sample.output.completion == turns[-1]["final_code"]
        assert [t["turn"] for t in sample.metadata["per_turn"]] == list(range(len(turns)))
    means = {score.name: score.metrics["mean"].value for score in log.results.scores}
    assert means["solved"] == pytest.approx(sum(solved) / 3)
    assert log.stats.role_usage["code"].input_tokens == sum(s.role_usage["code"].input_tokens for s in log.samples)


def test_release_records_and_hostile_text_export(tmp_path: Path) -> None:
    """The report's scenario: records with code_calls, a release-format pickle, a corrupt file, hostile code."""
    dataset, results = build_results(tmp_path)
    done = export(results, dataset, tmp_path / "logs", "--model", MODEL, "--guidance-type", "fixed")
    assert done.returncode == 0, done.stderr
    log = log_api.read_eval_log(str(tmp_path / "logs" / f"recode-h_{run_folder_name('memory_agent', MODEL, 'fixed', 0)}.eval"))
    by_id = {sample.id: sample for sample in log.samples}
    assert sorted(by_id) == [1, 2]                                   # task 3 is corrupt, so not exported
    ours, release = by_id[1], by_id[2]
    assert ours.messages[0].text == SYSTEM_PROMPT and ours.output.completion == HOSTILE
    assert release.messages == [] and release.model_usage[MODEL].input_tokens == 200    # 100 per release turn
    assert release.scores["solved"].value == 0.0


def test_user_errors_and_the_console_script(tmp_path: Path) -> None:
    done = export(tmp_path / "nowhere", tmp_path, tmp_path / "logs")
    assert done.returncode == 2 and done.stderr.strip().startswith("error: results folder")
    assert "Traceback" not in done.stderr
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["recode-export"] == "scripts.export:main"
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("inspect_ai") for req in extras["inspect"])


def test_the_readme_s_command_without_dataset_dir(tmp_path: Path) -> None:
    """``python scripts/export.py --format inspect --output-dir experiment_results`` from a checkout-like folder
    (a path with a space): the dataset is the default work_dir/dataset, as --help says (was a TypeError)."""
    home = tmp_path / "my checkout"
    write_run(home / "experiment_results", home / "work_dir" / "dataset", tasks=2, levels=[0], turns=2, model=MODEL,
              paper_chars=1_000)
    for flag in ("--output-dir", "--result-dir"):
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "export.py"), "--format", "inspect", flag,
                               "experiment_results"], cwd=home, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "1 Inspect log(s) in experiment_results/inspect_logs" in done.stdout
        assert ("note: --result-dir is deprecated; use --output-dir" in done.stderr) == (flag == "--result-dir")
