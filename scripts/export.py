"""Export a results folder to another tool's format. Today: Inspect eval logs (``--format inspect``), one
``.eval`` file per run with one sample per task (messages, scores, token usage), for ``inspect view
--log-dir DIR`` and ``inspect_ai.log.read_eval_log``. Needs the optional extra: pip install inspect_ai.

Usage (from the repo root, or as ``recode-export``):
    python scripts/export.py --format inspect --output-dir experiment_results [--out DIR] [--model m1,m2]
Writes DIR (default OUTPUT_DIR/inspect_logs). Selection options are those of the report (--evaluation-setting,
--guidance-type, --guidance-level, --task-ids, --dataset-dir); --max-turn and --task-ids default to the run records.
"""
import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metrics"))

from analysis import build_contexts  # noqa: E402
from export_inspect import write_inspect_logs  # noqa: E402
from cli_flags import add_flag  # noqa: E402
from metric_cli import USER_ERRORS, base_parser  # noqa: E402
from result_files import warn_stderr  # noqa: E402

FORMATS = {"inspect": write_inspect_logs}
OUT_DIR = "inspect_logs"


def parser() -> argparse.ArgumentParser:
    """The metric scripts' selection options (with their resolution of --dataset-dir / --work-dir);
    ``--format`` names the export format instead of a table format."""
    command = base_parser(__doc__, turn_options=("--max-turn",), table_format=False)
    command.add_argument("--format", choices=sorted(FORMATS), required=True, help="export format")
    add_flag(command, "--out", help=f"output folder (default: OUTPUT_DIR/{OUT_DIR})")
    command.set_defaults(guidance_type=None, levels=None, max_turns=None)
    return command


def main(argv: Iterable[str] | None = None) -> int:
    command = parser()
    args = command.parse_args(None if argv is None else list(argv))
    out = Path(args.out) if args.out else Path(args.result_dir) / OUT_DIR
    try:
        contexts = build_contexts(args)
        written = FORMATS[args.format](contexts, out)
    except USER_ERRORS as exc:
        command.exit(2, f"error: {exc}\n")
    for ctx in contexts:
        for line in ctx.args.covers:
            warn_stderr(f"covers: {line}")
    print(f"{len(written)} Inspect log(s) in {out}; view them with: inspect view --log-dir {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
