"""A results folder as Inspect eval logs, for ``inspect view`` and ``inspect_ai.log.read_eval_log``.

One log per run (setting, guidance type, model, level); in it one sample per task holding the code
model's conversation (the system prompt once, then each call's new messages and its answer, tagged with
turn, step and purpose), the scores of the report's tables (``solved`` within max-turn, the best
``test_case_pass_rate``) and the token usage of the code and feedback models. Turn by turn detail
(status, test digest, feedback) goes into the sample metadata. Tasks that are incomplete (stopped for a
reason that is not the model's) get no score and say why, as in the tables.

inspect_ai is an optional extra, imported only here (``pip install inspect_ai``).
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from metric_aggregate import summarize
from metric_cli import Context
from metric_passrate_testcase import best_rate
from metric_passrate_unitest import first_success, solved_within
from optional_extras import import_extra
from plots import file_stem
from report_calls import Call, code_calls
from result_files import LevelRun, turn_status
from report_html import text_of
from task_meta import count_test_cases, read_meta_rows

PURPOSE = "inspect export"
SCORERS = ("solved", "test_case_pass_rate")


def _time(path: Path) -> str:
    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).isoformat()


def _usage(model_api, calls: list[dict]):
    """The sum of usage dicts as an Inspect ModelUsage (cost only when every call had a price)."""
    costs = [u.get("cost_usd") for u in calls]
    tokens = {key: sum(int(u.get(key) or 0) for u in calls)
              for key in ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")}
    return model_api.ModelUsage(
        input_tokens=tokens["input_tokens"], output_tokens=tokens["output_tokens"],
        total_tokens=tokens["input_tokens"] + tokens["output_tokens"],
        input_tokens_cache_read=tokens["cached_tokens"] or None, reasoning_tokens=tokens["reasoning_tokens"] or None,
        total_cost=float(sum(costs)) if costs and all(isinstance(c, (int, float)) for c in costs) else None)


def _calls_usage(model: str, turns: list[dict]) -> list[tuple[str, str, dict]]:
    """(role, model name, usage dict) of every call: the code model's, then the feedback model's."""
    found = []
    for turn in turns:
        for role, key in (("code", "code_usage"), ("feedback", "feedback_usage")):
            for usage in turn.get(key) or []:
                if isinstance(usage, dict):
                    found.append((role, str(usage.get("model") or (model if role == "code" else "feedback")), usage))
        if not isinstance(turn.get("code_usage"), list):  # release records: per-call token lists (older: totals)
            found += [("code", model, {"input_tokens": i, "output_tokens": o, "cost_usd": None})
                      for i, o in zip(_per_call(turn.get("code_input_tokens")),
                                      _per_call(turn.get("code_output_tokens")))]
    return found


def _per_call(value: object) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value] if isinstance(value, int) else []


def _grouped(model_api, calls: list[tuple[str, str, dict]], by: int) -> dict:
    groups: dict[str, list[dict]] = {}
    for call in calls:
        groups.setdefault(call[by], []).append(call[2])
    return {name: _usage(model_api, usage) for name, usage in groups.items()}


def _messages(model_api, model: str, turns: list[dict]) -> list:
    """The conversation as Inspect messages: each call's messages not yet in it, then its answer."""
    messages: list = []
    system_seen: set[str] = set()
    for turn in turns:
        for call in code_calls(turn):
            meta = {"turn": turn.get("turn_number"), "step": call.step, "purpose": call.purpose}
            for message in _new_messages(call, system_seen):
                kind = model_api.ChatMessageSystem if message["role"] == "system" else model_api.ChatMessageUser
                messages.append(kind(content=message["content"] or " ", metadata=meta))
            messages.append(model_api.ChatMessageAssistant(content=call.answer or " ", model=model, metadata=meta,
                                                           source="generate"))
    return messages


def _new_messages(call: Call, system_seen: set[str]) -> list[dict]:
    """A call's system prompt when it differs from those already shown, and its requests after the last
    answer it was sent (earlier ones are already in the conversation)."""
    out = []
    for message in call.messages:
        if message["role"] == "system":
            if message["content"] not in system_seen:
                system_seen.add(message["content"])
                out.append(message)
    tail = [m for m in call.messages if m["role"] != "system"]
    last_answer = max((i for i, m in enumerate(tail) if m["role"] == "assistant"), default=-1)
    return out + [m for m in tail[last_answer + 1:] if m["role"] != "assistant"]


def _turn_summary(turn: dict) -> dict:
    result = turn.get("execution_result") or {}
    return {"turn": turn.get("turn_number"), "status": turn_status(turn), "guidance_level": turn.get("guidance_level"),
            "tests": result.get("tests"), "failures": result.get("failures"), "errors": result.get("errors"),
            "test_digest": text_of(turn.get("test_digest")), "feedback_text": text_of(turn.get("feedback_text")),
            "feedback_source": turn.get("feedback_source")}


def sample(inspect, run: LevelRun, task_id: int, meta: dict, n_cases: int | None, max_turns: int):
    """One task of one run as an EvalSample."""
    model_api, scorer_api = inspect["model"], inspect["scorer"]
    turns = run.trajectories[task_id]
    first = first_success(turns, max_turns)
    where = f"{meta.get('repo_dir_name') or '?'}/{meta.get('target_file_path') or '?'}"
    scores = None
    if task_id not in run.incomplete:
        scores = {"solved": scorer_api.Score(value=1.0 if first is not None else 0.0,
                                             answer=f"turn {first}" if first is not None else "not solved")}
        if n_cases:
            scores["test_case_pass_rate"] = scorer_api.Score(value=best_rate({task_id: n_cases}, max_turns)(task_id,
                                                                                                           turns))
    final = text_of(turns[-1].get("final_code"))
    calls = _calls_usage(run.model, turns)
    wall = [t["wall_time_sec"] for t in turns if isinstance(t.get("wall_time_sec"), (int, float))]
    return inspect["log"].EvalSample(
        id=task_id, epoch=1, input=f"Implement {where} (RECODE-H task {task_id}) at guidance level L{run.level}",
        target=", ".join(meta.get("test_cases") or []), messages=_messages(model_api, run.model, turns),
        output=model_api.ModelOutput.from_content(run.model, final), scores=scores,
        model_usage=_grouped(model_api, calls, 1), role_usage=_grouped(model_api, calls, 0),
        total_time=sum(wall) if wall else None,
        metadata={"task": task_id, "level": run.level, "turns": len(turns), "first_success_turn": first,
                  "incomplete": run.incomplete.get(task_id), "per_turn": [_turn_summary(t) for t in turns]})


def eval_log(inspect, ctx: Context, run: LevelRun, rows: dict[int, dict], cases: dict[int, int]):
    """The EvalLog of one run: its samples, the mean of each score (as the report's tables), total usage."""
    log_api = inspect["log"]
    max_turns = ctx.args.max_turns
    samples = [sample(inspect, run, task_id, rows.get(task_id, {}), cases.get(task_id), max_turns)
               for task_id in sorted(run.trajectories)]
    means = {"solved": summarize(run, solved_within(max_turns)), "test_case_pass_rate":
             summarize(run, best_rate(cases, max_turns))}
    scores = [log_api.EvalScore(name=name, scorer=name, scored_samples=summary.scored,
                                metrics={"mean": log_api.EvalMetric(name="mean", value=summary.value)})
              for name, summary in means.items() if summary.value is not None]
    usage: dict = {}
    roles: dict = {}
    for item in samples:
        for total, parts in ((usage, item.model_usage), (roles, item.role_usage)):
            for name, part in parts.items():
                total[name] = total[name] + part if name in total else part
    created = _time(run.folder)
    selection = ctx.selection
    spec = log_api.EvalSpec(
        created=created, task="recode-h", model=run.model, dataset=log_api.EvalDataset(
            name="RECODE-H", location=str(ctx.meta_path), samples=len(samples), sample_ids=[s.id for s in samples]),
        config=log_api.EvalConfig(), task_args={"setting": selection.setting, "guidance_type": selection.guidance_type,
                                                "guidance_level": run.level, "max_turn": max_turns},
        metadata={"result_folder": str(run.folder)})
    return log_api.EvalLog(
        version=2, status="success", eval=spec, samples=samples,
        results=log_api.EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=scores),
        stats=log_api.EvalStats(started_at=created, completed_at=created, model_usage=usage, role_usage=roles))


def write_inspect_logs(contexts: list[Context], out: Path | str) -> list[Path]:
    """One ``.eval`` file per loaded run under ``out``; raises ExtraUnavailable without inspect_ai."""
    inspect = {name: import_extra(f"inspect_ai.{name}", PURPOSE) for name in ("log", "model", "scorer")}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for ctx in contexts:
        rows, cases = read_meta_rows(ctx.meta_path), count_test_cases(ctx.meta_path)
        for model in ctx.models:
            for run in ctx.runs(model):
                if not run.trajectories:
                    continue
                path = out / f"recode-h_{file_stem(run.folder.name)}.eval"
                inspect["log"].write_eval_log(eval_log(inspect, ctx, run, rows, cases), str(path))
                written.append(path)
    return written
