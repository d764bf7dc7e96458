"""One task's trajectory as a standalone HTML page: everything the models saw and did, turn by turn.

Per turn: every call of the code model in order (system prompt, each message,
the answer, parameters, tokens, cost, latency), the actions and where their
results were shown, the diff from the previous turn, the test information as
shown to the model, the feedback and the feedback model's whole conversation.
Text repeated from an earlier call is folded into a link (metrics/report_text.py),
so a page holds each line once. Works on release-format records too: every key
of ours is optional and its absence is said in the page.
"""
from __future__ import annotations

from dataclasses import dataclass

from metric_cost import turn_cost
from metric_passrate_testcase import turn_rate
from metric_passrate_unitest import first_success, turn_success
from report_calls import Call, code_calls, feedback_calls
from report_html import Html, bullet_list, cell, details, diff_html, join, page, pre, table, tag, text_of
from report_text import Registry, Shown, render, split_lines
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
    prev_href: str | None = None
    next_href: str | None = None
    position: str = ""         # e.g. "12 of 510"


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
            rate_text(turn, view.n_cases), _level(turn), len(code_calls(turn)) + len(feedback_calls(turn)),
            cost["code_input"], cost["code_output"], cost["feedback_input"], cost["feedback_output"], cost_text(cost),
            latency_text(turn), f"{cost['wall_time_sec']:.1f}" if cost["timed_turns"] else "-",
        ])
    columns = ["turn", "status", "tests", "test cases", "level", "calls", "code in", "code out", "fb in", "fb out",
               "cost", "model s", "wall s"]
    facts = [f"Result folder: {view.folder}", verdict_text(turns, view.state),
        f"Test cases in the meta file: {view.n_cases if view.n_cases is not None else 'task not in the meta file'}",
        _state_text(view.state),
    ]
    return join([bullet_list(facts), table(columns, rows)])


def latency_text(turn: dict) -> str:
    """Seconds spent waiting for the models this turn (sum of the calls' latencies), '-' when none is recorded."""
    latencies = [u["latency_sec"] for key in ("code_usage", "feedback_usage") for u in turn.get(key) or []
                 if isinstance(u, dict) and isinstance(u.get("latency_sec"), (int, float))]
    return f"{sum(latencies):.1f}" if latencies else "-"


def _state_text(state: dict) -> str:
    if not state:
        return "No state file (release results, or written before the task finished)."
    finished = "finished" if state.get("finished") else "NOT finished (partial trajectory)"
    return f"State: {finished}" + (f"; stopped by an error: {state['error']}" if state.get("error") else "")


def _level(turn: dict) -> str:
    level = turn.get("guidance_level")
    return "-" if level is None else f"L{level}"


class PageText:
    """What one page has shown so far: the registry of texts and the numbering of the calls."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.calls = 0
        self.last: dict[tuple[str, str, int], Shown] = {}  # (model, role, position from the end) -> text

    def text(self, id_: str, label: str, value: str, key: tuple[str, str, int] | None = None,
             class_: str = "text", fold: bool = True) -> Html:
        """Render a text against what the page holds; ``key`` names the text it is diffed against next time.
        Without ``fold`` it is shown whole (a model's answer reads as written) but later texts may refer to it."""
        shown = Shown(id_, label, split_lines(value))
        html = render(shown, self.registry, self.last.get(key) if key else None, class_, fold)
        if key:
            self.last[key] = shown
        return html


def _usage_cells(usage: dict) -> list[object]:
    cost = usage.get("cost_usd")
    latency = usage.get("latency_sec")
    return [cell(_count(usage.get("input_tokens"))), cell(_count(usage.get("output_tokens"))),
            cell(_count(usage.get("cached_tokens"))),
            cell("unknown" if not isinstance(cost, (int, float)) else f"${cost:.4f}", "num"),
            cell("-" if not isinstance(latency, (int, float)) else f"{latency:.1f}", "num")]


def _count(value: object) -> int | str:
    return value if isinstance(value, int) and not isinstance(value, bool) else "-"


def _usage_text(usage: dict) -> str:
    parts = [f"{usage[k]:,} {label}" for k, label in (("input_tokens", "in"), ("output_tokens", "out"))
             if isinstance(usage.get(k), int)]
    if isinstance(usage.get("cost_usd"), (int, float)):
        parts.append(f"${usage['cost_usd']:.4f}")
    if isinstance(usage.get("latency_sec"), (int, float)):
        parts.append(f"{usage['latency_sec']:.1f} s")
    if usage.get("from_cache"):
        parts.append("from the cache")
    return " · ".join(parts)


def call_block(number: int, call: Call, text: PageText) -> Html:
    """One call folded: the parameters, each message sent (repeats folded), the answer, tokens, cost, latency."""
    body: list[object] = []
    if call.params:
        body.append(tag("p", "Parameters: " + ", ".join(f"{k}={text_of(v)}" for k, v in call.params.items()),
                        class_="muted"))
    if call.note:
        body.append(tag("p", f"Note: {call.note}.", class_="muted"))
    count = len(call.messages)
    for index, message in enumerate(call.messages):
        id_ = f"c{number}-m{index}"
        rendered = text.text(id_, f"call {number} message {index + 1}", message["content"],
                             (call.model, message["role"], count - index))
        expand = [tag("button", "show all repeated lines", type="button", class_="expand-all", data_target=id_)] \
            if 'class="same"' in rendered else []
        body.append(details(join([tag("span", message["role"], class_="role"),
                                  f" · message {index + 1} of {count} · {len(message['content']):,} characters"]),
                            *expand, rendered, class_="msg"))
    if not call.messages:
        body.append(tag("p", "The request is not recorded.", class_="muted"))
    answer = text.text(f"c{number}-a", f"call {number} answer", call.answer, fold=False)
    body.append(details(join([tag("span", "answer", class_="role"), f" · {len(call.answer):,} characters"]),
                        answer, class_="msg", open_=True))
    usage = _usage_text(call.usage)
    what = f"step {call.step}" if call.purpose == "step" and call.step is not None else \
        call.purpose + (f" · step {call.step}" if call.step is not None else "")
    summary = f"Call {number} · {what}" + (f" · {usage}" if usage else "")
    return tag("details", tag("summary", summary), *body, class_=f"call {call.model}", id=f"call-{number}")


def calls_block(calls: list[Call], text: PageText, what: str) -> tuple[Html, list[int]]:
    """A table of the calls (tokens, cost, latency) and each call folded; returns the page numbers given."""
    if not calls:
        return tag("p", f"No {what} call is recorded for this turn.", class_="muted"), []
    numbers = []
    for _ in calls:
        text.calls += 1
        numbers.append(text.calls)
    rows = [[tag("a", f"call {number}", href=f"#call-{number}"), call.purpose,
             "-" if call.step is None else call.step, *_usage_cells(call.usage)]
            for number, call in zip(numbers, calls)]
    head = table(["call", "purpose", "step", "tokens in", "tokens out", "cached", "cost", "latency s"], rows)
    blocks = [call_block(number, call, text) for number, call in zip(numbers, calls)]
    return join([head, *blocks]), numbers


def actions_block(turn: dict, calls: list[Call], numbers: list[int]) -> Html:
    """Each action, whether it worked, and where its result is: the prompt of the next step's call, or the tests."""
    actions = turn.get("actions")
    if not isinstance(actions, list):
        return tag("p", f"Actions: {NOT_RECORDED}.", class_="muted")
    step_calls = {call.step: number for call, number in zip(calls, numbers) if call.step is not None
                  and call.purpose == "step"}
    number = turn.get("turn_number", "?")
    rows = []
    for action in (a for a in actions if isinstance(a, dict)):
        step = action.get("step")
        later = step_calls.get(step + 1) if isinstance(step, int) else None
        if later is not None:
            where: object = tag("a", f"prompt of call {later}", href=f"#call-{later}")
        elif action.get("action") == "SUBMIT":
            where = tag("a", "test results below", href=f"#tests-{number}")
        else:
            where = "-"
        ok = bool(action.get("ok"))
        rows.append([step, action.get("action"), cell("ok" if ok else "failed", "ok" if ok else "bad"),
                     pre(action["argument"]) if action.get("argument") else "", where])
    return table(["step", "action", "result", "argument", "result shown in"], rows) if rows \
        else tag("p", "No actions.", class_="muted")


def code_block(turn: dict, previous: str, previous_label: str, text: PageText) -> Html:
    """The diff from the previous turn's file, and the whole file folded (lines seen before are links)."""
    code = text_of(turn.get("final_code"))
    number = turn.get("turn_number", "?")
    label = f"turn {number}"
    return join([
        diff_html(previous, code, previous_label, label),
        details(f"Whole file at {label} ({len(code.splitlines())} lines)",
                text.text(f"file-{number}", f"the file at {label}", code, ("file", "code", 0), class_="text py")),
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


def feedback_block(turn: dict, text: PageText) -> Html:
    """The feedback on this attempt at this turn's level (the agent reads it next turn), the raw records and
    the feedback model's whole conversation, call by call."""
    level = turn.get("guidance_level")
    calls = feedback_calls(turn)
    conversation = join([tag("h4", "Feedback model conversation"), calls_block(calls, text, "feedback")[0]]) \
        if calls else Html("")
    if "feedback_text" not in turn:
        return join([tag("p", f"Formatted feedback: {NOT_RECORDED}.", class_="muted"), conversation])
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
    return join([*parts, conversation])


def stops_block(turn: dict) -> Html:
    """Answers of the turn that ended short of complete (with the provider's words and the raw text), and the
    guard's ``suspicious`` notes (acts it could not judge exactly; never a verdict). Nothing when there are none."""
    stops = [entry for entry in turn.get("answer_stops") or [] if isinstance(entry, dict)]
    notes = [text_of(note) for note in turn.get("suspicious") or []]
    parts: list[object] = []
    if stops:
        rows = [[entry.get("role"), entry.get("purpose"), "-" if entry.get("step") is None else entry.get("step"),
                 cell(entry.get("reason"), "warn"), text_of(entry.get("provider_words") or "-"),
                 "applied as it came" if entry.get("applied") else "not applied",
                 details(f"{len(text_of(entry.get('text')))} characters", pre(text_of(entry.get("text"))))]
                for entry in stops]
        parts += [tag("h3", "Answers that ended short of complete (truncated, refused, filtered)"),
                  table(["model", "purpose", "step", "stop", "provider's words", "used", "raw answer"], rows)]
    if notes:
        parts += [tag("h3", "Suspicious (the guard's notes; not a verdict)"), bullet_list(notes)]
    return join(parts)


def usage_block(turn: dict) -> Html:
    cost = turn_cost(turn)
    kinds = ("input", "output", "cached")
    rows = [[role] + [cost[f"{role}_{kind}"] for kind in kinds] for role in ("code", "feedback")]
    wall = f" Wall time: {cost['wall_time_sec']:.1f} s." if cost["timed_turns"] else ""
    return join([table(["role", *(f"{kind} tokens" for kind in kinds)], rows),
                 tag("p", f"Cost: {cost_text(cost)}.{wall}")])


def memory_block(turns: list[dict], text: PageText) -> Html:
    """The agent's memory after the last turn (what the next turn would start from), repeats folded."""
    memory = turns[-1].get("agent_memory") if turns else None
    if not memory:
        return Html("")
    if not isinstance(memory, list):
        return details("Agent memory after the last turn", pre(memory))
    blocks = [join([tag("span", text_of(m.get("role")), class_="role"),
                    text.text(f"memory-{i}", f"memory message {i + 1}", text_of(m.get("content")))])
              if isinstance(m, dict) else pre(m) for i, m in enumerate(memory)]
    return details(f"Agent memory after the last turn ({len(memory)} messages)", *blocks)


def turn_section(turn: dict, previous: str, previous_label: str, text: PageText) -> Html:
    """One turn, folded (a page opens fast; the overview links open it, and find-in-page looks inside)."""
    number = turn.get("turn_number", "?")
    label, css = status_of(turn)
    summary = join([f"Turn {number} · ", tag("span", label, class_=css), f" · {tests_text(turn)} · {_level(turn)}"])
    calls = code_calls(turn)
    calls_html, numbers = calls_block(calls, text, "code model")
    body = [
        tag("h3", "Code model calls (what the model was shown and answered)"), calls_html,
        tag("h3", "Actions"), actions_block(turn, calls, numbers),
        tag("h3", f"Code: change from {previous_label}"), code_block(turn, previous, previous_label, text),
        tag("h3", "Tests", id=f"tests-{number}"), tests_block(turn),
        tag("h3", "Feedback on this attempt (shown to the agent next turn)"), feedback_block(turn, text),
        tag("h3", "Tokens and cost"), usage_block(turn),
        stops_block(turn),
    ]
    return tag("details", tag("summary", summary), *body, class_="turn", id=f"turn-{number}")


def pager(view: TaskView) -> Html:
    """Back to the report, previous and next trajectory (the page script follows the index's filter instead)."""
    def link(rel: str, label: str, href: str | None) -> Html:
        return tag("a", label, rel=rel, href=href, aria_disabled=None if href else "true")

    return tag("nav", tag("a", "← report", href=view.index_href, data_index=True),
               link("prev", "‹ previous (p)", view.prev_href), link("next", "next (n) ›", view.next_href),
               tag("span", view.position, class_="position"), class_="pager")


def trajectory_page(view: TaskView, turns: list[dict]) -> str:
    text = PageText()
    sections, previous, previous_label = [], view.init_content, "the initial file"
    for turn in turns:
        sections.append(turn_section(turn, previous, previous_label, text))
        previous, previous_label = text_of(turn.get("final_code")), f"turn {turn.get('turn_number', '?')}"
    title = f"Task {view.task_id} · {view.title}"
    return page(title, pager(view), tag("h1", title), overview(view, turns), tag("h2", "Turns"), *sections,
                memory_block(turns, text))
