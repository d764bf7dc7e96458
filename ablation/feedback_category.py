"""Feedback adoption: an LLM judge labels every feedback item of stored runs with what became of it.

    python ablation/feedback_category.py --yaml-location my.yaml
        [--judge-yaml JUDGE.yaml] [--source-run RESULT_FOLDER ...] [--samples 20] [--seed 0] [--max-workers 1]

Sources: the result folders named by --source-run, else every existing result
folder of the config's models and guidance levels. Samples are (run, task,
turn) triples whose turn received feedback records and that have a next turn.
For each feedback item the judge (the human-* keys of --judge-yaml, default
--yaml-location's) sees the task, the item (without its category), the file it
was about, the next turn's file and that file's test results, and answers with
structured output: error_type T0-T4, adopted and resolved, each YES, PARTIAL or
NO. An answer that does not match the schema is retried with the problem
stated; after the last attempt the item counts as a judge error. The tables
give adoption and resolution rates per code model, guidance level and error
type. Rerunning the command skips judged samples. The judge is built with the
prices and cache-path of the config naming it (a ``replay`` judge answers from
that response cache).
"""
from __future__ import annotations

import argparse
import json
import importlib.util
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from ablation.ablation_common import (  # noqa: E402
    AblationError, Tally, Trajectory, UnitStore, ablation_folder, base_parser, human_model, load_run,
    for_each, mean, run_main, run_model_name, sample, spec_params, unit_name, write_summary,
)
from agent.config import RunConfig, load_config  # noqa: E402
from agent.feedback import CATEGORIES  # noqa: E402
from agent.models.build import ChatModel  # noqa: E402
from agent.task.dataset import DatasetManager  # noqa: E402
from agent.job.layout import result_folder  # noqa: E402
from agent.job.parts import RunParts  # noqa: E402

VERDICTS = ("YES", "PARTIAL", "NO")
MAX_JUDGE_ATTEMPTS = 3
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "error_type": {"type": "string", "enum": list(CATEGORIES)},
        "adopted": {"type": "string", "enum": list(VERDICTS)},
        "resolved": {"type": "string", "enum": list(VERDICTS)},
        "reason": {"type": "string"},
    },
    "required": ["error_type", "adopted", "resolved", "reason"],
    "additionalProperties": False,
}
JUDGE_SYSTEM = (
    "You review research code written by a coding agent. A researcher gave the agent feedback on one attempt; "
    "you judge what became of ONE feedback item in the agent's next attempt. Answer only with a JSON object "
    "that matches the requested schema."
)
JUDGE_REQUEST = """## Task given to the agent
{instruction}

## Feedback item (given on the attempt of turn {turn})
Interface: {interface}
Description: {description}
Analysis: {analysis}
Actionable feedback: {actionable_feedback}
Code suggestion:
{direct_code_feedback}

## The attempt the feedback was about (turn {turn})
```python
{before}
```

## The next attempt (turn {next_turn})
```python
{after}
```

## Test results of the next attempt
{digest}

## Your labels
- error_type: the kind of error the item points at: T0 code structure or planning, T1 code correctness \
(the code does not run), T2 alignment of the implementation with the paper or the instruction, T3 missing \
knowledge or context, T4 integration with the rest of the repository.
- adopted: did the next attempt act on this item? YES, PARTIAL or NO.
- resolved: is the problem the item describes gone from the next attempt? YES, PARTIAL or NO.
- reason: one sentence.
Answer as {{"error_type": "T0".."T4", "adopted": "YES|PARTIAL|NO", "resolved": "YES|PARTIAL|NO", "reason": "..."}}."""
# What the judge sees of an item: everything but the feedback model's own category.
CATEGORY_FREE_FIELDS = ("interface", "description", "analysis", "actionable_feedback", "direct_code_feedback")
JUDGE_RETRY = "That answer is not usable: {problem}. Answer again with only the JSON object."


class JudgementError(ValueError):
    """A judge answer that does not match JUDGE_SCHEMA; the message says where."""


def parse_judgement(text: str) -> dict:
    """The labels of a judge answer (a ```json fence is tolerated; labels are case-insensitive)."""
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        raise JudgementError(f"not valid JSON ({exc.msg})") from None
    if not isinstance(payload, dict):
        raise JudgementError("expected a JSON object")
    missing = [key for key in JUDGE_SCHEMA["required"] if not isinstance(payload.get(key), str)]
    if missing:
        raise JudgementError(f"{', '.join(missing)} missing or not a string")
    labels = {key: payload[key].strip().upper() for key in ("error_type", "adopted", "resolved")}
    for key, allowed in (("error_type", CATEGORIES), ("adopted", VERDICTS), ("resolved", VERDICTS)):
        if labels[key] not in allowed:
            raise JudgementError(f"{key} '{payload[key]}' is not one of {', '.join(allowed)}")
    return {**labels, "reason": payload["reason"]}


def judge_item(judge: ChatModel, prompt: str) -> dict:
    """One item's labels, asking again (with the problem named) while the answer is unusable."""
    messages = [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": prompt}]
    usage: list[dict] = []
    problem = ""
    for attempt in range(1, MAX_JUDGE_ATTEMPTS + 1):
        completion = judge.complete(messages, response_schema=JUDGE_SCHEMA)
        usage.append(completion.usage.to_dict())
        try:
            return {**parse_judgement(completion.text), "attempts": attempt, "error": None, "usage": usage}
        except JudgementError as exc:
            problem = str(exc)
            messages += [{"role": "assistant", "content": completion.text},
                         {"role": "user", "content": JUDGE_RETRY.format(problem=problem)}]
    return {"attempts": MAX_JUDGE_ATTEMPTS, "error": f"no valid answer in {MAX_JUDGE_ATTEMPTS} attempts: {problem}",
            "usage": usage}


def judge_turn(judge: ChatModel, dataset: DatasetManager, traj: Trajectory, turn: int) -> dict:
    """Labels of every feedback item of ``turn``, judged against turn + 1."""
    record, after = traj.turns[turn], traj.turns[turn + 1]
    labels = []
    for number, item in enumerate(record["feedback_items"]):
        prompt = JUDGE_REQUEST.format(instruction=dataset.instruction(traj.task_index).strip(), turn=turn,
                                      next_turn=turn + 1, before=record["final_code"].rstrip("\n"),
                                      after=after["final_code"].rstrip("\n"), digest=after["test_digest"],
                                      **{k: item[k].strip() for k in CATEGORY_FREE_FIELDS})
        labels.append({"item": number, "interface": item["interface"], "feedback_category": item["category"],
                       **judge_item(judge, prompt)})
    return {"task_index": traj.task_index, "turn_number": turn, "model": run_model_name(traj.run),
            "level": record["guidance_level"], "usage": [u for lab in labels for u in lab.pop("usage")],
            "labels": labels}


def source_runs(cfg: RunConfig, named: list[Path] | None) -> list[Path]:
    """The named folders, else every existing result folder of the config's models and levels."""
    if named:
        return [Path(p) for p in named]
    folders = [result_folder(cfg, model, level) for model in cfg.models for level in cfg.guidance_levels
               if level > 0 or cfg.guidance_type == "dynamic"]
    found = [f for f in folders if f.is_dir()]
    if not found:
        raise AblationError(f"no result folder of this config with feedback exists yet (looked in {cfg.output_dir}); "
                            "run it at a guidance level above 0 first or pass --source-run")
    return found


def rate_rows(units: list[dict]) -> tuple[list[str], list[list], list[str]]:
    """Rates per model, level and judged error type, plus notes (judge errors, category agreement)."""
    items = [{**lab, "model": u["model"], "level": f"L{u['level']}"} for u in units for lab in u["labels"]]
    judged = [i for i in items if i["error"] is None]
    groups = [("all", "")] + [(key, value) for key in ("model", "level", "error_type")
                              for value in sorted({i[key] for i in judged})]
    rows = []
    for key, value in groups:
        group = [i for i in judged if key == "all" or i[key] == value]
        rows.append([key.replace("_", " "), value, len(group)] + [
            mean([float(i[label] == verdict) for i in group]) for label in ("adopted", "resolved")
            for verdict in ("YES", "PARTIAL")])
    notes = [f"{len(items) - len(judged)} of {len(items)} item(s) had no valid judge answer and are left out"]
    if judged:
        agree = mean([float(i["error_type"] == i["feedback_category"]) for i in judged])
        notes.append(f"the judge's error type equals the feedback model's category for {100 * agree:.1f}% of items")
    headers = ["by", "value", "items", "adopted YES", "adopted PARTIAL", "resolved YES", "resolved PARTIAL"]
    return headers, rows, notes


def run(args: argparse.Namespace) -> str:
    cfg = load_config(args.yaml_location)
    judge_model = human_model(args.judge_yaml or args.yaml_location, "judge")
    judge_spec = judge_model.spec
    folders = source_runs(cfg, args.source_run)
    names = [f.resolve().name for f in folders]
    if len(set(names)) < len(names):
        raise AblationError("two --source-run folders have the same name; judge them in separate commands")
    parts = RunParts(cfg)
    dataset = parts.dataset
    runs = {str(folder.resolve()): load_run(folder, parts) for folder in folders}
    candidates = [(run, task, t["turn_number"]) for run, trajs in runs.items() for task, traj in trajs.items()
                  for t in traj.turns[:-1] if t["feedback_items"]]
    picked = sample(candidates, args.samples, args.seed)
    if not picked:
        raise AblationError("no turn of the source runs has feedback records followed by another turn; "
                            "judge runs made at a guidance level above 0 with max-turn of 2 or more")
    folder = ablation_folder(cfg, "feedback_category", (judge_spec.model,), {"judge": spec_params(judge_spec)})
    tally, judge = Tally(), judge_model.build()

    def one_sample(triple: tuple[str, int, int]) -> dict:
        run_path, task, turn = triple
        store = UnitStore(folder / Path(run_path).name, tally)
        return store.get(unit_name(task, turn), lambda: judge_turn(judge, dataset, runs[run_path][task], turn))

    units = for_each(picked, one_sample, "judging", args.max_workers)
    headers, rows, notes = rate_rows(units)
    title = (f"Feedback adoption: {len(picked)} turn(s) with feedback from {len(runs)} run(s) (seed {args.seed}), "
             f"judged by {judge_spec.model}")
    return write_summary(folder, title, headers, rows, tally, notes)


def parse_args() -> argparse.ArgumentParser:
    parser = base_parser(__doc__)
    parser.add_argument("--judge-yaml", type=Path,
                        help="config whose human-* keys name the judge model (default: --yaml-location's)")
    parser.add_argument("--source-run", type=Path, action="append",
                        help="a result folder to judge (repeatable; default: the config's folders)")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_main(parse_args(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
