"""The flags every command spells one way, with one meaning and one description.

* ``--task-ids 1,2`` or ``--task-ids 1 2``: only these tasks;
* ``--dataset-dir DIR``: the dataset folder, the one holding ``annotation_meta.jsonl``;
* ``--work-dir DIR``: the folder that contains ``dataset/``, as in the release.

Old spellings of ours stay as hidden aliases that print a deprecation note on
stderr, and so do flags a command took without honouring them (:func:`add_idle`); the release's own spellings are accepted
silently. Metrics import nothing of ``agent``, so this module lives on their
side (stdlib only); the harness, scripts and ablations import it as
``metrics.cli_flags``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

META_FILE = "annotation_meta.jsonl"
DEFAULT_DATASET_DIR = Path("work_dir") / "dataset"
TASK_IDS_HELP = "only these tasks: 1,2 or 1 2"
DATASET_DIR_HELP = f"the dataset folder, holding {META_FILE}"
WORK_DIR_HELP = "the folder that contains dataset/, as in the release"


class Parser(argparse.ArgumentParser):
    """Usage mistakes end like every other user error: one line on stderr, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


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


class _Deprecated(argparse.Action):
    """An old or idle flag: prints ``note`` on stderr, then does what ``then`` does (else stores the value)."""

    def __init__(self, option_strings, dest, note: str, then: type[argparse.Action] | None = None, **kwargs) -> None:
        self.note = note
        self.then = then
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"note: {option_string} {self.note}", file=sys.stderr)
        if self.then is not None:
            self.then(self.option_strings, self.dest)(parser, namespace, values, option_string)
        else:
            setattr(namespace, self.dest, values)


def _task_ids(text: str) -> list[int]:
    try:
        return int_list(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected task ids like 1,2 or 1 2, got '{text}'") from None


def add_task_ids(parser: argparse.ArgumentParser, default_help: str = "every runnable task",
                 old: tuple[str, ...] = ()) -> None:
    """``--task-ids`` (``args.task_ids``: a list of ints, or None); ``old`` spellings are deprecated aliases."""
    parser.add_argument("--task-ids", nargs="+", type=_task_ids, action=Flatten, metavar="ID",
                        help=f"{TASK_IDS_HELP} (default: {default_help})")
    for flag in old:
        add_renamed(parser, flag, "--task-ids", then=Flatten, nargs="+", type=_task_ids)


def add_renamed(parser: argparse.ArgumentParser, old: str, new: str, then: type[argparse.Action] | None = None,
                **kwargs) -> None:
    """``old``, a former spelling of ``new``: sets what ``new`` sets, hidden from --help, with a deprecation note."""
    parser.add_argument(old, dest=new.lstrip("-").replace("-", "_"), action=_Deprecated,
                        note=f"is deprecated; use {new}", then=then, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, **kwargs)


def add_idle(parser: argparse.ArgumentParser, flag: str, why: str, **kwargs) -> None:
    """A flag this command used to take but never honoured: still accepted, hidden from --help, and a note
    saying it is ignored (``why``) and will be removed."""
    parser.add_argument(flag, dest=f"idle_{flag.strip('-').replace('-', '_')}", action=_Deprecated,
                        note=f"is ignored ({why}) and will be removed", help=argparse.SUPPRESS, **kwargs)


def add_dataset_dirs(parser: argparse.ArgumentParser, default_help: str = f"{DEFAULT_DATASET_DIR}",
                     release_aliases: tuple[str, ...] = (), required: bool = False) -> None:
    """``--dataset-dir`` or ``--work-dir`` (one of them); resolve them with :func:`dataset_dir`."""
    group = parser.add_mutually_exclusive_group(required=required)
    suffix = " (this or --work-dir is required)" if required else f" (default: {default_help})"
    group.add_argument("--dataset-dir", dest="dataset_dir", metavar="DIR", help=DATASET_DIR_HELP + suffix)
    for flag in release_aliases:
        group.add_argument(flag, dest="dataset_dir", metavar="DIR", help=argparse.SUPPRESS)
    group.add_argument("--work-dir", dest="work_dir", metavar="DIR", help=WORK_DIR_HELP)


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
