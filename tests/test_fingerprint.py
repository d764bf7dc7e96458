"""A job's fingerprint (agent/job/fingerprint.py): fed from a real RunConfig, each change named by key, the refusal
line naming the changes and both ways out, no secret inside."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import agent.protocols.prompts as prompts_module
from agent.task.dataset import DatasetManager
from agent.config import KNOWN_KEYS
from agent.job.fingerprint import diff_fingerprints, job_fingerprint, refusal, text_hash, user_key
from agent.protocols.base import prompt_texts
from tests.loop_config import make_config


def fingerprint_of(cfg, level: int = 0, prompts: dict | None = None) -> dict:
    """What the lead's wiring will do: plain data out of the RunConfig (keys left out)."""
    def spec(model) -> dict:
        return {k: v for k, v in dataclasses.asdict(model).items() if k != "api_key"}

    return job_fingerprint(
        models={"code": spec(cfg.models[0]), **({"feedback": spec(cfg.feedback_model)} if cfg.feedback_model else {})},
        protocol="release-8.6", prompts=prompt_texts(prompts_module) if prompts is None else prompts,
        setting=cfg.evaluation_setting, level=level, max_steps=cfg.max_steps,
        memory={"threshold": cfg.memory_threshold, "to_keep": cfg.memory_to_keep}, feedback_source="model",
        dataset=DatasetManager(cfg.work_dir).fingerprint(), harness="0.9.0")


def test_a_real_config_gives_named_readable_values(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, guidance_level=2)
    found = fingerprint_of(cfg, level=2)
    assert found["code.model"] == "scripted-coder" and found["feedback.model"] == "scripted-researcher"
    assert found["level"] == 2 and found["setting"] == "memory_agent" and found["max_steps"] == cfg.max_steps
    assert found["prompt.AGENT_SYSTEM"] == text_hash(prompts_module.AGENT_SYSTEM)
    assert found["prompt.ACTION_HELP"].startswith("sha256:")
    assert len(found["dataset"]) == 64 and not any("api_key" in key for key in found)
    assert fingerprint_of(make_config(tmp_path, guidance_level=2), level=2) == found  # same config, same identity


def test_each_change_is_named_and_max_turn_is_not_one(tmp_path: Path) -> None:
    base = fingerprint_of(make_config(tmp_path, guidance_level=1))
    assert diff_fingerprints(base, fingerprint_of(make_config(tmp_path, guidance_level=1, max_turn=9))) == []
    assert diff_fingerprints(base, fingerprint_of(make_config(tmp_path, guidance_level=1, human_agent_model="other-researcher"))) \
        == ["feedback.model"]
    assert diff_fingerprints(base, fingerprint_of(make_config(tmp_path, guidance_level=1, max_steps=7, memory_threshold=20))) \
        == ["max_steps", "memory.threshold"]
    edited = {**prompt_texts(prompts_module), "AGENT_SYSTEM": prompts_module.AGENT_SYSTEM + " "}
    assert diff_fingerprints(base, fingerprint_of(make_config(tmp_path, guidance_level=1), prompts=edited)) == ["prompt.AGENT_SYSTEM"]
    assert diff_fingerprints({"a": 1}, {"b": 1}) == ["a", "b"]


def test_the_refusal_names_each_change_and_both_ways_out(tmp_path: Path) -> None:
    old = fingerprint_of(make_config(tmp_path, guidance_level=1))
    new = fingerprint_of(make_config(tmp_path, guidance_level=1, human_agent_model="other-researcher", max_steps=5))
    line = refusal("out/task_1_result.pkl", old, new)
    assert line == (f"out/task_1_result.pkl was made under another configuration (human-agent-model "
                    f"\"scripted-researcher\" -> \"other-researcher\", max-steps {old['max_steps']} -> 5); set "
                    "overwrite: true to recompute it, or choose another output-dir to keep it")
    assert "\n" not in line
    assert "temperature (none) -> 0.5" in refusal("x", {}, {"code.temperature": 0.5})


def test_keys_are_named_as_the_user_wrote_them(tmp_path: Path) -> None:
    """Every key a real fingerprint holds is named as a key of the YAML (or says what sets it)."""
    found = fingerprint_of(make_config(tmp_path, guidance_level=2))
    named = {key: user_key(key) for key in found}
    assert named["feedback.model"] == "human-agent-model" and named["code.model"] == "model"
    assert named["feedback.top_p"] == "human-top-p" and named["code.max_output_tokens"] == "max-tokens"
    assert named["memory.to_keep"] == "memory-to-keep" and named["setting"] == "evaluation-setting"
    keys = {name for name in named.values() if " " not in name}
    assert keys <= KNOWN_KEYS, keys - KNOWN_KEYS
    assert not any("." in name or "_" in name.split(" ")[0] for name in named.values()), named


def test_many_changes_name_five_and_point_to_a_file_with_all(tmp_path: Path) -> None:
    old = fingerprint_of(make_config(tmp_path, guidance_level=1))
    edited = {name: f"{text} " for name, text in prompt_texts(prompts_module).items() if isinstance(text, str)}
    new = fingerprint_of(make_config(tmp_path, guidance_level=1, human_agent_model="other", max_steps=5),
                         prompts={**prompt_texts(prompts_module), **edited})
    changed = diff_fingerprints(old, new)
    assert len(changed) > 12
    line = refusal("out/task_1_result.pkl", old, new)
    assert line.count(" -> ") == 5 and len(line) < 700 and "\n" not in line
    listed = Path(line.split(f"all {len(changed)} in ")[1].split(")")[0])
    assert listed.read_text().splitlines() == [
        f"{user_key(key)} {json.dumps(old[key])} -> {json.dumps(new[key])}" for key in changed]
    assert refusal("out/task_1_result.pkl", old, new) == line  # the same refusal, the same file


def test_a_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="hold a secret"):
        job_fingerprint(models={"code": {"model": "m", "api_key": "sk-live"}}, protocol="p", prompts={},
                        setting="agent", level=0, max_steps=3, memory={}, feedback_source="model", dataset="d",
                        harness="h")
