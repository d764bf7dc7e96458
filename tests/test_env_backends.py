"""Backend selection, command construction (conda is not installable here) and pip settings for uv."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent.envs.backends import (
    PipSettings,
    build_plan,
    conda_plan,
    default_backend,
    default_python_version,
    parse_pip_settings,
    uv_index_args,
    uv_plan,
    venv_plan,
)
from agent.envs.spec import EnvError
from scripts.manage_envs import main as manage_main
from tests.env_testlib import make_dataset

# What `pip config list` prints on these machines (the uv backend must honour all of it).
PIP_CONFIG_LIST = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


def fake_tool(directory: Path, name: str) -> str:
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def test_conda_commands_create_a_prefix_with_python_and_install_with_its_pip(tmp_path: Path) -> None:
    plan = conda_plan("/opt/conda/bin/conda", tmp_path / "env", tmp_path / "req.txt", "3.10")
    assert plan.commands == (
        ("/opt/conda/bin/conda", "create", "--yes", "--quiet", "--prefix", str(tmp_path / "env"), "python=3.10", "pip"),
        (str(tmp_path / "env" / "bin" / "python"), "-m", "pip", "install", "--requirement", str(tmp_path / "req.txt")),
    )


def test_conda_found_on_path_is_used_and_absent_conda_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("RECODE_ENV_BACKEND", raising=False)
    with pytest.raises(EnvError, match="backend 'conda' needs conda on PATH .*--env-backend uv"):
        build_plan("conda", tmp_path / "env", tmp_path / "req.txt", "3.10")
    assert default_backend() == "uv"
    conda = fake_tool(tmp_path, "conda")
    assert default_backend() == "conda"
    assert build_plan("conda", tmp_path / "env", tmp_path / "req.txt", "3.10").commands[0][0] == conda


def test_backend_and_python_choice_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECODE_ENV_BACKEND", "venv")
    assert default_backend() == "venv"
    monkeypatch.setenv("RECODE_ENV_BACKEND", "docker")
    with pytest.raises(EnvError, match="unknown environment backend 'docker'"):
        default_backend()
    monkeypatch.delenv("RECODE_ENV_PYTHON", raising=False)
    assert default_python_version("conda") == "3.10"
    assert default_python_version("uv") == f"{sys.version_info.major}.{sys.version_info.minor}"
    monkeypatch.setenv("RECODE_ENV_PYTHON", "3.12")
    assert default_python_version("venv") == "3.12"


def test_pip_settings_of_this_machine_become_uv_flags() -> None:
    settings = parse_pip_settings(PIP_CONFIG_LIST, {})
    assert settings == PipSettings(
        extra_index_urls=("file:///opt/pypi/simple", "file:///opt/pypi-more/simple"),
        find_links=("/opt/wheels",),
        constraints=("/etc/xdg/pip/constraints.txt",),
        cert="/etc/ssl/certs/ca-certificates.crt",
    )
    assert uv_index_args(settings) == [
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
        "--constraint", "/etc/xdg/pip/constraints.txt",
        "--index-strategy", "unsafe-best-match",
    ]


def test_pip_precedence_env_over_install_section_over_global() -> None:
    listed = "global.index-url='https://a/simple'\ninstall.index-url='https://b/simple'\nglobal.find-links='/x\\n/y'\n"
    assert parse_pip_settings(listed, {}).index_url == "https://b/simple"
    assert parse_pip_settings(listed, {}).find_links == ("/x", "/y")
    overridden = parse_pip_settings(listed, {"PIP_INDEX_URL": "https://mirror/simple", "PIP_NO_INDEX": "1"})
    assert (overridden.index_url, overridden.no_index) == ("https://mirror/simple", True)
    assert uv_index_args(overridden)[:3] == ["--no-index", "--index-url", "https://mirror/simple"]
    assert uv_index_args(PipSettings()) == []


def test_uv_and_venv_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    pip = PipSettings(find_links=("/opt/wheels",), cert="/etc/ca.crt")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    plan = uv_plan("/bin/uv", tmp_path / "env", tmp_path / "r.txt", version, pip)
    python = str(tmp_path / "env" / "bin" / "python")
    assert plan.commands[0] == ("/bin/uv", "venv", "--python", sys.executable, str(tmp_path / "env"))
    assert plan.commands[1][:6] == ("/bin/uv", "pip", "install", "--python", python, "--requirement")
    assert plan.commands[1][7:9] == ("--find-links", "/opt/wheels")
    assert plan.extra_env == {"SSL_CERT_FILE": "/etc/ca.crt"}
    assert venv_plan(tmp_path / "env", tmp_path / "r.txt", version).commands == (
        (sys.executable, "-m", "venv", str(tmp_path / "env")),
        (python, "-m", "pip", "install", "--requirement", str(tmp_path / "r.txt")),
    )


def test_manage_envs_without_conda_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = make_dataset(tmp_path / "ds", {1: "a"}, {"a.txt": "pytest\n"})
    monkeypatch.setenv("PATH", str(tmp_path))
    code = manage_main(["--dataset-dir", str(dataset.root), "--env-backend", "conda", "--env-dir", str(tmp_path / "envs")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: backend 'conda' needs conda on PATH") and err.count("\n") == 1
