"""Write a scripted-model rule file answering every ResearchCodeBench snippet of a dataset.

    python scripts/rcb_scripted_answers.py --dataset-dir DIR --answer reference|placeholder --out FILE.yaml
        [--protocol snippet|agent]

``reference`` answers each block with its ground truth (expect 100 scaled
pass@1 on every runnable paper); ``placeholder`` leaves the placeholder in
place (expect exactly the code-line share of the weak tests). Use the file as
``script:`` of a config with ``api-provider: scripted`` and
``evaluation-setting: snippet``; with ``--protocol agent`` the answers
REPLACE the whole target file and SUBMIT, for the feedback settings
(``baseline``, ``agent``, ``memory_agent``) over the same tasks.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from agent.common.setup_hint import name_missing_modules  # noqa: E402

name_missing_modules()


import yaml

from agent.common.atomic_file import atomic_write_text
from agent.rcb.answers import ANSWERS, PROTOCOLS, answer_rules
from agent.rcb.snippet import SnippetError, load_snippet_task
from agent.task.dataset import DatasetError, DatasetManager
from metrics.cli_flags import Parser, add_dataset_dirs, add_flag, dataset_dir


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    add_dataset_dirs(parser, required=True)  # the dataset scripts/import_researchcodebench.py wrote
    parser.add_argument("--answer", choices=ANSWERS, required=True)
    add_flag(parser, "--out", required=True, help="rule file to write (YAML)")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="snippet",
                        help="snippet: answer the block (evaluation-setting snippet); agent: REPLACE the whole file "
                             "and SUBMIT (baseline, agent, memory_agent)")
    args = parser.parse_args(argv)
    root = dataset_dir(parser, args)
    try:
        dataset = DatasetManager(root)
        tasks = [(load_snippet_task(dataset, meta.index), dataset.canonical(meta.index))
                 for meta in dataset.select(None) if meta.extra.get("snippet")]
        if not tasks:
            raise DatasetError(f"{dataset.meta_path} has no ResearchCodeBench snippet task; import papers first")
        rules = answer_rules(tasks, args.answer, args.protocol)
    except (DatasetError, SnippetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    atomic_write_text(Path(args.out), yaml.safe_dump({"rules": rules}, sort_keys=False, width=100000))
    print(f"wrote {len(rules)} rule(s) answering with the {args.answer} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
