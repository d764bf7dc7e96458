"""The configuration is declared once (agent/config/schema.py): config/default.yaml and docs/configuration.md are
what the schema generates, the fingerprint marks agree with agent/job/fingerprint.py, and the key list agrees with
the feedback sources agent/job/parts.py builds."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.config import ConfigError, load_config
from agent.config.schema import KEYS, KNOWN_KEYS, SECTIONS
from agent.job.fingerprint import diff_fingerprints, user_key
from agent.job.layout import Job
from agent.job.parts import RunParts
from scripts import config_docs
from tests.loop_config import make_config

REPO = Path(__file__).resolve().parents[1]


def test_default_yaml_and_docs_are_what_the_schema_generates() -> None:
    for path, text in config_docs.generated().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(REPO)} differs from agent/config/schema.py; run python scripts/config_docs.py --write")


def test_the_check_fails_on_a_stale_file_and_write_repairs_it(tmp_path: Path, monkeypatch, capsys) -> None:
    folder = tmp_path / "a checkout with spaces"
    folder.mkdir()
    for name in ("DEFAULT_YAML", "DOCS_PAGE"):
        copy = folder / getattr(config_docs, name).name
        shutil.copy(getattr(config_docs, name), copy)
        monkeypatch.setattr(config_docs, name, copy)
    monkeypatch.setattr(config_docs, "REPO", tmp_path)
    page = config_docs.DOCS_PAGE.read_text(encoding="utf-8")
    config_docs.DOCS_PAGE.write_text(page.replace("| `max-turn` | an integer >= 1 |", "| `max-turn` | any |"))
    yaml_text = config_docs.DEFAULT_YAML.read_text(encoding="utf-8")
    config_docs.DEFAULT_YAML.write_text(yaml_text.replace("# turns per task", "# turns"))
    assert config_docs.main([]) == 1
    stale = capsys.readouterr().err.splitlines()
    assert len(stale) == 2 and all("run python scripts/config_docs.py --write" in line for line in stale)
    assert config_docs.main(["--write"]) == 0
    assert config_docs.main([]) == 0
    assert config_docs.DOCS_PAGE.read_text(encoding="utf-8") == (REPO / "docs/configuration.md").read_text()
    assert config_docs.DEFAULT_YAML.read_text(encoding="utf-8") == (REPO / "config/default.yaml").read_text()


def test_each_key_and_spelling_is_declared_once() -> None:
    spellings = [spelling for section in SECTIONS for key in section.keys for spelling in (key.name, *key.also)]
    assert len(spellings) == len(set(spellings)) == len(KNOWN_KEYS)
    documented = yaml.safe_load((REPO / "config/default.yaml").read_text())
    assert set(documented) | {"models"} == KNOWN_KEYS
    for key in KEYS.values():
        assert key.means and "\n" not in key.means and key.kind.what, key.name
        assert key.default is None or key.kind.accepts(key.default), key.name


def test_guidance_level_line_can_still_be_edited_with_sed(tmp_path: Path, monkeypatch) -> None:
    """Users switch the level of a copy of config/default.yaml with sed; the line keeps its shape."""
    text = (REPO / "config/default.yaml").read_text()
    lines = [line for line in text.splitlines() if line.startswith("guidance-level:")]
    assert len(lines) == 1 and re.fullmatch(r"guidance-level: 4 +# .+", lines[0])
    folder = tmp_path / "my runs"
    folder.mkdir()
    copy = folder / "default copy.yaml"
    shutil.copy(REPO / "config/default.yaml", copy)
    subprocess.run(["sed", "-i", "s/^guidance-level: 4 /guidance-level: 2 /", str(copy)], check=True)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.chdir(REPO)
    assert load_config(copy).guidance_levels == (2,)


def _keys_in(fingerprint: dict) -> set[str]:
    """The YAML keys a fingerprint's entries are named after (agent/job/fingerprint.py's user_key)."""
    found = set()
    for name in fingerprint:
        role, _, field = name.partition(".")
        if field == "openai_api":  # named after the protocol, which also sets it; the user's key is openai-api
            found.add("openai-api" if role == "code" else "human-openai-api")
            continue
        written = user_key(name)
        inside = re.findall(r"\(([\w-]+)", written)
        first = written.split(" ")[0].rstrip(",")
        found |= {word for word in (first, *inside) if word in KNOWN_KEYS}
    return found


def test_fingerprint_marks_agree_with_the_fingerprint(tmp_path: Path) -> None:
    """Every marked key shows in the fingerprint of the setting it shapes (the snippet setting's own key in its)."""
    found = set()
    for setting in ("memory_agent", "snippet"):
        cfg = make_config(tmp_path, guidance_level=1, guidance_type="dynamic", max_guidance_level=3,
                          evaluation_setting=setting, reindent_snippet=True)
        parts = RunParts(cfg)
        found |= _keys_in(parts.fingerprint(Job(cfg.models[0], 1, parts.dataset.runnable()[0].index)))
    assert {key.name for key in KEYS.values() if key.fingerprint} == found


def test_reindenting_snippets_is_part_of_a_snippet_jobs_identity(tmp_path: Path) -> None:
    """A snippet job made with re-indented blocks is another trajectory; the default (verbatim) adds no key, so
    snippet runs stored before the key entered are still accepted."""
    def of(**keys: object) -> dict:
        parts = RunParts(make_config(tmp_path, evaluation_setting="snippet", **keys))
        return parts.fingerprint(Job(parts.cfg.models[0], 0, parts.dataset.runnable()[0].index))

    verbatim, reindented = of(), of(reindent_snippet=True)
    assert "reindent_snippet" not in verbatim and diff_fingerprints(verbatim, reindented) == ["reindent_snippet"]
    assert user_key("reindent_snippet") == "reindent-snippet"


def test_the_config_package_does_not_import_the_run_modules() -> None:
    """agent.config is imported by the modules that run jobs; it must not import them back (no circle)."""
    code = ("import sys, agent.config; bad = sorted(m for m in sys.modules if m in "
            "('agent.job.parts', 'agent.job.layout', 'agent.job.session', 'agent.job.workflow', 'agent.run.scheduler')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _offline_with(tmp_path: Path, change: dict) -> Path:
    """config/offline.yaml (levels 0-4: the feedback model is read too) with ``change``, in a path with a space."""
    raw = {**yaml.safe_load((REPO / "config/offline.yaml").read_text()), "work-dir": str(REPO / "work_dir"),
           "script": str(REPO / "config/scripted/code_model.yaml"),
           "human-script": str(REPO / "config/scripted/feedback_model.yaml"), **change}
    path = tmp_path / "a config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("key", sorted(k for k in KEYS if KEYS[k].scope != "sweep"))
def test_every_key_names_itself_when_wrong(tmp_path: Path, key: str) -> None:
    """The one generic reader: a value of the wrong type for any key (the feedback model's included: the
    config runs levels 0-4) is one line naming that key."""
    wrong = next(value for value in (3.5, "wrong") if not KEYS[key].kind.accepts(value))
    path = _offline_with(tmp_path, {key: wrong})
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: '{key}' must be ")
    assert message.endswith(f"got {wrong!r}")


@pytest.mark.parametrize("change, expected", [
    ({"guidance-level": [0, None]}, "'guidance-level' must be an integer from 0 to 4 or a list of them, got None"),
    ({"task-ids": [1, None]}, "'task-ids' must be a task id or a list of task ids, got None"),
    ({"max-tokens": 5, "max-output-tokens": 5}, "set either 'max-tokens' or 'max-output-tokens'"),
    ({"human-max-output-tokens": 0}, "'human-max-output-tokens' must be an integer >= 1, got 0"),
])
def test_lists_and_other_spellings(tmp_path: Path, change: dict, expected: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_config(_offline_with(tmp_path, change))
