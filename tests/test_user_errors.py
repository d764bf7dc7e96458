"""Every user error is one line naming the fix: GPUs configured but not visible, a missing dependency, an API
server that refuses connections (the line names the base-url), an unusable result file (the footer says to
move it away or overwrite, not to run the same command again)."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent.parallel.executor import ExecutorError, gpu_problem, make_executor, visible_gpus
from agent.common.setup_hint import setup_line
from agent.parallel.slots import SlotConfig
from tests.run_support import (
    CLI, REPO, SOLVE_AT, STANDARD_RUN, cli_env, run_cli, write_config, write_scripts,
)

ONE_JOB = {**STANDARD_RUN, "task-ids": [1], "guidance-level": [0], "max-turn": 2}


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(("gpus", "environ", "visible", "expected"), [
    (("0",), {}, None, "gpus ['0'] configured but GPU 0 is not visible here (no nvidia-smi, so no NVIDIA GPU); "
                       "remove 'gpus' from the config to test on CPUs, or list GPUs this machine has"),
    (("0", "1"), {}, {"0"}, "gpus ['0', '1'] configured but GPU 1 is not visible here (nvidia-smi lists ['0']); "
                            "remove 'gpus' from the config to test on CPUs, or list GPUs this machine has"),
    (("0",), {"CUDA_VISIBLE_DEVICES": "2,3"}, {"0", "1", "2", "3"},
     "gpus ['0'] configured but CUDA_VISIBLE_DEVICES='2,3' (the GPUs this process was given) excludes 0; list "
     "only those GPUs in 'gpus', or unset CUDA_VISIBLE_DEVICES"),
    (("2", "GPU-9a"), {"CUDA_VISIBLE_DEVICES": "2,GPU-9a"}, {"0", "2", "GPU-9a"}, None),
    ((), {"CUDA_VISIBLE_DEVICES": ""}, None, None),
])
def test_gpu_problem(gpus, environ, visible, expected) -> None:
    assert gpu_problem(gpus, environ, visible) == expected


@pytest.mark.skipif(visible_gpus() is not None, reason="this machine has nvidia-smi: the GPU-less case is not here")
def test_gpus_configured_without_a_gpu_stop_the_run_in_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path / "run.yaml", write_scripts(tmp_path / "s", SOLVE_AT), tmp_path / "out",
                          **ONE_JOB, gpus=[0])
    done = run_cli(config)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {gpu_problem(('0',), {}, None)}"]
    with pytest.raises(ExecutorError):
        make_executor("processes", 1, SlotConfig(gpus=("0",)))


@pytest.mark.parametrize(("entry", "module"), [
    ([str(CLI), "--yaml-location", "config/offline.yaml"], "yaml"),
    ([str(REPO / "agent" / "clean_test_runner.py"), "--help"], "junitparser"),
    ([str(REPO / "scripts" / "manage_envs.py"), "--help"], "filelock"),
])
def test_a_missing_dependency_names_the_set_up_command(tmp_path: Path, entry: list[str], module: str) -> None:
    """A core module the entry imports made unimportable (None in sys.modules: the import fails as if absent)."""
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nsys.modules[{module!r}] = None\n")
    done = subprocess.run([sys.executable, *entry], cwd=REPO, env={**cli_env(), "PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [setup_line(module)]
    assert "requirements.txt" in done.stderr


def test_a_refused_connection_names_the_base_url(tmp_path: Path) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    config = write_config(tmp_path / "run.yaml", write_scripts(tmp_path / "s", SOLVE_AT), tmp_path / "out",
                          **ONE_JOB, **{"api-provider": "openai", "api-key": "sk-test", "base-url": base_url,
                                        "max-retries": 1})
    done = subprocess.run([sys.executable, str(CLI), "--yaml-location", str(config)], cwd=REPO,
                          env={**cli_env(), "RECODE_RETRY_WAIT_SCALE": "0"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 4, done.stderr  # the run stops: every later call would meet the same (docs/failures.md)
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(
        f"(last: connection refused at {base_url}) (unreachable): check base-url and that the server is running, "
        "then run the same command again; 1 jobs remain"), done.stderr


@pytest.mark.slow
def test_an_unusable_result_file_footer_says_what_to_do(tmp_path: Path) -> None:
    config = write_config(tmp_path / "run.yaml", write_scripts(tmp_path / "s", SOLVE_AT), tmp_path / "out", **ONE_JOB)
    assert run_cli(config).returncode == 0
    [result] = (tmp_path / "out").glob("*/task_1_result.pkl")
    result.write_bytes(b"not a pickle")
    done = run_cli(config)
    assert done.returncode == 1
    assert str(result) in done.stdout
    assert done.stderr.strip().splitlines()[-1].endswith(
        "; 1 on a result, seed or state file that cannot be used (named above): move each such file away (its job "
        "is recomputed) or set overwrite: true (every job is recomputed), then start the run")
    assert "run the same command again" not in done.stderr
    result.rename(tmp_path / "moved away.pkl")
    assert run_cli(config).returncode == 0
