"""The result store and the turn record: records of builtins only, atomic rewrites, corrupt files, seeds, the
release's shapes, upgrades at load time, pass rates."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from agent.job import record as records
from agent.job import results
from agent.protocols.improved import ImprovedProtocol
from agent.job.record import Upgrade, check_builtins, make_record, pass_rate, turn_solved, usage_totals
from agent.job.results import ResultError, ResultStore
from agent.job.seeds import load_seed, save_seed, seed_path
from metrics.result_format import RECORD_KEYS, RELEASE_KEYS

IMPROVED = ImprovedProtocol(15, 10)


def upgrade(level: int | None, cases: tuple[str, ...] = ()) -> Upgrade:
    return Upgrade(level, lambda execution: IMPROVED.test_info(execution, cases), IMPROVED.feedback_text)


def record(turn: int, task: int = 3, **changes) -> dict:
    fields = {key: None for key in RECORD_KEYS}
    fields.update(task_index=task, turn_number=turn, final_code=f"x = {turn}\n", agent_memory=[],
                  execution_result={"tests": 2, "errors": 0, "failures": 1, "skipped": 0, "status": "failed",
                                    "test_summary": {"test_a": True, "test_b": False}},
                  code_usage=[{"input_tokens": 5, "output_tokens": 2, "cost_usd": 0.5}], actions=[])
    fields.update(changes)
    return make_record(**fields)


def test_records_carry_every_release_key() -> None:
    assert set(RELEASE_KEYS) <= set(record(0))
    with pytest.raises(KeyError, match="missing"):
        make_record(task_index=1, turn_number=0)
    with pytest.raises(KeyError, match="unknown"):
        make_record(**record(0), extra=1)


@pytest.mark.parametrize("bad", [Path("x"), {1.5: "float key"}, object(), [{"deep": {Path("k"): 1}}], {1, 2}])
def test_non_builtins_are_refused(bad: object) -> None:
    with pytest.raises(TypeError):
        check_builtins({"value": bad})
    with pytest.raises(TypeError):
        record(0, agent_memory=bad)


def test_saved_results_load_without_the_harness(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "run", 3)
    store.save([record(0), record(1)], finished=True)
    script = ("import pickle, sys; turns = pickle.load(open(sys.argv[1], 'rb')); "
              "assert not [m for m in sys.modules if m == 'agent' or m.startswith('agent.')]; "
              "print(len(turns), turns[1]['final_code'].strip())")
    out = subprocess.run([sys.executable, "-c", script, str(store.result_path)], capture_output=True, text=True,
                         cwd=tmp_path, check=True).stdout
    assert out.split() == ["2", "x", "=", "1"]
    assert store.state()["finished"] is True and store.state()["error"] is None


def test_a_crash_while_writing_keeps_the_previous_version(tmp_path: Path, monkeypatch) -> None:
    store = ResultStore(tmp_path, 3)
    store.save([record(0)], finished=False)
    before = store.result_path.read_bytes()

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "replace", crash)
    with pytest.raises(OSError):
        store.save([record(0), record(1)], finished=False)
    monkeypatch.undo()
    assert store.result_path.read_bytes() == before
    assert [t["turn_number"] for t in store.load()] == [0]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_corrupt_or_foreign_results_are_clear_errors(tmp_path: Path) -> None:
    store = ResultStore(tmp_path, 3)
    store.result_path.write_bytes(b"\x80\x04garbage")
    with pytest.raises(ResultError, match="corrupt.*move it away"):
        store.load()
    store.result_path.write_bytes(pickle.dumps([record(1)]))
    with pytest.raises(ResultError, match="out of order"):
        store.load()
    store.result_path.write_bytes(pickle.dumps([record(0, task=4)]))
    with pytest.raises(ResultError, match="another task"):
        store.load()
    store.result_path.write_bytes(pickle.dumps({"not": "a list"}))
    with pytest.raises(ResultError, match="not a list"):
        store.load()


def test_unreadable_state_counts_as_absent(tmp_path: Path) -> None:
    store = ResultStore(tmp_path, 3)
    assert store.state() is None
    store.state_path.write_text("{torn")
    assert store.state() is None
    store.mark(finished=False, error="InfraError: no env", turns=[record(0), record(1)])
    assert store.state()["error"] == "InfraError: no env" and store.state()["turns"] == 2


def test_set_aside_keeps_an_old_result(tmp_path: Path) -> None:
    store = ResultStore(tmp_path, 3)
    assert store.set_aside() is None
    store.save([record(0)], finished=True)
    backup = store.set_aside()
    assert backup is not None and backup.exists() and not store.result_path.exists()
    assert pickle.loads(backup.read_bytes())[0]["turn_number"] == 0


def test_seed_layout_and_validation(tmp_path: Path) -> None:
    path = seed_path(tmp_path, "org/model-x", 5)
    assert path == tmp_path / "org_model-x_task5_init.pkl"
    assert load_seed(path, "memory_agent", "improved", upgrade(None)) is None
    turn0 = record(0, task=5, code_input_tokens=[5], code_output_tokens=[2], feedback_input_token=[],
                   feedback_output_token=[], feedback_interaction_history=[], feedback_items=None)
    seed = {"setting": "memory_agent", "protocol": "improved", "feedback_model": None,
            "unclaimed_usage": [{"input_tokens": 5}], "record": turn0}
    save_seed(path, seed)
    stored = pickle.loads(path.read_bytes())
    assert isinstance(stored, list) and len(stored) == 1 and stored[0]["feedback_items"] == []
    loaded = load_seed(path, "memory_agent", "improved", upgrade(None))
    assert loaded["record"]["feedback_items"] is None and loaded["unclaimed_usage"] == [{"input_tokens": 5}]
    with pytest.raises(ResultError, match="evaluation-setting 'memory_agent', not 'baseline'"):
        load_seed(path, "baseline", "improved", upgrade(None))
    with pytest.raises(ResultError, match="protocol 'improved', not 'release'"):
        load_seed(path, "memory_agent", "release", upgrade(None))
    assert seed_path(tmp_path, "org/model-x", 5, "memory_agent") == path
    assert seed_path(tmp_path, "org/model-x", 5, "baseline") == tmp_path / "org_model-x_task5_baseline_init.pkl"
    path.write_bytes(pickle.dumps({"format": 99}))
    with pytest.raises(ResultError, match="not a turn-0 seed"):
        load_seed(path, "memory_agent", "improved", upgrade(None))


def test_release_execution_shape() -> None:
    ours = {"tests": 3, "errors": 1, "failures": 2, "skipped": 1, "status": "failed",
            "failure_messages": ["test_a: assert 1 == 2\ntrace", "test_b: boom\ntrace", "test_s: skipped why",
                                 "test_m: not in the report (expected by annotation_meta test_cases)"],
            "outcomes": {"test_a": "failure", "test_b": "error", "test_s": "skipped", "test_ok": "passed"},
            "missing_tests": ["test_m"],
            "test_summary": {"test_a": False, "test_b": False, "test_s": False, "test_ok": True, "test_m": False}}
    shaped = records.release_execution(ours)
    assert shaped["failure_messages"] == ["FAILURE in test_a: assert 1 == 2\ntrace", "ERROR in test_b: boom\ntrace",
                                          "FAILURE in test_m: not in the report (expected by annotation_meta "
                                          "test_cases)"]
    assert shaped["test_summary"] == {"test.py::test_a": False, "test.py::test_b": False, "test.py::test_s": False,
                                      "test.py::test_ok": True, "test.py::test_m": False}
    assert records.release_execution(shaped) == shaped
    session = records.release_execution({"failure_messages": ["session: the process ended"], "outcomes": {}})
    assert session["failure_messages"] == ["ERROR in session: the process ended"]


def test_a_parameter_holding_colons_gets_the_release_prefix_once() -> None:
    ours = {"failure_messages": [], "outcomes": {}, "test_summary": {"test_url[http://[::1]:8329]": True}}
    shaped = records.release_execution(ours)
    assert shaped["test_summary"] == {"test.py::test_url[http://[::1]:8329]": True}
    assert records.release_execution(shaped) == shaped


def test_a_release_record_is_upgraded_with_every_key_of_ours() -> None:
    feedback = [{"interface": "f", "category": "T2", "description": "wrong sign", "analysis": "a",
                 "actionable_feedback": "flip it", "direct_code_feedback": "return -x"}]
    release = {"task_index": 3, "turn_number": 0, "code_input_tokens": [100, 50], "code_output_tokens": [10, 5],
               "final_code": "x = 1\n", "agent_memory": [{"role": "user", "content": "m"}],
               "code_interaction_history": [], "feedback_input_token": [70], "feedback_output_token": [7],
               "feedback_interaction_history": [{"role": "user", "content": "compare"},
                                                {"role": "assistant", "content": feedback}],
               "execution_result": {"tests": 2, "errors": 0, "failures": 1, "skipped": 0,
                                    "failure_messages": ["FAILURE in test_b: assert 1 == 2"],
                                    "test_summary": {"test.py::test_a": True, "test.py::test_b": False}}}
    upgraded = upgrade(2, ("test_a", "test_b", "test_c"))(release)
    assert set(upgraded) == set(RECORD_KEYS)
    assert upgraded["status"] == "failed" and upgraded["feedback_items"] == feedback
    assert "Description: wrong sign" in upgraded["feedback_text"] and "flip it" not in upgraded["feedback_text"]
    assert "PASS test_a" in upgraded["test_digest"] and "NOT RUN test_c" in upgraded["test_digest"]
    assert upgraded["token_totals"] == {"code_input_tokens": 150, "code_output_tokens": 15,
                                        "feedback_input_token": 70, "feedback_output_token": 7}
    assert [u["input_tokens"] for u in upgraded["code_usage"]] == [100, 50]
    assert {k: upgraded[k] for k in release} == {**release, "execution_result": {
        **release["execution_result"], "status": "failed"}}
    assert upgrade(2)(upgraded) is upgraded


@pytest.mark.parametrize(
    "execution, solved, rate",
    [
        ({"status": "passed", "tests": 4, "errors": 0, "failures": 0, "skipped": 0}, True, 1.0),
        ({"status": "failed", "tests": 4, "errors": 0, "failures": 1, "skipped": 0}, False, 0.75),
        ({"status": "failed", "tests": 4, "errors": 0, "failures": 0, "skipped": 1}, False, 0.75),
        ({"status": "error", "tests": 4, "errors": 1, "failures": 0, "skipped": 0}, False, 0.0),
        ({"status": "timeout", "tests": 0, "errors": 0, "failures": 0, "skipped": 0}, False, 0.0),
    ],
)
def test_success_and_pass_rate(execution: dict, solved: bool, rate: float) -> None:
    assert turn_solved(execution) is solved
    assert pass_rate(execution, 4) == rate


def test_usage_totals_unknown_cost_is_none() -> None:
    assert usage_totals([{"input_tokens": 3, "output_tokens": 1, "cost_usd": 0.25}] * 2) == (6, 2, 0.5)
    assert usage_totals([{"input_tokens": 3, "output_tokens": None, "cost_usd": None}])[2] is None
    assert usage_totals([]) == (0, 0, 0.0)


def test_atomic_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = ResultStore(tmp_path, 1)
    for n in range(3):
        store.save([record(t, task=1) for t in range(n + 1)], finished=False)
    assert sorted(os.listdir(tmp_path)) == ["task_1_result.pkl", "task_1_state.json"]


class _Marker:
    """Unpickling an instance would call ``os.system`` (a crafted result file someone sent you)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


def test_a_result_file_that_would_run_code_is_refused_and_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    store = ResultStore(tmp_path / "run", 3)
    store.result_path.parent.mkdir()
    store.result_path.write_bytes(pickle.dumps([_Marker(marker)]))
    with pytest.raises(ResultError, match=r"not a plain result file \(refused global posix.system.*move it away"):
        store.load()
    seed = tmp_path / "m_task3_init.pkl"
    seed.write_bytes(pickle.dumps([_Marker(marker)]))
    with pytest.raises(ResultError, match="recompute the seed"):
        load_seed(seed, "memory_agent", "improved", upgrade(None))
    assert not marker.exists()
