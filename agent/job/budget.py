"""Spending caps: ``max-task-cost-usd`` per job and ``max-cost-usd`` for the whole run.

Costs come from the stored turn records (``code_usage``/``feedback_usage``), so
a cap covers what earlier invocations spent too: a job stopped at its cap stays
stopped on a rerun with the same cap and continues with a higher one. The check
runs at turn boundaries, before a turn starts, so the turn in flight may pass
the cap by its own cost.

The run's total is kept in ``<output-dir>/cost_ledger.json``: one entry per job
and per turn-0 seed (the seed's calls are shared by every level of a task, so
they are counted once, under the seed), each rewritten from its records under a
file lock, so every worker process sees the same total. A call whose cost is
unknown (no price, no token counts) is never taken as free: the spend is then
unknown and the job stops as ``budget``, saying so. A run that sets a cap while
one of its models has no price is refused before anything is spent
(:func:`check_prices`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock

from agent.common.atomic_file import atomic_write_bytes
from agent.models.pricing import find_price
from agent.models.providers import PROVIDERS as PRICED_PROVIDERS

if TYPE_CHECKING:
    from agent.config import RunConfig

LEDGER_NAME = "cost_ledger.json"


class BudgetError(Exception):
    """A cap that cannot be enforced (a model without a price); one line naming the fix."""


@dataclass(frozen=True)
class Spend:
    """Dollars of the calls whose cost is known, and how many calls have an unknown cost."""

    usd: float = 0.0
    unknown: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.usd + other.usd, self.unknown + other.unknown)

    def text(self) -> str:
        return f"${self.usd:.4f}" + (f" + {self.unknown} call(s) of unknown cost" if self.unknown else "")

    def reaches(self, cap: float) -> bool:
        """Whether the cap is reached, or cannot be shown not to be (an unknown cost)."""
        return self.unknown > 0 or self.usd >= cap


def usage_spend(usage: list[dict]) -> Spend:
    """What a list of Usage dicts cost; cache hits are free, a None cost is unknown."""
    spend = Spend()
    for call in usage:
        cost = call.get("cost_usd")
        if call.get("from_cache"):
            continue
        spend += Spend(0.0, 1) if cost is None else Spend(float(cost), 0)
    return spend


def job_spend(turns: list[dict], *, without_seed: bool = False) -> Spend:
    """What a job's records cost; ``without_seed`` leaves out turn 0's share of the seed (counted under it)."""
    spend = Spend()
    for turn in turns:
        from_seed = without_seed and turn["turn_number"] == 0
        spend += Spend() if from_seed else usage_spend(turn.get("code_usage") or [])
        if not (from_seed and turn.get("feedback_source") == "seed"):
            spend += usage_spend(turn.get("feedback_usage") or [])
    return spend


def seed_spend(seed: dict) -> Spend:
    record = seed["record"]
    return usage_spend((record.get("code_usage") or []) + (record.get("feedback_usage") or []))


def check_prices(cfg: RunConfig) -> None:
    """With a cap set, every paid model must have a price, or the cap could not be enforced."""
    if cfg.max_cost_usd is None and cfg.max_task_cost_usd is None:
        return
    for spec in (*cfg.models, *([cfg.feedback_model] if cfg.feedback_model else [])):
        if spec.provider in PRICED_PROVIDERS and find_price(cfg.prices, spec.model) is None:
            raise BudgetError(f"max-cost-usd/max-task-cost-usd need the price of model '{spec.model}', which the "
                              "price table lacks; add it to config/prices.yaml (or the file 'prices' names)")


class Ledger:
    """The run's spend per job and seed, shared by every worker through a file under a lock."""

    def __init__(self, output_dir: Path) -> None:
        self.path = Path(output_dir) / LEDGER_NAME
        self.lock = FileLock(str(self.path) + ".lock")

    def _read(self) -> dict[str, dict]:
        try:
            entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return entries if isinstance(entries, dict) else {}

    def _write(self, entries: dict[str, dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, (json.dumps(entries, indent=1, sort_keys=True) + "\n").encode())

    def reset(self, entries: dict[str, Spend]) -> None:
        """Start the run's ledger from what its jobs and seeds already spent (earlier invocations). Another run
        on the folder may be spending meanwhile: an entry it recorded higher than its stored files show stays."""
        with self.lock:
            merged = self._read()
            for key, spend in entries.items():
                if float(merged.get(key, {}).get("usd", 0.0)) <= spend.usd:
                    merged[key] = spend.__dict__
            self._write(merged)

    def record(self, key: str, spend: Spend) -> Spend:
        """Set one entry and return the run's total."""
        with self.lock:
            entries = self._read()
            entries[key] = spend.__dict__
            self._write(entries)
        return self.total(entries)

    def total(self, entries: dict[str, dict] | None = None) -> Spend:
        if entries is None:
            with self.lock:
                entries = self._read()
        return sum((Spend(float(e.get("usd", 0.0)), int(e.get("unknown", 0))) for e in entries.values()), Spend())


def over_budget(cfg: RunConfig, key: str, turns: list[dict]) -> str | None:
    """Why the job must stop before its next turn (a cap reached), else None; updates the run's ledger."""
    if cfg.max_task_cost_usd is not None:
        spend = job_spend(turns)
        if spend.reaches(cfg.max_task_cost_usd):
            return f"max-task-cost-usd ${cfg.max_task_cost_usd:g} reached: this task spent {spend.text()}"
    if cfg.max_cost_usd is not None:
        total = Ledger(cfg.output_dir).record(key, job_spend(turns, without_seed=True))
        if total.reaches(cfg.max_cost_usd):
            return f"max-cost-usd ${cfg.max_cost_usd:g} reached: the run spent {total.text()}"
    return None


def run_over_budget(cfg: RunConfig) -> str | None:
    """Why no new seed may be computed (the run's cap reached), else None."""
    if cfg.max_cost_usd is None:
        return None
    total = Ledger(cfg.output_dir).total()
    return f"max-cost-usd ${cfg.max_cost_usd:g} reached: the run spent {total.text()}" if total.reaches(
        cfg.max_cost_usd) else None
