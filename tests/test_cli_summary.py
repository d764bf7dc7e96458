"""The end-of-run table: per model x level counts, rates, tokens and dollars from the job outcomes;
jobs that stopped early are counted as incomplete and explained under the table, never scored."""
from __future__ import annotations

from agent.run.summary import format_table, stop_notes, summarize
from metrics.result_format import STOP_KEY
from metrics.run_status import BUDGET, FEEDBACK_MISSING


def outcome(model: str, level: int, task: int, **changes) -> dict:
    base = {"task_index": task, "model": model, "level": level, "state": "finished", "solved": False, "turns": 10,
            "best_rate": 0.5, "input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.01, "api_calls": 20,
            "error": None, STOP_KEY: None, "unpriced_calls": 0}
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
    assert (first.tasks, first.solved, first.incomplete, first.recall, first.pass_rate) == (2, 1, 0, 0.5, 0.625)
    assert (first.input_tokens, first.output_tokens, first.cost_usd, first.unpriced) == (2000, 400, 0.02, 0)
    second = rows[("gpt-5", 2)]
    assert (second.tasks, second.solved, second.incomplete, second.recall) == (1, 1, 1, 1.0)
    assert (second.unpriced, second.cost_usd) == (1, 0.01)


def test_stopped_jobs_are_neither_solved_nor_unsolved() -> None:
    """A level-2 job whose feedback never came is not an unsolved level-2 job: the rates skip it."""
    outcomes = [outcome("m", 2, 1, solved=True, best_rate=1.0),
                outcome("m", 2, 2, state="error", best_rate=0.2, error="feedback missing at turn 1: no records",
                        **{STOP_KEY: FEEDBACK_MISSING}),
                outcome("m", 2, 3, state="budget", best_rate=0.4, error="max-cost-usd $1 reached",
                        **{STOP_KEY: BUDGET})]
    (row,) = summarize(outcomes)
    assert (row.tasks, row.solved, row.incomplete, row.recall, row.pass_rate) == (1, 1, 2, 1.0, 1.0)
    only_stopped = summarize([outcomes[1]])[0]
    assert (only_stopped.recall, only_stopped.pass_rate) == (None, None)
    assert format_table([only_stopped], 10).splitlines()[2].split()[2:6] == ["0/0", "1", "-", "-"]


def test_table_text() -> None:
    table = format_table(summarize([outcome("gpt-5", 4, 1, solved=True, best_rate=1.0),
                                    outcome("gpt-5", 4, 2, state="error", cost_usd=None)]), max_turn=10)
    lines = table.splitlines()
    assert lines[0].split() == ["model", "level", "solved", "(all)", "incomplete", "Recall@10", "(all)", "test-case",
                                "pass", "(all)", "tokens", "in", "(this", "run)", "tokens", "out", "(this", "run)",
                                "cost", "$", "(this", "run)"]
    assert lines[2].split() == ["gpt-5", "L4", "1/1", "1", "100.0%", "100.0%", "2,000", "400", "0.0100*"]
    assert lines[3].startswith("solved, Recall and pass rates cover complete jobs only")
    assert lines[-2].startswith("* lower bound")
    assert lines[-1].startswith("(all): every stored result of these jobs") and "over all results" in lines[-1]
    assert len({len(line) for line in lines[:3]}) == 1


def test_stop_notes_count_each_reason_and_name_the_jobs() -> None:
    feedback = [outcome("m", 2, task, state="error", error=f"feedback missing at turn 1: bad answer {task}",
                        **{STOP_KEY: FEEDBACK_MISSING}) for task in range(7)]
    budget = outcome("m", 1, 9, state="budget", error="max-cost-usd $0.5 reached: the run spent $0.5100",
                     **{STOP_KEY: BUDGET})
    crash = outcome("m", 1, 8, state="error", error="InfraError: task 8 turn 0: the tests could not run (x)")
    notes = stop_notes([*feedback, budget, crash, outcome("m", 0, 1, unpriced_calls=3)])
    assert notes[0].startswith("7 job(s) stopped because their feedback could not be produced")
    assert notes[1] == "  task 0 L2 m: feedback missing at turn 1: bad answer 0"
    assert notes[6] == "  ... and 2 more (the run record lists them all)"
    assert notes[7] == "1 job(s) stopped at the budget (a higher cap continues them):"
    assert notes[8] == "  task 9 L1 m: max-cost-usd $0.5 reached: the run spent $0.5100"
    assert notes[9:11] == ["1 job(s) failed:", "  task 8 L1 m: InfraError: task 8 turn 0: the tests could not run (x)"]
    assert notes[11].startswith("3 model call(s) of this run have an unknown cost")
    assert stop_notes([outcome("m", 0, 1)]) == []
