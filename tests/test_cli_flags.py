"""One spelling of every shared flag: every command's --help, and what the flags and their old spellings do."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.config import ConfigError, load_config
from agent.research_code_generation import parse_args as main_args
from metrics.cli_flags import (CONCEPTS, DATASET_DIR_HELP, LEVELS_HELP, MODEL_HELP, OUTPUT_DIR_HELP, TASK_IDS_HELP,
                               WORK_DIR_HELP, Parser, add_flag)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the TOML reader pytest itself uses there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
SHARED = {"--task-ids": TASK_IDS_HELP, "--dataset-dir": DATASET_DIR_HELP, "--work-dir": WORK_DIR_HELP,
          "--output-dir": OUTPUT_DIR_HELP, "--guidance-level": LEVELS_HELP, "--model": MODEL_HELP}
# Commands whose flag of a shared concept takes one value, so its description says so instead.
SINGLE_VALUE = {("agent/clean_test_runner.py", "--task-ids"), ("ablation/human_feedback.py", "--guidance-level"),
                ("ablation/feedback_ablation.py", "--model"), ("ablation/human_feedback.py", "--model"),
                ("ablation/step_ablition.py", "--model")}
OLD = {flag for concept in CONCEPTS.values() for flag in (*concept.old, *concept.release)}
RELEASE_SINGLE_TASK = "agent/clean_test_runner.py"  # the release's runner: --task-id N works there (SPEC 8.2)
HELP_DRIVER = """
import contextlib, io, json, runpy, sys
helps = {}
for path in sys.argv[1:]:
    sys.path.insert(0, path.rsplit("/", 1)[0])
    sys.argv = [path, "--help"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit:
            pass
    sys.path.pop(0)
    helps[path] = out.getvalue()
print(json.dumps(helps))
"""


# Files with a __main__ block that are not commands of ours: pytest's own start, inside the sandbox.
NOT_COMMANDS = {"agent/runner/pytest_guard/run_pytest.py"}


def runs_as_a_script(path: Path) -> bool:
    """The module has a top-level ``if __name__ == "__main__":`` block (a mention in a docstring is not one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
               and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__" for node in tree.body)


def commands() -> list[str]:
    """Every file of scripts/, ablation/, metrics/ and agent/ (at any depth) that runs as a command: the main
    command, the release's runner and whatever entry point a folder of agent/ gains."""
    files = [str(path.relative_to(REPO)) for folder in ("scripts", "ablation", "metrics", "agent")
             for path in sorted((REPO / folder).rglob("*.py")) if runs_as_a_script(path)]
    return [path for path in files if path not in NOT_COMMANDS]


def words(flag: str) -> tuple[str, ...]:
    """A flag's words, singular, without separators: --max-turns, --max_turn and --maxturn's are alike."""
    return tuple(word[:-1] if word.endswith("s") and len(word) > 3 else word
                 for word in flag.lstrip("-").replace("_", "-").split("-"))


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    """Each command's --help, as printed (one interpreter runs them all, at a width that never wraps)."""
    done = subprocess.run([sys.executable, "-c", HELP_DRIVER, *commands()], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "1000"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def options(help_text: str) -> list[tuple[list[str], str]]:
    """(flags, description) of each option of an argparse --help."""
    entries: list[tuple[list[str], str]] = []
    for line in help_text.splitlines():
        if re.match(r"^  -", line):
            invocation, _, description = line.strip().partition("  ")
            flags = [part.split(" ")[0] for part in invocation.split(", ")]
            entries.append((flags, description.strip()))
        elif entries and line.startswith("    "):
            entries[-1] = (entries[-1][0], f"{entries[-1][1]} {line.strip()}".strip())
    return entries


def test_every_command_prints_its_help(helps: dict[str, str]) -> None:
    assert len(helps) == len(commands()) >= 26
    empty = [path for path, text in helps.items() if "usage:" not in text]
    assert empty == []


def test_shared_flags_are_spelled_and_described_one_way(helps: dict[str, str]) -> None:
    problems = []
    for path, text in helps.items():
        entries = options(text)
        shown = {flag for flags, _ in entries for flag in flags}
        for flags, description in entries:
            for flag in set(flags) & set(SHARED):
                if flags != [flag]:
                    problems.append(f"{path}: {flag} shares its entry with {flags}")
                if not description.startswith(SHARED[flag]) and (path, flag) not in SINGLE_VALUE:
                    problems.append(f"{path}: {flag} is described as {description!r}")
        old = shown & OLD
        if old:
            problems.append(f"{path}: shows the old spelling(s) {sorted(old)}")
        if ("--dataset-dir" in shown) != ("--work-dir" in shown):
            problems.append(f"{path}: takes only one of --dataset-dir and --work-dir")
    assert problems == []


def test_one_concept_has_one_spelling_in_every_command(helps: dict[str, str]) -> None:
    """Across every command's --help: no flag shows two spellings in one entry, no two flags shown anywhere are
    spellings of one concept of the table, and no two differ only by plural, separator or case."""
    shown: dict[str, set[str]] = {}
    for path, text in helps.items():
        for flags, _ in options(text):
            long = [flag for flag in flags if flag.startswith("--")]
            assert len(long) == 1, f"{path}: one entry with several spellings {long}"
            shown.setdefault(long[0], set()).add(path)
    problems = []
    for concept in CONCEPTS.values():
        for old in set(concept.old + concept.release) & set(shown):
            problems.append(f"{old} (in {sorted(shown[old])}) is a second spelling of {concept.flag}")
    by_words: dict[tuple[str, ...], set[str]] = {}
    for flag in shown:
        by_words.setdefault(words(flag.lower()), set()).add(flag)
    problems += [f"one concept, several spellings: {sorted(flags)}" for flags in by_words.values() if len(flags) > 1]
    assert problems == []


def test_every_old_spelling_is_accepted_with_a_note_or_as_the_release_s(capsys: pytest.CaptureFixture) -> None:
    """Each alias of the table sets what its canonical flag sets; ours say so on stderr in one line."""
    for concept in CONCEPTS.values():
        for old, noted in [(flag, True) for flag in concept.old] + [(flag, False) for flag in concept.release]:
            parser = Parser(prog="cmd")
            add_flag(parser, concept.flag, release=True, dest="value")
            assert parser.parse_args([old, "X"]).value == "X"
            note = f"note: {old} is deprecated; use {concept.flag}\n"
            assert capsys.readouterr().err == (note if noted else ""), old


def test_console_scripts_are_commands_the_flag_test_walks() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    walked = {path.removesuffix(".py").replace("/", ".") for path in commands()}
    assert {target.split(":")[0] for target in scripts.values()} <= walked


def test_the_shared_flags_are_where_tasks_and_datasets_are_chosen(helps: dict[str, str]) -> None:
    def flags(path: str) -> set[str]:
        return {flag for names, _ in options(helps[path]) for flag in names}

    main = flags("agent/research_code_generation.py")
    assert {"--output-dir", "--task-ids", "--guidance-level", "--max-turn", "--model", "--dataset-dir",
            "--work-dir"} <= main
    for path in ("scripts/manage_envs.py", "scripts/verify_envs_via_test_sh.py", "metrics/metric_cost.py",
                 "metrics/all_metrics.py", "scripts/analyze_results.py", "scripts/report.py"):
        assert {"--task-ids", "--dataset-dir", "--work-dir"} <= flags(path), path
    for path in ("metrics/all_metrics.py", "scripts/analyze_results.py", "scripts/export.py",
                 "metrics/metric_scaled_pass.py"):
        assert {"--output-dir", "--guidance-level", "--model", "--evaluation-setting"} <= flags(path), path
    assert "--per-turn" not in flags("scripts/cost_report.py") and "--max-turn" not in flags("scripts/cost_report.py")
    assert {"--per-turn", "--max-turn"} <= flags("metrics/metric_passrate_unitest.py")
    assert "--task-ids" in flags(RELEASE_SINGLE_TASK)


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [
    ["scripts/verify_envs_via_test_sh.py"], ["scripts/manage_envs.py", "--list"], ["scripts/extract_env_map.py"],
    ["metrics/metric_cost.py"], [RELEASE_SINGLE_TASK, "--task-id", "1"],
    ["agent/research_code_generation.py", "--yaml-location", "config/offline.yaml"],
])
def test_a_work_dir_given_as_dataset_dir_is_refused_naming_the_right_flag(command: list[str]) -> None:
    done = run(*command, "--dataset-dir", "work_dir")
    assert done.returncode == 2
    assert "--dataset-dir work_dir holds dataset/, not annotation_meta.jsonl: pass it as --work-dir" in done.stderr


def test_old_and_idle_spellings_still_work_and_say_so(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    done = run("scripts/cost_report.py", "--result-dir", str(results), "--tasks", "1,2", "--per-turn",
               "--max-turns", "3")
    assert "note: --result-dir is deprecated; use --output-dir" in done.stderr
    assert "note: --tasks is deprecated; use --task-ids" in done.stderr
    assert "note: --per-turn is ignored (this script has no per-turn table) and will be removed" in done.stderr
    assert "note: --max-turns is ignored" in done.stderr
    assert done.returncode == 2 and "no 'memory_agent_*" in done.stderr  # the run goes on to its own check
    done = run("scripts/extract_env_map.py", "--ref-dataset-dir", "work_dir/dataset")  # the release's spelling
    assert done.returncode == 0 and json.loads(done.stdout)["1"] and "note:" not in done.stderr


def test_task_ids_take_commas_and_spaces_the_same_way() -> None:
    both = [main_args(["--task-ids", *words])[1]["task-ids"] for words in (["1,2", "3"], ["1", "2", "3"], ["1,2,3,2"])]
    assert both == [[1, 2, 3]] * 3
    with pytest.raises(SystemExit):
        main_args(["--task-ids", "one"])


def test_the_main_command_overrides_the_yaml(tmp_path: Path) -> None:
    _, overrides = main_args(["--yaml-location", "config/offline.yaml", "--task-ids", "2", "5",
                              "--guidance-level", "0,3", "--output-dir", str(tmp_path / "out dir"),
                              "--model", "scripted-coder", "--work-dir", str(REPO / "work_dir")])
    cfg = load_config(REPO / "config/offline.yaml", overrides)
    assert cfg.task_ids == (2, 5) and cfg.guidance_levels == (0, 3)
    assert cfg.output_dir == tmp_path / "out dir" and [m.model for m in cfg.models] == ["scripted-coder"]
    assert cfg.work_dir == REPO / "work_dir" / "dataset"
    assert load_config(REPO / "config/offline.yaml", main_args([])[1]).guidance_levels == (0, 1, 2, 3, 4)


def test_model_picks_entries_of_a_models_list(tmp_path: Path) -> None:
    script = str(REPO / "config/scripted/code_model.yaml")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "models": [{"model": "coder-a", "api-provider": "scripted", "script": script},
                   {"model": "coder-b", "api-provider": "scripted", "script": script, "temperature": 0.5}],
        "guidance-level": 0, "work-dir": str(REPO / "work_dir"), "output-dir": str(tmp_path / "out")}))
    cfg = load_config(path, main_args(["--model", "coder-b"])[1])
    assert [(m.model, m.temperature) for m in cfg.models] == [("coder-b", 0.5)]
    with pytest.raises(ConfigError, match="model 'coder-c' is not among its 'models' entries"):
        load_config(path, main_args(["--model", "coder-c"])[1])


def test_docs_cli_table_is_the_table_of_concepts() -> None:
    """docs/cli.md has one row per concept: its flag, and every spelling that flag replaced."""
    rows = [line for line in (REPO / "docs" / "cli.md").read_text().splitlines() if line.startswith("| ")][1:]
    assert len(rows) == len(CONCEPTS)
    for row, concept in zip(rows, CONCEPTS.values()):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] == f"`{concept.flag}`", row
        assert re.findall(r"`(--[\w-]+)`", cells[2]) == [*concept.old, *concept.release], row


def test_the_main_command_takes_the_old_spellings_the_readme_promised(capsys: pytest.CaptureFixture) -> None:
    _, overrides = main_args(["--tasks", "1,2", "--levels", "0", "--max-turns", "3", "--models", "a,b",
                              "--guidance-levels", "2"])
    assert overrides["task-ids"] == [1, 2] and overrides["guidance-level"] == [2] and overrides["max-turn"] == 3
    assert overrides["model"] == ["a", "b"]
    notes = capsys.readouterr().err.splitlines()
    assert notes == ["note: --tasks is deprecated; use --task-ids", "note: --levels is deprecated; use --guidance-level",
                     "note: --max-turns is deprecated; use --max-turn", "note: --models is deprecated; use --model",
                     "note: --guidance-levels is deprecated; use --guidance-level"]
