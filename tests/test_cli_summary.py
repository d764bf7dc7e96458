"""The end-of-run table: per model x level counts, rates, tokens and dollars from the job outcomes."""
from __future__ import annotations

from agent.run_summary import format_table, summarize


def outcome(model: str, level: int, task: int, **changes) -> dict:
    base = {"task_index": task, "model": model, "level": level, "state": "finished", "solved": False, "turns": 10,
            "best_rate": 0.5, "input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.01, "api_calls": 20,
            "error": None}
    return {**base, **changes}


def test_rows_per_model_and_level() -> None:
    outcomes = [
        outcome("gpt-5", 2, 1, state="skipped", solved=True, best_rate=1.0, api_calls=0),
        outcome("gpt-5", 0, 1, solved=True, best_rate=1.0),
        outcome("gpt-5", 0, 2, best_rate=0.25),
        outcome("gpt-5", 2, 2, state="error", best_rate=0.0, input_tokens=0, output_tokens=0, cost_usd=None),
        outcome("org/m", 0, 1, cost_usd=None),
    ]
    rows = {(r.model, r.level): r for r in summarize(outcomes)}
    assert list(rows) == [("gpt-5", 0), ("gpt-5", 2), ("org/m", 0)]
    first = rows[("gpt-5", 0)]
    assert (first.tasks, first.solved, first.errors, first.recall, first.pass_rate) == (2, 1, 0, 0.5, 0.625)
    assert (first.input_tokens, first.output_tokens, first.cost_usd, first.unpriced) == (2000, 400, 0.02, 0)
    second = rows[("gpt-5", 2)]
    assert (second.solved, second.errors, second.unpriced, second.cost_usd) == (1, 1, 1, 0.01)


def test_table_text() -> None:
    table = format_table(summarize([outcome("gpt-5", 4, 1, solved=True, best_rate=1.0),
                                    outcome("gpt-5", 4, 2, state="error", cost_usd=None)]), max_turn=10)
    lines = table.splitlines()
    assert lines[0].split() == ["model", "level", "solved", "Recall@10", "test-case", "pass", "tokens", "in",
                                "tokens", "out", "cost", "$", "(this", "run)"]
    assert lines[2].split() == ["gpt-5", "L4", "1/2", "(1", "err)", "50.0%", "75.0%", "2,000", "400", "0.0100*"]
    assert lines[-1].startswith("* lower bound")
    assert len({len(line) for line in lines[:3]}) == 1
