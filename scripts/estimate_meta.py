"""What a run would cost on tasks known only from their meta file (annotation_meta.jsonl), e.g. the published
dataset's before it is downloaded: the estimate of ``--estimate``, with stand-in texts of given sizes.

    python scripts/estimate_meta.py --meta ../shared/recode_h/annotation_meta.jsonl \\
        [--yaml-location config/default.yaml] [--paper-chars 1708] [--instruction-chars 3702] [--code-chars 5188]

The meta file gives the tasks, their target files, starting contents and test
cases; it holds no paper, task text or reference file, so their sizes are
flags (defaults: the means of the sample tasks in work_dir/dataset). Every
other figure comes from the run config as ``--estimate`` reads it (no API key
needed, no model called). docs/estimate.md says how to read the table.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from agent.common.setup_hint import name_missing_modules  # noqa: E402

name_missing_modules()

from agent.config import ConfigError, load_config  # noqa: E402
from agent.task.dataset import DatasetError, load_meta  # noqa: E402
from agent.estimate import Assumptions, TaskText, estimate_tasks, job_shape  # noqa: E402
from agent.estimate.report import format_estimate  # noqa: E402
from agent.estimate.walk import filler  # noqa: E402
from agent.models.types import InferenceError  # noqa: E402

SAMPLE_SIZES = {"paper": 1708, "instruction": 3702, "code": 5188}  # means over work_dir/dataset's 8 tasks


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--meta", required=True, type=Path, help="an annotation_meta.jsonl")
    parser.add_argument("--yaml-location", default="config/default.yaml", help="the run config to price")
    parser.add_argument("--paper-chars", type=int, default=SAMPLE_SIZES["paper"], help="characters of each paper")
    parser.add_argument("--instruction-chars", type=int, default=SAMPLE_SIZES["instruction"],
                        help="characters of each task description")
    parser.add_argument("--code-chars", type=int, default=SAMPLE_SIZES["code"],
                        help="characters of each reference file (the assumed size of a code answer)")
    return parser.parse_args(argv)


def stand_in_tasks(meta: Path, paper: int, instruction: int, code: int) -> list[TaskText]:
    """The meta file's runnable tasks with texts of the given sizes."""
    return [TaskText(row.index, filler(paper), filler(instruction), filler(code), row.target_file_path,
                     row.init_content, tuple(row.test_cases)) for row in load_meta(meta) if row.if_test]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        cfg = load_config(args.yaml_location, need_keys=False)
        tasks = stand_in_tasks(args.meta, args.paper_chars, args.instruction_chars, args.code_chars)
    except (ConfigError, DatasetError, InferenceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pending = {model.model: [(task.index, level) for task in tasks for level in cfg.guidance_levels]
               for model in cfg.models}
    seeds = {model: [task.index for task in tasks] for model in pending}
    estimate = estimate_tasks(cfg, tasks, job_shape(cfg), pending, seeds, Assumptions())
    print(format_estimate(estimate.to_dict()))
    print(f"stand-in texts: paper {args.paper_chars:,}, task {args.instruction_chars:,}, reference file "
          f"{args.code_chars:,} characters per task; from {args.meta}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
