"""Import ResearchCodeBench papers into a RECODE-H dataset folder: one task per annotated snippet.

    python scripts/import_researchcodebench.py --pset PATH/TO/pset --out work_dir/rcb_dataset
        [--papers ID,ID] [--start-index N] [--no-resolve] [--torch-pair 2.14.1,0.29.1] [--python-version 3.11]
        [--requirements FILE [--env-name recode_rcb]]
        [--report-weak [--env-backend current] [--timeout-sec 120]]

Environments come from the papers: each paper's requirements*.txt, else its
third-party imports mapped to distributions; the package index is asked
(wheels only, nothing installed) what cannot be installed offline, and the
imports such distributions provide become stubs in the tests (recorded in
each task's meta row as ``stubs``). Papers share an environment when that
changes no version any of them gets; every environment has one
torch/torchvision pair (requirements/rcb_constraints.txt). ``--requirements``
replaces all of this with one file for every paper.

Each task's repository is the paper folder with every paper2code tag line
removed and the chosen snippet replaced by its two placeholder lines; the
paper's unittest entry point runs from the paper root, as in the release.
Re-importing a paper replaces its earlier tasks (same ids for the same
snippets). ``--report-weak`` runs each new task's tests on its placeholder
version and lists the tasks that still pass: their tests cannot tell an empty
block from a right one (the public set has a few), so scores on them say
little. The import itself never fails because of them.
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

import argparse
import shutil

from agent.runner.core import RunnerOptions
from agent.envs.backends import current_python_version
from agent.envs.spec import EnvError
from agent.rcb.annotations import AnnotationError
from agent.rcb.environments import EnvPlan, plan_environments, write_requirements
from agent.rcb.gold import EXPECTED, WEAK, check_task
from agent.rcb.importer import TaskPlan, plan_paper
from agent.rcb.pset import PaperSpec, PsetError, load_pset
from agent.rcb.requirements import TORCH_PAIR
from agent.rcb.resolve import ResolveError, Resolver
from agent.rcb.tasks import DEFAULT_ENV_NAME, DEFAULT_TIMEOUT
from agent.rcb.writer import MAP_FILE, import_plans
from agent.task.dataset import META_FILE, DatasetError, DatasetManager
from metrics.cli_flags import Parser, add_flag


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pset", required=True, help="ResearchCodeBench 'pset' folder (holds papers.yaml)")
    add_flag(parser, "--out", required=True, help="dataset folder to write (created if missing)")
    parser.add_argument("--papers", help="comma-separated paper ids (default: every paper of papers.yaml)")
    parser.add_argument("--start-index", type=int, help="first task id (default: reuse earlier ids, else max + 1)")
    parser.add_argument("--env-name", default=DEFAULT_ENV_NAME,
                        help="with --requirements: the one conda env every test.sh names")
    parser.add_argument("--requirements",
                        help="one requirements file for every paper (overrides the derived environments)")
    parser.add_argument("--no-resolve", action="store_true",
                        help="derive environments without asking the package index what can be installed")
    parser.add_argument("--torch-pair", help="TORCH,TORCHVISION versions for the shared constraints "
                        "(default: the newest pair the index offers)")
    add_flag(parser, "--python-version", metavar="X.Y",
             help="python version the environments will have (default: this interpreter's)")
    parser.add_argument("--test-timeout", type=int, default=DEFAULT_TIMEOUT, help="pytest --timeout in test.sh")
    parser.add_argument("--report-weak", action="store_true",
                        help="after importing, flag tasks whose placeholder version passes the tests")
    add_flag(parser, "--env-backend", help="environment backend for --report-weak (conda, uv, venv, current)")
    parser.add_argument("--timeout-sec", type=float, default=300.0, help="per-task limit for --report-weak")
    return parser.parse_args(argv)


def install_requirements(out: Path, env_name: str, requirements: str) -> None:
    """Copy the user's requirements file into the dataset as requirements/<env-name>.txt."""
    source = Path(requirements)
    if not source.is_file():
        raise DatasetError(f"requirements file {source} not found; fix --requirements")
    target = out / "requirements" / f"{env_name}.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def parse_pair(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise DatasetError(f"--torch-pair must be TORCH,TORCHVISION (e.g. 2.14.1,0.29.1), got '{text}'")
    return dict(zip(TORCH_PAIR, parts))


def derived_environments(papers: list[PaperSpec], args: argparse.Namespace) -> EnvPlan:
    resolver = None if args.no_resolve else Resolver(args.python_version or current_python_version())
    return plan_environments(papers, resolver, parse_pair(args.torch_pair))


def report_weak(out: Path, indices: list[int], plans: list[TaskPlan], backend: str | None,
                timeout_sec: float) -> list[int]:
    """Gold-check every new task; print the weak tests (and tasks that are not as expected); return the weak ids."""
    dataset = DatasetManager(out)
    options = RunnerOptions(timeout_sec=timeout_sec, env_backend=backend)
    weak = []
    for index, plan in zip(indices, plans):
        check = check_task(dataset, index, options)
        label = f"task {index} ({plan.paper} / {plan.file} / {plan.snippet!r})"
        if check.verdict.kind == WEAK:
            weak.append(index)
            print(f"weak test: {label} passes with its block left as the placeholder ({check.reference['tests']} tests)")
        elif check.verdict.kind != EXPECTED:
            print(f"{check.verdict.kind}: {label}: {check.verdict.reason}")
    print(f"weak tests: {len(weak)} of {len(indices)} imported task(s)")
    return weak


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out).expanduser().resolve()
    try:
        papers = load_pset(args.pset, [p.strip() for p in args.papers.split(",") if p.strip()] if args.papers else None)
        env_plan = None if args.requirements else derived_environments(papers, args)
        plans: list[TaskPlan] = []
        for paper in papers:
            env_name = env_plan.env_of[paper.paper_id] if env_plan else args.env_name
            stubs = env_plan.stubs(paper.paper_id) if env_plan else {}
            paper_plans, warnings = plan_paper(paper, env_name, args.test_timeout, stubs)
            plans += paper_plans
            for warning in warnings:
                print(f"warning: {warning}", file=sys.stderr)
        if args.requirements:
            install_requirements(out, args.env_name, args.requirements)
        indices = import_plans(out, plans, [p.paper_id for p in papers], args.start_index)
        if env_plan:
            write_requirements(out, env_plan)
    except (PsetError, AnnotationError, DatasetError, ResolveError, EnvError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    span = f"ids {min(indices)}..{max(indices)}" if indices else "no tasks"
    print(f"imported {len(indices)} snippet task(s) from {len(papers)} paper(s) into {out} ({span}; "
          f"{sum(p.code_lines for p in plans)} code lines); rows in {out / META_FILE} and {out / MAP_FILE}")
    if env_plan:
        print_environments(env_plan, out)
    if args.report_weak and indices:
        try:
            report_weak(out, indices, plans, args.env_backend, args.timeout_sec)
        except (DatasetError, ValueError) as exc:
            print(f"error: weak-test check stopped: {exc}", file=sys.stderr)
            return 2
    return 0


def print_environments(plan: EnvPlan, out: Path) -> None:
    """One line per environment and every note, so what was derived (and stubbed) is on screen."""
    for group in plan.groups:
        print(f"environment {group.name}: {', '.join(group.papers)} "
              f"({len(group.requirements)} requirements, {out / 'requirements' / (group.name + '.txt')})")
    for paper, needs in plan.needs.items():
        stubs = plan.stubs(paper)
        if stubs:
            print(f"stubs for '{paper}': {', '.join(sorted(stubs))}")
    for note in plan.notes:
        print(f"note: {note}")


if __name__ == "__main__":
    sys.exit(main())
