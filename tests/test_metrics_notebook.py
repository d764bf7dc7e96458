"""The release's notebook calls, made as a notebook makes them.

A notebook of the release runs from the repository root, does
``sys.path.insert(0, "metrics")`` and relies on the default paths
(``work_dir/dataset``, ``experiment_results``). The folder built here has those
defaults, release-shaped result pickles written by hand (token lists, no
status, ``test.py::`` keys), and a ``metrics`` link to our metrics folder; the
calls run in a fresh interpreter with that folder as its working directory.
"""
from __future__ import annotations

import inspect
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metrics_helpers import METRICS_DIR, write_dataset
import metric_MRR
import metric_codebert
import metric_codebleu
import metric_passrate_testcase
import metric_passrate_unitest

MODEL = "gpt-4o"
CANONICAL = "def f(x):\n    return x + 1\n"


def execution(tests: int, errors: int = 0, failures: int = 0, skipped: int = 0) -> dict:
    names = [f"test_{k}" for k in range(tests)]
    bad = set(names[:errors + failures + skipped])
    return {"tests": tests, "errors": errors, "failures": failures, "skipped": skipped,
            "failure_messages": [f"FAILURE in {name}: assert 1 == 2\ntrace" for name in sorted(bad)],
            "test_summary": {f"test.py::{name}": name not in bad for name in names}}


def release_turn(task: int, number: int, result: dict, code: str = CANONICAL) -> dict:
    """A turn record with the release's keys and types only."""
    return {"task_index": task, "turn_number": number, "code_input_tokens": [100, 40], "code_output_tokens": [10, 4],
            "final_code": code, "agent_memory": "", "code_interaction_history": [], "execution_result": result,
            "feedback_input_token": [50], "feedback_output_token": [5], "feedback_interaction_history": []}


def write(folder: Path, task: int, turns: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"task_{task}_result.pkl").write_bytes(pickle.dumps(turns))


@pytest.fixture(scope="module")
def notebook_root(tmp_path_factory) -> Path:
    """Tasks 1-3 runnable (4 test cases each), task 4 not; five levels of release results.

    Every level: task 1 solved at turn 1 (turn 0 passes 2 of 4), task 2 solved at turn 0,
    task 3 errors on both turns and leaves an empty file. At level 4 our harness stopped
    task 3 because its feedback could not be produced: it is incomplete there.
    """
    root = tmp_path_factory.mktemp("notebook")
    (root / "metrics").symlink_to(METRICS_DIR, target_is_directory=True)
    write_dataset(root / "work_dir" / "dataset", {1: 4, 2: 4, 3: 4, 4: 4}, {1: CANONICAL, 2: CANONICAL},
                  not_runnable=(4,))
    for level in range(5):
        folder = root / "experiment_results" / f"memory_agent_{MODEL}_feedback_fixed_guidance_{level}"
        write(folder, 1, [release_turn(1, 0, execution(4, failures=2)), release_turn(1, 1, execution(4))])
        write(folder, 2, [release_turn(2, 0, execution(4))])
        third = [release_turn(3, 0, execution(4, errors=1), ""), release_turn(3, 1, execution(4, errors=1), "")]
        if level == 4:
            third[-1] |= {"status": "failed", "stop_reason": "feedback_missing"}
        write(folder, 3, third)
    return root


NOTEBOOK = """
import json, sys
sys.path.insert(0, "metrics")
from metric_passrate_testcase import get_model_passrates, load_task_ids_from_jsonl
import metric_passrate_unitest as unit, metric_passrate_testcase as case, metric_MRR as mrr
import metric_codebleu as bleu, metric_codebert as bert, metric_cost as cost

ids = load_task_ids_from_jsonl()
out = {
    "ids": ids, "unit_ids": unit.load_task_ids_from_jsonl(), "mrr_ids": mrr.load_task_ids_from_jsonl(),
    "testcase": get_model_passrates("gpt-4o", ids),
    "testcase_init": case.get_init_model_passrates("gpt-4o", ids),
    "testcase_turn": case.get_model_passrates_turn("gpt-4o", ids),
    "unit": unit.get_model_passrates("gpt-4o", ids),
    "unit_init": unit.get_init_model_passrates("gpt-4o", ids),
    "unit_turns": unit.get_model_passrates_turns("gpt-4o", ids),
    "pass_rates": [{str(k): v for k, v in level.items()} for level in unit.get_pass_rates("gpt-4o", ids)],
    "formatted": unit.format_passrates(unit.get_model_passrates("gpt-4o", ids)),
    "mrr": mrr.get_model_mmr("gpt-4o", ids), "mrr_init": mrr.get_init_model_mmr("gpt-4o", ids),
    "mrr_formatted": mrr.format_passrates(mrr.get_model_mmr("gpt-4o", ids)),
    "success": [mrr.eval_success({"tests": 2, "errors": 0, "failures": 0, "skipped": 0}),
                unit.eval_success({"tests": 2, "errors": 0, "failures": 0, "skipped": 1})],
    "cases": case.get_test_case_num(1), "cases_path": case.get_test_case_num(2, "work_dir/dataset/annotation_meta.jsonl"),
    "pass_num": [case.get_pass_num({"tests": 4, "errors": 0, "failures": 1, "skipped": 1}),
                 case.get_pass_num({"tests": 4, "errors": 1, "failures": 0, "skipped": 0})],
    "canonical": [bleu.read_canonical(1), bert.read_canonical(1, "work_dir"), bleu.read_canonical(2, word_dir=None)],
    "empty": bleu.get_empty_filal_code("gpt-4o", ids), "empty_bert": bert.get_empty_filal_code("gpt-4o", ids),
    "no_comments": bert.remove_codecomments("x = 1  # one\\n# alone\\ny = '#kept'\\n"),
    "code_tokens": [level["code_input"] for level in cost.get_model_costs("gpt-4o", ids)],
}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def notebook(notebook_root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", NOTEBOOK], cwd=notebook_root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_task_ids_default_to_the_release_meta_path(notebook: dict) -> None:
    assert notebook["ids"] == notebook["unit_ids"] == notebook["mrr_ids"] == [1, 2, 3]


def test_pass_rates_per_level_with_an_incomplete_task_left_out(notebook: dict) -> None:
    assert notebook["unit"] == pytest.approx([2 / 3] * 4 + [1.0])
    assert notebook["unit_init"] == pytest.approx([1 / 3] * 4 + [1 / 2])
    assert notebook["pass_rates"][0] == {"1": 1.0, "2": 1.0, "3": 0.0}
    assert notebook["pass_rates"][4] == {"1": 1.0, "2": 1.0}
    assert notebook["formatted"] == "66.7 & 66.7 & 66.7 & 66.7 & 100.0"
    curve = notebook["unit_turns"][0]
    assert len(curve) == 10 and curve[:3] == pytest.approx([1 / 3, 2 / 3, 2 / 3]) and curve[-1] == pytest.approx(2 / 3)


def test_test_case_pass_rates(notebook: dict) -> None:
    assert notebook["testcase"] == pytest.approx([2 / 3] * 4 + [1.0])
    assert notebook["testcase_init"] == pytest.approx([(0.5 + 1 + 0) / 3] * 4 + [(0.5 + 1) / 2])
    assert notebook["testcase_turn"][0][:3] == pytest.approx([0.5, 2 / 3, 2 / 3])
    assert notebook["cases"] == notebook["cases_path"] == 4
    assert notebook["pass_num"] == [2, 0]


def test_mrr_and_the_published_success_test(notebook: dict) -> None:
    assert notebook["mrr"] == pytest.approx([0.5] * 4 + [0.75])
    assert notebook["mrr_init"] == pytest.approx([1 / 3] * 4 + [0.5])
    assert notebook["mrr_formatted"] == "50.0 & 50.0 & 50.0 & 50.0 & 75.0"
    assert notebook["success"] == [True, False]


def test_canonical_files_empty_files_and_comments(notebook: dict) -> None:
    assert notebook["canonical"] == [CANONICAL] * 3
    assert notebook["empty"] == notebook["empty_bert"] == [[3], [3], [3], [3], []]
    assert notebook["no_comments"] == "x = 1\ny = '#kept'\n"


def test_release_token_lists_are_summed(notebook: dict) -> None:
    assert notebook["code_tokens"] == [140 * 5] * 5  # five turns per level; incomplete jobs cost money too


def test_read_canonical_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="annotation_9"):
        metric_codebleu.read_canonical(9, tmp_path)


@pytest.mark.parametrize("module, name, params", [
    (metric_passrate_unitest, "load_task_ids_from_jsonl", {"jsonl_path": None}),
    (metric_passrate_unitest, "get_model_passrates", {"model": inspect.Parameter.empty,
                                                      "task_ids": inspect.Parameter.empty, "result_dir": None}),
    (metric_passrate_testcase, "get_test_case_num", {"task_id": inspect.Parameter.empty, "mate_data_path": None}),
    (metric_passrate_testcase, "get_pass_num", {"exec_result": inspect.Parameter.empty}),
    (metric_codebleu, "read_canonical", {"task_id": inspect.Parameter.empty, "word_dir": None}),
    (metric_codebert, "read_canonical", {"task_id": inspect.Parameter.empty, "word_dir": None}),
    (metric_codebleu, "calculate_codebleu", {"generated": inspect.Parameter.empty,
                                             "references": inspect.Parameter.empty, "weights": (0.25,) * 4}),
])
def test_release_signatures(module, name: str, params: dict) -> None:
    signature = inspect.signature(getattr(module, name))
    leading = dict(list((p.name, p.default) for p in signature.parameters.values())[:len(params)])
    assert leading == params


@pytest.mark.parametrize("module, names", [
    (metric_passrate_unitest, ["load_task_ids_from_jsonl", "eval_success", "get_model_passrates",
                               "get_init_model_passrates", "format_passrates", "get_pass_rates",
                               "get_model_passrates_turns"]),
    (metric_passrate_testcase, ["get_test_case_num", "get_pass_num", "get_model_passrates", "get_model_passrates_turn",
                                "get_init_model_passrates", "load_task_ids_from_jsonl"]),
    (metric_MRR, ["load_task_ids_from_jsonl", "eval_success", "get_model_mmr", "get_init_model_mmr",
                  "format_passrates"]),
    (metric_codebleu, ["remove_codecomments", "calculate_codebleu", "read_canonical", "get_model_code_bleu",
                       "get_init_model_code_bleu", "get_empty_filal_code"]),
    (metric_codebert, ["remove_codecomments", "calculate_codebleu", "read_canonical", "get_model_code_bert",
                       "get_init_model_code_bert", "get_empty_filal_code"]),
])
def test_every_release_name_is_a_function_of_its_module(module, names: list[str]) -> None:
    assert [name for name in names if not callable(getattr(module, name, None))] == []


def test_calculate_codebleu_scores_one_file_or_lists() -> None:
    pytest.importorskip("codebleu", reason="optional extra codebleu not installed")
    try:
        metric_codebleu.check_codebleu()
    except metric_codebleu.ExtraUnavailable as exc:
        pytest.skip(str(exc))
    assert metric_codebleu.calculate_codebleu(CANONICAL, CANONICAL, (0.25,) * 4) == pytest.approx(1.0)
    pair = metric_codebleu.calculate_codebleu([CANONICAL], [CANONICAL.replace("+ 1", "* 2")], (0.25,) * 4)
    assert 0.0 < pair < 1.0


def test_remove_codecomments_survives_broken_code() -> None:
    assert metric_codebleu.remove_codecomments("# head\nx = '''open\n  # alone\ny = 1  # kept\n") == \
        "x = '''open\ny = 1  # kept\n"
