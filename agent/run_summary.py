"""The end-of-run table: per model x guidance level, what the run achieved and what it cost.

Computed from the job outcomes of ``run_task`` (finished, skipped-as-already-
finished and errored jobs alike): solved counts and rates cover the whole
experiment even on a resumed run, while tokens and dollars are what this
invocation spent (a skipped task costs nothing now).
"""
from __future__ import annotations

from dataclasses import dataclass

from agent.text_table import fixed_width


@dataclass(frozen=True)
class SummaryRow:
    model: str
    level: int
    tasks: int
    solved: int
    errors: int
    recall: float           # share of tasks solved within the run's turns
    pass_rate: float        # mean over tasks of the best test-case pass rate
    input_tokens: int
    output_tokens: int
    cost_usd: float         # sum of the known costs
    unpriced: int           # jobs whose cost is unknown (no price, or the job failed)


def summarize(outcomes: list[dict], model_order: list[str] | None = None) -> list[SummaryRow]:
    """One row per (model, level): models in ``model_order`` (default: first seen), levels ascending."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for outcome in outcomes:
        groups.setdefault((outcome["model"], outcome["level"]), []).append(outcome)
    models = list(dict.fromkeys([*(model_order or []), *(model for model, _ in groups)]))
    rows = []
    for (model, level), group in sorted(groups.items(), key=lambda item: (models.index(item[0][0]), item[0][1])):
        solved = sum(bool(o["solved"]) for o in group)
        rows.append(SummaryRow(
            model=model,
            level=level,
            tasks=len(group),
            solved=solved,
            errors=sum(o["state"] == "error" for o in group),
            recall=solved / len(group),
            pass_rate=sum(o["best_rate"] for o in group) / len(group),
            input_tokens=sum(o["input_tokens"] or 0 for o in group),
            output_tokens=sum(o["output_tokens"] or 0 for o in group),
            cost_usd=sum(o["cost_usd"] or 0.0 for o in group),
            unpriced=sum(o["cost_usd"] is None for o in group),
        ))
    return rows


def format_table(rows: list[SummaryRow], max_turn: int) -> str:
    """A fixed-width text table; costs with unknown parts are marked '*' and explained below."""
    header = ("model", "level", "solved", f"Recall@{max_turn}", "test-case pass", "tokens in", "tokens out",
              "cost $ (this run)")
    body = [
        (
            row.model,
            f"L{row.level}",
            f"{row.solved}/{row.tasks}" + (f" ({row.errors} err)" if row.errors else ""),
            f"{100 * row.recall:.1f}%",
            f"{100 * row.pass_rate:.1f}%",
            f"{row.input_tokens:,}",
            f"{row.output_tokens:,}",
            f"{row.cost_usd:.4f}" + ("*" if row.unpriced else ""),
        )
        for row in rows
    ]
    lines = fixed_width(header, body)
    if any(row.unpriced for row in rows):
        lines.append("* lower bound: some jobs have no known cost (no price in the price table, or the job failed)")
    return "\n".join(lines)
