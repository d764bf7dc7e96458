"""The CLI: every user mistake ends with one line on stderr and a non-zero exit, never a traceback."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.models.build import PROVIDER_ENV_VARS
from agent.run.summary import REPORT_SCRIPT

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / "agent" / "research_code_generation.py"


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV_VARS}
    return {**env, "RECODE_ENV_BACKEND": "current"}


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CLI), *args], capture_output=True, text=True, cwd=cwd,
                          env=cli_env(), timeout=120)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A one-task dataset (files present; the task is never run by these tests)."""
    root = tmp_path / "dataset"
    task = root / "annotations" / "annotation_1"
    (task / "repo").mkdir(parents=True)
    (task / "repo" / "mod.py").write_text("")
    for name in ("instruction.txt", "latex.txt", "canonical.py", "test.py", "test.sh"):
        (task / name).write_text("x\n")
    row = {"index": 1, "repo_dir_name": "repo", "target_file_path": "mod.py", "if_test": True, "init_content": "",
           "test_cases": ["test_a"]}
    (root / "annotation_meta.jsonl").write_text(json.dumps(row) + "\n")
    return root


def config(tmp_path: Path, dataset: Path, **keys: object) -> Path:
    script = tmp_path / "script.yaml"
    script.write_text("rules:\n  - responses: ['reflect: done\\naction: SUBMIT']\n")
    values = {"api-provider": "scripted", "model": "coder", "script": str(script), "work-dir": str(dataset),
              "output-dir": str(tmp_path / "out"), "guidance-level": 0, **keys}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def assert_one_line_error(done: subprocess.CompletedProcess, expected: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], done.stderr


@pytest.mark.parametrize("keys, expected", [
    ({"max-turns": 3}, "unknown key 'max-turns' (did you mean 'max-turn'?)"),
    ({"task-ids": [1, 999]}, "unknown task id 999"),
    ({"api-provider": "openai", "model": "gpt-5"}, "export OPENAI_API_KEY or set 'api-key'"),
    ({"work-dir": "/nonexistent/dataset"}, "dataset not found"),
    ({"guidance-level": 9}, "'guidance-level' must be an integer from 0 to 4"),
])
def test_user_errors_are_one_line(tmp_path: Path, dataset: Path, keys: dict, expected: str) -> None:
    assert_one_line_error(run_cli("--yaml-location", str(config(tmp_path, dataset, **keys))), expected)


def test_missing_config_and_broken_task(tmp_path: Path, dataset: Path) -> None:
    assert_one_line_error(run_cli("--yaml-location", str(tmp_path / "nope.yaml")), "config file not found")
    (dataset / "annotations" / "annotation_1" / "test.sh").unlink()
    assert_one_line_error(run_cli("--yaml-location", str(config(tmp_path, dataset))), "task 1 is missing")


def test_unwritable_output_dir(tmp_path: Path, dataset: Path) -> None:
    (tmp_path / "a_file").write_text("")
    done = run_cli("--yaml-location", str(config(tmp_path, dataset, **{"output-dir": str(tmp_path / "a_file" / "out")})))
    assert_one_line_error(done, "cannot write to output-dir")


@pytest.mark.parametrize("flag, value", [("--max-workers", "0"), ("--max-turn", "0"), ("--guidance-level", "7")])
def test_bad_flag_value_is_named_as_the_flag_not_the_file(tmp_path: Path, dataset: Path, flag: str, value: str) -> None:
    path = config(tmp_path, dataset)
    done = run_cli("--yaml-location", str(path), flag, value)
    assert_one_line_error(done, f"error: {flag} must be an integer")
    assert str(path) not in done.stderr and f", got {value}" in done.stderr
    assert not (tmp_path / "out").exists()
    done = run_cli("--yaml-location", str(config(tmp_path, dataset, **{flag.lstrip("-"): int(value)})))
    assert_one_line_error(done, f"{path}: '{flag.lstrip('-')}' must be an integer")  # the file's own value


def test_the_footer_names_the_documented_report_command_and_it_runs(tmp_path: Path, dataset: Path) -> None:
    """The last line of a run is the report command docs/cli.md documents; run as printed, it reports."""
    home = tmp_path / "a home with spaces"
    home.mkdir()
    done = run_cli("--yaml-location", str(config(home, dataset, **{"max-turn": 1})), cwd=REPO)
    assert done.returncode in (0, 1), done.stderr
    footer = done.stdout.strip().splitlines()[-1]
    command = footer.removeprefix("report: ")
    assert command.startswith(f"python {REPORT_SCRIPT} --output-dir ") and footer.startswith("report: ")
    assert f"python {REPORT_SCRIPT} --output-dir experiment_results" in (REPO / "docs" / "cli.md").read_text()
    assert f"({REPORT_SCRIPT})" in done.stdout  # the table's note names the same command
    report = subprocess.run([sys.executable, *shlex.split(command)[1:], "--skip", "codebert,codebleu"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    assert (home / "out" / "report" / "index.html").is_file()
