"""The end-of-run table: per model x guidance level, what the run achieved and what it cost.

Computed from the job outcomes of ``run_task`` (finished, skipped-as-already-
finished, stopped and errored jobs alike). Only complete jobs are scored:
a job that stopped early (feedback that could not be produced, the budget, an
error) is counted as incomplete, never as solved or unsolved at its level, and
:func:`stop_notes` says how many stopped and why. Solved counts and rates cover
the whole experiment even on a resumed run, while tokens and dollars are what
this invocation spent (a skipped task costs nothing now). The table says so in
its headers and its last line, since the report (:data:`REPORT_SCRIPT`) counts the
tokens and dollars of all results in the folder and the two differ after a resume.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from metrics.result_format import STOP_KEY
from metrics.run_status import BUDGET, FEEDBACK_MISSING, TAMPERED_STOP
from agent.common.text_table import fixed_width
from agent.job.record import CACHE_KEYS

MAX_LISTED = 5  # stopped jobs named per reason under the table
# The documented command after a run (docs/cli.md): every metric's table, the figures and the HTML report.
REPORT_SCRIPT = "scripts/analyze_results.py"


def report_command(output_dir: Path, dataset_dir: Path) -> str:
    """The command that reports on ``output_dir``, quoted for a shell (users' paths have spaces); the dataset
    is named unless it is the report's default, ``work_dir/dataset`` of the current folder."""
    command = f"python {REPORT_SCRIPT} --output-dir {shlex.quote(str(output_dir))}"
    if dataset_dir.resolve() != (Path.cwd() / "work_dir" / "dataset").resolve():
        command += f" --dataset-dir {shlex.quote(str(dataset_dir))}"
    return command
STOP_COUNTS = ("length", "refusal", "content_filter")  # answer stops counted per row (agent/models/stops.py)
CONTEXT_LENGTH = "context_length"


@dataclass(frozen=True)
class SummaryRow:
    model: str
    level: int
    tasks: int              # complete jobs: finished now or earlier
    solved: int
    incomplete: int         # jobs that stopped early or failed: not scored
    recall: float | None    # share of complete jobs solved within the run's turns (None: none complete)
    pass_rate: float | None  # mean over complete jobs of the best test-case pass rate
    input_tokens: int
    output_tokens: int
    cost_usd: float         # sum of the known costs
    unpriced: int           # jobs whose cost is unknown (no price, or the job failed)
    truncated: int = 0      # answers (code and feedback) cut off at the output limit, over the jobs' turns
    refusals: int = 0       # answers that are the model's refusal
    filtered: int = 0       # answers the provider's safety filter stopped
    context_limit: int = 0  # jobs stopped because a request exceeds the model's context (not a score)
    request_refused: int = 0  # jobs stopped because a request is refused as sent for another reason
    tampered: int = 0       # jobs stopped at a turn graded tampered (on-tampered: stop; not a score)

    @property
    def stops(self) -> tuple[int, ...]:
        return (self.truncated, self.refusals, self.filtered, self.context_limit, self.request_refused,
                self.tampered)


def is_complete(outcome: dict) -> bool:
    """Finished now, or skipped because it had finished (a partial task skipped carries why in ``error``)."""
    return outcome["state"] == "finished" or (outcome["state"] == "skipped" and not outcome.get("error"))


def summarize(outcomes: list[dict], model_order: list[str] | None = None) -> list[SummaryRow]:
    """One row per (model, level): models in ``model_order`` (default: first seen), levels ascending."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for outcome in outcomes:
        groups.setdefault((outcome["model"], outcome["level"]), []).append(outcome)
    models = list(dict.fromkeys([*(model_order or []), *(model for model, _ in groups)]))
    rows = []
    for (model, level), group in sorted(groups.items(), key=lambda item: (models.index(item[0][0]), item[0][1])):
        complete = [o for o in group if is_complete(o)]
        solved = sum(bool(o["solved"]) for o in complete)
        rows.append(SummaryRow(
            model=model,
            level=level,
            tasks=len(complete),
            solved=solved,
            incomplete=len(group) - len(complete),
            recall=solved / len(complete) if complete else None,
            pass_rate=sum(o["best_rate"] for o in complete) / len(complete) if complete else None,
            input_tokens=sum(o["input_tokens"] or 0 for o in group),
            output_tokens=sum(o["output_tokens"] or 0 for o in group),
            cost_usd=sum(o["cost_usd"] or 0.0 for o in group),
            unpriced=sum(o["cost_usd"] is None for o in group),
            **stop_counts(group),
        ))
    return rows


def stop_counts(group: list[dict]) -> dict[str, int]:
    """The answer stops and the refused or tampered jobs of one (model, level) group of outcomes."""
    answers = [sum((o.get("answer_stops") or {}).get(reason, 0) for o in group) for reason in STOP_COUNTS]
    refused = [o for o in group if o["state"] in ("refused", "skipped") and o.get(STOP_KEY) not in
               (None, TAMPERED_STOP, FEEDBACK_MISSING, BUDGET)]
    return {"truncated": answers[0], "refusals": answers[1], "filtered": answers[2],
            "context_limit": sum(o[STOP_KEY] == CONTEXT_LENGTH for o in refused),
            "request_refused": sum(o[STOP_KEY] != CONTEXT_LENGTH for o in refused),
            "tampered": sum(o.get(STOP_KEY) == TAMPERED_STOP for o in group)}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def format_table(rows: list[SummaryRow], max_turn: int) -> str:
    """A fixed-width text table; costs with unknown parts are marked '*' and explained below."""
    header = ("model", "level", "solved (all)", "incomplete", f"Recall@{max_turn} (all)", "test-case pass (all)",
              "tokens in (this run)", "tokens out (this run)", "cost $ (this run)")
    body = [
        (
            row.model,
            f"L{row.level}",
            f"{row.solved}/{row.tasks}",
            str(row.incomplete),
            _percent(row.recall),
            _percent(row.pass_rate),
            f"{row.input_tokens:,}",
            f"{row.output_tokens:,}",
            f"{row.cost_usd:.4f}" + ("*" if row.unpriced else ""),
        )
        for row in rows
    ]
    if any(any(row.stops) for row in rows):
        header += ("answers cut/refused/filtered (all)", "stopped: context/refused/tampered")
        body = [(*line, "/".join(map(str, row.stops[:3])), "/".join(map(str, row.stops[3:])))
                for line, row in zip(body, rows)]
    lines = fixed_width(header, body)
    if any(any(row.stops) for row in rows):
        lines.append("cut/refused/filtered: answers truncated at the output limit, refused by the model, stopped "
                     "by the provider's filter (protocol release applies them as they came, as the release does; "
                     "protocol improved never applies them); stopped: jobs ended by a request too long for the "
                     "model's context, a request refused as sent, a turn graded tampered (not scores; listed below)")
    if any(row.incomplete for row in rows):
        lines.append("solved, Recall and pass rates cover complete jobs only; incomplete jobs are listed below")
    if any(row.unpriced for row in rows):
        lines.append("* lower bound: some jobs have no known cost (no price in the price table, or the job failed)")
    lines.append("(all): every stored result of these jobs, earlier runs included; (this run): spent by this "
                 f"command only. The report ({REPORT_SCRIPT}) counts tokens and cost over all results.")
    return "\n".join(lines)


def _job(outcome: dict) -> str:
    return f"task {outcome['task_index']} L{outcome['level']} {outcome['model']}"


def _listed(title: str, group: list[dict]) -> list[str]:
    lines = [f"{len(group)} job(s) {title}:"]
    lines += [f"  {_job(o)}: {o.get('error')}" for o in group[:MAX_LISTED]]
    if len(group) > MAX_LISTED:
        lines.append(f"  ... and {len(group) - MAX_LISTED} more (the run record lists them all)")
    return lines


def cache_record(outcomes: list[dict], enabled: bool) -> dict:
    """The run record's prompt-cache figures of this invocation."""
    totals = {key: sum(o.get(key) or 0 for o in outcomes) for key in CACHE_KEYS}
    return {"enabled": enabled, "input_tokens": sum(o.get("input_tokens") or 0 for o in outcomes), **totals}


def cache_note(record: dict) -> str:
    """The line under the table: how much of the input the providers' prompt caches served, and what it saved."""
    if not record["enabled"]:
        return "prompt caching: off (prompt-caching: false); providers that cache by themselves may still report hits"
    share = record["cached_tokens"] / record["input_tokens"] if record["input_tokens"] else 0.0
    return (f"prompt caching: {record['cached_tokens']:,} of {record['input_tokens']:,} input tokens read from the "
            f"providers' caches ({100 * share:.1f}%), {record['cache_write_tokens']:,} written; "
            f"saved ${record['cache_saved_usd']:.4f} at list prices (this run)")


def stop_notes(outcomes: list[dict]) -> list[str]:
    """Lines under the table: how many jobs stopped early, for which reason, and the first few of each."""
    feedback = [o for o in outcomes if o.get(STOP_KEY) == FEEDBACK_MISSING]
    budget = [o for o in outcomes if o.get(STOP_KEY) == BUDGET]
    refused = [o for o in outcomes if o["state"] == "refused"]
    tampered = [o for o in outcomes if o["state"] == "tampered"]
    other = [o for o in outcomes if o["state"] == "error" and o.get(STOP_KEY) is None]
    partial = [o for o in outcomes if o["state"] == "skipped" and o.get("error")]
    lines: list[str] = []
    if feedback:
        lines += _listed("stopped because their feedback could not be produced (an infrastructure failure, not "
                         "a score; the next run asks again and continues)", feedback)
    if budget:
        lines += _listed("stopped at the budget (a higher cap continues them)", budget)
    if refused:
        lines += _listed("stopped because the provider refuses their request as sent (the reason is named; not a "
                         "score: the same settings are never resent, see docs/failures.md)", refused)
    if tampered:
        lines += _listed("stopped at a turn graded tampered (on-tampered: stop; not a score)", tampered)
    if other:
        lines += _listed("failed", other)
    if partial:
        lines += _listed("skipped with partial results", partial)
    unknown = sum(o.get("unpriced_calls") or 0 for o in outcomes)
    if unknown:
        lines.append(f"{unknown} model call(s) of this run have an unknown cost (no price for the model, or no "
                     "token counts): they are not in the dollars above")
    return lines
