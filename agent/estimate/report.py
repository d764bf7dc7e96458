"""The estimate as the terminal shows it: before the run (``--estimate``), and beside what a run spent."""
from __future__ import annotations

from typing import Any

from agent.common.text_table import fixed_width
from agent.estimate.walk import SOLVED, UNSOLVED


ROLES = {"code": "code (CodeAgent)", "feedback": "feedback (HumanAgent)"}


def count(n: float) -> str:
    """A token or call count, short: 950, 12.3k, 4.56M."""
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{int(n)}"


def calls(n: int) -> str:
    return f"{n:,}"


def dollars(value: float | None) -> str:
    return "no price" if value is None else f"${value:,.2f}"


def span(low: Any, high: Any, show: Any = count) -> str:
    return show(low) if low == high else f"{show(low)} - {show(high)}"


def format_estimate(estimate: dict) -> str:
    """The table ``--estimate`` prints: per model, calls, tokens and dollars, from a solved to an unsolved run."""
    lines = [_headline(estimate), ""]
    body = []
    for line in estimate["lines"]:
        low, high = line["totals"][SOLVED], line["totals"][UNSOLVED]
        body.append([line["model"], ROLES[line["role"]], span(low["calls"], high["calls"], calls),
                     span(low["input_tokens"], high["input_tokens"]), span(low["output_tokens"], high["output_tokens"]),
                     span(line["dollars"][SOLVED], line["dollars"][UNSOLVED], dollars),
                     span(line["cached_dollars"][SOLVED], line["cached_dollars"][UNSOLVED], dollars)])
    body.append(["all models", "", _total_span(estimate, "calls", calls),
                 *(_total_span(estimate, key) for key in ("input_tokens", "output_tokens")),
                 _total_span(estimate, "dollars", dollars), _total_span(estimate, "cached_dollars", dollars)])
    lines += fixed_width(["model", "role", "calls", "input tokens", "output tokens", "list price",
                          "with prompt caching"], body)
    return "\n".join(lines + ["", *assumption_notes(estimate)])


def _headline(estimate: dict) -> str:
    settings, levels = estimate["settings"], estimate["levels"]
    jobs = estimate["jobs"] - estimate["finished_jobs"]
    seeds = f", {estimate['seeds']} turn-0 seed(s) shared by the levels" if estimate["seeds"] else ""
    done = f" ({estimate['finished_jobs']} more already finished: not counted)" if estimate["finished_jobs"] else ""
    return (f"Estimate, no model called: {jobs} job(s) to run{done}: {estimate['tasks']} task(s) at level(s) "
            f"{'/'.join(map(str, levels))}{seeds}; protocol {settings['protocol']}, "
            f"{settings['evaluation_setting']}, max-turn {settings['max_turn']}, max-steps {settings['max_steps']}, "
            f"{settings['guidance_type']} guidance.")


def _total_span(estimate: dict, key: str, show: Any = count) -> str:
    values = [_total(estimate, key, course) for course in (SOLVED, UNSOLVED)]
    return "no price" if None in values else span(*values, show=show)


def _total(estimate: dict, key: str, course: str) -> float | None:
    """The sum over models of a totals field or of a dollar column; None when some model has no price."""
    values = [line[key][course] if key in ("dollars", "cached_dollars") else line["totals"][course][key]
              for line in estimate["lines"]]
    return None if any(v is None for v in values) else sum(values)


def assumption_notes(estimate: dict) -> list[str]:
    """What the two ends of each range mean and the assumed sizes behind every number."""
    a = estimate["assumptions"]
    return [
        f"low: every task solved at turn 0 (its file written, then submitted), no feedback; high: no task solved, "
        f"all {estimate['settings']['max_turn']} turns, every step writing the whole file, feedback after each turn "
        "but the last where the level gives it, memory summaries as the protocol makes them.",
        f"assumed: {a['chars_per_token']} characters per token; a code answer is the task's reference file; "
        f"a feedback answer holds {a['feedback_records']} records of {a['feedback_field_chars']} characters per "
        f"field; a failing test shows a {a['failure_chars']}-character traceback; a memory summary is "
        f"{a['summary_chars']} characters; no failed or repeated call; hidden reasoning tokens not counted.",
        f"prompt caching: a call reads from the cache the prefix it shares with the previous call of its kind in "
        f"its job (from {a['min_cached_tokens']} tokens) and writes what the next one reuses; prices from the "
        "price table (list prices; check your provider's page).",
    ]


def format_estimate_vs_spent(estimate: dict, outcomes: list[dict]) -> str:
    """Estimate beside spend, after a run: calls, tokens and dollars of this invocation's jobs."""
    spent_cost = [o.get("cost_usd") for o in outcomes]
    spent = {"calls": sum(o.get("api_calls") or 0 for o in outcomes),
             "input_tokens": sum(o.get("input_tokens") or 0 for o in outcomes),
             "output_tokens": sum(o.get("output_tokens") or 0 for o in outcomes)}
    rows = [["calls", _total_span(estimate, "calls", calls), calls(spent["calls"])]]
    rows += [[label, _total_span(estimate, key), count(spent[key])] for label, key in
             (("input tokens", "input_tokens"), ("output tokens", "output_tokens"))]
    known = [c for c in spent_cost if c is not None]
    rows.append(["dollars (list price)", _total_span(estimate, "dollars", dollars),
                 dollars(sum(known)) + (f" ({len(spent_cost) - len(known)} job(s) of unknown cost)"
                                        if len(known) < len(spent_cost) else "")])
    rows.append(["dollars with prompt caching", _total_span(estimate, "cached_dollars", dollars), ""])
    return "\n".join(["estimate (before the run, low - high) vs spent:",
                      *fixed_width(["", "estimate", "spent"], rows)])
