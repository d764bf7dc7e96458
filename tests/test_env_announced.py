"""Nothing large is built silently: a build says what and how big first (and --dry-run shows it), takes the
CPU PyTorch build on a machine without a GPU unless told otherwise, and says it is still going."""
from __future__ import annotations

from pathlib import Path

import pytest

import agent.envs.cache as env_cache
from agent.task.dataset import DatasetManager
from agent.envs.cache import ensure_env, env_settings, spec_for_task
from agent.envs.release import torch_index_url
from scripts.manage_envs import main as manage_main
from tests.env_testlib import LocalIndex, fake_builds

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "work_dir" / "dataset"
TORCH_TASK = 4  # its test.sh activates recode_sample_torch: a plain torch==2.13.0 pin


def dry_run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *extra: str) -> list[str]:
    code = manage_main(["--dataset-dir", str(SAMPLE), "--env-backend", "uv", "--task-ids", str(TORCH_TASK),
                        "--env-dir", str(tmp_path / "env dir"), "--dry-run", *extra])
    assert code == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("gpu, setting, flag, build", [
    (False, None, None, "CPU"), (False, "0", None, "CUDA"), (False, None, "--cuda", "CUDA"),
    (True, None, None, "CUDA"), (True, "1", None, "CPU"), (True, None, "--cpu", "CPU"),
])
def test_the_torch_build_follows_the_machine_unless_told(monkeypatch, capsys, tmp_path, gpu, setting, flag,
                                                         build) -> None:
    monkeypatch.setattr(env_cache, "gpu_present", lambda: gpu)
    index = LocalIndex()  # where the CPU builds come from: it answers the probe of a default CPU choice
    monkeypatch.setenv("RECODE_TORCH_INDEX_URL", index.url)
    if setting is None:
        monkeypatch.delenv("RECODE_ENV_CPU", raising=False)
    else:
        monkeypatch.setenv("RECODE_ENV_CPU", setting)
    lines = dry_run(capsys, tmp_path, *([flag] if flag else []))
    index.close()
    [said] = [line for line in lines if line.startswith("# environment ")]
    assert f"torch {build} build" in said and "packages from" in said and "on disk (an estimate)" in said
    install = next(line for line in lines if " pip install " in line)
    assert (f"--extra-index-url {index.url}/cpu" in install) == (build == "CPU")
    told = {"--cpu": True, "--cuda": False}.get(flag or "")
    spec = spec_for_task(DatasetManager(SAMPLE), TORCH_TASK, env_settings("uv", tmp_path / "env dir", cpu=told))
    assert ("torch==2.13.0+cpu" in spec.install_lines) == (build == "CPU")
    size = said.split("about ")[1].split(" on disk")[0]
    assert size.endswith("GB") and (float(size.split()[0]) > 3) == (build == "CUDA")  # nvidia-* wheels
    if build == "CUDA":
        assert "RECODE_ENV_CPU=1 or --cpu" in said


def test_a_build_says_what_and_how_big_before_it_starts_and_while_it_runs(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("agent.common.progress.HEARTBEAT_SEC", 0.1)
    monkeypatch.setattr(env_cache, "gpu_present", lambda: False)
    monkeypatch.delenv("RECODE_ENV_CPU", raising=False)
    settings = env_settings("venv", tmp_path / "envs")
    spec = spec_for_task(DatasetManager(SAMPLE), TORCH_TASK, settings)
    built = fake_builds(monkeypatch, pause_sec=0.5)
    said: list[str] = []
    assert ensure_env(spec, settings, progress=said.append).status == "built"
    assert len(built) == 1 and said[0].startswith(f"building environment {spec.name} for 'recode_sample_torch'")
    assert "torch CPU build" in said[0] and "about 1." in said[0]
    assert any(line.startswith(f"still building {spec.name} (") for line in said[1:])


def test_the_torch_extra_is_the_cpu_build_from_the_index_the_environments_use() -> None:
    """requirements-extras.txt installs torch's CPU build from the same PyTorch CPU index the environments use
    without a GPU (checked as text: the index is not reachable from the test machines)."""
    lines = [line.strip() for line in (REPO / "requirements-extras.txt").read_text().splitlines()]
    assert f"--extra-index-url {torch_index_url('cpu', {})}" in lines
    [torch] = [line for line in lines if line.startswith("torch==")]
    assert torch.endswith("+cpu")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in (REPO / "pyproject.toml").read_text()
