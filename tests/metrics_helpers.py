"""Builders of release-format result files and datasets for the metric tests."""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
METRICS_DIR = REPO / "metrics"
if str(METRICS_DIR) not in sys.path:
    sys.path.insert(0, str(METRICS_DIR))

from result_files import run_folder_name

MODEL = "org/model-a"


def turn(number: int, *, tests: int = 4, errors: int = 0, failures: int = 0, skipped: int = 0,
         code: str = "x = 1\n", status: str | None = None, **extra: object) -> dict:
    """One per-turn record with the release keys (plus any of ours given as keyword arguments)."""
    record = {
        "task_index": 0, "turn_number": number, "code_input_tokens": 100, "code_output_tokens": 10,
        "final_code": code, "agent_memory": "", "code_interaction_history": [],
        "execution_result": {"tests": tests, "errors": errors, "failures": failures, "skipped": skipped,
                             "failure_messages": [], "test_summary": {}},
        "feedback_input_token": 50, "feedback_output_token": 5, "feedback_interaction_history": [],
    }
    if status is not None:
        record["status"] = status
    record.update(extra)
    return record


def passed(number: int, tests: int = 4, **extra: object) -> dict:
    return turn(number, tests=tests, status="passed", **extra)


def run_dir(result_dir: Path, level: int, model: str = MODEL, setting: str = "memory_agent") -> Path:
    folder = result_dir / run_folder_name(setting, model, "fixed", level)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_result(result_dir: Path, level: int, task_id: int, turns: object, model: str = MODEL) -> Path:
    path = run_dir(result_dir, level, model) / f"task_{task_id}_result.pkl"
    path.write_bytes(pickle.dumps(turns))
    return path


def write_dataset(root: Path, tasks: dict[int, int], canonical: dict[int, str] | None = None,
                  not_runnable: tuple[int, ...] = ()) -> Path:
    """A dataset folder: meta rows with ``tasks[id]`` test cases each, and the given canonical files."""
    root.mkdir(parents=True, exist_ok=True)
    rows = [{"index": i, "repo_dir_name": "repo", "target_file_path": "m.py", "if_test": i not in not_runnable,
             "init_content": "", "test_cases": [f"test_{k}" for k in range(n)]} for i, n in tasks.items()]
    (root / "annotation_meta.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    for task_id, text in (canonical or {}).items():
        folder = root / "annotations" / f"annotation_{task_id}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "canonical.py").write_text(text)
    return root


def write_outcomes(result_dir: Path, level: int, solved_at: dict[int, int | None], model: str = MODEL,
                   tests: int = 4, turns: int = 3) -> None:
    """One result file per task: solved at turn ``solved_at[id]`` (earlier turns fail one test), or never
    (``None``: ``turns`` turns failing ``1 + id % (tests - 1)`` tests, so the test-case rates vary by task)."""
    for task_id, first in solved_at.items():
        if first is None:
            failing = 1 + task_id % (tests - 1)
            records = [turn(t, tests=tests, failures=failing, status="failed") for t in range(turns)]
        else:
            records = [turn(t, tests=tests, failures=1, status="failed") for t in range(first)]
            records.append(passed(first, tests=tests))
        write_result(result_dir, level, task_id, records, model=model)
