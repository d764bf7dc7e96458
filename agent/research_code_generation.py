"""Run RECODE-H: every (model, guidance level, task) job of a config, in parallel, resumably.

    python agent/research_code_generation.py [--yaml-location config/default.yaml]
        [--max-workers N] [--parallel-mode processes|threads|none|ray] [--output-dir DIR]
        [--task-ids 1,2] [--guidance-level 0 2 4] [--max-turn N] [--model NAME ...]
        [--work-dir DIR | --dataset-dir DIR] [--estimate]

Each flag overrides the YAML key of its name, so a sweep needs no edits of the file.
``--estimate`` prints what the run would cost (jobs, calls, tokens per model, a dollar range at list prices)
and exits without calling a model, building an environment or running a test (docs/estimate.md).

Shows progress (jobs done, turns, tests running, dollars so far: a bar on a
terminal, a line per finished job otherwise) and, at the end, a table per
model x level. Ctrl-C stops cleanly: finished turns are on disk; with
``resume: true`` the same command continues the interrupted tasks. Mistakes a user can make end with one line and exit code 2.
Exit codes: 0 all jobs done, 1 some job failed (feedback that could not be
produced included: the summary says so), 3 the budget stopped jobs, 4 a provider
refused the run (quota, key, permission, model: the last line names the cause
and the fix, and how many jobs remain; docs/failures.md), 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import signal
import importlib.util
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from agent.common.setup_hint import name_missing_modules  # noqa: E402

name_missing_modules()

from agent.job.budget import BudgetError, check_prices  # noqa: E402
from agent.config import ConfigError, RunConfig, load_config  # noqa: E402
from agent.envs.cache import EnvError  # noqa: E402
from agent.estimate import estimate_run  # noqa: E402
from agent.estimate.report import format_estimate, format_estimate_vs_spent  # noqa: E402
from agent.parallel.executor import PARALLEL_MODES, Executor, ExecutorError, make_executor  # noqa: E402
from agent.models.build import InferenceError, build_model  # noqa: E402
from agent.common.progress import Progress  # noqa: E402
from agent.job.results import ResultError  # noqa: E402
from agent.run.metadata import build_metadata, metadata_path, write_metadata  # noqa: E402
from agent.run.summary import (  # noqa: E402
    cache_note, cache_record, format_table, report_command, stop_notes, summarize,
)
from agent.run.scheduler import RunStats, check_plan, plan_run, run_plan  # noqa: E402
from agent.job.workflow import REFUSED, start_ledger  # noqa: E402
from agent.web import WebFeedbackError, shared_server  # noqa: E402
from agent.task.dataset import DatasetError, DatasetManager  # noqa: E402
from metrics.result_format import STOP_KEY  # noqa: E402
from metrics.run_status import TAMPERED_STOP  # noqa: E402
from metrics.cli_flags import (  # noqa: E402
    Parser, add_dataset_dirs, add_flag, add_levels, add_models, add_output_dir, add_task_ids, dataset_dir,
)

USER_ERRORS = (BudgetError, ConfigError, DatasetError, InferenceError, EnvError, ExecutorError, WebFeedbackError)
EXIT_USER_ERROR = 2
EXIT_JOBS_FAILED = 1
EXIT_BUDGET = 3
EXIT_RUN_FATAL = 4
EXIT_INTERRUPTED = 130
SETTLED_STATES = ("finished", "skipped", REFUSED, TAMPERED_STOP)  # outcomes a rerun leaves as they are


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, dict]:
    """The arguments and the YAML keys they override (hyphenated, as load_config takes them)."""
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--yaml-location", default="config/default.yaml",
                        help="the run's YAML config (default: config/default.yaml, as in the release)")
    parser.add_argument("--max-workers", type=int, help="jobs at once (overrides max-workers)")
    parser.add_argument("--parallel-mode", choices=PARALLEL_MODES, help="overrides parallel-mode")
    add_output_dir(parser, "where this run writes; overrides output-dir")
    add_task_ids(parser, "the config's task-ids, else every runnable task")
    add_dataset_dirs(parser, default_help="the config's work-dir")
    add_levels(parser, "the config's guidance-level")
    add_flag(parser, "--max-turn", type=int, metavar="N", help="turns per task (overrides max-turn)")
    add_models(parser, "the code models to run (overrides model; with a 'models' list in the config, picks its "
                       "entries of these names)")
    parser.add_argument("--estimate", action="store_true",
                        help="print the run's expected calls, tokens and dollars, then exit: no model is called")
    args = parser.parse_args(argv)
    folder = dataset_dir(parser, args) if args.dataset_dir or args.work_dir else None
    overrides = {"max-workers": args.max_workers, "parallel-mode": args.parallel_mode,
                 "output-dir": args.output_dir, "task-ids": args.task_ids, "guidance-level": args.guidance_level,
                 "max-turn": args.max_turn,
                 "work-dir": None if folder is None else str(folder), "model": args.model}
    return args, overrides


def select_tasks(cfg: RunConfig) -> list[int]:
    """Task ids to run; an unknown id or a broken task folder is a DatasetError before anything runs."""
    dataset = DatasetManager(cfg.work_dir)
    tasks = [meta.index for meta in dataset.select(list(cfg.task_ids) if cfg.task_ids else None)]
    for index in tasks:
        dataset.check_task(index)
    if not tasks:
        raise DatasetError(f"no runnable task in {dataset.meta_path} (no row has if_test: true)")
    return tasks


def check_models(cfg: RunConfig) -> None:
    """Build each model once here, so a missing SDK or bad setting stops the run before any job starts."""
    for spec in (*cfg.models, *([cfg.feedback_model] if cfg.feedback_model else [])):
        build_model(spec, prices=cfg.prices, cache_path=str(cfg.cache_path) if cfg.cache_path else None)


def estimate(cfg: RunConfig) -> int:
    """``--estimate``: the table, from the dataset's texts alone (no key needed, nothing written)."""
    if cfg.replay_feedback_level is not None:
        raise ConfigError("--estimate does not cover replay-feedback-level runs (one new turn per stored turn); "
                          "leave the key empty to estimate the run itself")
    table = format_estimate(estimate_run(cfg, select_tasks(cfg)).to_dict())
    try:
        print(table, flush=True)
    except BrokenPipeError:  # `--estimate | head`: the reader left; no traceback at exit (Python docs' recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def run(cfg: RunConfig, argv: list[str]) -> int:
    """Everything after validation: metadata, the jobs, the table. Returns the exit code."""
    tasks = select_tasks(cfg)
    check_models(cfg)
    if cfg.feedback_source == "web":
        shared_server(cfg.web_port)  # a port that is taken stops the run here, not in every job
    check_prices(cfg)
    plan = plan_run(cfg, tasks)
    check_plan(cfg, plan)  # before anything is written: a refused run leaves the folder as it was
    meta_file = metadata_path(cfg)
    expected = None if cfg.replay_feedback_level is not None else estimate_run(cfg, tasks).to_dict()
    record = {**build_metadata(cfg, argv), "estimate": expected}
    try:
        write_metadata(meta_file, record)
    except OSError as exc:
        raise ConfigError(f"cannot write to output-dir {cfg.output_dir} ({exc.strerror}); "
                          "choose a writable folder") from None
    start_ledger(cfg, plan.jobs)
    executor = make_executor(cfg.parallel_mode, cfg.max_workers, cfg.slots, ray_address=cfg.ray_address,
                             ray_num_cpus=cfg.ray_num_cpus, ray_num_gpus=cfg.ray_num_gpus)
    slots = executor.slots
    progress = Progress(len(plan.jobs), tests_running=lambda: None if slots is None else slots.running)
    start = time.monotonic()
    try:
        outcomes, stats = run_plan(cfg, plan, executor, on_outcome=progress.job_done, on_progress=progress.turn,
                                   on_poll=progress.tick)
    except KeyboardInterrupt:
        clean = executor.shutdown(cancel=True)
        write_metadata(meta_file, {**record, "status": "interrupted", "wall_time_sec": time.monotonic() - start})
        try:  # the terminal may be gone (a closed pipe): the exit below must still happen
            progress.close()
            print(f"interrupted: finished turns are saved; {_again(cfg)} to resume", file=sys.stderr)
            sys.stderr.flush()
        finally:
            if not clean:  # worker threads cannot be stopped; their turns in flight are dropped like a killed process's
                os._exit(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    if stats.halted:
        return halted_end(cfg, len(plan.jobs), outcomes, stats, executor, progress,
                          (meta_file, {**record, "wall_time_sec": time.monotonic() - start}))
    progress.close()
    executor.shutdown()
    rows = summarize(outcomes, [model.model for model in cfg.models])
    failed = [o for o in outcomes if o["state"] == "error"]
    caching = cache_record(outcomes, cfg.prompt_caching)
    write_metadata(meta_file, {
        **record, "status": "finished", "wall_time_sec": time.monotonic() - start,
        "seeds_computed": stats.seeds_computed, "api_calls": sum(o["api_calls"] for o in outcomes),
        "summary": [row.__dict__ for row in rows], "prompt_caching": caching,
        "errors": [{k: o.get(k) for k in ("model", "level", "task_index", "error", "traceback")} for o in failed],
    })
    print("\n".join([format_table(rows, cfg.max_turn), cache_note(caching), *stop_notes(outcomes)]))
    if expected is not None:
        print(format_estimate_vs_spent(expected, outcomes))
    print(f"results: {cfg.output_dir}  run record: {meta_file}")
    print(f"report: {report_command(cfg.output_dir, cfg.work_dir)}")
    return closing(outcomes, meta_file, cfg)


def closing(outcomes: list[dict], meta_file: Path, cfg: RunConfig) -> int:
    """The last line (stderr) and the exit code of a run that went to its end."""
    failed = [o for o in outcomes if o["state"] == "error"]
    if failed:
        print(failed_footer(failed, meta_file, cfg), file=sys.stderr)
        return EXIT_JOBS_FAILED
    refused = [o for o in outcomes if is_refused(o)]
    if refused:
        print(f"{len(refused)} job(s) stopped because the provider refuses their request as sent (named above): "
              "they are not resent under the same settings; serve the model with a longer context (base-url, "
              "endpoint, deployment) or change max-turn, then run the same command again", file=sys.stderr)
        return EXIT_JOBS_FAILED
    if any(o["state"] == "budget" for o in outcomes):
        print("the budget stopped the run: raise max-cost-usd / max-task-cost-usd and run the same command "
              "again to continue", file=sys.stderr)
        return EXIT_BUDGET
    return 0


def halted_end(cfg: RunConfig, jobs: int, outcomes: list[dict], stats: RunStats, executor: Executor,
               progress: Progress, meta: tuple[Path, dict]) -> int:
    """A provider refused the run: jobs still running after the grace are cancelled (their turns in flight
    are dropped, as a killed run's), the table shows what finished, and the last line says why and how many
    jobs the same command, run again after the fix, continues."""
    clean = executor.shutdown(cancel=bool(stats.in_flight))
    meta_file, record = meta
    remain = remaining_jobs(jobs, outcomes)
    write_metadata(meta_file, {**record, "status": "stopped", "stopped_by": stats.halted, "jobs_remaining": remain,
                               "api_calls": sum(o["api_calls"] for o in outcomes)})
    try:
        progress.close()
        rows = summarize(outcomes, [model.model for model in cfg.models])
        print("\n".join([format_table(rows, cfg.max_turn), *stop_notes(outcomes)]))
        print(f"results: {cfg.output_dir}  run record: {meta_file}")
        sys.stdout.flush()
        print(f"{stats.halted}; {remain} jobs remain", file=sys.stderr)
        sys.stderr.flush()
    finally:
        if not clean:  # job threads cannot be stopped: end the process, as Ctrl-C does
            os._exit(EXIT_RUN_FATAL)
    return EXIT_RUN_FATAL


def is_refused(outcome: dict) -> bool:
    """A job stopped (now or in an earlier run) because the provider refuses its request as sent."""
    reason = outcome.get(STOP_KEY)
    return outcome["state"] == REFUSED or (outcome["state"] == "skipped" and reason not in (None, TAMPERED_STOP))


def remaining_jobs(jobs: int, outcomes: list[dict]) -> int:
    """Jobs a rerun of the same command still has to run or continue (a refused or tampered stop stands)."""
    return jobs - sum(o["state"] in SETTLED_STATES for o in outcomes)


def failed_footer(failed: list[dict], meta_file: Path, cfg: RunConfig) -> str:
    """The last line of a run with failed jobs; a file that cannot be used fails again on every run, so then
    the line names what to do about it instead of running again."""
    unusable = sum(f"{ResultError.__name__}: " in (outcome.get("error") or "") for outcome in failed)
    head = f"{len(failed)} job(s) failed (listed in {meta_file})"
    if not unusable:
        return f"{head}; {_again(cfg)} to retry them"
    return (f"{head}; {unusable} on a result, seed or state file that cannot be used (named above): move each such "
            "file away (its job is recomputed) or set overwrite: true (every job is recomputed), then start the run")


def _again(cfg: RunConfig) -> str:
    """How to continue stored partial tasks: resume: false (the release's default) skips them."""
    return "run the same command again" if cfg.resume else "set resume: true and run the same command again"


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM (a cluster's scheduler, ``kill``) stops the run like Ctrl-C: workers ended, turns kept."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, overrides = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        cfg = load_config(args.yaml_location, overrides, need_keys=not args.estimate)
        return estimate(cfg) if args.estimate else run(cfg, [sys.argv[0], *argv])
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted before any job started", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
