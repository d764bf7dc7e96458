"""Shared pieces of the end-to-end run tests: scripted models that solve on cue, configs, result comparison."""
from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from agent.models.build import PROVIDER_ENV_VARS, ModelSpec
from agent.models.scripted import ScriptedModel
from agent.task.dataset import DatasetManager
from tests.fake_providers import FakeUsage, Reply, ReceivedRequest, openai_completion

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "work_dir" / "dataset"
CLI = REPO / "agent" / "research_code_generation.py"
WRONG_CODE = "def not_the_answer():\n    return None\n"
# Values that differ between two identical runs: clocks, and where the run happened.
VOLATILE_KEYS = {"wall_time_sec", "latency_sec", "duration_sec", "report_path", "output"}
TMP_PATH = re.compile(r"/tmp/[^\s'\"]+")
ADDRESS = re.compile(r"\b0x[0-9a-f]{6,}\b")


def write_scripts(folder: Path, solve_at: dict[int, int | None], latency: float = 0.0,
                  wrong_code: str = WRONG_CODE) -> tuple[Path, Path]:
    """Code model: per task, ``wrong_code`` before turn ``solve_at[task]`` and the reference from then on
    (None: never); every answer is REPLACE then SUBMIT. Feedback model: one fixed record (under both protocols'
    keys). The code model reads the turn from our improved protocol's step header: configs of
    ``write_config`` use that protocol (the run's mechanics are the same in both)."""
    dataset = DatasetManager(DATASET)
    rules: list[dict[str, Any]] = [
        {"when": "Summarise the history", "responses": ["Earlier turns replaced the file; tests failed."]},
        {"when": r"## Result of your last action \(REPLACE", "responses": ["reflect: test it\naction: SUBMIT"]},
    ]
    for task, turn in solve_at.items():
        fix = dataset.canonical(task)
        wrong = [wrong_code] * (turn if turn is not None else 1)
        rules.append({
            "when": re.escape(f"`{dataset.get(task).target_file_path}`"),
            "index-from": r"## Turn (\d+), step",
            "responses": [f"reflect: write it\naction: REPLACE\n```python\n{code}```"
                          for code in wrong + ([fix] if turn is not None else [])],
        })
    record = {"interface": "module", "category": "T2", "description": "Functions are missing.",
              "analysis": "Only a stub is defined.", "actionable_feedback": "Implement the described API.",
              "direct_code_feedback": "def f(x):\n    return x"}
    folder.mkdir(parents=True, exist_ok=True)
    code, feedback = folder / "code.yaml", folder / "feedback.yaml"
    code.write_text(yaml.safe_dump({"latency-sec": latency, "rules": rules}, sort_keys=False))
    feedback.write_text(yaml.safe_dump({"latency-sec": latency,
                                        "rules": [{"responses": [{"feedback": [record], "feedbacks": [record]}]}]}))
    return code, feedback


def write_config(path: Path, scripts: tuple[Path, Path], output: Path, **keys: Any) -> Path:
    values = {
        "api-provider": "scripted", "model": "coder", "script": str(scripts[0]),
        "human-api-provider": "scripted", "human-agent-model": "researcher", "human-script": str(scripts[1]),
        "work-dir": str(DATASET), "output-dir": str(output), "sandbox": "off", "guidance-level": 0,
        "resume": True, "protocol": "improved", **keys,
    }
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def cli_env() -> dict[str, str]:
    """This environment minus every provider key, with the current interpreter as task environment."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV_VARS}
    return {**env, "RECODE_ENV_BACKEND": "current"}


def start_cli(config: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The main command in its own session; ``env`` adds variables to :func:`cli_env`."""
    return subprocess.Popen([sys.executable, str(CLI), "--yaml-location", str(config), *flags], cwd=REPO,
                            env={**cli_env(), **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def run_cli(config: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CLI), "--yaml-location", str(config), *flags], cwd=REPO,
                          env=cli_env(), capture_output=True, text=True, timeout=300)


def wait_for(path_glob: str, root: Path, timeout: float = 60.0) -> None:
    """Block until a file matching ``path_glob`` exists under ``root``."""
    deadline = time.monotonic() + timeout
    while not any(root.glob(path_glob)):
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing matched {path_glob} under {root} within {timeout} s")
        time.sleep(0.05)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children of each of its threads, recursively)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            children = (task / "children").read_text().split() if (task / "children").exists() else []
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def _normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, str):
        return ADDRESS.sub("0x?", TMP_PATH.sub("<tmp>", value))
    return value


def results(output: Path) -> dict[str, Any]:
    """Every result pickle under ``output`` (relative path -> turns), minus timing and location fields."""
    found = {}
    for path in sorted(output.glob("*/task_*_result.pkl")):
        found[str(path.relative_to(output))] = _normalize(pickle.loads(path.read_bytes()))
    return found


SOLVE_AT = {1: 1, 2: None}  # the standard run: task 1 is solved at turn 1, task 2 never
STANDARD_RUN = {"guidance-level": [0, 2], "max-turn": 3, "task-ids": [1, 2], "max-workers": 2}
_reference: dict[str, Any] = {}


def reference_results(root: Path) -> dict[str, Any]:
    """Results of the standard run done in order (parallel-mode none); computed once per test session."""
    if not _reference:
        folder = root / "reference_run"
        scripts = write_scripts(folder / "scripts", SOLVE_AT)
        done = run_cli(write_config(folder / "run.yaml", scripts, folder / "out", **STANDARD_RUN),
                       "--parallel-mode", "none")
        assert done.returncode == 0, done.stderr
        _reference.update(results(folder / "out"))
    return _reference


def run_record(output: Path) -> dict:
    """The newest run metadata record of ``output``."""
    newest = max((output / "run_metadata").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    return json.loads(newest.read_text())


def scripted_responder(script: Path):
    """A FakeProvider responder answering like the scripted model would, over the real OpenAI protocol."""
    model = ScriptedModel(ModelSpec("scripted", "responder", script=str(script)))

    def respond(request: ReceivedRequest) -> Reply:
        completion = model.complete(request.messages)
        tokens = FakeUsage(completion.usage.input_tokens, completion.usage.output_tokens)
        return Reply(body=openai_completion(completion.text, tokens))

    return respond
