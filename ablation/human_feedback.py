"""Human-feedback ablation: the same failed attempts continued with human, LLM and no feedback.

    python ablation/human_feedback.py --yaml-location config/offline.yaml
        [--feedback-file HUMAN.jsonl] [--source-run RESULT_FOLDER] [--model NAME]
        [--level 4] [--samples 20] [--seed 0] [--max-workers 1]

Human feedback is a file in the format of ``feedback-source: file`` (see
agent/feedback/file.py): entries {"task_index", "turn_number", "feedback": [records]},
each about the submission of that turn of the source run (default file: the
config's feedback-file). Samples are drawn from the entries of the file,
except those about a turn that solved the task. Each sample is replayed as
``replay-feedback-level`` replays a stored turn (ONE new turn from that turn's
state, each unit holding the new turn's record) three times: with the human
records, with the LLM records that turn received in the run (fresh ones from
the config's feedback model when it received none), and with no feedback (the
test digest alone, level 0); records are shown at --level. The table gives per
condition the share solved and the mean test-case pass rate. An entry about a
turn the run does not have, or LLM records that could not be produced, make
incomplete units: listed, never scored. Rerunning the command skips finished
samples.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import threading
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from ablation.ablation_common import (  # noqa: E402
    AblationError, Continuation, Shown, Tally, UnitStore, ablation_folder, add_continuation_args, base_parser,
    for_each, human_model, incomplete_notes, prepare_continuation, run_main, sample, unit_name, write_summary,
)
from agent.feedback import load_feedback_file  # noqa: E402
from metrics.cli_flags import add_flag  # noqa: E402
from agent.job.record import turn_solved  # noqa: E402

# Feedback sources where a person wrote the records; every other source (llm, seed, replay) is a model's.
HUMAN_SOURCES = ("file", "interactive", "web")


def parse_args() -> argparse.ArgumentParser:
    parser = base_parser(__doc__)
    add_continuation_args(parser)
    parser.add_argument("--feedback-file", type=Path, help="human feedback (default: the config's feedback-file)")
    add_flag(parser, "--guidance-level", dest="level", type=int, choices=range(1, 5), default=4,
             help="the guidance level the human and LLM records are shown at (default 4)")
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
    """The LLM records of a turn shown at ``level``: those the run recorded, else fresh ones (the
    feedback model built once, when first needed)."""

    def __init__(self, cont: Continuation, yaml_location: Path, store: UnitStore, level: int) -> None:
        self.cont, self.yaml_location, self.store, self.level = cont, yaml_location, store, level
        self.model = None
        self.lock = threading.Lock()

    def __call__(self, pair: tuple[int, int]) -> Shown:
        record = self.cont.record(pair)
        stored = self.cont.stored_feedback(pair, self.level)
        if record is None or (stored.missing is None and record["feedback_source"] not in HUMAN_SOURCES):
            return stored
        fresh = self.store.get(unit_name(*pair, "llm_feedback"), lambda: self._fresh(pair))
        return Shown(fresh["records"], self.level, "llm", fresh["incomplete"])

    def _fresh(self, pair: tuple[int, int]) -> dict:
        with self.lock:
            if self.model is None:
                self.model = human_model(self.yaml_location, "feedback").build()
        return self.cont.fresh_feedback(self.model, pair)


def run(args: argparse.Namespace) -> str:
    cont = prepare_continuation(args)
    path, human = human_table(args, cont)
    pairs = sample([pair for pair in human if not _solved(cont, pair)], args.samples, args.seed)
    if not any(cont.record(pair) is not None for pair in pairs):
        raise AblationError(f"{path} has no entry for a failed turn of {cont.source}; key its entries by the "
                            "task_index and turn_number of that run's failed turns")
    folder = ablation_folder(cont.cfg, "human_feedback", (cont.source.name, f"{cont.model.model}__L{args.level}"),
                             {**cont.params(), "level": args.level})
    store = UnitStore(folder, Tally())
    llm_records = LLMRecords(cont, args.yaml_location, store, args.level)

    def one_sample(pair: tuple[int, int]) -> dict[str, dict]:
        return cont.replay(store, pair, {"human": Shown(human[pair], args.level, "file"), "llm": llm_records(pair),
                                         "none": Shown([], 0, "none")})

    units = for_each(pairs, one_sample, "human feedback ablation", args.max_workers)
    outcomes = {label: [unit[label] for unit in units] for label in ("human", "llm", "none")}
    headers, rows = cont.table(pairs, outcomes)
    title = (f"Human feedback ablation: {len(pairs)} failed turn(s) of {cont.source.name} (seed {args.seed}), "
             f"feedback shown at L{args.level}, one turn of {cont.model.model} per condition")
    return write_summary(folder, title, headers, rows, store.tally,
                         [f"human feedback: {path}", *incomplete_notes(outcomes)])


def _solved(cont: Continuation, pair: tuple[int, int]) -> bool:
    record = cont.record(pair)
    return record is not None and turn_solved(record["execution_result"])


def main(argv: list[str] | None = None) -> int:
    return run_main(parse_args(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
