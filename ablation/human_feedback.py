"""Human-feedback ablation: the same failed attempts continued with human, LLM and no feedback.

    python ablation/human_feedback.py --yaml-location config/offline.yaml
        [--feedback-file HUMAN.jsonl] [--source-run RESULT_FOLDER] [--model NAME]
        [--level 4] [--samples 20] [--seed 0]

Human feedback is a file in the format of ``feedback-source: file`` (see
agent/feedback.py): entries {"task_index", "turn_number", "feedback": [records]},
each about the submission of that turn of the source run (default file: the
config's feedback-file). Samples are drawn from the failed turns of the run
that the file has an entry for. Each sample is continued for ONE turn three
times: with the human records, with the LLM records that turn received in the
run (fresh ones from the config's feedback model when it received none), and
with no feedback (the test digest alone); records are shown at --level.
The table gives per condition the share solved and the mean test-case pass
rate. Rerunning the command skips finished samples.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ablation.ablation_common import (  # noqa: E402
    AblationError, Continuation, Tally, UnitStore, ablation_folder, add_continuation_args, base_parser, build,
    human_model, prepare_continuation, progress, run_main, sample, unit_name, unsolved_turns, write_summary,
)
from agent.feedback import format_feedback, load_feedback_file  # noqa: E402

# Feedback sources where a person wrote the records; every other source (llm, seed, replay) is a model's.
HUMAN_SOURCES = ("file", "interactive")


def parse_args() -> argparse.ArgumentParser:
    parser = base_parser(__doc__)
    add_continuation_args(parser)
    parser.add_argument("--feedback-file", type=Path, help="human feedback (default: the config's feedback-file)")
    parser.add_argument("--level", type=int, choices=range(1, 5), default=4,
                        help="guidance level the human and LLM records are shown at (default 4)")
    return parser


def human_table(args: argparse.Namespace, cont: Continuation) -> tuple[Path, dict[tuple[int, int], list[dict]]]:
    path = args.feedback_file or cont.cfg.feedback_file
    if path is None:
        raise AblationError("no human feedback: pass --feedback-file or set feedback-file in the config")
    try:
        return Path(path), load_feedback_file(Path(path))
    except ValueError as exc:
        raise AblationError(str(exc)) from None


class LLMRecords:
    """The LLM records of a turn: those the run recorded, else fresh ones (the feedback model built once)."""

    def __init__(self, cont: Continuation, yaml_location: Path, store: UnitStore) -> None:
        self.cont, self.yaml_location, self.store = cont, yaml_location, store
        self.model = None

    def __call__(self, pair: tuple[int, int]) -> list[dict]:
        record = self.cont.record(pair)
        if record["feedback_items"] and record["feedback_source"] not in HUMAN_SOURCES:
            return record["feedback_items"]
        return self.store.get(unit_name(*pair, "llm_feedback"), lambda: self._fresh(pair))["records"]

    def _fresh(self, pair: tuple[int, int]) -> dict:
        if self.model is None:
            self.model = human_model(self.yaml_location, "feedback").build()
        return self.cont.fresh_feedback(self.model, pair)


def run(args: argparse.Namespace) -> str:
    cont = prepare_continuation(args)
    path, human = human_table(args, cont)
    failed = set(unsolved_turns(cont.runs))
    pairs = sample(failed & set(human), args.samples, args.seed)
    if not pairs:
        raise AblationError(f"{path} has no entry for a failed turn of {cont.source}; key its entries by the "
                            "task_index and turn_number of that run's failed turns")
    folder = ablation_folder(cont.cfg, "human_feedback", (cont.source.name, f"{cont.model.model}__L{args.level}"),
                             {**cont.params(), "level": args.level})
    store = UnitStore(folder, Tally())
    code_model, llm_records = build(cont.cfg, cont.model), LLMRecords(cont, args.yaml_location, store)
    outcomes: dict[str, list[dict]] = {"human": [], "llm": [], "none": []}
    for pair in progress(pairs, "human feedback ablation"):
        texts = {"human": format_feedback(human[pair], args.level),
                 "llm": format_feedback(llm_records(pair), args.level), "none": ""}
        for label, unit in cont.continue_all(code_model, store, pair, texts).items():
            outcomes[label].append(unit)
    headers, rows = cont.table(pairs, outcomes)
    title = (f"Human feedback ablation: {len(pairs)} failed turn(s) of {cont.source.name} (seed {args.seed}), "
             f"feedback shown at L{args.level}, one turn of {cont.model.model} per condition")
    return write_summary(folder, title, headers, rows, store.tally, [f"human feedback: {path}"])


def main(argv: list[str] | None = None) -> int:
    return run_main(parse_args(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
