"""Import ResearchCodeBench papers into a RECODE-H dataset folder: one task per annotated snippet.

    python scripts/import_researchcodebench.py --pset PATH/TO/pset --out work_dir/rcb_dataset
        [--papers ID,ID] [--start-index N] [--env-name recode_rcb] [--requirements FILE]
        [--report-weak [--env-backend current] [--timeout-sec 120]]

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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import shutil

from agent.rcb.annotations import AnnotationError
from agent.rcb.writer import MAP_FILE, META_FILE, import_plans
from agent.rcb.importer import TaskPlan, plan_paper
from agent.rcb.pset import PsetError, load_pset
from agent.rcb.tasks import DEFAULT_ENV_NAME, DEFAULT_TIMEOUT
from agent.utils import DatasetError, DatasetManager


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pset", required=True, help="ResearchCodeBench 'pset' folder (holds papers.yaml)")
    parser.add_argument("--out", required=True, help="dataset folder to write (created if missing)")
    parser.add_argument("--papers", help="comma-separated paper ids (default: every paper of papers.yaml)")
    parser.add_argument("--start-index", type=int, help="first task id (default: reuse earlier ids, else max + 1)")
    parser.add_argument("--env-name", default=DEFAULT_ENV_NAME, help="conda env named in every test.sh")
    parser.add_argument("--requirements", help="requirements file to install as requirements/<env-name>.txt")
    parser.add_argument("--test-timeout", type=int, default=DEFAULT_TIMEOUT, help="pytest --timeout in test.sh")
    parser.add_argument("--report-weak", action="store_true",
                        help="after importing, flag tasks whose placeholder version passes the tests")
    parser.add_argument("--env-backend", help="environment backend for --report-weak (conda, uv, venv, current)")
    parser.add_argument("--timeout-sec", type=float, default=300.0, help="per-task limit for --report-weak")
    return parser.parse_args(argv)


def install_requirements(out: Path, env_name: str, requirements: str | None) -> str | None:
    """Copy the requirements file into the dataset; a note when the env will get the default group only."""
    target = out / "requirements" / f"{env_name}.txt"
    if requirements:
        source = Path(requirements)
        if not source.is_file():
            raise DatasetError(f"requirements file {source} not found; fix --requirements")
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(source, target)
        return None
    if target.exists():
        return None
    return (f"note: {target} does not exist, so environment '{env_name}' gets only the default group "
            "(pytest); pass --requirements FILE with the papers' dependencies")


def report_weak(out: Path, indices: list[int], plans: list[TaskPlan], backend: str | None,
                timeout_sec: float) -> list[int]:
    """Run every new task on its placeholder version; print and return the ids whose tests still pass."""
    from agent.clean_test_runner import RunnerOptions, run_candidate

    dataset = DatasetManager(out)
    options = RunnerOptions(timeout_sec=timeout_sec, env_backend=backend)
    weak = []
    for index, plan in zip(indices, plans):
        result = run_candidate(dataset, index, plan.init_content, options)
        label = f"task {index} ({plan.paper} / {plan.file} / {plan.snippet!r})"
        if result["status"] == "passed":
            weak.append(index)
            print(f"weak test: {label} passes with its block left as the placeholder ({result['tests']} tests)")
        elif result["status"] == "infra_error":
            print(f"not checked: {label}: {result['failure_messages'][0].splitlines()[0]}")
    print(f"weak tests: {len(weak)} of {len(indices)} imported task(s)")
    return weak


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out).expanduser().resolve()
    try:
        papers = load_pset(args.pset, [p.strip() for p in args.papers.split(",") if p.strip()] if args.papers else None)
        plans: list[TaskPlan] = []
        for paper in papers:
            paper_plans, warnings = plan_paper(paper, args.env_name, args.test_timeout)
            plans += paper_plans
            for warning in warnings:
                print(f"warning: {warning}", file=sys.stderr)
        note = install_requirements(out, args.env_name, args.requirements)
        indices = import_plans(out, plans, [p.paper_id for p in papers], args.start_index)
    except (PsetError, AnnotationError, DatasetError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    span = f"ids {min(indices)}..{max(indices)}" if indices else "no tasks"
    print(f"imported {len(indices)} snippet task(s) from {len(papers)} paper(s) into {out} ({span}; "
          f"{sum(p.code_lines for p in plans)} code lines); rows in {out / META_FILE} and {out / MAP_FILE}")
    if note:
        print(note)
    if args.report_weak and indices:
        try:
            report_weak(out, indices, plans, args.env_backend, args.timeout_sec)
        except (DatasetError, ValueError) as exc:
            print(f"error: weak-test check stopped: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
