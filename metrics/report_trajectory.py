"""One task's trajectory as a standalone HTML page: turn by turn, the code diff, tests, feedback, tokens and cost.

Works on release-format records too: every key of ours (status, test_digest,
feedback_text, usage, actions...) is optional and its absence is said in the page.
"""
from __future__ import annotations

from dataclasses import dataclass

from metric_cost import turn_cost
from metric_passrate_testcase import turn_rate
from metric_passrate_unitest import first_success, turn_success
from report_html import Html, bullet_list, cell, details, diff_html, join, page, pre, table, tag, text_of
from junit_outcome import outcome_counts
from result_files import execution, incomplete_reason, turn_status
from result_format import STOP_KEY
from run_status import UNTRUSTED_STATUSES

NOT_RECORDED = "not recorded in this result file (release format)"


@dataclass(frozen=True)
class TaskView:
    """What the page shows about one task of one run, besides its turns."""

    title: str                 # e.g. "memory_agent · fixed · gpt-5 · L2"
    folder: str                # the run folder, for the reader to find the pickle
    task_id: int
    n_cases: int | None        # len(test_cases) from the meta file; None when the task is not in it
    init_content: str          # what the target file starts as (turn 0 is diffed against it)
    state: dict                # the task's state file ({} for release results)
    index_href: str


def status_of(turn: dict) -> tuple[str, str]:
    """(label, css class): the runner status, or pass/fail derived from the counts for release records;
    a turn where the job stopped early (feedback missing, budget) says so."""
    solved = turn_success(turn)
    status = turn_status(turn) or ("passed" if solved else "failed")
    if turn.get(STOP_KEY):
        return f"{status}; job stopped: {turn[STOP_KEY]}", "warn"
    css = "ok" if solved else "warn" if status in (*UNTRUSTED_STATUSES, "timeout") else "bad"
    return status, css


def cost_text(cost: dict) -> str:
    """Dollars, a lower bound when some calls had no known price, 'unknown' when none had."""
    if cost["unpriced"] and not cost["priced"]:
        return "unknown"
    return f"{'>= ' if cost['unpriced'] else ''}${cost['cost_usd']:.4f}"


def rate_text(turn: dict, n_cases: int | None) -> str:
    return "-" if not n_cases else f"{100 * turn_rate(turn, n_cases):.0f}%"


def tests_text(turn: dict) -> str:
    tests, errors, failures, skipped = outcome_counts(execution(turn))
    return f"{tests} run, {failures} failed, {errors} errors, {skipped} skipped"


def verdict_text(turns: list[dict], state: dict) -> str:
    """Solved at turn t, not solved, or incomplete (a job that stopped for a reason that is not the model's)."""
    reason = incomplete_reason(turns, state)
    if reason is not None:
        return f"Incomplete ({reason}): neither solved nor unsolved at this level"
    first = first_success(turns)
    return "Not solved" if first is None else "Solved at turn " + str(turns[first].get("turn_number", first))


def overview(view: TaskView, turns: list[dict]) -> Html:
    """One row per turn linking to its section, then the task's totals."""
    rows = []
    for turn in turns:
        label, css = status_of(turn)
        cost = turn_cost(turn)
        number = turn.get("turn_number", "?")
        rows.append([
            tag("a", f"turn {number}", href=f"#turn-{number}"), cell(label, css), tests_text(turn),
            rate_text(turn, view.n_cases), _level(turn), cost["code_input"], cost["code_output"],
            cost["feedback_input"], cost["feedback_output"], cost_text(cost),
            f"{cost['wall_time_sec']:.1f}" if cost["timed_turns"] else "-",
        ])
    columns = ["turn", "status", "tests", "test cases", "level", "code in", "code out", "fb in", "fb out", "cost",
               "wall s"]
    facts = [f"Result folder: {view.folder}", verdict_text(turns, view.state),
        f"Test cases in the meta file: {view.n_cases if view.n_cases is not None else 'task not in the meta file'}",
        _state_text(view.state),
    ]
    return join([bullet_list(facts), table(columns, rows)])


def _state_text(state: dict) -> str:
    if not state:
        return "No state file (release results, or written before the task finished)."
    finished = "finished" if state.get("finished") else "NOT finished (partial trajectory)"
    return f"State: {finished}" + (f"; stopped by an error: {state['error']}" if state.get("error") else "")


def _level(turn: dict) -> str:
    level = turn.get("guidance_level")
    return "-" if level is None else f"L{level}"


def actions_block(turn: dict) -> Html:
    actions = turn.get("actions")
    if not isinstance(actions, list):
        return tag("p", f"Actions: {NOT_RECORDED}.", class_="muted")
    rows = [[a.get("step"), a.get("action"), cell("ok" if a.get("ok") else "failed", "ok" if a.get("ok") else "bad"),
             pre(a["argument"]) if a.get("argument") else ""] for a in actions if isinstance(a, dict)]
    return table(["step", "action", "result", "argument"], rows) if rows else tag("p", "No actions.", class_="muted")


def code_block(turn: dict, previous: str, previous_label: str) -> Html:
    code = text_of(turn.get("final_code"))
    label = f"turn {turn.get('turn_number', '?')}"
    return join([
        diff_html(previous, code, previous_label, label),
        details(f"Whole file at {label} ({len(code.splitlines())} lines)", pre(code)),
    ])


def tests_block(turn: dict) -> Html:
    """The digest the agent was shown; for release records, the per-test results and failure messages."""
    result = execution(turn)
    parts: list[object] = [tag("p", f"Tests: {tests_text(turn)}.")]
    if turn.get("test_digest"):
        parts.append(details("Test digest shown to the agent", pre(turn["test_digest"]), open_=True))
        return join(parts)
    summary = result.get("test_summary")
    if isinstance(summary, dict) and summary:
        parts.append(table(["test", "result"], [[name, cell("PASS" if ok else "FAILED", "ok" if ok else "bad")]
                                                for name, ok in summary.items()]))
    if result.get("failure_messages"):
        parts.append(details("Failure messages", pre("\n\n".join(map(text_of, result["failure_messages"])))))
    return join(parts)


def feedback_block(turn: dict) -> Html:
    """The feedback on this attempt at this turn's level (the agent reads it next turn) and the raw records."""
    level = turn.get("guidance_level")
    if "feedback_text" not in turn:
        return join([tag("p", f"Formatted feedback: {NOT_RECORDED}.", class_="muted"),
                     messages_block("Feedback model conversation",
                                    turn.get("feedback_conversation") or turn.get("feedback_interaction_history"))])
    parts: list[object] = []
    if turn["feedback_text"]:
        parts.append(pre(turn["feedback_text"]))
    elif level == 0:
        parts.append(tag("p", "Level 0: no feedback text; the agent sees the test digest only.", class_="muted"))
    else:
        parts.append(tag("p", "No feedback on this turn (solved, last turn, or none generated).", class_="muted"))
    if turn.get("feedback_error"):
        parts.append(tag("p", f"Feedback error: {text_of(turn['feedback_error'])}", class_="bad"))
    records = [r for r in turn.get("feedback_items") or [] if isinstance(r, dict)]
    if records:
        fields = ["category", "interface", "description", "analysis", "actionable_feedback", "direct_code_feedback"]
        rows = [[pre(record.get(name)) if name == "direct_code_feedback" else record.get(name) for name in fields]
                for record in records]
        source = turn.get("feedback_source")
        parts.append(details(f"Raw feedback records ({len(records)}{', source ' + str(source) if source else ''})",
                             table(fields, rows)))
    return join(parts)


def usage_block(turn: dict) -> Html:
    cost = turn_cost(turn)
    kinds = ("input", "output", "cached")
    rows = [[role] + [cost[f"{role}_{kind}"] for kind in kinds] for role in ("code", "feedback")]
    wall = f" Wall time: {cost['wall_time_sec']:.1f} s." if cost["timed_turns"] else ""
    return join([table(["role", *(f"{kind} tokens" for kind in kinds)], rows),
                 tag("p", f"Cost: {cost_text(cost)}.{wall}")])


def messages_block(summary: str, messages: object) -> Html:
    """A collapsed list of chat messages, each headed by its role (and kind); other values pretty-printed."""
    if not messages:
        return Html("")
    if not isinstance(messages, list):
        return details(summary, pre(messages))
    blocks = [pre(f"[{m.get('role')}{' / ' + str(m['kind']) if m.get('kind') else ''}]\n{text_of(m.get('content'))}")
              if isinstance(m, dict) else pre(m) for m in messages]
    return details(f"{summary} ({len(messages)})", *blocks)


def transcript_block(turn: dict) -> Html:
    """The model's own answers this turn (prompts are left out: they repeat the paper and the file)."""
    history = turn.get("code_interaction_history")
    answers = [m for m in history if isinstance(m, dict) and m.get("role") == "assistant"] \
        if isinstance(history, list) else history
    return messages_block("Model answers", answers)


def turn_section(turn: dict, previous: str, previous_label: str) -> Html:
    number = turn.get("turn_number", "?")
    label, css = status_of(turn)
    summary = join([f"Turn {number} · ", tag("span", label, class_=css), f" · {tests_text(turn)} · {_level(turn)}"])
    body = [
        tag("h3", "Actions"), actions_block(turn),
        tag("h3", f"Code: change from {previous_label}"), code_block(turn, previous, previous_label),
        tag("h3", "Tests"), tests_block(turn),
        tag("h3", "Feedback on this attempt (shown to the agent next turn)"), feedback_block(turn),
        tag("h3", "Tokens and cost"), usage_block(turn),
        transcript_block(turn),
    ]
    return tag("details", tag("summary", summary), *body, class_="turn", id=f"turn-{number}", open=True)


def trajectory_page(view: TaskView, turns: list[dict]) -> str:
    sections, previous, previous_label = [], view.init_content, "the initial file"
    for turn in turns:
        sections.append(turn_section(turn, previous, previous_label))
        previous, previous_label = text_of(turn.get("final_code")), f"turn {turn.get('turn_number', '?')}"
    title = f"Task {view.task_id} · {view.title}"
    memory = messages_block("Agent memory after the last turn", turns[-1].get("agent_memory")) if turns else ""
    return page(title, tag("p", tag("a", "← back to the report", href=view.index_href)), tag("h1", title),
                overview(view, turns), tag("h2", "Turns"), *sections, memory)

