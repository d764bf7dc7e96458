"""CodeBLEU of a turn's file against canonical.py, equal weights 0.25 each (docs/ARCHITECTURE.md, "Metrics").

Optional extra: codebleu==0.7.0 with tree-sitter==0.22.3 and tree-sitter-python==0.21.0
(newer grammar packages fail inside codebleu). Scores are per task, then macro-averaged.

Usage: python metrics/metric_codebleu.py --output-dir DIR --model m1,m2
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from metric_aggregate import level_values
from metric_cli import Context, run_cli
from metric_tables import Table
from optional_extras import ExtraUnavailable, import_extra
from reference_similarity import get_empty_filal_code, reference_scorer, reference_tables, remove_codecomments
from result_files import DEFAULT_GUIDANCE_TYPE, DEFAULT_SETTING, LEVELS, RunSelection
from task_meta import DEFAULT_DATASET_DIR, read_canonical

__all__ = ["calculate_codebleu", "get_empty_filal_code", "get_init_model_code_bleu", "get_model_code_bleu",
           "read_canonical", "remove_codecomments"]

WEIGHTS = (0.25, 0.25, 0.25, 0.25)
PINS = "pip install codebleu==0.7.0 tree-sitter==0.22.3 tree-sitter-python==0.21.0"


def calculate_codebleu(generated: str | list[str], references: str | list[str],
                       weights: tuple[float, float, float, float] = WEIGHTS) -> float:
    """CodeBLEU of generated code against its reference (one file each, or equally long lists).

    codebleu logs a warning whenever a short example has no data flow; one per task
    would bury the table, so logging is muted during the call.
    """
    codebleu = import_extra("codebleu", "CodeBLEU")
    predictions = [generated] if isinstance(generated, str) else list(generated)
    targets = [references] if isinstance(references, str) else list(references)
    logging.disable(logging.WARNING)
    try:
        return float(codebleu.calc_codebleu(targets, predictions, lang="python", weights=weights)["codebleu"])
    finally:
        logging.disable(logging.NOTSET)


@lru_cache(maxsize=1)
def check_codebleu() -> None:
    """Fail early, in one line, when codebleu is absent or paired with an incompatible grammar package."""
    try:
        calculate_codebleu("x = 1\n", "x = 1\n")
    except TypeError as exc:
        raise ExtraUnavailable(f"codebleu cannot load the Python grammar ({exc}); {PINS}") from None


@lru_cache(maxsize=4096)
def code_bleu(candidate: str, reference: str) -> float:
    """CodeBLEU of one candidate against one reference (cached: every level shares turn 0)."""
    check_codebleu()
    return calculate_codebleu(candidate, reference)


def get_model_code_bleu(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[float | None]:
    """Mean CodeBLEU of the last turn's file per guidance level."""
    selection = RunSelection(result_dir, setting, guidance_type, levels)
    return level_values(model, task_ids, reference_scorer(dataset_dir, -1, code_bleu), selection)


def get_init_model_code_bleu(
    model: str, task_ids: Iterable[int], result_dir: Path | str | None = None, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[float | None]:
    """Mean CodeBLEU of the turn-0 file per guidance level."""
    selection = RunSelection(result_dir, setting, guidance_type, levels)
    return level_values(model, task_ids, reference_scorer(dataset_dir, 0, code_bleu), selection)


def tables(ctx: Context) -> list[Table]:
    check_codebleu()
    return reference_tables(ctx, "CodeBLEU", code_bleu)


def main(argv: Iterable[str] | None = None) -> int:
    return run_cli(__doc__, tables, argv=argv, turn_options=())


if __name__ == "__main__":
    sys.exit(main())
