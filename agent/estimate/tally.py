"""The price of a run before it starts: its jobs walked without a model (agent/estimate/walk.py), their calls
summed per model and priced at the price table's list prices, with and without prompt caching.

A turn-0 seed shared by the levels of a (model, task) is counted once, as
the run computes it once. The result is plain data (``Estimate.to_dict``),
stored in the run metadata and printed beside what the run spent.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from agent.estimate.walk import COURSES, Assumptions, CallSize, JobShape, TaskText, walk_job
from agent.models.pricing import cost_usd
from agent.models.types import Tokens


@dataclass
class Totals:
    """Calls and tokens of one role over a run, for one course of its jobs."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, call: CallSize, assumptions: Assumptions) -> None:
        tokens = assumptions.tokens
        read, written = tokens(call.read), tokens(call.written)
        self.calls += 1
        self.input_tokens += tokens(call.prompt)
        self.output_tokens += tokens(call.answer)
        self.cached_tokens += read if read >= assumptions.min_cached_tokens else 0
        self.cache_write_tokens += written if written >= assumptions.min_cached_tokens else 0

    def dollars(self, prices: dict, model: str, cached: bool) -> float | None:
        if not cached:
            return cost_usd(prices, model, Tokens(self.input_tokens, self.output_tokens))
        return cost_usd(prices, model, Tokens(self.input_tokens, self.output_tokens, self.cached_tokens,
                                              cache_write=self.cache_write_tokens))


@dataclass
class ModelLine:
    """One model's part of the estimate: its totals per course and their dollars (None: no price)."""

    model: str
    role: str
    totals: dict[str, Totals]
    dollars: dict[str, float | None] = field(default_factory=dict)
    cached_dollars: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Estimate:
    """What a run is expected to cost; every count is a (solved, unsolved) pair of courses."""

    jobs: int
    finished_jobs: int
    tasks: int
    levels: tuple[int, ...]
    seeds: int
    settings: dict[str, Any]
    lines: list[ModelLine]
    assumptions: Assumptions

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Walks = dict[tuple[int, int, str], list[CallSize]]  # (task, level, course) -> the job's calls
Roles = dict[str, dict[str, Totals]]  # role ("code", "feedback") -> course -> totals


def walk_jobs(tasks: list[TaskText], shape: JobShape, levels: tuple[int, ...], assumptions: Assumptions) -> Walks:
    """Every (task, level) job walked along both courses; the calls do not depend on which code model answers."""
    return {(task.index, level, course): walk_job(task, shape, level, course, assumptions)
            for task in tasks for level in levels for course in COURSES}


def model_totals(walks: Walks, jobs: list[tuple[int, int]], seeds: list[int], shares_seed: bool,
                 seed_feedback: bool, assumptions: Assumptions) -> Roles:
    """One code model's calls: its ``jobs`` (task, level), their turn 0 counted once per task in ``seeds`` where
    the levels share it (with its feedback when some level uses it)."""
    totals = {role: {course: Totals() for course in COURSES} for role in ("code", "feedback")}
    for course in COURSES:
        for task, level in jobs:
            for call in walks[(task, level, course)]:
                if call.turn > 0 or not shares_seed:
                    totals[call.role][course].add(call, assumptions)
        for task in seeds if shares_seed else ():
            for call in _seed_calls(walks, task, course, seed_feedback):
                totals[call.role][course].add(call, assumptions)
    return totals


def _seed_calls(walks: Walks, task: int, course: str, with_feedback: bool) -> list[CallSize]:
    """Turn 0 of ``task`` as its seed makes it: the code calls, and the feedback call of a level that asks."""
    runs = [calls for (index, _, path), calls in walks.items() if index == task and path == course]
    richest = max(runs, key=lambda calls: sum(c.turn == 0 and c.role == "feedback" for c in calls))
    return [c for c in richest if c.turn == 0 and (c.role == "code" or with_feedback)]


def price_lines(per_model: dict[str, Roles], feedback_model: str | None, prices: dict) -> list[ModelLine]:
    """One line per code model and one for the feedback model (the sum of what every code model's jobs ask),
    each priced at list prices with and without the cache."""
    lines = [ModelLine(model, "code", roles["code"]) for model, roles in per_model.items()]
    if feedback_model is not None:
        lines.append(ModelLine(feedback_model, "feedback", {course: _sum(
            [roles["feedback"][course] for roles in per_model.values()]) for course in COURSES}))
    for line in lines:
        line.dollars = {c: line.totals[c].dollars(prices, line.model, cached=False) for c in COURSES}
        line.cached_dollars = {c: line.totals[c].dollars(prices, line.model, cached=True) for c in COURSES}
    return lines


def _sum(parts: list[Totals]) -> Totals:
    return Totals(**{key: sum(getattr(part, key) for part in parts) for key in Totals.__dataclass_fields__})
