"""Test helper of the agent-loop tests: a real RunConfig for the sample tasks and the scripted models."""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import yaml

from agent.config import RunConfig, load_config
from agent.protocols.release_texts import load_release_texts

REPO = Path(__file__).resolve().parents[1]
VOLATILE_KEYS = {"duration_sec", "wall_time_sec", "report_path", "output", "latency_sec"}


def make_config(tmp_path: Path, **keys: object) -> RunConfig:
    """load_config on a YAML written in ``tmp_path``; ``keys`` use the YAML's names with '_' for '-'

    (``init_seed`` is spelt with '_' in the YAML too, as in the release).
    """
    raw = {
        "api-provider": "scripted", "model": "scripted-coder",
        "script": str(REPO / "config/scripted/code_model.yaml"),
        "human-api-provider": "scripted", "human-agent-model": "scripted-researcher",
        "human-script": str(REPO / "config/scripted/feedback_model.yaml"),
        "work-dir": str(REPO / "work_dir/dataset"), "output-dir": str(tmp_path / "results"),
        "env-backend": "current", "guidance-level": 0, "resume": True, "max-turn": 2, "test-timeout-sec": 120, "parallel-mode": "none",
    }
    raw.update({key if key == "init_seed" else key.replace("_", "-"): value for key, value in keys.items()})
    path = tmp_path / f"config_{len(list(tmp_path.glob('config_*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return load_config(path)


def comparable(turns: list[dict]) -> object:
    """Turn records without timings, object addresses and temp paths, for comparing two runs of one task."""
    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE_KEYS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    text = json.dumps(strip(turns), sort_keys=True)
    text = re.sub(r"\b0x[0-9a-fA-F]{6,}\b", "0x...", text)
    return json.loads(re.sub(re.escape(tempfile.gettempdir()) + r"/[^/\\\s'\"]+", "<tmp>", text))


# What a scripted test server reads in a code request, under both protocols (the release's in our own words).
_OURS = load_release_texts(None)
_TEST_INFO_HEAD = _OURS.texts["test_info"].split("{status}")[0]
_WROTE_FILE = re.compile(r"## Result of your last action \((?:REPLACE|EDIT)|" + re.escape(
    _OURS.fill("result_wrap", result=_OURS.fill("replace_done"), guidance=_OURS.fill("guidance")) + "\n") + r"\Z")
_SUMMARY = re.compile(r"Summarise the history below|" + re.escape(_OURS.fill("summary_request", conversation="")
                                                                  .split("\n\n")[0].strip()))


def turn_of(prompt: str) -> int:
    """The turn a code request belongs to: its step header (improved protocol), else the number of test results
    it shows (release protocol: turn t has seen t of them)."""
    found = re.search(r"## Turn (\d+), step", prompt)
    return int(found.group(1)) if found else prompt.count(_TEST_INFO_HEAD)


def wrote_file(prompt: str) -> bool:
    """Whether the request's last action result says the file was written (time to SUBMIT)."""
    return _WROTE_FILE.search(prompt) is not None


def asks_summary(prompt: str) -> bool:
    return _SUMMARY.search(prompt) is not None
