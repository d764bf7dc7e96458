"""The flags every command spells one way, with one meaning and one description.

A flag that stands for a key of the run's YAML is spelled as that key (``--output-dir``, ``--guidance-level``,
``--max-turn``, ``--model``, ``--env-backend``, ``--task-ids``...), whichever command takes it: the main
command writes ``output-dir``, the metrics read it, and both call it ``--output-dir``. :data:`CONCEPTS` is the
table (concept -> canonical flag, our old spellings, the release's spellings); :func:`add_flag` is how a
command takes one of them, so its old spellings come along as hidden aliases that print a one-line
deprecation note on stderr, and the release's own spellings are accepted silently. Flags a command took
without honouring them are accepted with a note that they are ignored (:func:`add_idle`).

Metrics import nothing of ``agent``, so this module lives on their side (stdlib only); the harness, scripts
and ablations import it as ``metrics.cli_flags``.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

META_FILE = "annotation_meta.jsonl"
DEFAULT_DATASET_DIR = Path("work_dir") / "dataset"
TASK_IDS_HELP = "only these tasks: 1,2 or 1 2"
DATASET_DIR_HELP = f"the dataset folder, holding {META_FILE}"
WORK_DIR_HELP = "the folder that contains dataset/, as in the release"
OUTPUT_DIR_HELP = "the run's output-dir: the folder holding the run folders"
LEVELS_HELP = "guidance level(s) 0-4: 2, or 0,2,4 or 0 2 4"
MODEL_HELP = "code model name(s): a,b or a b"


@dataclass(frozen=True)
class Concept:
    """One thing several commands take a flag for: its one spelling and the spellings it replaced."""

    meaning: str
    flag: str
    old: tuple[str, ...] = ()      # ours, before: accepted with a deprecation note
    release: tuple[str, ...] = ()  # the authors' release's: accepted silently, as the release's scripts use them


CONCEPTS: dict[str, Concept] = {concept.flag: concept for concept in (
    Concept("tasks to run or read", "--task-ids", ("--tasks",), ("--task-id",)),
    Concept("the results folder (the run's output-dir)", "--output-dir", ("--result-dir",)),
    Concept("guidance levels", "--guidance-level", ("--guidance-levels", "--levels", "--level")),
    Concept("turns per task (the n of Recall@n)", "--max-turn", ("--max-turns",)),
    Concept("code models", "--model", ("--models",)),
    Concept("evaluation setting", "--evaluation-setting", ("--setting",)),
    Concept("environment backend", "--env-backend", ("--backend",)),
    Concept("Python version of new environments", "--python-version", ("--python",)),
    Concept("dataset folder (holds annotation_meta.jsonl)", "--dataset-dir", (), ("--ref-dataset-dir",)),
    Concept("work folder (holds dataset/)", "--work-dir"),
    Concept("the meta file", "--meta", (), ("--meta-jsonl",)),
    Concept("the file or folder a command writes", "--out", ("--output",)),
)}


class Parser(argparse.ArgumentParser):
    """Usage mistakes end like every other user error: one line on stderr, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        """argparse's own ``required`` misses a value given by an alias: :func:`add_flag`'s are checked here."""
        parsed, rest = super().parse_known_args(args, namespace)
        missing = [action.option_strings[0] for action in self._actions
                   if getattr(action, "needed", False) and getattr(parsed, action.dest, None) is None]
        if missing:
            self.error(f"the following arguments are required: {', '.join(missing)}")
        return parsed, rest


def int_list(text: str) -> list[int]:
    """One word of a ``nargs="+"`` integer flag: ``1,2`` -> [1, 2] (with :class:`Flatten`, ``1 2`` works too)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None


class Flatten(argparse.Action):
    """Words of comma-separated integers -> one list, in order, each once."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        ids = [task for word in values for task in word]
        setattr(namespace, self.dest, list(dict.fromkeys(ids)) or None)


class _Alias(argparse.Action):
    """Another spelling of ``target``'s flag: prints ``note`` (if any) on stderr, then does what ``target`` does."""

    def __init__(self, option_strings, dest, target: argparse.Action | None = None, note: str | None = None,
                 **kwargs) -> None:
        self.target = target
        self.note = note
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if self.note:
            print(f"note: {option_string} {self.note}", file=sys.stderr)
        if self.target is not None:
            self.target(parser, namespace, values, option_string)
        else:
            setattr(namespace, self.dest, values)


def add_alias(parser: argparse.ArgumentParser | argparse._ActionsContainer, flag: str, target: argparse.Action,
              note: str | None) -> None:
    """``flag``, hidden from --help, parses its words as ``target`` does and sets what it sets."""
    parser.add_argument(flag, dest=target.dest, nargs=target.nargs, type=target.type, choices=target.choices,
                        metavar=target.metavar, action=_Alias, target=target, note=note, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def add_flag(parser: argparse.ArgumentParser | argparse._ActionsContainer, flag: str, *, release: bool = False,
             **kwargs) -> argparse.Action:
    """The concept ``flag`` of :data:`CONCEPTS`, with ``add_argument``'s ``kwargs``; our old spellings are
    deprecated aliases, the release's (``release``: this command is one of the release's) silent ones."""
    concept = CONCEPTS[flag]
    needed = kwargs.pop("required", False)
    action = parser.add_argument(flag, **kwargs)
    action.needed = needed  # checked by Parser once every spelling had its say
    for old in concept.old:
        add_alias(parser, old, action, f"is deprecated; use {flag}")
    for old in concept.release if release else ():
        add_alias(parser, old, action, None)
    return action


def add_renamed(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """``old``, a former spelling of this command's own flag ``new`` (not a shared concept): hidden, with a
    deprecation note."""
    target = next(action for action in parser._actions if new in action.option_strings)
    add_alias(parser, old, target, f"is deprecated; use {new}")


def add_idle(parser: argparse.ArgumentParser, flag: str, why: str, **kwargs) -> None:
    """A flag this command used to take but never honoured: still accepted, hidden from --help, and a note
    saying it is ignored (``why``) and will be removed."""
    parser.add_argument(flag, dest=f"idle_{flag.strip('-').replace('-', '_')}", action=_Alias,
                        note=f"is ignored ({why}) and will be removed", help=argparse.SUPPRESS, **kwargs)


def _task_ids(text: str) -> list[int]:
    try:
        return int_list(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected task ids like 1,2 or 1 2, got '{text}'") from None


def add_task_ids(parser: argparse.ArgumentParser, default_help: str = "every runnable task") -> None:
    """``--task-ids`` (``args.task_ids``: a list of ints, or None)."""
    add_flag(parser, "--task-ids", nargs="+", type=_task_ids, action=Flatten, metavar="ID",
             help=f"{TASK_IDS_HELP} (default: {default_help})")


def add_levels(parser: argparse.ArgumentParser, default_help: str, dest: str = "guidance_level",
               default: list[int] | None = None) -> None:
    """``--guidance-level`` (``args.<dest>``: a list of levels, or ``default``): ``2``, ``0,2,4`` or ``0 2 4``."""
    add_flag(parser, "--guidance-level", dest=dest, nargs="+", type=int_list, action=Flatten, metavar="L",
             default=default, help=f"{LEVELS_HELP} (default: {default_help})")


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


class _FlattenNames(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, list(dict.fromkeys(name for word in values for name in word)) or None)


def add_models(parser: argparse.ArgumentParser, help_text: str, dest: str = "model") -> None:
    """``--model`` (``args.<dest>``: a list of names, or None): ``a,b`` or ``a b``."""
    add_flag(parser, "--model", dest=dest, nargs="+", type=_names, action=_FlattenNames, metavar="NAME",
             help=f"{MODEL_HELP}: {help_text}")


def add_output_dir(parser: argparse.ArgumentParser, help_text: str, dest: str = "output_dir", **kwargs) -> None:
    """``--output-dir DIR``: the folder a run writes its run folders to, and the metrics read them from."""
    add_flag(parser, "--output-dir", dest=dest, metavar="DIR", help=f"{OUTPUT_DIR_HELP} ({help_text})", **kwargs)


def add_dataset_dirs(parser: argparse.ArgumentParser, default_help: str = f"{DEFAULT_DATASET_DIR}",
                     release: bool = False, required: bool = False) -> None:
    """``--dataset-dir`` or ``--work-dir`` (one of them); resolve them with :func:`dataset_dir`."""
    group = parser.add_mutually_exclusive_group(required=required)
    suffix = " (this or --work-dir is required)" if required else f" (default: {default_help})"
    add_flag(group, "--dataset-dir", release=release, dest="dataset_dir", metavar="DIR", help=DATASET_DIR_HELP + suffix)
    add_flag(group, "--work-dir", dest="work_dir", metavar="DIR", help=WORK_DIR_HELP)


def dataset_in(work_dir: Path) -> Path | None:
    """The dataset a work dir holds: ``<work-dir>/dataset``, or the folder itself when it holds the meta file."""
    for folder in (work_dir / "dataset", work_dir):
        if (folder / META_FILE).is_file():
            return folder
    return None


def dataset_dir(parser: argparse.ArgumentParser, args: argparse.Namespace,
                default: Path | str = DEFAULT_DATASET_DIR) -> Path:
    """The dataset folder ``--dataset-dir`` or ``--work-dir`` names (else ``default``), as the user wrote it
    (relative stays relative, so messages show their path); a flag given the other's folder is a usage error
    naming the right one."""
    if args.dataset_dir:
        folder = Path(args.dataset_dir).expanduser()
        if not (folder / META_FILE).is_file() and (folder / "dataset" / META_FILE).is_file():
            parser.error(f"--dataset-dir {args.dataset_dir} holds dataset/, not {META_FILE}: pass it as "
                         f"--work-dir, or pass --dataset-dir {folder / 'dataset'}")
        return folder
    if args.work_dir:
        work = Path(args.work_dir).expanduser()
        found = dataset_in(work)
        if found is None:
            parser.error(f"--work-dir {args.work_dir} holds neither dataset/{META_FILE} nor {META_FILE}; "
                         "pass the folder that contains dataset/")
        return found
    return Path(default).expanduser()
