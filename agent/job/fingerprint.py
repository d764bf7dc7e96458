"""A job's identity: everything that shapes its trajectory, as named values, so a resumed or skipped job can be
checked against the configuration that made it, and a change named key by key.

Pure functions on plain data; the caller builds the inputs from its RunConfig. ``max-turn`` is left out on
purpose: raising it extends a trajectory whose prefix stays valid. API keys never enter (they do not shape
a trajectory, and fingerprints are written next to results).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SHOWN_TEXT_CHARS = 64  # longer texts are kept as a hash
# Where a model is served (base-url, endpoint, API version) is left out: a local server restarted on another
# port, or a proxy in front of the same model, serves the same trajectory.
MODEL_KEYS = ("provider", "model", "deployment", "temperature", "top_p", "max_output_tokens", "reasoning_effort",
              "thinking_budget", "fold_system", "openai_api", "script")
SECRET_KEYS = {"api_key"}
_MISSING: Any = object()
SHOWN_CHANGES = 5  # changed keys a refusal names; the rest go to a file it points to
# How the user wrote what each fingerprint key holds: the YAML key (config/default.yaml), or what sets it.
_SETTING_KEYS = {
    "protocol": "protocol", "setting": "evaluation-setting", "level": "guidance-level",
    "guidance_type": "guidance-type", "max_guidance_level": "max-guidance-level", "max_steps": "max-steps",
    "edit_action": "edit-action", "reindent_snippet": "reindent-snippet", "feedback_source": "feedback-source", "replayed_level": "replay-run-feedback-level",
    "dataset": "the task's files (work-dir)", "harness": "the harness version",
    "memory.threshold": "memory-threshold", "memory.to_keep": "memory-to-keep",
}
_MODEL_FIELDS = {
    "provider": "api-provider", "model": "model", "deployment": "deployment", "temperature": "temperature",
    "top_p": "top-p", "max_output_tokens": "max-tokens", "reasoning_effort": "reasoning-effort",
    "thinking_budget": "thinking-budget", "script": "script",
    "fold_system": "protocol (system prompt folded for this model)", "openai_api": "protocol (OpenAI API used)",
}
_ROLE_PREFIX = {"code": "", "feedback": "human-"}
_HUMAN_EXCEPTIONS = {"model": "human-agent-model"}  # the release's name of the feedback model's key


def text_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _value(value: Any) -> Any:
    """A scalar as it is (short text included); long text and anything nested as a hash of its canonical JSON."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str) and len(value) <= SHOWN_TEXT_CHARS:
        return value
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text_hash(text)


def job_fingerprint(*, models: Mapping[str, Mapping[str, Any]], prompts: Mapping[str, Any],
                    memory: Mapping[str, Any], **settings: Any) -> dict[str, Any]:
    """The fingerprint of one (model, setting, level, task) job, as ``{"name": value}``.

    ``models``: role (``code``, ``feedback``, ...) -> the model's settings (provider, model, base-url,
    sampling; keys outside :data:`MODEL_KEYS` are ignored and secrets refused); ``prompts``: name -> the
    text (or structure) the protocol sends; ``memory``: the memory parameters; ``settings``: the job's other
    named values (protocol, setting, level, max_steps, feedback_source, dataset: the task's fingerprint,
    harness: its version, ...).
    """
    found: dict[str, Any] = {name: _value(value) for name, value in settings.items()}
    for role, spec in models.items():
        leaked = SECRET_KEYS & set(spec)
        if leaked and any(spec[key] for key in leaked):
            raise ValueError(f"model settings of '{role}' hold a secret ({', '.join(sorted(leaked))}); leave it out")
        found.update({f"{role}.{key}": _value(spec.get(key)) for key in MODEL_KEYS})
    found.update({f"memory.{key}": _value(value) for key, value in memory.items()})
    found.update({f"prompt.{name}": _value(text) for name, text in prompts.items()})
    return dict(sorted(found.items()))


def diff_fingerprints(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Keys whose values differ, in order; a key present on one side only counts as changed."""
    return sorted(key for key in set(old) | set(new) if old.get(key, _MISSING) != new.get(key, _MISSING))


def _shown(value: Any) -> str:
    return "(none)" if value is _MISSING else json.dumps(value) if isinstance(value, str) else str(value)


def user_key(key: str) -> str:
    """A fingerprint key as the user wrote it in the YAML: ``feedback.model`` -> ``human-agent-model``,
    ``code.top_p`` -> ``top-p``, ``max_steps`` -> ``max-steps``, ``prompt.X`` -> ``prompt X``."""
    if key in _SETTING_KEYS:
        return _SETTING_KEYS[key]
    role, _, field = key.partition(".")
    if role in _ROLE_PREFIX and field in _MODEL_FIELDS:
        name = _MODEL_FIELDS[field]
        if role == "feedback" and " " not in name:
            return _HUMAN_EXCEPTIONS.get(field, f"human-{name}")
        return name if role == "code" else f"{name}, feedback model"
    if role == "prompt" and field:
        return f"prompt {field} (release-prompts or the harness's prompts)"
    return key


def _changes_file(lines: list[str]) -> Path:
    """Every change, one per line, in a file named by its content (the same refusal writes it once)."""
    text = "".join(f"{line}\n" for line in lines)
    path = Path(tempfile.gettempdir()) / f"recode-h-changes-{hashlib.sha256(text.encode()).hexdigest()[:12]}.txt"
    if not path.exists():
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    return path


def refusal(where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The one line refusing to resume or skip ``where`` (a result file) made under ``old``: the changed keys
    named as the user wrote them, at most :data:`SHOWN_CHANGES` of them, and a file listing them all."""
    changes = [f"{user_key(key)} {_shown(old.get(key, _MISSING))} -> {_shown(new.get(key, _MISSING))}"
               for key in diff_fingerprints(old, new)]
    shown = ", ".join(changes[:SHOWN_CHANGES])
    if len(changes) > SHOWN_CHANGES:
        shown += f", and {len(changes) - SHOWN_CHANGES} more: all {len(changes)} in {_changes_file(changes)}"
    return (f"{where} was made under another configuration ({shown}); set overwrite: true to recompute it, "
            "or choose another output-dir to keep it")


