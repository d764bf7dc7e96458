"""Figures of prompt caching: a sweep of the main command (release protocol, sample tasks) with each provider's SDK
against local servers that apply that provider's caching rules (tests/caching_servers.py), caching on and off;
then the same calls with each task's paper replaced by a text of a published paper's size.

    python scripts/bench_caching.py [--task-ids 1 2 3] [--level 2] [--max-turn 3] [--paper-chars N ...]

Prints per provider: calls, input tokens, the share read from the cache, tokens written, dollars with and without
prompt caching (list prices of config/prices.yaml), and whether the model-visible text was identical. The
published tasks' meta (../shared/recode_h/annotation_meta.jsonl) holds no paper text, so the paper sizes default
to the eight real papers of ../shared/rcb_pset_sample (their .tex files: ML papers as the published tasks use).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.task.dataset import DatasetManager  # noqa: E402
from agent.estimate.walk import filler  # noqa: E402
from agent.models.pricing import cost_usd, load_prices  # noqa: E402
from agent.models.types import Tokens  # noqa: E402
from agent.common.text_table import fixed_width  # noqa: E402
from metrics.cli_flags import add_levels, add_task_ids  # noqa: E402
from tests.caching_servers import PromptCache, Sweep, run_sweep, usage_of  # noqa: E402
from tests.fake_providers import DEFAULT_MODELS  # noqa: E402
from tests.run_support import DATASET  # noqa: E402

RCB_PAPERS = Path(__file__).resolve().parents[2] / "shared" / "rcb_pset_sample"


def replaced(value: Any, papers: dict[str, str]) -> Any:
    """A request body with each paper's text replaced (in every string of it)."""
    if isinstance(value, str):
        for old, new in papers.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [replaced(item, papers) for item in value]
    if isinstance(value, dict):
        return {key: replaced(item, papers) for key, item in value.items()}
    return value


def priced(protocol: str, bodies: list[dict], output_tokens: int) -> dict[str, float]:
    """The calls through a fresh cache of ``protocol``'s rules: tokens, share cached, writes and list dollars."""
    cache, prices, model = PromptCache(protocol), load_prices(), DEFAULT_MODELS[protocol]
    per_call_output = output_tokens / max(len(bodies), 1)
    total = {"input": 0.0, "cached": 0.0, "written": 0.0, "dollars": 0.0}
    for body in bodies:
        counts = cache.counts(body)
        usage = usage_of(protocol, counts, 0)
        total["input"] += counts.prompt
        total["cached"] += counts.read
        total["written"] += counts.written
        tokens = Tokens(counts.prompt, round(per_call_output), usage.cached_tokens, None, usage.cache_write_tokens)
        total["dollars"] += cost_usd(prices, model, tokens) or 0.0
    return total


def row(label: str, figures: dict[str, float], plain: float, calls: int, same: bool | str) -> list[str]:
    share = figures["cached"] / figures["input"] if figures["input"] else 0.0
    return [label, str(calls), f"{figures['input']:,.0f}", f"{100 * share:.1f}%", f"{figures['written']:,.0f}",
            f"${figures['dollars']:.4f}", f"${plain:.4f}", f"{round(100 * (1 - figures['dollars'] / plain), 1) + 0.0:.1f}%",
            str(same)]


def output_tokens(sweep: Sweep) -> int:
    return sum(r["output_tokens"] for r in sweep.record["summary"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_ids(parser, "1 2 3")
    add_levels(parser, "2")
    parser.add_argument("--max-turn", type=int, default=3)
    parser.add_argument("--providers", nargs="+", default=["anthropic", "openai", "gemini"])
    parser.add_argument("--paper-chars", type=int, nargs="*", default=None,
                        help="paper sizes to price the same calls at (default: the rcb sample's real papers)")
    args = parser.parse_args()
    sizes = args.paper_chars or sorted(len(p.read_text(encoding="utf-8")) for p in RCB_PAPERS.glob("*/*.tex"))
    published = round(statistics.mean(sizes))
    dataset = DatasetManager(DATASET)
    tasks = args.task_ids or [1, 2, 3]
    papers = {dataset.latex(task): dataset.latex(task) + filler(published - len(dataset.latex(task)))
              for task in tasks}  # each task's own paper, lengthened: papers still differ between tasks
    levels = args.guidance_level or [2]
    keys = {"task-ids": tasks, "guidance-level": levels, "max-turn": args.max_turn}
    root = Path(tempfile.mkdtemp(prefix="bench caching "))
    rows = []
    for protocol in args.providers:
        on, off = run_sweep(protocol, True, root, **keys), run_sweep(protocol, False, root, **keys)
        if on.returncode or off.returncode:
            sys.exit(f"{protocol}: the sweep failed:\n{on.output[-1500:]}\n{off.output[-1500:]}")
        same = on.seen() == off.seen()
        out = output_tokens(on)
        for label, change in (("sample papers", {}), (f"papers of {published:,} chars", papers)):
            with_cache = priced(protocol, [replaced(r.body, change) for r in on.requests], out)
            without = priced(protocol, [replaced(r.body, change) for r in off.requests], out)
            rows.append(row(f"{protocol}, {label}", with_cache, without["dollars"], len(on.requests), same))
    print(f"sweep: release protocol, tasks {tasks}, L{levels}, max-turn {args.max_turn}; models "
          f"{', '.join(DEFAULT_MODELS[p] for p in args.providers)}; list prices of config/prices.yaml")
    print("\n".join(fixed_width(["provider, papers", "calls", "input tokens", "cached", "written", "$ caching on",
                                 "$ caching off", "saved", "same text"], rows)))
    print(f"published paper size: the mean of {len(sizes)} real papers ({min(sizes):,}-{max(sizes):,} chars); "
          "the meta file holds no paper text. 'caching off' is the run with prompt-caching: false "
          "(OpenAI and Gemini still cache by themselves).")


if __name__ == "__main__":
    main()
