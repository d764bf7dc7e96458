"""Requirements normalisation, fingerprints and the task -> env -> requirements mapping."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.envs.cache import env_settings, plan_envs, spec_for_task
from agent.envs.spec import (
    BUILTIN_DEFAULT,
    EnvError,
    canonical_name,
    fingerprint,
    load_requirements_map,
    normalise_requirement,
    normalise_requirements_file,
)
from scripts.extract_env_map import main as extract_main
from tests.env_testlib import make_dataset


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Foo_Bar.baz==1.0", "foo-bar-baz==1.0"),
        ("numpy >= 1.26 , < 3", "numpy>=1.26,<3"),
        ("Requests[Socks, security] ==2.0", "requests[security,socks]==2.0"),
        ('tomli>=1 ;  python_version < "3.11"', 'tomli>=1; python_version < "3.11"'),
        ("Pkg @ https://example.org/pkg-1.0.whl", "pkg@https://example.org/pkg-1.0.whl"),
        ("--extra-index-url   https://x/simple", "--extra-index-url https://x/simple"),
    ],
)
def test_normalise_requirement(raw: str, expected: str) -> None:
    assert normalise_requirement(raw) == expected


def test_canonical_name_is_pep503() -> None:
    assert canonical_name("Zope.Interface") == canonical_name("zope_interface") == "zope-interface"


def test_equivalent_files_share_a_fingerprint_and_real_changes_do_not(tmp_path: Path) -> None:
    a = write(tmp_path / "a.txt", "# torch group\nnumpy>=1.26\n\nPyTest==8.0  # runner\ntorch==2.13.0\n")
    b = write(tmp_path / "b.txt", "torch == 2.13.0\npytest==8.0\n# comment only\nnumpy>=1.26\nnumpy>=1.26\n")
    c = write(tmp_path / "c.txt", "numpy>=1.26\npytest==8.0\ntorch==2.12.0\n")
    lines_a, lines_b = normalise_requirements_file(a), normalise_requirements_file(b)
    assert lines_a == lines_b == ["numpy>=1.26", "pytest==8.0", "torch==2.13.0"]
    same = fingerprint(lines_a, "3.11", "uv")
    assert same == fingerprint(lines_b, "3.11", "uv")
    assert same != fingerprint(normalise_requirements_file(c), "3.11", "uv")
    assert same != fingerprint(lines_a, "3.10", "uv")
    assert same != fingerprint(lines_a, "3.11", "conda")


def test_included_files_are_inlined_so_their_edits_count(tmp_path: Path) -> None:
    common = write(tmp_path / "common.txt", "pytest\n")
    write(tmp_path / "caps.txt", "numpy<3\n")
    top = write(tmp_path / "top.txt", "-r common.txt\n--constraint caps.txt\nsix \\\n  ==1.17\n")
    before = normalise_requirements_file(top)
    assert before == ["-c numpy<3", "pytest", "six==1.17"]
    write(common, "pytest==8.0\n")
    assert normalise_requirements_file(top) != before


def test_include_loops_and_missing_files_are_one_line_errors(tmp_path: Path) -> None:
    loop = write(tmp_path / "loop.txt", "-r loop.txt\n")
    with pytest.raises(EnvError, match="includes itself"):
        normalise_requirements_file(loop)
    with pytest.raises(EnvError, match="cannot read requirements file"):
        normalise_requirements_file(tmp_path / "absent.txt")


def test_task_env_comes_from_test_sh_and_requirements_group(tmp_path: Path) -> None:
    dataset = make_dataset(
        tmp_path,
        {1: "recode_sample_numpy", 2: "recode_sample_torch", 3: "unknown_env", 4: None},
        {"recode_sample_numpy.txt": "numpy\npytest\n", "recode_sample_torch.txt": "torch==2.13.0\npytest\n"},
    )
    settings = env_settings("uv", tmp_path / "envs", python_version="3.11")
    numpy_spec = spec_for_task(dataset, 1, settings)
    assert (numpy_spec.env_name, numpy_spec.group) == ("recode_sample_numpy", "recode_sample_numpy")
    assert numpy_spec.requirements == ("numpy", "pytest")
    assert numpy_spec.name == f"uv-py3.11-{numpy_spec.fingerprint[:12]}"
    assert spec_for_task(dataset, 2, settings).requirements == ("pytest", "torch==2.13.0")
    for index in (3, 4):
        fallback = spec_for_task(dataset, index, settings)
        assert (fallback.group, fallback.requirements_file, fallback.requirements) == ("default", None, BUILTIN_DEFAULT)
    write(dataset.root / "requirements" / "default.txt", "pytest\nsix\n")
    assert spec_for_task(dataset, 4, settings).requirements == ("pytest", "six")


def test_identical_requirements_under_two_env_names_share_one_environment(tmp_path: Path) -> None:
    dataset = make_dataset(
        tmp_path, {1: "env_a", 2: "env_b", 3: "env_c"},
        {"env_a.txt": "numpy\npytest\n", "env_b.txt": "PyTest\n# same\nnumpy\n", "env_c.txt": "six\npytest\n"},
    )
    planned, errors = plan_envs(dataset, None, env_settings("uv", tmp_path / "envs"))
    assert errors == {}
    assert [(p.tasks, p.env_names) for p in planned] == [([1, 2], ["env_a", "env_b"]), ([3], ["env_c"])]


def test_requirements_map_names_release_files_and_a_default(tmp_path: Path) -> None:
    release = tmp_path / "release"
    release.mkdir()
    write(release / "requirements_15.txt", "pytest\ncopulae==0.8.0\n")
    write(release / "requirements_test_common.txt", "pytest\nnumpy\n")
    dataset = make_dataset(tmp_path / "ds", {15: "recode_15", 16: "other", 17: "../../etc/passwd"}, {})
    write(dataset.root / "requirements" / "env_map.yaml", yaml.safe_dump({
        "default": "../../release/requirements_test_common.txt",
        "envs": {"recode_15": "../../release/requirements_15.txt", "other": None},
    }))
    settings = env_settings("uv", tmp_path / "envs")
    assert spec_for_task(dataset, 15, settings).requirements == ("copulae==0.8.0", "pytest")
    for index in (16, 17):
        spec = spec_for_task(dataset, index, settings)
        assert (spec.group, spec.requirements) == ("default", ("numpy", "pytest"))
    explicit = write(tmp_path / "map.yaml", "envs:\n  other: release/requirements_15.txt\n")
    assert spec_for_task(dataset, 16, env_settings("uv", tmp_path / "envs", explicit)).group == "other"


@pytest.mark.parametrize(
    ("text", "message"),
    [("envs: [a, b]\n", "must be a mapping"), ("envs: {a: 3}\n", "must name a requirements file"), ("envs: {a: [\n", "not valid YAML")],
)
def test_bad_requirements_maps_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(EnvError, match=message) as caught:
        load_requirements_map(write(tmp_path / "map.yaml", text))
    assert "\n" not in str(caught.value)


def test_map_naming_a_missing_file_is_reported_per_task(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path, {1: "gone", 2: "fine"}, {"fine.txt": "pytest\n", "env_map.yaml": "envs: {gone: nope.txt}\n"})
    planned, errors = plan_envs(dataset, None, env_settings("uv", tmp_path / "envs"))
    assert [p.tasks for p in planned] == [[2]]
    assert "nope.txt" in errors[1] and "does not exist" in errors[1]


def test_extract_env_map_writes_a_loadable_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = make_dataset(tmp_path / "ds", {1: "has_file", 2: "has_file", 3: "no_file", 4: None}, {"has_file.txt": "pytest\n"})
    out = tmp_path / "out" / "env_map.yaml"
    out.parent.mkdir()
    assert extract_main(["--dataset-dir", str(dataset.root), "--out", str(out)]) == 0
    data = yaml.safe_load(out.read_text())
    assert data["envs"]["has_file"] == {"requirements": "../ds/requirements/has_file.txt", "tasks": [1, 2]}
    assert data["envs"]["no_file"] == {"requirements": None, "tasks": [3]}
    assert data["tasks_without_env"] == [4]
    assert load_requirements_map(out).envs["has_file"] == (dataset.root / "requirements" / "has_file.txt").resolve()
    assert "envs without requirements: no_file" in capsys.readouterr().err


def test_extract_env_map_on_a_missing_dataset_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert extract_main(["--dataset-dir", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: dataset not found") and err.count("\n") == 1
