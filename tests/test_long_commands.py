"""Nothing long is silent: a step that writes nothing itself for minutes (an environment build, waiting for
another process's build, precompiling, a full sweep's report) says what it is doing at least every
HEARTBEAT_SEC, on a terminal or not. HEARTBEAT_SEC is made small here; the steps are real."""
from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

import agent.envs.cache as env_cache
from agent.task.dataset import DatasetManager
from agent.envs.cache import ensure_env, env_root, env_settings, spec_for_task
from agent.common.progress import still_running
from scripts import analyze_results, report
from tests.env_testlib import fake_builds
from tests.synthetic_run import write_run

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "work_dir" / "dataset"


@pytest.fixture(autouse=True)
def quick_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agent.common.progress.HEARTBEAT_SEC", 0.05)


def test_a_step_says_what_it_is_doing_until_it_ends() -> None:
    said: list[str] = []
    with still_running("doing the thing", said.append, "part one") as step:
        time.sleep(0.2)
        step.now("part two")
        time.sleep(0.2)
    ended = len(said)
    time.sleep(0.2)
    assert len(said) == ended  # nothing after the step
    assert re.fullmatch(r"still doing the thing \(0 s; part one\)", said[0])
    assert re.fullmatch(r"still doing the thing \(0 s; part two\)", said[-1])


def test_waiting_for_another_process_s_build_says_so_while_it_waits(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(env_cache, "gpu_present", lambda: True)  # no CPU index involved
    settings = env_settings("venv", tmp_path / "envs")
    spec = spec_for_task(DatasetManager(SAMPLE), 1, settings)
    fake_builds(monkeypatch)
    root = env_root(spec, settings)
    root.mkdir(parents=True)
    other = FileLock(str(root / "build.lock"))
    other.acquire()  # another process is building it
    said: list[str] = []
    waiter = threading.Thread(target=lambda: ensure_env(spec, settings, progress=said.append))
    waiter.start()
    time.sleep(0.4)
    other.release()
    waiter.join(timeout=60)
    assert said[0] == f"waiting for another process to finish building {spec.name} ..."
    assert said[1].startswith(f"still waiting for another process to finish building {spec.name} (0 s; its log: ")
    assert any(line.startswith(f"building environment {spec.name}") for line in said)


def test_precompiling_an_older_environment_says_so(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(env_cache, "gpu_present", lambda: True)
    settings = env_settings("venv", tmp_path / "envs")
    spec = spec_for_task(DatasetManager(SAMPLE), 1, settings)
    fake_builds(monkeypatch)
    assert ensure_env(spec, settings, progress=lambda line: None).status == "built"
    monkeypatch.setattr(env_cache, "compile_bytecode",
                        lambda python, log, env, done=None: time.sleep(0.3) or {"pytest_plugins_exit": 5})
    marker = env_root(spec, settings) / "recode_env.json"
    marker.write_text(marker.read_text().replace('"bytecode"', '"older"'))  # built before the bytecode step
    said: list[str] = []
    assert ensure_env(spec, settings, progress=said.append).status == "bytecode compiled"
    assert said[0].startswith(f"precompiling the packages of {spec.name}")
    assert said[1] == f"still precompiling {spec.name} (0 s)"


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[Path, Path]:
    results, dataset = tmp_path / "a sweep" / "results", tmp_path / "a sweep" / "dataset"
    write_run(results, dataset, tasks=4, levels=[0, 1], turns=2, model="org/model", paper_chars=200)
    return results, dataset


@pytest.mark.parametrize("command, what", [(analyze_results, "analysing the results"),
                                           (report, "writing the report")])
def test_the_report_commands_say_which_page_they_are_writing(command, what: str, sweep, monkeypatch,
                                                             capsys) -> None:
    """A full sweep's report writes thousands of trajectory pages: slowed down here, the lines name them."""
    pages = sys.modules["report_list"]
    write_page = pages.write_page
    monkeypatch.setattr(pages, "write_page", lambda *args: time.sleep(0.06) or write_page(*args))
    results, dataset = sweep
    assert command.main(["--output-dir", str(results), "--dataset-dir", str(dataset),
                         "--skip", "codebert,codebleu"]) == 0
    err = capsys.readouterr().err
    assert re.search(rf"^still {what} \(\d+ s; writing trajectory page [1-8] of 8\)$", err, re.M), err
