#!/usr/bin/env python3
"""Write the env each task's test.sh activates, as the release does: JSON ``{task id: env name}``.

    python scripts/extract_env_map.py --dataset-dir work_dir/dataset [--meta FILE] [--out env_map.json]

(the release's spellings ``--ref-dataset-dir`` and ``--meta-jsonl`` work too).

Tasks come from ``--meta`` (default: the dataset's annotation_meta.jsonl;
every runnable row); a task whose test.sh activates no env maps to null. The
JSON is what the test runner's ``--env-map-path`` reads.

``--format yaml`` (or an ``--out`` ending in .yaml/.yml) writes instead a
requirements map (the format of ``<dataset>/requirements/env_map.yaml``):
env -> requirements file, with the tasks of each; fill in the
``requirements: null`` entries and save it there, or pass it to manage_envs.py
with ``--requirements-map``. Tasks without an env, and envs left null, use the
default group.
"""
from __future__ import annotations

import argparse
import json
import os
import importlib.util
import sys
from pathlib import Path

import yaml

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from agent.common.setup_hint import name_missing_modules  # noqa: E402

name_missing_modules()

from agent.envs.spec import (  # noqa: E402
    EnvError,
    find_requirements_map,
    load_requirements_map,
    requirements_source,
    task_env_names,
)
from agent.task.dataset import DatasetError, DatasetManager  # noqa: E402
from metrics.cli_flags import Parser, add_dataset_dirs, add_flag, dataset_dir  # noqa: E402

def shown(path: Path | None, relative_to: Path, dataset_root: Path) -> str | None:
    """Files inside the dataset relative to where the map will live (so the pair can move); others absolute."""
    if path is None:
        return None
    return os.path.relpath(path, relative_to) if path.is_relative_to(dataset_root) else str(path)


def build_map(dataset: DatasetManager, requirements_map: Path | None, relative_to: Path) -> dict:
    """The requirements map as plain data; file paths are relative to ``relative_to`` (where the map will live)."""
    rmap = load_requirements_map(find_requirements_map(dataset.root, requirements_map))
    by_task = task_env_names(dataset, None)
    envs: dict[str, dict] = {}
    for index, env_name in by_task.items():
        if env_name is None:
            continue
        if env_name not in envs:
            group, source = requirements_source(env_name, dataset.root / "requirements", rmap, dataset.root)
            found = source if group == env_name else None
            envs[env_name] = {"requirements": shown(found, relative_to, dataset.root), "tasks": []}
        envs[env_name]["tasks"].append(index)
    return {
        "default": shown(rmap.default, relative_to, dataset.root),
        "envs": envs,
        "tasks_without_env": [index for index, env_name in by_task.items() if env_name is None],
    }


def task_env_json(dataset: DatasetManager) -> tuple[str, str]:
    """(JSON ``{"<task id>": env name or null}`` of the runnable tasks in meta order, one-line summary)."""
    by_task = task_env_names(dataset, None)
    envs = {env for env in by_task.values() if env}
    text = json.dumps({str(index): env for index, env in by_task.items()}, indent=2) + "\n"
    return text, f"{len(by_task)} tasks in {len(envs)} envs"


def requirements_map_yaml(dataset: DatasetManager, requirements_map: Path | None, out: Path | None) -> tuple[str, str]:
    """(YAML text, one-line summary) of the requirements map."""
    relative_to = out.parent if out else dataset.root / "requirements"
    mapping = build_map(dataset, requirements_map, relative_to)
    text = (
        f"# env map of {dataset.root}, written by scripts/extract_env_map.py\n"
        f"# relative requirement paths are relative to {relative_to}; null entries use the default group\n"
        + yaml.safe_dump(mapping, sort_keys=False)
    )
    unresolved = sorted(name for name, entry in mapping["envs"].items() if entry["requirements"] is None)
    summary = (f"{sum(len(e['tasks']) for e in mapping['envs'].values())} tasks in {len(mapping['envs'])} envs; "
               f"{len(mapping['tasks_without_env'])} tasks name no env; "
               f"envs without requirements: {', '.join(unresolved) or 'none'}")
    return text, summary


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_dirs(parser, release=True)
    add_flag(parser, "--meta", release=True, metavar="FILE",
             help="the meta file listing the tasks (default: <dataset>/annotation_meta.jsonl)")
    add_flag(parser, "--out", metavar="FILE", help="write here (default: print it)")
    parser.add_argument("--format", choices=("json", "yaml"),
                        help="json: task id -> env name (default); yaml: env -> requirements file (default for a .yaml/.yml --out)")
    parser.add_argument("--requirements-map", help="with --format yaml: an existing map to resolve env names with")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve() if args.out else None
    fmt = args.format or ("yaml" if out and out.suffix in (".yaml", ".yml") else "json")
    root = dataset_dir(parser, args, _CHECKOUT / "work_dir" / "dataset")
    try:
        meta = Path(args.meta).expanduser().resolve() if args.meta else None
        dataset = DatasetManager(root, str(meta)) if meta else DatasetManager(root)
        if fmt == "json":
            text, summary = task_env_json(dataset)
        else:
            text, summary = requirements_map_yaml(dataset, Path(args.requirements_map) if args.requirements_map else None, out)
    except (DatasetError, EnvError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if out:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    print(summary + (f"; wrote {out}" if out else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
