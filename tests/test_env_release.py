"""The published dataset's environments: the release's mapping, post-install steps, PyTorch tags and the commands.

A replica of the published layout is made under tmp_path from the real meta
file and the eight real requirements files (``shared/recode_h``), with
test.sh files of ours in the published shape. Conda is not installable here
and the PyTorch / PyG wheel sites are not reachable, so those builds are
checked through the exact commands they run; what is reachable is built for
real in the slow test at the end.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agent.envs.cache import build_commands, env_root, env_settings, plan_envs, spec_for_task
from agent.envs.release import PostStep, plan_install, pyg_wheel_page, torch_index_url
from agent.envs.spec import load_task_env_map
from scripts.extract_env_map import main as extract_main
from scripts.manage_envs import main as manage_main
from tests.env_testlib import RELEASE_ENV_ORDER, make_dataset, make_release_dataset, published_dir

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = published_dir()
pytestmark = pytest.mark.skipif(PUBLISHED is None, reason="the published meta and requirements files (shared/recode_h) are not beside the checkout")
RELEASE_FILES = {
    "test_newtransformer1": "requirements_newtransformer.txt", "test_281": "requirements_28.txt",
    "test_191": "requirements_19.txt", "test_common1": "requirements_test_common.txt", "test_151": "requirements_15.txt",
    "test_511": "requirements_51.txt", "test_631": "requirements_63.txt", "test_981": "requirements_98.txt",
}
CLIP = "clip @ git+https://github.com/openai/CLIP.git@dcba3cb2e2827b402d2701e7e1c7d9fed8a20ef1"
MHN = "mhnreact @ git+https://github.com/ml-jku/mhn-react.git@a3e0cc6fe3b8715f2e9b91352a0b66893b4aa560"
DASSL = "dassl @ git+https://github.com/KaiyangZhou/Dassl.pytorch.git@c61a1b570ac6333bd50fb5ae06aea59002fb20bb"


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    return make_release_dataset(tmp_path_factory.mktemp("release") / "dataset", PUBLISHED)


def specs_by_env(dataset, settings) -> dict:
    planned, errors = plan_envs(dataset, None, settings)
    assert errors == {}
    return {entry.env_names[0]: entry for entry in planned}


def test_the_eight_envs_come_from_the_release_files_at_the_dataset_root(replica: tuple, tmp_path: Path) -> None:
    dataset, assignment = replica
    by_env = specs_by_env(dataset, env_settings("uv", tmp_path / "envs", python_version="3.10"))
    assert sorted(by_env) == sorted(RELEASE_ENV_ORDER)
    for env_name, entry in by_env.items():
        assert entry.env_names == [env_name]
        assert entry.spec.requirements_file == str(dataset.root / RELEASE_FILES[env_name])
        assert entry.tasks == [task for task, env in assignment.items() if env == env_name]
    assert sum(len(entry.tasks) for entry in by_env.values()) == 102


def test_post_install_steps_are_the_releases(replica: tuple, tmp_path: Path) -> None:
    by_env = specs_by_env(replica[0], env_settings("uv", tmp_path / "envs"))
    steps = {env: entry.spec.post_install for env, entry in by_env.items()}
    dgl = PostStep(("dgl==1.1.3",), no_deps=True, why="release post-install, without dependencies")
    assert [s.requirements for s in steps["test_newtransformer1"]] == [(CLIP,), (MHN,)]
    assert [s.requirements for s in steps["test_common1"]] == [
        ("setuptools==73.0.1",), ("dgl==1.1.3",), (CLIP,), (MHN,), (DASSL,), ("torch_scatter==2.1.2",)]
    assert steps["test_common1"][1] == dgl and steps["test_981"][0] == dgl
    assert steps["test_981"][1] == PostStep(("torch_scatter==2.1.2", "torch_sparse==0.6.18"), torch_wheel_page=True,
                                            why="PyG wheels of the installed torch build")
    assert all(not steps[env] for env in ("test_281", "test_191", "test_151", "test_511", "test_631"))


def test_cuda_tags_need_their_index_and_cpu_tags_are_dropped(replica: tuple, tmp_path: Path) -> None:
    by_env = specs_by_env(replica[0], env_settings("uv", tmp_path / "envs", cpu=False))
    common, nine_eight = by_env["test_common1"].spec, by_env["test_981"].spec
    assert common.index_tags == ("cu128",) and "torch==2.7.1+cu128" in common.install_lines
    moved_out = ("dgl", "clip", "mhnreact", "dassl", "torch_scatter")
    assert not [line for line in common.install_lines if line.split("=")[0].split(" ")[0] in moved_out]
    assert nine_eight.index_tags == ()
    assert {"torch==2.8.0", "torchvision==0.23.0"} <= set(nine_eight.install_lines)
    assert not [line for line in nine_eight.install_lines if "+cpu" in line or line.startswith(("torch_s", "dgl"))]
    plain = by_env["test_281"].spec
    assert plain.install_lines == () and plain.index_tags == ("cu128",), "an unchanged file is installed as it is"


def test_cpu_option_swaps_every_cuda_build_for_the_cpu_wheel(replica: tuple, tmp_path: Path) -> None:
    gpu = specs_by_env(replica[0], env_settings("uv", tmp_path / "envs", cpu=False))
    cpu = specs_by_env(replica[0], env_settings("uv", tmp_path / "envs", cpu=True))
    for env_name in RELEASE_ENV_ORDER:
        spec = cpu[env_name].spec
        assert spec.index_tags == ("cpu",) and spec.cpu, env_name
        assert spec.name != gpu[env_name].spec.name, "a CPU build is another environment"
        assert not [line for line in spec.install_lines if line.startswith(("nvidia-", "triton")) or "+cu" in line]
        torch_pins = [line for line in spec.install_lines if line.startswith(("torch==", "torchvision==", "torchaudio=="))]
        assert torch_pins and all(line.endswith("+cpu") for line in torch_pins), (env_name, torch_pins)
    assert "torch==2.7.1+cpu" in cpu["test_631"].spec.install_lines, "an untagged torch pin gets the CPU build too"


def test_plain_requirements_keep_their_environment_names() -> None:
    """Envs built before this change must not be rebuilt: a file needing no rewrite fingerprints as before."""
    dataset = REPO / "work_dir" / "dataset"
    if not (dataset / "annotation_meta.jsonl").is_file():
        pytest.skip("the sample dataset is not in this checkout")
    from agent.task.dataset import DatasetManager

    settings = env_settings("uv", "/nonexistent", python_version="3.11", cpu=False)  # the CUDA builds, as before
    names = {spec_for_task(DatasetManager(dataset), index, settings).name for index in (1, 4)}
    assert names == {"uv-py3.11-7fb33cc74612", "uv-py3.11-63e6efbfedf6"}


@pytest.mark.parametrize(("version", "cuda", "page"), [
    ("2.8.0+cu128", "12.8", "https://data.pyg.org/whl/torch-2.8.0+cu128.html"),
    ("2.7.1", "12.6", "https://data.pyg.org/whl/torch-2.7.0+cu126.html"),
    ("2.8.0+cpu", None, "https://data.pyg.org/whl/torch-2.8.0+cpu.html"),
    ("2.8.0", None, "https://data.pyg.org/whl/torch-2.8.0+cpu.html"),
])
def test_pyg_page_matches_the_installed_torch_build(version: str, cuda: str | None, page: str) -> None:
    assert pyg_wheel_page(version, cuda, {}) == page


def test_wheel_sites_can_be_mirrors() -> None:
    assert torch_index_url("cu128", {}) == "https://download.pytorch.org/whl/cu128"
    assert torch_index_url("cpu", {"RECODE_TORCH_INDEX_URL": "file:///mirror/torch/"}) == "file:///mirror/torch/cpu"
    assert pyg_wheel_page("2.8.0+cpu", None, {"RECODE_PYG_WHEEL_URL": "https://m/pyg"}) == "https://m/pyg/torch-2.8.0+cpu.html"


def test_retagging_keeps_extras_and_markers_and_leaves_options_alone() -> None:
    plan = plan_install(["torch[opt]==2.7.1+cu118 ; python_version >= '3.10'", "--extra-index-url https://x/simple",
                         "numpy==2.1.2"], None, cpu=False)
    assert plan.lines == ("torch[opt]==2.7.1+cu118 ; python_version >= '3.10'", "--extra-index-url https://x/simple",
                          "numpy==2.1.2")
    assert plan.index_tags == ("cu118",) and not plan.changed
    cpu = plan_install(list(plan.lines), None, cpu=True)
    assert cpu.lines[0] == "torch[opt]==2.7.1+cpu ; python_version >= '3.10'" and cpu.changed


def fake_tool(directory: Path, name: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def dry_run(capsys: pytest.CaptureFixture[str], *argv: str, said: bool = False) -> list[str]:
    """The --dry-run lines: the commands (and with ``said``, what and how big each build is)."""
    assert manage_main([*argv, "--dry-run"]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if said or not line.startswith("# environment ")]


def test_conda_commands_for_test_common1(replica: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    dataset, assignment = replica
    conda = fake_tool(tmp_path / "bin", "conda")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("RECODE_TORCH_INDEX_URL", raising=False)
    monkeypatch.delenv("RECODE_PYG_WHEEL_URL", raising=False)
    task = next(t for t, env in assignment.items() if env == "test_common1")
    lines = dry_run(capsys, "--work-dir", str(dataset.root.parent), "--env-backend", "conda", "--task-ids", str(task),
                    "--env-dir", str(tmp_path / "envs"), "--cuda", said=True)
    spec = spec_for_task(dataset, task, env_settings("conda", tmp_path / "envs", cpu=False))
    root = env_root(spec, env_settings("conda", tmp_path / "envs", cpu=False))
    python = f"{root}/prefix/bin/python"
    assert spec.name.startswith("conda-py3.10-")
    assert lines[1].startswith(f"# environment {spec.name} for 'test_common1': python 3.10 (conda)")
    assert "torch CUDA build" in lines[1]
    del lines[1]
    assert lines == [
        f"# {spec.name} (test_common1; task {task})",
        f"{conda} create --yes --quiet --prefix {root}/prefix python=3.10 pip",
        f"{python} -m pip install --requirement {root}/requirements.txt --extra-index-url https://download.pytorch.org/whl/cu128",
        f"{python} -m pip install setuptools==73.0.1 --extra-index-url https://download.pytorch.org/whl/cu128",
        f"{python} -m pip install --no-deps dgl==1.1.3 --extra-index-url https://download.pytorch.org/whl/cu128",
        f"{python} -m pip install {shlex.quote(CLIP)} --extra-index-url https://download.pytorch.org/whl/cu128",
        f"{python} -m pip install {shlex.quote(MHN)} --extra-index-url https://download.pytorch.org/whl/cu128",
        f"{python} -m pip install {shlex.quote(DASSL)} --extra-index-url https://download.pytorch.org/whl/cu128",
        f"{python} -m pip install torch_scatter==2.1.2 --find-links 'https://data.pyg.org/whl/torch-<installed torch>.html'"
        " --extra-index-url https://download.pytorch.org/whl/cu128",
        f"{python} -m compileall -q -j0 '<site-packages of {python}>'",
    ]


def test_uv_and_venv_commands_for_test_981_cpu(replica: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    dataset, assignment = replica
    monkeypatch.delenv("RECODE_TORCH_INDEX_URL", raising=False)
    task = next(t for t, env in assignment.items() if env == "test_981")
    base = ["--dataset-dir", str(dataset.root), "--task-ids", f"{task},", "--env-dir", str(tmp_path / "envs"), "--cpu"]
    here = "%d.%d" % sys.version_info[:2]  # the venv backend then builds from this very interpreter
    uv = dry_run(capsys, *base, "--backend", "uv", "--python-version", here)
    venv = dry_run(capsys, *base, "--env-backend", "venv", "--python", here)
    cpu_index = "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert cpu_index in uv[2] and "--index-strategy unsafe-best-match" in uv[2] and " pip install --python " in uv[2]
    assert uv[1].split()[1:3] == ["venv", "--python"]
    assert venv[1] == f"{sys.executable} -m venv {venv[1].split()[-1]}"
    assert venv[2].endswith(f"-m pip install --requirement {Path(venv[1].split()[-1]).parent}/requirements.txt {cpu_index}")
    assert venv[3].endswith(f"-m pip install --no-deps dgl==1.1.3 {cpu_index}")
    assert "torch_scatter==2.1.2 torch_sparse==0.6.18 --find-links" in venv[4]
    spec = spec_for_task(dataset, task, env_settings("venv", tmp_path / "envs", cpu=True, python_version="3.11"))
    assert "torch==2.8.0+cpu" in spec.install_lines and "torchvision==0.23.0+cpu" in spec.install_lines


def test_release_flags_of_manage_envs(replica: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--work-dir (the folder holding dataset/), --source, --python-version, --max-workers; ours as aliases."""
    dataset, assignment = replica
    elsewhere = tmp_path / "reqs"
    elsewhere.mkdir()
    (elsewhere / "requirements_28.txt").write_text("pytest==8.4.1\n")
    task = next(t for t, env in assignment.items() if env == "test_281")
    common = ["--env-backend", "uv", "--env-dir", str(tmp_path / "envs"), "--task-ids", str(task), "--list"]
    assert manage_main(["--work-dir", str(dataset.root.parent), "--python-version", "3.10", "--max-workers", "2", *common]) == 0
    listed = capsys.readouterr().out
    assert "python 3.10" in listed and f"requirements: {dataset.root / 'requirements_28.txt'}" in listed
    assert manage_main(["--work-dir", str(dataset.root.parent), "--source", str(elsewhere), *common]) == 0
    assert f"requirements: {elsewhere / 'requirements_28.txt'}" in capsys.readouterr().out
    assert manage_main(["--work-dir", str(dataset.root), "--source", *common]) == 0, "a folder holding the meta file works too"
    with pytest.raises(SystemExit) as usage:
        manage_main(["--work-dir", str(tmp_path / "nothing"), *common])
    err = capsys.readouterr().err
    assert usage.value.code == 2 and "holds neither dataset/annotation_meta.jsonl" in err and err.count("\n") == 1


def test_install_all_benchmark_envs_script_on_the_replica(replica: tuple, tmp_path: Path) -> None:
    dataset, _ = replica
    done = subprocess.run(
        ["bash", str(REPO / "install_all_benchmark_envs.sh"), "--work-dir", str(dataset.root.parent), "--env-backend", "uv",
         "--env-dir", str(tmp_path / "envs"), "--cpu", "--dry-run"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr
    headers = [line for line in done.stdout.splitlines() if line.startswith("# ") and "# environment " not in line]
    assert sorted(line.split("(")[1].split(";")[0] for line in headers) == sorted(RELEASE_ENV_ORDER)
    said = [line for line in done.stdout.splitlines() if line.startswith("# environment ")]
    assert len(said) == 8 and all("torch CPU build" in line and "on disk (an estimate)" in line for line in said)
    assert done.stdout.count("-m compileall -q -j0") == 8


def test_extract_env_map_writes_the_releases_json(replica: tuple, tmp_path: Path) -> None:
    dataset, assignment = replica
    meta = tmp_path / "meta.jsonl"
    rows = [json.loads(line) for line in (dataset.root / "annotation_meta.jsonl").read_text().splitlines()]
    meta.write_text("".join(json.dumps(row) + "\n" for row in rows[:5]))
    out = tmp_path / "env_map.json"
    assert extract_main(["--ref-dataset-dir", str(dataset.root), "--meta-jsonl", str(meta), "--out", str(out)]) == 0
    first = {str(row["index"]): assignment[row["index"]] for row in rows[:5] if row["if_test"]}
    assert json.loads(out.read_text()) == first
    assert load_task_env_map(out) == {int(k): v for k, v in first.items()}
    assert extract_main(["--ref-dataset-dir", str(dataset.root), "--out", str(out)]) == 0
    assert load_task_env_map(out) == assignment


def test_env_map_override_picks_the_named_env(replica: tuple, tmp_path: Path) -> None:
    dataset, assignment = replica
    task = next(t for t, env in assignment.items() if env == "test_281")
    settings = env_settings("uv", tmp_path / "envs")
    assert spec_for_task(dataset, task, settings, env_name="test_981").requirements_file == str(dataset.root / "requirements_98.txt")


def test_bad_env_map_is_one_line(tmp_path: Path) -> None:
    from agent.envs.spec import EnvError

    bad = tmp_path / "m.json"
    bad.write_text('{"one": 3}')
    with pytest.raises(EnvError, match="must map a task id to an env name"):
        load_task_env_map(bad)


# ---- a real build of test_981 (--cpu, uv) with the PyTorch and PyG sites replaced by local mirrors ----

FAKE_TORCH = {
    "torch": ("2.8.0+cpu", {"torch/__init__.py": "__version__ = '2.8.0+cpu'\nfrom . import version\n",
                            "torch/version.py": "cuda = None\n"}),
    "torchvision": ("0.23.0+cpu", {"torchvision/__init__.py": "__version__ = '0.23.0+cpu'\n"}),
}
FAKE_PYG = {
    "torch_scatter": ("2.1.2+pt28cpu", {"torch_scatter/__init__.py": "__version__ = '2.1.2'\n"}),
    "torch_sparse": ("0.6.18+pt28cpu", {"torch_sparse/__init__.py": "__version__ = '0.6.18'\n"}),
}


def write_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A minimal pure-python wheel (stand-in for a wheel site this machine cannot reach)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    entries = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
               f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    entries[f"{info}/RECORD"] = "".join(f"{entry},,\n" for entry in [*entries, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for entry, text in entries.items():
            archive.writestr(entry, text)
    return path


@pytest.mark.slow
def test_real_uv_build_of_test_981_for_cpu(replica: tuple, tmp_path: Path) -> None:
    dataset, assignment = replica
    mirror = tmp_path / "torch-mirror"
    for name, (version, files) in FAKE_TORCH.items():
        wheel = write_wheel(mirror / "cpu" / name, name, version, files)
        (mirror / "cpu" / name / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    pyg = tmp_path / "pyg-mirror"
    links = [write_wheel(pyg, name, version, files).name for name, (version, files) in FAKE_PYG.items()]
    (pyg / "torch-2.8.0+cpu.html").write_text("".join(f'<a href="{link}">{link}</a>\n' for link in links))
    task = next(t for t, env in assignment.items() if env == "test_981")
    env = {**os.environ, "PYTHON": sys.executable, "RECODE_TORCH_INDEX_URL": mirror.as_uri(),
           "RECODE_PYG_WHEEL_URL": pyg.as_uri()}
    argv = ["bash", str(REPO / "install_all_benchmark_envs.sh"), "--work-dir", str(dataset.root.parent), "--cpu",
            "--env-backend", "uv", "--env-dir", str(tmp_path / "envs"), "--task-ids", str(task)]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env)
    spec = spec_for_task(dataset, task, env_settings("uv", tmp_path / "envs", cpu=True))
    root = env_root(spec, env_settings("uv", tmp_path / "envs", cpu=True))
    log = (root / "build.log").read_text()
    assert first.returncode == 0, first.stdout + first.stderr + log[-3000:]
    assert f"--extra-index-url {mirror.as_uri()}/cpu" in log and f"--find-links {pyg.as_uri()}/torch-2.8.0+cpu.html" in log
    probe = ("import importlib.metadata as m, torch, torch_scatter; "
             "print(torch.__version__, *(m.version(p) for p in ('torch-scatter', 'torch-sparse', 'dgl', 'numpy', 'scipy', 'pytest')))")
    shown = subprocess.run([str(root / "prefix" / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=120)
    assert shown.stdout.split() == ["2.8.0+cpu", "2.1.2+pt28cpu", "0.6.18+pt28cpu", "1.1.3", "2.1.2", "1.15.3", "8.4.1"], shown.stderr
    assert list((root / "prefix").glob("lib/python3.*/site-packages/scipy/__pycache__/*.pyc"))
    assert json.loads((root / "recode_env.json").read_text())["bytecode"]["compileall_exit"] in (0, 1)
    second = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert second.returncode == 0 and "all 1 environment up to date; nothing to do" in second.stdout


def test_tiny_dataset_still_works_without_release_files(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "ds", {1: "test_common1"}, {})
    spec = spec_for_task(dataset, 1, env_settings("uv", tmp_path / "envs"))
    assert spec.group == "default" and spec.post_install == (), "no release file: the default group, no release steps"
    assert build_commands(spec, env_settings("uv", tmp_path / "envs"))[-1].endswith("-j0 '<site-packages of " + str(
        env_root(spec, env_settings("uv", tmp_path / "envs")) / "prefix" / "bin" / "python") + ">'")
