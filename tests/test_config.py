"""load_config: every user mistake is one line naming the key; env vars, sweeps, secrets, default.yaml."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.config import DEFAULTS, KNOWN_KEYS, ConfigError, load_config
from agent.models.build import PROVIDER_ENV_VARS

REPO = Path(__file__).resolve().parents[1]
SENTINEL = "sk-SENTINEL-never-in-metadata-0123456789"


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real key or endpoint variable may leak into a config test."""
    for name in PROVIDER_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def base(tmp_path: Path) -> dict:
    """A valid scripted config: a dataset folder and a script file of its own."""
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "annotation_meta.jsonl").write_text("")
    script = tmp_path / "script.yaml"
    script.write_text("rules:\n  - responses: ['action: SUBMIT']\n")
    return {"api-provider": "scripted", "model": "coder", "script": str(script), "work-dir": str(dataset),
            "output-dir": str(tmp_path / "out"), "guidance-level": 0}


def write(tmp_path: Path, values: dict) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def load(tmp_path: Path, values: dict, **overrides):
    return load_config(write(tmp_path, values), overrides or None)


def error_of(tmp_path: Path, values: dict) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, values)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(tmp_path))
    return message


def test_defaults_are_the_release_files_values(tmp_path: Path, base: dict, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    cfg = load(tmp_path, {k: v for k, v in base.items() if k != "guidance-level"})
    assert (cfg.evaluation_setting, cfg.max_turn, cfg.max_steps, cfg.guidance_type) == ("memory_agent", 10, 3, "fixed")
    assert cfg.guidance_levels == (4,) and (cfg.memory_threshold, cfg.memory_to_keep) == (15, 10)
    assert (cfg.feedback_model.provider, cfg.feedback_model.model) == ("openai", "o4-mini")
    assert cfg.resume is False and cfg.overwrite is False and cfg.replay_feedback_level is None
    assert cfg.init_seed_dir == cfg.output_dir / "init_seed"
    assert cfg.parallel_mode == "processes" and cfg.max_workers == 4
    assert cfg.runner.timeout_sec == 600 and cfg.runner.sandbox == "auto" and cfg.runner.memory_mb == 8192
    assert cfg.prices and cfg.models[0].script == base["script"]


@pytest.mark.parametrize("change, expected", [
    ({"max-turns": 3}, "unknown key 'max-turns' (did you mean 'max-turn'?)"),
    ({"guidance_level": 2}, "unknown key 'guidance_level' (did you mean 'guidance-level'?)"),
    ({"colour": "red"}, "unknown key 'colour' (config/default.yaml lists every key)"),
    ({"max-turn": "ten"}, "'max-turn' must be an integer >= 1, got 'ten'"),
    ({"max-turn": True}, "'max-turn' must be an integer >= 1, got True"),
    ({"resume": "yes"}, "'resume' must be true or false, got 'yes'"),
    ({"ray-num-gpus": -1}, "'ray-num-gpus' must be a number >= 0, got -1"),
    ({"guidance-level": 5}, "'guidance-level' must be an integer from 0 to 4 or a list of them, got 5"),
    ({"guidance-level": [0, -1]}, "'guidance-level' must be an integer from 0 to 4 or a list of them, got -1"),
    ({"max-guidance-level": 7}, "'max-guidance-level' must be an integer from 0 to 4, got 7"),
    ({"api-provider": "openia"}, "'api-provider' must be one of openai, azure-openai"),
    ({"evaluation-setting": "memory"}, "'evaluation-setting' must be one of baseline, agent, memory_agent, snippet"),
    ({"parallel-mode": "gpu"}, "'parallel-mode' must be one of processes, threads, none, ray, got 'gpu'"),
    ({"feedback-source": "human"}, "'feedback-source' must be one of llm, file, interactive, web, got 'human'"),
    ({"sandbox": "maybe"}, "'sandbox' must be one of auto, off, required"),
    ({"env-backend": "docker"}, "'env-backend' must be one of conda, uv, venv, current"),
    ({"task-ids": ["3"]}, "'task-ids' must be a task id or a list of task ids, got '3'"),
    ({"memory-to-keep": 30, "protocol": "improved"},
     "'memory-to-keep' (30) must be smaller than 'memory-threshold' (15)"),
    ({"script": "/nonexistent/script.yaml"}, "provider 'scripted' needs 'script' naming an existing script file"),
    ({"work-dir": "/nonexistent/dataset"}, "dataset not found: 'work-dir' '/nonexistent/dataset' holds neither dataset/annotation_meta.jsonl"),
    ({"feedback-source": "file"}, "'feedback-file' must name an existing file"),
    ({"prices": "/nonexistent/prices.yaml"}, "'prices': cannot read price table /nonexistent/prices.yaml"),
    ({"api-provider": "replay"}, "provider 'replay' answers from the response cache: set 'cache-path'"),
    ({"feedback-source": "interactive", "parallel-mode": "threads"}, "set 'parallel-mode: none'"),
    ({"guidance-level": 2}, "no API key for provider 'openai' (model 'o4-mini'); export OPENAI_API_KEY or set "
                            "'human-api-key'"),
    ({"resume": True, "overwrite": True}, "set only one"),
    ({"replay-feedback-level": 1, "replay-run-feedback-level": 2}, "not both"),
    ({"model": []}, "'model' is an empty list"),
    ({"model": ["a", "a"]}, "model 'a' appears twice in the sweep"),
    ({"models": [{"model": "x"}]}, "use either 'model' or 'models', not both"),
    ({"request-timeout-sec": 0}, "'request-timeout-sec' must be a number > 0, got 0"),
    ({"human-max-retries": -2, "human-api-provider": "openai", "human-agent-model": "r",
      "human-base-url": "http://127.0.0.1:9/v1", "guidance-level": 1}, "'human-max-retries' must be an integer >= 0, got -2"),
])
def test_each_mistake_is_one_line(tmp_path: Path, base: dict, change: dict, expected: str) -> None:
    assert expected in error_of(tmp_path, {**base, **change})


def test_missing_api_key_names_the_variable_and_the_key(tmp_path: Path, base: dict) -> None:
    code = {**base, "api-provider": "anthropic", "model": "claude-sonnet-4"}
    assert ("no API key for provider 'anthropic' (model 'claude-sonnet-4'); export ANTHROPIC_API_KEY or set 'api-key'"
            in error_of(tmp_path, code))
    feedback = {**base, "guidance-level": 1, "human-api-provider": "openai", "human-agent-model": "o4-mini"}
    assert "export OPENAI_API_KEY or set 'human-api-key'" in error_of(tmp_path, feedback)


def test_key_from_the_environment_or_none_for_a_local_server(tmp_path: Path, base: dict, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    cfg = load(tmp_path, {**base, "api-provider": "openai", "model": "gpt-5"})
    assert cfg.models[0].api_key == SENTINEL
    monkeypatch.delenv("OPENAI_API_KEY")
    local = load(tmp_path, {**base, "api-provider": "openai", "model": "qwen", "base-url": "http://127.0.0.1:9/v1"})
    assert local.models[0].api_key is None and local.models[0].base_url == "http://127.0.0.1:9/v1"


def test_env_var_expansion(tmp_path: Path, base: dict, monkeypatch) -> None:
    monkeypatch.setenv("RECODE_TEST_KEY", SENTINEL)
    monkeypatch.setenv("RECODE_TEST_OUT", str(tmp_path / "elsewhere"))
    cfg = load(tmp_path, {**base, "api-provider": "openai", "model": "gpt-5", "api-key": "${RECODE_TEST_KEY}",
                          "output-dir": "${RECODE_TEST_OUT}/results"})
    assert cfg.models[0].api_key == SENTINEL and cfg.output_dir == tmp_path / "elsewhere" / "results"
    monkeypatch.delenv("RECODE_TEST_KEY")
    message = error_of(tmp_path, {**base, "api-key": "${RECODE_TEST_KEY}"})
    assert "'api-key' uses ${RECODE_TEST_KEY} but the environment variable RECODE_TEST_KEY is not set" in message


def test_sweeps_of_models_and_levels(tmp_path: Path, base: dict, monkeypatch) -> None:
    cfg = load(tmp_path, {**base, "model": ["a", "org/b"], "guidance-level": [0, 2, 2, 4],
                          "human-api-provider": "scripted", "human-agent-model": "fb", "human-script": base["script"]})
    assert [m.model for m in cfg.models] == ["a", "org/b"] and {m.provider for m in cfg.models} == {"scripted"}
    assert cfg.guidance_levels == (0, 2, 4) and cfg.feedback_model.model == "fb"
    monkeypatch.setenv("DEEPSEEK_API_KEY", SENTINEL)
    mixed = load(tmp_path, {**{k: v for k, v in base.items() if k != "model"}, "temperature": 0.0, "models": [
        {"model": "coder"},
        {"model": "deepseek-chat", "api-provider": "deepseek", "temperature": 1},
    ]})
    assert [(m.provider, m.model, m.temperature) for m in mixed.models] == [
        ("scripted", "coder", 0.0), ("deepseek", "deepseek-chat", 1.0)]
    assert mixed.models[1].api_key == SENTINEL
    bad_entry = {**{k: v for k, v in base.items() if k != "model"}, "models": [{"model": "x", "guidance-level": 2}]}
    assert "unknown key 'guidance-level' in a 'models' entry" in error_of(tmp_path, bad_entry)


def test_request_timeout_and_retries_reach_each_model(tmp_path: Path, base: dict) -> None:
    default = load(tmp_path, base).models[0]
    assert (default.timeout_sec, default.max_retries) == (600.0, 6)
    cfg = load(tmp_path, {**base, "request-timeout-sec": 90, "max-retries": 2, "guidance-level": 1,
                          "human-api-provider": "scripted", "human-agent-model": "researcher",
                          "human-script": base["script"], "human-max-retries": 0})
    assert (cfg.models[0].timeout_sec, cfg.models[0].max_retries) == (90.0, 2)
    assert (cfg.feedback_model.timeout_sec, cfg.feedback_model.max_retries) == (600.0, 0)


def test_overrides_win_over_the_file(tmp_path: Path, base: dict) -> None:
    cfg = load(tmp_path, {**base, "max-workers": 8, "parallel-mode": "threads"}, **{"max-workers": 2})
    assert cfg.max_workers == 2 and cfg.parallel_mode == "threads"


def test_null_means_default_except_for_limits(tmp_path: Path, base: dict) -> None:
    cfg = load(tmp_path, {**base, "max-turn": None, "memory-mb": None, "max-processes": None})
    assert cfg.max_turn == 10 and cfg.runner.memory_mb is None and cfg.runner.max_processes is None


def test_public_dict_holds_no_secret(tmp_path: Path, base: dict, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL)
    cfg = load(tmp_path, {**base, "model": ["a"], "guidance-level": 3, "human-api-provider": "anthropic",
                          "human-agent-model": "claude", "human-base-url": "https://user:pass-SECRET@proxy:8443/v1"})
    assert cfg.feedback_model.api_key == SENTINEL
    public = json.dumps(cfg.public_dict())
    assert SENTINEL not in public and "pass-SECRET" not in public and "https://proxy:8443/v1" in public
    assert cfg.public_dict()["feedback_model"]["api_key_set"] is True
    assert SENTINEL not in repr(cfg)


def test_default_yaml_documents_every_key_and_matches_the_defaults(monkeypatch) -> None:
    text = (REPO / "config" / "default.yaml").read_text()
    documented = yaml.safe_load(text)
    assert set(documented) | {"models"} == KNOWN_KEYS
    assert "models:" in text
    for key, value in DEFAULTS.items():
        assert documented[key] == value, key
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")):
            assert "#" in line, f"undocumented: {line}"
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    monkeypatch.chdir(REPO)
    cfg = load_config(REPO / "config" / "default.yaml")
    assert cfg.models[0].model == "gpt-4o" and cfg.feedback_model.model == "o4-mini"


def test_shipped_offline_config_loads(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    cfg = load_config(REPO / "config" / "offline.yaml")
    assert cfg.guidance_levels == (0, 1, 2, 3, 4) and cfg.feedback_model.provider == "scripted"
    assert {m.provider for m in cfg.models} == {"scripted"}


def test_yaml_problems(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(missing)
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [a, b\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(listing)
