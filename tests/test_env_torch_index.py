"""An unreachable PyTorch CPU index does not fail the torch environments: a short connect probe, asked once per
run, decides; the build then takes torch from the configured index, says so in one warning naming the choices,
and its announcement and completion marker record it. Every index here is a server (or a closed port) on
127.0.0.1."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

import agent.envs.cache as env_cache
import agent.envs.reach as reach
from agent.task.dataset import DatasetManager
from agent.envs.cache import env_root, env_settings, resolve_python, spec_for_task
from scripts.manage_envs import main as manage_main
from tests.env_testlib import LocalIndex, closed_port_url, fake_builds

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "work_dir" / "dataset"
TORCH_TASKS = (4, 8)  # both activate recode_sample_torch: a plain torch==2.13.0 pin


@pytest.fixture
def index() -> Iterator[LocalIndex]:
    served = LocalIndex()
    yield served
    served.close()


@pytest.fixture(autouse=True)
def fresh_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test is a new run: no cached answer or warning, no GPU, no told choice, no proxy."""
    monkeypatch.setattr(reach, "_answers", {})
    monkeypatch.setattr(env_cache, "_MEMO", {})
    monkeypatch.setattr(env_cache, "gpu_present", lambda: False)
    for name in ("RECODE_ENV_CPU", "RECODE_TORCH_INDEX_URL", "http_proxy", "https_proxy", "HTTP_PROXY",
                 "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def test_the_probe_answers_for_a_listening_index_and_keeps_its_answer(index: LocalIndex) -> None:
    assert reach.index_answers(index.url + "/cpu") == (True, True) and index.count(1) == 1
    index.close()
    assert reach.index_answers(index.url + "/cu128") == (True, False)  # the same host and port: asked once
    assert index.count() == 1


def test_a_refused_index_is_unreachable_at_once() -> None:
    start = time.monotonic()
    assert reach.index_answers(closed_port_url()) == (False, True)
    assert time.monotonic() - start < 1.0


def test_processes_sharing_a_record_ask_once_until_it_is_old(index: LocalIndex, monkeypatch, tmp_path) -> None:
    record = tmp_path / "env dir" / "index_probes.json"
    assert reach.index_answers(index.url, record) == (True, True) and index.count(1) == 1
    monkeypatch.setattr(reach, "_answers", {})  # another process of the run
    assert reach.index_answers(index.url, record) == (True, False) and index.count() == 1
    monkeypatch.setattr(reach, "_answers", {})
    monkeypatch.setattr(reach, "SHARED_FOR_SEC", 0.0)  # a later run
    assert reach.index_answers(index.url, record) == (True, True) and index.count(2) == 2


def test_an_index_that_never_accepts_is_unreachable_after_the_timeout() -> None:
    """A listener whose backlog is full drops new connections (as a firewall does): the probe gives up."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        waiting = [socket.socket() for _ in range(4)]
        for client in waiting:
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", port))
        time.sleep(0.2)
        start = time.monotonic()
        assert reach.index_answers(f"http://127.0.0.1:{port}/cpu", timeout=0.5) == (False, True)
        assert 0.4 < time.monotonic() - start < 3.0
        for client in waiting:
            client.close()


def test_a_file_mirror_is_not_probed_and_a_proxy_is_probed_instead_of_the_host(index: LocalIndex, monkeypatch) -> None:
    assert reach.index_answers("file:///nowhere/torch/cpu") == (True, False)
    monkeypatch.setenv("https_proxy", index.url.rsplit("/", 1)[0])
    monkeypatch.setenv("no_proxy", "")
    assert reach.index_answers("https://download.pytorch.org/whl/cpu") == (True, True) and index.count(1) == 1


def dry_run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *extra: str) -> tuple[list[str], str]:
    code = manage_main(["--dataset-dir", str(SAMPLE), "--env-backend", "uv", "--task-ids", str(TORCH_TASKS[0]),
                        "--env-dir", str(tmp_path / "env dir"), "--dry-run", *extra])
    assert code == 0
    out, err = capsys.readouterr()
    return out.splitlines(), err


def test_dry_run_with_the_cpu_index_reachable_uses_it_silently(index: LocalIndex, monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setenv("RECODE_TORCH_INDEX_URL", index.url)
    lines, err = dry_run(capsys, tmp_path)
    assert err == "" and index.count(1) == 1
    assert f"--extra-index-url {index.url}/cpu" in next(line for line in lines if " pip install " in line)
    assert "torch CPU build" in next(line for line in lines if line.startswith("# environment "))


def test_dry_run_with_the_cpu_index_unreachable_falls_back_in_one_line(monkeypatch, capsys, tmp_path) -> None:
    url = closed_port_url()
    monkeypatch.setenv("RECODE_TORCH_INDEX_URL", url)
    lines, err = dry_run(capsys, tmp_path)
    [warning] = err.splitlines()
    assert warning.startswith(f"warning: PyTorch's CPU index {url}/cpu did not answer within 3 s")
    assert "RECODE_TORCH_INDEX_URL" in warning and "RECODE_ENV_CPU=0" in warning
    install = next(line for line in lines if " pip install " in line)
    assert url not in install and "+cpu" not in install
    said = next(line for line in lines if line.startswith("# environment "))
    assert f"torch from the configured index ({url}/cpu did not answer" in said
    assert "about 1.1 GB (CPU build) to 4.3 GB (CUDA build) on disk (an estimate)" in said


@pytest.mark.parametrize("told", [["--cpu"], ["--cuda"]])
def test_a_told_choice_is_never_probed_or_changed(told: list[str], monkeypatch, capsys, tmp_path) -> None:
    url = closed_port_url()
    monkeypatch.setenv("RECODE_TORCH_INDEX_URL", url)
    lines, err = dry_run(capsys, tmp_path, *told)
    assert err == "" and reach._answers == {}
    assert (f"--extra-index-url {url}/cpu" in next(line for line in lines if " pip install " in line)) == (
        told == ["--cpu"])


@pytest.mark.parametrize("reachable", [True, False])
def test_a_run_builds_the_torch_environment_either_way_and_says_which(reachable: bool, index: LocalIndex, monkeypatch,
                                                                      capsys, tmp_path) -> None:
    url = index.url if reachable else closed_port_url()
    monkeypatch.setenv("RECODE_TORCH_INDEX_URL", url)
    monkeypatch.setenv("RECODE_ENV_DIR", str(tmp_path / "env dir"))
    built = fake_builds(monkeypatch)
    dataset = DatasetManager(SAMPLE)
    pythons = {resolve_python(dataset, task, "uv") for task in TORCH_TASKS}
    assert len(pythons) == 1 and len(built) == 1  # one environment serves both tasks, built once
    assert ("torch==2.13.0+cpu" in built[0]) == reachable
    settings = env_settings("uv", tmp_path / "env dir", cpu=reachable)
    marker = json.loads((env_root(spec_for_task(dataset, TORCH_TASKS[0], settings), settings) /
                         "recode_env.json").read_text())
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if line.startswith("warning: PyTorch's CPU index")]
    [building] = [line for line in err if line.startswith("building environment ")]
    if reachable:
        assert warnings == [] and "torch CPU build" in building and "torch_index_unreachable" not in marker
    else:
        assert len(warnings) == 1 and f"{url}/cpu did not answer" in building
        assert marker["torch_index_unreachable"] == f"{url}/cpu"
    assert index.count(1 if reachable else 0) == (1 if reachable else 0)


WORKER = """
import sys
import agent.envs.cache as env_cache
from agent.task.dataset import DatasetManager
from agent.envs.cache import env_settings, reachable_torch_index, spec_for_task
env_cache.gpu_present = lambda: False
settings = env_settings("uv", sys.argv[1])
chosen = reachable_torch_index(settings, [spec_for_task(DatasetManager(sys.argv[2]), 4, settings)])
print(chosen.torch_fallback)
"""


def test_the_worker_processes_of_a_run_warn_once_between_them(tmp_path: Path) -> None:
    """Three processes at once (as a run's workers): one asks and warns, all fall back alike."""
    url = closed_port_url()
    env = {key: value for key, value in os.environ.items() if key not in ("RECODE_ENV_CPU", "https_proxy")}
    env.update(RECODE_TORCH_INDEX_URL=url, PYTHONPATH=str(REPO))
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path / "env dir"), str(SAMPLE)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    said = [worker.communicate(timeout=120) for worker in workers]
    assert [out.strip() for out, _ in said] == [f"{url}/cpu"] * 3, said
    assert sum(err.count("warning: PyTorch's CPU index") for _, err in said) == 1
