"""A results folder in the contract's format for the plot and report tests.

Two models, fixed levels 0 and 2 plus a dynamic run starting at level 0, three
runnable tasks; records carry our keys (status, digest, feedback, usage,
actions, ``code_calls``, the feedback conversation). One run also holds a
release-format pickle (release keys only), a corrupt file, and a missing task;
the final code of one turn is hostile HTML.
"""
from __future__ import annotations

import json
import pickle
from html.parser import HTMLParser
from pathlib import Path

from tests.metrics_helpers import turn, write_dataset
from result_files import run_folder_name

MODEL = "org/model-a"
SECOND = "vendor/model-b"
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'
INIT = "import numpy as np\n"
SYSTEM_PROMPT = "You implement one file of a research repository. Tools: READ, REPLACE, SUBMIT."
FEEDBACK_SYSTEM = "You are the researcher who wrote the paper; review the attempt."
CORRUPT_TASK, MISSING_TASK, RELEASE_TASK = 3, 2, 2


def usage(tokens_in: int, tokens_out: int, cost: float | None) -> dict:
    return {"provider": "scripted", "model": "m", "input_tokens": tokens_in, "output_tokens": tokens_out,
            "cached_tokens": 0, "reasoning_tokens": 0, "latency_sec": 0.0, "cost_usd": cost, "from_cache": False}


def our_turn(number: int, task: int, level: int, code: str, *, solved: bool, feedback: str = "") -> dict:
    """A full per-turn record: release keys plus every key of ours."""
    failures = 0 if solved else 1
    record = turn(number, tests=2, failures=failures, code=code, status="passed" if solved else "failed")
    record["execution_result"].update(
        status=record["status"], test_summary={"test.py::test_a": True, "test.py::test_b": solved},
        failure_messages=[] if solved else ["test_b: AssertionError: <mismatch & 'quotes'>"],
    )
    record.update(
        task_index=task, guidance_level=level, feedback_text=feedback, wall_time_sec=1.5,
        feedback_items=[{"interface": "f()", "category": "T2", "description": "wrong axis", "analysis": "sum over 0",
                         "actionable_feedback": "use axis=1", "direct_code_feedback": "x.sum(axis=1)"}]
        if feedback else [],
        test_digest=f"Status: {record['status']}. Tests run: 2\nPASS test_a\n{'PASS' if solved else 'FAILED'} test_b",
        code_usage=[usage(1000, 200, 0.01)], feedback_usage=[usage(500, 100, 0.002)] if feedback else [],
        code_cost_usd=0.01, feedback_cost_usd=0.002 if feedback else 0.0, feedback_source="llm",
        feedback_error=None,
        actions=[{"step": 1, "action": "REPLACE", "argument": "```python ...```", "ok": True},
                 {"step": 2, "action": "SUBMIT", "argument": "", "ok": True}],
        code_interaction_history=[{"role": "user", "content": f"prompt of turn {number}", "kind": "step"},
                                  {"role": "assistant", "content": f"reflect: try {number}\naction: SUBMIT",
                                   "kind": "step"}],
    )
    history = record["code_interaction_history"]
    record["code_calls"] = [{"purpose": "step", "step": 1, "answer": history[1]["content"],
                             "messages": [{"role": "system", "content": SYSTEM_PROMPT}, history[0]],
                             "usage": {**usage(1000, 200, 0.01), "latency_sec": 2.5, "purpose": "step"},
                             "params": {"temperature": 0, "top_p": 1}}]
    if feedback:
        record["feedback_conversation"] = [
            {"role": "system", "content": FEEDBACK_SYSTEM},
            {"role": "user", "content": f"review turn {number}: tests {record['test_digest']}"},
            {"role": "assistant", "content": '{"feedbacks": [{"category": "T2", "description": "wrong axis"}]}'}]
    return record


def trajectory(task: int, level: int, solve_at: int | None, turns: int = 3, final_code: str = "") -> list[dict]:
    """Turns 0..n-1, solved at ``solve_at`` (then stopping); code changes every turn."""
    last = solve_at if solve_at is not None else turns - 1
    records = []
    for number in range(last + 1):
        code = f"{INIT}def f(x):\n    return x.sum(axis={number})\n"
        solved = number == solve_at
        feedback = "" if solved or level == 0 or number == last else f"Description: wrong axis (turn {number})"
        records.append(our_turn(number, task, level, code, solved=solved, feedback=feedback))
    if final_code:
        records[-1]["final_code"] = final_code
    return records


def write_run(result_dir: Path, model: str, guidance_type: str, level: int, tasks: dict[int, object]) -> Path:
    folder = result_dir / run_folder_name("memory_agent", model, guidance_type, level)
    folder.mkdir(parents=True, exist_ok=True)
    for task, content in tasks.items():
        data = content if isinstance(content, bytes) else pickle.dumps(content, protocol=4)
        (folder / f"task_{task}_result.pkl").write_bytes(data)
        (folder / f"task_{task}_state.json").write_text(json.dumps({"finished": True, "error": None}))
    return folder


def build_results(root: Path) -> tuple[Path, Path]:
    """(dataset dir, result dir) of the scenario described in the module docstring."""
    dataset = write_dataset(root / "dataset", {1: 2, 2: 2, 3: 2}, {1: "x = 1\n", 2: "x = 2\n", 3: "x = 3\n"})
    rows = [json.loads(line) for line in (dataset / "annotation_meta.jsonl").read_text().splitlines()]
    (dataset / "annotation_meta.jsonl").write_text("".join(json.dumps({**row, "init_content": INIT}) + "\n"
                                                          for row in rows))
    results = root / "results"
    release = [turn(0, tests=2, failures=1), turn(1, tests=2, failures=1, code="def f(x):\n    return 0\n")]
    folder = write_run(results, MODEL, "fixed", 0, {1: trajectory(1, 0, None, final_code=HOSTILE),
                                                    RELEASE_TASK: release, CORRUPT_TASK: b"not a pickle"})
    (folder / f"task_{RELEASE_TASK}_state.json").unlink()  # the release wrote no state files
    write_run(results, MODEL, "fixed", 2, {1: trajectory(1, 2, 2), 3: trajectory(3, 2, 1)})
    write_run(results, MODEL, "dynamic", 0, {1: trajectory(1, 0, 2), 3: trajectory(3, 0, None)})
    for level in (0, 2):
        write_run(results, SECOND, "fixed", level, {task: trajectory(task, level, 0) for task in (1, 2, 3)})
    record = results / "run_metadata" / "20260101-000000_1.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"command": ["python", "agent/research_code_generation.py"], "note": HOSTILE}))
    return dataset, results


class PageScan(HTMLParser):
    """Every element (tag, attributes) and the text of an HTML page, as the browser's parser sees them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def attrs(self, tag: str, name: str) -> list[str]:
        return [attrs[name] for element, attrs in self.elements if element == tag and attrs.get(name)]
