#!/usr/bin/env python3
"""Write the task -> env name -> requirements mapping found in a dataset's test.sh files.

The output is a valid requirements map (the format of
``<dataset>/requirements/env_map.yaml``): fill in the ``requirements: null``
entries (e.g. with the release's ``requirements_*.txt``) and save it there, or
pass it to manage_envs.py with ``--requirements-map``. Tasks whose test.sh
activates no env are listed under ``tasks_without_env``; they, and envs left
null, use the default group.

    python scripts/extract_env_map.py --dataset-dir work_dir/dataset --out env_map.yaml
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.envs.spec import (  # noqa: E402
    EnvError,
    find_requirements_map,
    load_requirements_map,
    requirements_source,
    task_env_names,
)
from agent.utils import DatasetError, DatasetManager  # noqa: E402

DEFAULT_DATASET = Path(__file__).resolve().parents[1] / "work_dir" / "dataset"


def shown(path: Path | None, relative_to: Path, dataset_root: Path) -> str | None:
    """Files inside the dataset relative to where the map will live (so the pair can move); others absolute."""
    if path is None:
        return None
    return os.path.relpath(path, relative_to) if path.is_relative_to(dataset_root) else str(path)


def build_map(dataset: DatasetManager, requirements_map: Path | None, relative_to: Path) -> dict:
    """The mapping as plain data; file paths are relative to ``relative_to`` (where the map will live)."""
    rmap = load_requirements_map(find_requirements_map(dataset.root, requirements_map))
    by_task = task_env_names(dataset, None)
    envs: dict[str, dict] = {}
    for index, env_name in by_task.items():
        if env_name is None:
            continue
        if env_name not in envs:
            group, source = requirements_source(env_name, dataset.root / "requirements", rmap)
            found = source if group == env_name else None
            envs[env_name] = {"requirements": shown(found, relative_to, dataset.root), "tasks": []}
        envs[env_name]["tasks"].append(index)
    return {
        "default": shown(rmap.default, relative_to, dataset.root),
        "envs": envs,
        "tasks_without_env": [index for index, env_name in by_task.items() if env_name is None],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset-dir", default=str(DEFAULT_DATASET), help="dataset folder (default: work_dir/dataset)")
    parser.add_argument("--out", help="write the YAML here (default: print it)")
    parser.add_argument("--requirements-map", help="an existing map to resolve env names with")
    args = parser.parse_args(argv)
    dataset = DatasetManager(args.dataset_dir)
    out = Path(args.out).resolve() if args.out else None
    relative_to = out.parent if out else dataset.root / "requirements"
    try:
        mapping = build_map(dataset, Path(args.requirements_map) if args.requirements_map else None, relative_to)
    except (DatasetError, EnvError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = (
        f"# env map of {dataset.root}, written by scripts/extract_env_map.py\n"
        f"# relative requirement paths are relative to {relative_to}; null entries use the default group\n"
        + yaml.safe_dump(mapping, sort_keys=False)
    )
    if out:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    unresolved = sorted(name for name, entry in mapping["envs"].items() if entry["requirements"] is None)
    print(
        f"{sum(len(e['tasks']) for e in mapping['envs'].values())} tasks in {len(mapping['envs'])} envs; "
        f"{len(mapping['tasks_without_env'])} tasks name no env; "
        f"envs without requirements: {', '.join(unresolved) or 'none'}"
        + (f"; wrote {out}" if out else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
