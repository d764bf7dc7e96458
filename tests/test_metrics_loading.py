"""Result-file loading: folder naming, safe unpickling, and the accounting of unusable files."""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from tests.metrics_helpers import MODEL, passed, run_dir, turn, write_result
from metric_aggregate import coverage_notes, summarize
from metric_passrate_unitest import solved_within
from result_files import (ResultFileError, RunSelection, discover_models, load_run, load_turns, run_folder_name,
                          safe_load_pickle)


class _RunsShell:
    """Pickles to a call of os.system, the classic way a shared pickle runs code on load."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_folder_name_follows_the_release_and_flattens_slashes() -> None:
    assert run_folder_name("memory_agent", "deepseek-ai/DeepSeek-V3.1", "fixed", 2) == (
        "memory_agent_deepseek-ai_DeepSeek-V3.1_feedback_fixed_guidance_2")


def test_builtin_values_round_trip() -> None:
    value = [{"a": {1, 2}, "b": frozenset({3}), "c": b"\x00\xff", "d": (1.5, None, True), "e": complex(1, 2)}]
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        assert safe_load_pickle(pickle.dumps(value, protocol=protocol)) == value


def test_malicious_pickle_is_refused_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = write_result(tmp_path / "res", 0, 1, [_RunsShell(marker)])
    with pytest.raises(ResultFileError, match="refused global posix.system|refused global os.system"):
        load_turns(path)
    assert not marker.exists()


@pytest.mark.parametrize("content, reason", [
    (b"not a pickle at all", "not a loadable pickle"),
    (pickle.dumps({"turns": []}), "expected a non-empty list of turn dicts, got dict"),
    (pickle.dumps([]), "got an empty list"),
    (pickle.dumps([turn(0), "turn 1"]), "turn 1 is str, expected dict"),
    (pickle.dumps([turn(0, execution_result=["x"])]), "execution_result is list"),
    (pickle.dumps([turn(0, tests="4")]), r"execution_result\['tests'\] is str"),
])
def test_unusable_pickles_say_why(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "task_1_result.pkl"
    path.write_bytes(content)
    with pytest.raises(ResultFileError, match=reason):
        load_turns(path)


def test_run_counts_missing_corrupt_and_unfinished(tmp_path: Path) -> None:
    result_dir = tmp_path / "res"
    write_result(result_dir, 0, 1, [passed(0)])
    write_result(result_dir, 0, 2, [turn(0, failures=1)])
    write_result(result_dir, 0, 3, {"not": "a list"})
    (run_dir(result_dir, 0) / "task_2_state.json").write_text(json.dumps({"finished": False, "error": None}))
    (run_dir(result_dir, 0) / "task_1_state.json").write_text(json.dumps({"finished": True, "error": None}))
    warnings: list[str] = []
    run = load_run(MODEL, 0, [1, 2, 3, 4], RunSelection(result_dir), warn=warnings.append)
    assert sorted(run.trajectories) == [1, 2]
    assert run.missing == [4]
    assert list(run.corrupt) == [3]
    assert run.unfinished == [2]
    assert run.requested == 4
    assert len(warnings) == 1 and "task_3_result.pkl" in warnings[0]


def test_infra_errors_come_from_turn_status_or_the_state_file(tmp_path: Path) -> None:
    result_dir = tmp_path / "res"
    write_result(result_dir, 0, 1, [turn(0, status="infra_error")])
    write_result(result_dir, 0, 2, [turn(0, execution_result={"tests": 0, "status": "infra_error"})])
    write_result(result_dir, 0, 3, [turn(0, status="failed")])
    write_result(result_dir, 0, 4, [turn(0, status="failed")])
    states = {4: "InfraError: task 4 turn 1: the tests could not run (env missing)",
              5: "InfraError: task 5 turn 0: the tests could not run (env missing)",
              6: "InferenceError: missing key"}
    for task_id, error in states.items():
        (run_dir(result_dir, 0) / f"task_{task_id}_state.json").write_text(
            json.dumps({"finished": False, "error": error}))
    run = load_run(MODEL, 0, range(1, 7), RunSelection(result_dir))
    assert run.infra_errors == [1, 2, 4, 5]
    assert run.missing == []
    assert run.incomplete == {1: "infra_error", 2: "infra_error", 4: "infra_error", 5: "infra_error",
                              6: "stopped by an error"}
    assert run.unfinished == []
    assert sorted(run.errors) == [4, 5, 6]


def test_models_are_discovered_per_setting_and_guidance_type(tmp_path: Path) -> None:
    result_dir = tmp_path / "res"
    for name in ("memory_agent_m1_feedback_fixed_guidance_0", "memory_agent_m_2_feedback_fixed_guidance_4",
                 "agent_m3_feedback_fixed_guidance_0", "memory_agent_m4_feedback_adaptive_guidance_0"):
        (result_dir / name).mkdir(parents=True)
    assert discover_models(RunSelection(result_dir)) == ["m1", "m_2"]
    assert discover_models(RunSelection(result_dir, setting="agent")) == ["m3"]
    assert discover_models(RunSelection(tmp_path / "absent")) == []


def test_stopped_jobs_are_incomplete_never_solved_or_unsolved(tmp_path: Path) -> None:
    """Feedback missing and budget stops (record key or state), reference access, tampering: left out of every
    average."""
    result_dir = tmp_path / "res"
    write_result(result_dir, 0, 1, [turn(0, failures=1, status="failed"), passed(1)])
    write_result(result_dir, 0, 2, [turn(0, failures=1, status="failed", stop_reason="feedback_missing")])
    write_result(result_dir, 0, 3, [turn(0, failures=1, status="failed")])
    (run_dir(result_dir, 0) / "task_3_state.json").write_text(
        json.dumps({"finished": False, "error": "budget reached", "stop_reason": "budget"}))
    write_result(result_dir, 0, 4, [turn(0, errors=4, status="reference_access")])
    write_result(result_dir, 0, 5, [turn(0, failures=1, status="failed")])
    write_result(result_dir, 0, 6, [turn(0, failures=1, status="failed", stop_reason="feedback_missing"),
                                    turn(1, failures=1, status="failed")])  # resumed and went on: complete
    (run_dir(result_dir, 0) / "task_6_state.json").write_text(json.dumps({"finished": True, "stop_reason": None}))
    write_result(result_dir, 0, 7, [turn(0, errors=4, status="tampered"), passed(1)])  # a later pass does not count
    run = load_run(MODEL, 0, range(1, 8), RunSelection(result_dir))
    assert run.incomplete == {2: "feedback_missing", 3: "budget", 4: "reference_access", 7: "tampered"}
    summary = summarize(run, solved_within(None))
    assert (summary.value, summary.scored) == (pytest.approx(1 / 3), 3)
    (note,) = coverage_notes([summary])
    assert "3/7 tasks used" in note
    assert "incomplete 4 (budget 1, feedback_missing 1, reference_access 1, tampered 1;" in note
