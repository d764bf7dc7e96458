"""Step ablation: replay the recorded actions of a run one by one and test the file after each.

    python ablation/step_ablition.py --yaml-location CONFIG.yaml
        [--source-run RESULT_FOLDER] [--model NAME] [--samples 20] [--seed 0] [--max-workers 1]

(The file name keeps the release's spelling.) Samples are (task, turn) pairs
of a stored run. Each sampled turn is replayed on a fresh private copy of the
task: the target file starts as it was when the turn began (the previous
turn's submission, or the blanked file at turn 0) and the turn's recorded
actions are applied again in order. REPLACE and EDIT change the file, their
code re-read from the model's answers in the turn's transcript; READ, BROWSE,
RETRIEVE, SUBMIT and invalid answers do not. The tests run on the starting
file and after every step that changed it. The table gives, after each step
number, the mean test-case pass rate and the share solved (a turn that
submitted earlier keeps its final value), and how often the replay ended on
the very file the run submitted. No model is called; rerunning the command
skips replayed samples.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import Counter
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from ablation.ablation_common import (  # noqa: E402
    AblationError, Continuation, Tally, UnitStore, ablation_folder, add_continuation_args, base_parser, mean,
    for_each, prepare_continuation, run_main, run_tests, sample, score, unit_name, write_summary,
)
from agent.task.action import (  # noqa: E402
    CODE_ACTIONS, Action, ActionFormatError, execute, extract_code_block, parse_answer,
)
from agent.common.tempdirs import private_dir  # noqa: E402
from agent.task.workspace import RepoWorkspace, make_workspace  # noqa: E402


def parse_args() -> argparse.ArgumentParser:
    parser = base_parser(__doc__)
    add_continuation_args(parser)
    return parser


def step_answers(record: dict) -> list[str]:
    """The model's answer at each step of the turn (index = step - 1); summaries are not steps."""
    return [m["content"] for m in record["code_interaction_history"]
            if m["role"] == "assistant" and m.get("kind", "step") == "step"]


def code_action(answer: str, recorded: dict) -> Action | None:
    """The file-changing action of ``answer`` as the run parsed it; the baseline's answer is a bare block."""
    try:
        action = parse_answer(answer)
    except ActionFormatError:
        action = None
    if action is not None and action.name == recorded["action"]:
        return action
    code = extract_code_block(answer) if recorded["action"] == "REPLACE" else None
    return None if code is None else Action("REPLACE", code=code)


def replay_turn(cont: Continuation, pair: tuple[int, int], reports: Path, tally: Tally) -> dict:
    """Re-apply one turn's actions on a fresh copy, testing the file at the start and after each change."""
    task, turn = pair
    record = cont.record(pair)
    answers = step_answers(record)
    tested: dict[str, dict] = {}

    def measure(code: str, label: str) -> dict:
        if code not in tested:
            report = reports / f"{unit_name(*pair)}_{label}.xml"
            execution = run_tests(cont.parts, task, code, report, tally)
            tested[code] = {"status": execution["status"], **score(cont.dataset, task, execution)}
        return tested[code]

    meta = cont.dataset.get(task)
    with private_dir("steps") as tmp:
        start = cont.runs[task].previous_code(turn, cont.dataset)
        ws = RepoWorkspace(make_workspace(cont.dataset, task, tmp / "repo", content=start),
                           meta.target_file_path)
        steps = [{"step": 0, "action": "start", "argument": "", "changed": True, **measure(start, "start")}]
        for recorded in record["actions"]:
            before = ws.code
            if recorded["action"] in CODE_ACTIONS and recorded["step"] <= len(answers):
                action = code_action(answers[recorded["step"] - 1], recorded)
                if action is not None:
                    execute(action, ws)
            code = ws.code
            steps.append({"step": recorded["step"], "action": recorded["action"], "argument": recorded["argument"],
                          "changed": code != before, **measure(code, f"step_{recorded['step']}")})
        final = ws.code
    return {"task_index": task, "turn_number": turn, "steps": steps, "matches_record": final == record["final_code"],
            "recorded": score(cont.dataset, task, record["execution_result"]), "usage": []}


def after_step(steps: list[dict], number: int) -> dict:
    """The state after step ``number``: the last entry at or before it (a turn that ended keeps its value)."""
    return [s for s in steps if s["step"] <= number][-1]


def step_rows(units: list[dict]) -> list[list]:
    last = max(s["step"] for u in units for s in u["steps"])
    rows = []
    for number in range(last + 1):
        states = [after_step(u["steps"], number) for u in units]
        taken = Counter(s["action"] for u in units for s in u["steps"] if s["step"] == number and number > 0)
        rows.append(["start" if number == 0 else f"step {number}", len(units),
                     mean([float(s["solved"]) for s in states]), mean([s["pass_rate"] for s in states]),
                     ", ".join(f"{name} {count}" for name, count in sorted(taken.items())) or "-"])
    recorded = [u["recorded"] for u in units]
    rows.append(["recorded submission", len(units), mean([float(r["solved"]) for r in recorded]),
                 mean([r["pass_rate"] for r in recorded]), "-"])
    return rows


def run(args: argparse.Namespace) -> str:
    cont = prepare_continuation(args)
    pairs = sample([(task, t["turn_number"]) for task, traj in cont.runs.items() for t in traj.turns if t["actions"]],
                   args.samples, args.seed)
    if not pairs:
        raise AblationError(f"run {cont.source} recorded no actions to replay")
    folder = ablation_folder(cont.cfg, "steps", (cont.source.name, "replay"), {"source": str(cont.source.resolve())})
    store = UnitStore(folder, Tally())
    units = for_each(pairs, lambda pair: store.get(unit_name(*pair), lambda: replay_turn(cont, pair, folder / "reports",
                                                                                         store.tally)),
                     "step replay", args.max_workers)
    matches = sum(u["matches_record"] for u in units)
    notes = [f"the replay ended on the submitted file for {matches} of {len(units)} turn(s)"
             + ("" if matches == len(units) else " (the others diverged: see matches_record in the unit files)")]
    title = f"Step ablation: {len(pairs)} turn(s) of {cont.source.name} (seed {args.seed}), tests after each step"
    headers = ["after", "turns", "solved", "test-case pass", "actions at this step"]
    return write_summary(folder, title, headers, step_rows(units), store.tally, notes)


def main(argv: list[str] | None = None) -> int:
    return run_main(parse_args(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
