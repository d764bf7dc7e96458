"""Long sweeps on one output folder: several runs at once do each job once (claims), a run killed mid-way is
taken over, a changed configuration is refused before anything is touched, and raising max-turn extends the
unsolved finished trajectories to what a run with the higher max-turn writes. All through the main command,
against local OpenAI-compatible servers that count every call."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.fake_providers import FakeProvider
from tests.run_support import (
    SOLVE_AT, STANDARD_RUN, results, run_cli, scripted_responder, start_cli, wait_for, write_config, write_scripts,
)

pytestmark = pytest.mark.slow  # several main commands on one folder

SLOW_ANSWERS = 0.3  # seconds per call: runs started together overlap for several seconds


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> tuple[Path, Path]:
    return write_scripts(tmp_path_factory.mktemp("scripts"), SOLVE_AT, latency=SLOW_ANSWERS)


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[Path, Path]:
    return write_scripts(tmp_path_factory.mktemp("quick"), SOLVE_AT)


class Servers:
    """A code and a feedback server answering as the scripts do, counting calls."""

    def __init__(self, scripts: tuple[Path, Path]) -> None:
        self.coder = FakeProvider("openai", scripted_responder(scripts[0]))
        self.researcher = FakeProvider("openai", scripted_responder(scripts[1]))

    def __enter__(self) -> Servers:
        self.coder.__enter__()
        self.researcher.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.researcher.__exit__(*exc)
        self.coder.__exit__(*exc)

    @property
    def calls(self) -> int:
        return len(self.coder.requests) + len(self.researcher.requests)

    def config(self, path: Path, scripts: tuple[Path, Path], output: Path, **keys: object) -> Path:
        return write_config(path, scripts, output, **{
            **STANDARD_RUN, "api-provider": "openai", "model": "gpt-5-mini", "base-url": self.coder.base_url,
            "human-api-provider": "openai", "human-agent-model": "gpt-5-mini",
            "human-base-url": self.researcher.base_url, **keys})


def finish(process) -> tuple[int, str]:
    _, err = process.communicate(timeout=300)
    return process.returncode, err


def test_runs_sharing_a_folder_make_the_calls_of_one_run_and_its_records(tmp_path: Path, scripts) -> None:
    with Servers(scripts) as alone:
        assert run_cli(alone.config(tmp_path / "alone.yaml", scripts, tmp_path / "alone")).returncode == 0
    with Servers(scripts) as shared:
        config = shared.config(tmp_path / "shared.yaml", scripts, tmp_path / "shared run")
        runs = [start_cli(config) for _ in range(2)]
        ended = [finish(run) for run in runs]
        assert [rc for rc, _ in ended] == [0, 0], ended
        assert shared.calls == alone.calls
    assert results(tmp_path / "shared run") == results(tmp_path / "alone")
    assert any("run by another process" in err for _, err in ended), "the two runs never met on a job"


def test_a_run_killed_mid_job_is_taken_over_by_the_others(tmp_path: Path, scripts) -> None:
    with Servers(scripts) as alone:
        assert run_cli(alone.config(tmp_path / "alone.yaml", scripts, tmp_path / "alone")).returncode == 0
    with Servers(scripts) as shared:
        output = tmp_path / "shared"
        config = shared.config(tmp_path / "shared.yaml", scripts, output)
        doomed = start_cli(config)
        wait_for("*_guidance_*/task_*_state.json", output)  # it holds a job with a turn stored
        survivors = [start_cli(config) for _ in range(2)]
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.communicate(timeout=60)
        ended = [finish(run) for run in survivors]
        assert [rc for rc, _ in ended] == [0, 0], ended
    assert results(output) == results(tmp_path / "alone")


def test_a_changed_configuration_is_refused_before_anything_is_touched(tmp_path: Path, quick) -> None:
    with Servers(quick) as servers:
        output = tmp_path / "out"
        config = servers.config(tmp_path / "run.yaml", quick, output, **{"max-turn": 2})
        assert run_cli(config).returncode == 0
        before = {path: path.stat().st_mtime_ns for path in output.rglob("*") if path.is_file()}
        calls = servers.calls
        changed = servers.config(tmp_path / "changed.yaml", quick, output,
                                 **{"max-turn": 2, "human-agent-model": "gpt-5"})
        refused = run_cli(changed)
        assert refused.returncode == 2 and servers.calls == calls
        [line] = refused.stderr.strip().splitlines()
        assert 'human-agent-model "gpt-5-mini" -> "gpt-5"' in line
        assert "overwrite: true" in line and "another output-dir" in line
        assert {path: path.stat().st_mtime_ns for path in output.rglob("*") if path.is_file()} == before

        overwritten = servers.config(tmp_path / "overwrite.yaml", quick, output,
                                     **{"max-turn": 2, "human-agent-model": "gpt-5", "overwrite": True, "resume": False})
        assert run_cli(overwritten).returncode == 0 and servers.calls > calls


def test_raising_max_turn_extends_unsolved_trajectories_to_the_longer_runs(tmp_path: Path, quick) -> None:
    with Servers(quick) as servers:
        assert run_cli(servers.config(tmp_path / "long.yaml", quick, tmp_path / "long")).returncode == 0
        short = servers.config(tmp_path / "short.yaml", quick, tmp_path / "short", **{"max-turn": 2})
        assert run_cli(short).returncode == 0
        assert len(results(tmp_path / "short")["memory_agent_gpt-5-mini_feedback_fixed_guidance_2/"
                                                  "task_2_result.pkl"]) == 2
        extended = servers.config(tmp_path / "extended.yaml", quick, tmp_path / "short")
        assert run_cli(extended).returncode == 0
    assert results(tmp_path / "short") == results(tmp_path / "long")
