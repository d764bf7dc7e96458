"""Cost and effort per model and guidance level: tokens, dollars, turns, wall time, infrastructure errors.

Reads our per-turn keys ``code_usage`` / ``feedback_usage`` (lists of usage
dicts), ``code_cost_usd`` / ``feedback_cost_usd`` and ``wall_time_sec``, and
falls back to the release's ``code_input_tokens``, ``code_output_tokens``,
``feedback_input_token`` and ``feedback_output_token`` (no price, no time).
Tasks whose tests hit an infrastructure error (``status == "infra_error"``)
are counted apart: they are not the model's failures and should be rerun.

Turn 0 is computed once per task and shared by every level (docs/ARCHITECTURE.md, "Protocol"), so a
level's row includes it, and the model's "all" row counts it once per task.

Usage: python scripts/cost_report.py --output-dir DIR --model m1,m2
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from metric_aggregate import LevelSummary, coverage_notes
from metric_cli import Context, run_cli
from metric_tables import Table
from result_files import (DEFAULT_GUIDANCE_TYPE, DEFAULT_RESULT_DIR, DEFAULT_SETTING, LEVELS, LevelRun, RunSelection,
                          load_runs)
from task_meta import DEFAULT_DATASET_DIR

# role -> (usage list key, release input-token key, release output-token key, cost key)
ROLES = {
    "code": ("code_usage", "code_input_tokens", "code_output_tokens", "code_cost_usd"),
    "feedback": ("feedback_usage", "feedback_input_token", "feedback_output_token", "feedback_cost_usd"),
}
TOKEN_KINDS = ("input", "output", "cached", "cache_write")  # cached / cache_write: read from / written to the
# provider's prompt cache (parts of input); "cache saved $" is what that saved at list prices (docs/caching.md)
COLUMNS = ["model", "level", "tasks", "turns", "turns/task", "code in", "code out", "code cached", "code written",
           "fb in", "fb out", "fb cached", "fb written", "cost $", "cache saved $", "wall h", "infra-error tasks"]


def _number(value: object) -> float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _count(value: object) -> float:
    """A release token field: a list of per-call counts (older results: one total)."""
    return sum(_number(v) for v in value) if isinstance(value, list) else _number(value)


def role_usage(turn: dict, role: str) -> dict:
    """Tokens and dollars of one role in one turn; ``priced``/``unpriced`` count prices known/unknown."""
    usage_key, input_key, output_key, cost_key = ROLES[role]
    calls = turn.get(usage_key)
    if isinstance(calls, list):
        calls = [call for call in calls if isinstance(call, dict)]
        tokens = {kind: sum(_number(call.get(f"{kind}_tokens")) for call in calls) for kind in TOKEN_KINDS}
        prices = [call.get("cost_usd") for call in calls]
        saved = sum(_number(call.get("cache_saved_usd")) for call in calls)
    else:
        tokens = {"input": _count(turn.get(input_key)), "output": _count(turn.get(output_key)), "cached": 0,
                  "cache_write": 0}
        prices, saved = [None] if tokens["input"] or tokens["output"] else [], 0.0
    if cost_key in turn:
        prices = [turn[cost_key]]
    known = [price for price in prices if isinstance(price, (int, float))]
    return {**tokens, "cost_usd": float(sum(known)), "priced": len(known), "unpriced": len(prices) - len(known),
            "cache_saved_usd": float(saved)}


def turn_cost(turn: dict) -> dict:
    """Flat numeric record of one turn; sums of these records give any total."""
    row = {"turns": 1, "cost_usd": 0.0, "priced": 0, "unpriced": 0, "wall_time_sec": 0.0, "timed_turns": 0,
           "cache_saved_usd": 0.0}
    for role in ROLES:
        usage = role_usage(turn, role)
        row.update({f"{role}_{kind}": usage[kind] for kind in TOKEN_KINDS})
        for key in ("cost_usd", "priced", "unpriced", "cache_saved_usd"):
            row[key] += usage[key]
    if isinstance(turn.get("wall_time_sec"), (int, float)):
        row["wall_time_sec"], row["timed_turns"] = float(turn["wall_time_sec"]), 1
    return row


def add_costs(rows: Iterable[dict]) -> dict:
    total = turn_cost({}) | {"turns": 0}
    for row in rows:
        total = {key: total[key] + row[key] for key in total}
    return total


def _tokens(row: dict) -> float:
    return sum(value for key, value in row.items() if key.startswith(("code_", "feedback_")))


def level_cost(run: LevelRun) -> dict:
    """Totals of one (model, level) run, with ``tasks`` and ``infra_error_tasks``."""
    total = add_costs(turn_cost(turn) for turns in run.trajectories.values() for turn in turns)
    return total | {"tasks": len(run.trajectories), "infra_error_tasks": len(run.infra_errors)}


def model_cost(runs: list[LevelRun]) -> dict:
    """Totals over all levels with the shared turn 0 counted once per task (its fullest record)."""
    first: dict[int, dict] = {}
    for run in runs:
        for task_id, turns in run.trajectories.items():
            candidate = turn_cost(turns[0])
            if task_id not in first or _tokens(candidate) > _tokens(first[task_id]):
                first[task_id] = candidate
    later = (turn_cost(turn) for run in runs for turns in run.trajectories.values() for turn in turns[1:])
    total = add_costs([*first.values(), *later])
    infra = {task_id for run in runs for task_id in run.infra_errors}
    return total | {"tasks": len(first), "infra_error_tasks": len(infra)}


def get_model_costs(
    model: str, task_ids: Iterable[int], result_dir: Path | str = DEFAULT_RESULT_DIR, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> list[dict]:
    """:func:`level_cost` per guidance level."""
    return [level_cost(run) for run in load_runs(model, task_ids, RunSelection(result_dir, setting, guidance_type, levels))]


def get_model_total_cost(
    model: str, task_ids: Iterable[int], result_dir: Path | str = DEFAULT_RESULT_DIR, *,
    meta_path: Path | str | None = None, setting: str = DEFAULT_SETTING, guidance_type: str = DEFAULT_GUIDANCE_TYPE,
    dataset_dir: Path | str = DEFAULT_DATASET_DIR, levels: Iterable[int] = LEVELS,
) -> dict:
    """:func:`model_cost` over the selected levels."""
    return model_cost(load_runs(model, task_ids, RunSelection(result_dir, setting, guidance_type, levels)))


def cost_row(model: str, label: str, cost: dict) -> list:
    return [
        model, label, cost["tasks"], cost["turns"], cost["turns"] / cost["tasks"] if cost["tasks"] else None,
        *(cost[f"{role}_{kind}"] for role in ROLES for kind in TOKEN_KINDS),
        None if cost["unpriced"] and not cost["priced"] else cost["cost_usd"], cost["cache_saved_usd"],
        cost["wall_time_sec"] / 3600 if cost["timed_turns"] else None,
        cost["infra_error_tasks"],
    ]


def tables(ctx: Context) -> list[Table]:
    rows, unpriced, summaries = [], 0, []
    for model in ctx.models:
        runs = ctx.runs(model)
        for run in runs:
            cost = level_cost(run)
            rows.append(cost_row(model, f"L{run.level}", cost))
            unpriced += cost["unpriced"]
            summaries.append(LevelSummary(model, run.level, None, len(run.trajectories), run))
        rows.append(cost_row(model, "all", model_cost(runs)))
    notes = coverage_notes(summaries)
    notes.append("'all' counts the shared turn 0 once per task; level rows each include it")
    if unpriced:
        notes.append(f"cost $ is a lower bound: {unpriced} model calls or turns have no known price")
    return [Table("Cost and effort", COLUMNS, rows, notes, digits=2)]


def main(argv: Iterable[str] | None = None) -> int:
    return run_cli(__doc__, tables, argv=argv, turn_options=())


if __name__ == "__main__":
    sys.exit(main())
