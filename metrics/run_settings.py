"""What the runs of a results folder were asked to do, read from their run records.

The harness writes ``<output-dir>/run_metadata/<timestamp>_<pid>.json`` per run (agent/run/metadata.py),
whose ``config`` holds ``max_turn``, ``task_ids`` (None: every runnable task), ``guidance_levels``,
``evaluation_setting``, ``guidance_type`` and ``models``. The analysis takes its defaults from them, so a
2-task ``max-turn: 2`` run is reported as Recall@2 over 2 tasks, and the report says what it covers.
Records are plain JSON read here without importing the harness; an unreadable one is named, not fatal.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

RUN_RECORDS = "run_metadata"


@dataclass
class RunSettings:
    """The union of what the matching run records asked for; None where no record says."""

    records: list[str] = field(default_factory=list)   # file names used
    max_turn: int | None = None
    task_ids: list[int] | None = None                  # None: every runnable task (or no record says)
    all_tasks: bool = False                            # a record ran every runnable task
    levels: list[int] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _config(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    config = record.get("config") if isinstance(record, dict) else None
    return config if isinstance(config, dict) else None


def _ints(value: object) -> list[int]:
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)] if isinstance(value, list) else []


def read_run_settings(result_dir: Path | str, setting: str | None = None,
                      guidance_type: str | None = None) -> RunSettings:
    """Settings of the records of ``setting`` and ``guidance_type`` (any when None), oldest to newest."""
    settings = RunSettings()
    turns: set[int] = set()
    tasks: set[int] = set()
    for path in sorted((Path(result_dir) / RUN_RECORDS).glob("*.json")):
        config = _config(path)
        if config is None:
            settings.notes.append(f"run record {path.name} is unreadable or has no config; left out")
            continue
        if setting is not None and config.get("evaluation_setting") not in (None, setting):
            continue
        if guidance_type is not None and config.get("guidance_type") not in (None, guidance_type):
            continue
        settings.records.append(path.name)
        if isinstance(config.get("max_turn"), int):
            turns.add(config["max_turn"])
        if config.get("task_ids") is None:
            settings.all_tasks = True
        tasks.update(_ints(config.get("task_ids")))
        settings.levels = sorted(set(settings.levels) | set(_ints(config.get("guidance_levels"))))
        names = [m.get("model") for m in config.get("models") or [] if isinstance(m, dict)]
        settings.models += [name for name in names if isinstance(name, str) and name not in settings.models]
    if turns:
        settings.max_turn = max(turns)
        if len(turns) > 1:
            settings.notes.append(f"run records disagree on max-turn ({', '.join(map(str, sorted(turns)))}); "
                                  f"using {settings.max_turn}")
    if tasks and not settings.all_tasks:
        settings.task_ids = sorted(tasks)
    return settings
