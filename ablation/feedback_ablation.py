"""Feedback-model ablation: the same failed attempts, feedback from another model, one turn per level.

    python ablation/feedback_ablation.py --yaml-location my.yaml
        [--feedback-yaml OTHER.yaml] [--source-run RESULT_FOLDER] [--model NAME]
        [--guidance-level 1 2 3 4] [--samples 20] [--seed 0] [--max-workers 1]

For sampled (task, turn) pairs of a stored run whose submission failed, the
feedback model named by the human-* keys of --feedback-yaml (default: those of
--yaml-location) writes fresh feedback on that submission. Then, at each
guidance level, the turn is replayed as ``replay-feedback-level`` replays it:
from the code state of that turn (file, test digest and, for memory_agent,
memory) the code model takes ONE turn with the fresh records shown at the
level, and the tests run on its submission; each unit holds that new turn's
record. The table gives per level the share of samples solved and the mean
test-case pass rate, next to the recorded turns they started from. A sample
whose feedback could not be produced is incomplete at every level: not run,
not scored, asked again by the next run. Rerunning the command skips finished
samples.
Each model is built with the prices and cache-path of the config naming it,
so a ``replay`` feedback model answers from --feedback-yaml's response cache.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from ablation.ablation_common import (  # noqa: E402
    AblationError, Shown, Tally, UnitStore, ablation_folder, add_continuation_args, base_parser, for_each,
    human_model, incomplete_notes, prepare_continuation, run_main, sample, spec_params, unit_name, unsolved_turns,
    write_summary,
)
from agent.feedback.guidance import LEVELS  # noqa: E402
from metrics.cli_flags import add_levels  # noqa: E402


def parse_args() -> argparse.ArgumentParser:
    parser = base_parser(__doc__)
    add_continuation_args(parser)
    parser.add_argument("--feedback-yaml", type=Path,
                        help="config whose human-* keys name the feedback model (default: --yaml-location's)")
    add_levels(parser, "1 2 3 4: the levels to compare", dest="levels", default=list(LEVELS[1:]))
    return parser


def run(args: argparse.Namespace) -> str:
    cont = prepare_continuation(args)
    feedback = human_model(args.feedback_yaml or args.yaml_location, "feedback")
    feedback_spec = feedback.spec
    pairs = sample(unsolved_turns(cont.runs), args.samples, args.seed)
    if not pairs:
        raise AblationError(f"run {cont.source} has no failed turn to give feedback on")
    levels = sorted(set(args.levels))
    if not set(levels) <= set(LEVELS):
        raise AblationError(f"--guidance-level takes levels {LEVELS[0]} to {LEVELS[-1]}, got "
                            f"{', '.join(map(str, levels))}")
    label = f"{cont.model.model}__feedback_{feedback_spec.model}"
    folder = ablation_folder(cont.cfg, "feedback", (cont.source.name, label),
                             {**cont.params(), "feedback_model": spec_params(feedback_spec)})
    store = UnitStore(folder, Tally())
    feedback_model = feedback.build()

    def one_sample(pair: tuple[int, int]) -> dict[str, dict]:
        fresh = store.get(unit_name(*pair, "feedback"), lambda: cont.fresh_feedback(feedback_model, pair))
        return cont.replay(store, pair, {f"L{level}": Shown(fresh["records"], level, "llm", fresh["incomplete"])
                                         for level in levels})

    units = for_each(pairs, one_sample, "feedback ablation", args.max_workers)
    outcomes = {f"L{level}": [unit[f"L{level}"] for unit in units] for level in levels}
    headers, rows = cont.table(pairs, outcomes)
    notes = incomplete_notes(outcomes)
    title = (f"Feedback ablation: {len(pairs)} failed turn(s) of {cont.source.name} (seed {args.seed}), "
             f"feedback by {feedback_spec.model}, one turn of {cont.model.model} per level")
    return write_summary(folder, title, headers, rows, store.tally, notes)


def main(argv: list[str] | None = None) -> int:
    return run_main(parse_args(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
