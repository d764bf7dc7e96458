"""Benchmarks of the run loop on the sample tasks, with scripted models (no network, no key):

(a) jobs in flight vs test slots: 8, 32 and 64 jobs at once on this machine,
    every model call taking a fixed latency (default 10 s, like a real API),
    every turn running the task's real tests through the test slots
    (default: one per CPU). Wall time is compared with the ideal bound
    max(model-bound, test-bound): the longest chain of model calls one job
    waits for (its seed's and its own), and the test runs' duration summed
    over the slots (target efficiency >= 0.85), with early test runs on
    (``--no-early-tests`` for the same run without). Also prints the peak
    resident memory of the whole process tree (driver, test workers, tests);
(b) prompt tokens of the last turn over the first in a long memory_agent run
    that never solves its task, so memory summarisation is what bounds the
    prompt (target <= 1.5). Turn 0 shows no test digest or feedback, later
    turns show the latest ones in full, so the bench also prints that floor
    and the growth from turn 1 (the first turn with both) on;
(c) API calls and seconds to rerun a finished run (target 0 calls).

    RECODE_ENV_BACKEND=current python scripts/bench_loop.py [--part slots|memory|rerun]
        [--jobs 8 32 64] [--latency 10] [--mode processes|threads] [--no-early-tests]

Prints the measurements; asserts nothing (timings depend on the machine).
"""
from __future__ import annotations

import argparse
import os
import pickle
import resource
import statistics
import importlib.util
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_found := importlib.util.find_spec("agent")) is None or Path(_found.origin or "").parents[1] != _CHECKOUT:
    sys.path.insert(0, str(_CHECKOUT))  # this checkout's code, also when another copy is installed

from agent.common.setup_hint import name_missing_modules  # noqa: E402

name_missing_modules()

import yaml  # noqa: E402

from agent.runner.core import run_candidate  # noqa: E402
from agent.config import RunConfig, load_config  # noqa: E402
from agent.parallel.executor import make_executor  # noqa: E402
from agent.run.scheduler import plan_run, run_plan  # noqa: E402
from agent.parallel.slots import Span, cpu_count  # noqa: E402
from agent.common.text_table import fixed_width  # noqa: E402
from agent.task.dataset import DatasetManager  # noqa: E402
from agent.job.layout import result_folder  # noqa: E402
from metrics.cli_flags import add_flag, add_renamed  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WRONG_CODE = "def not_the_answer():\n    return None\n"


def write_scripts(folder: Path, latency: float) -> tuple[Path, Path]:
    """A code model that never solves (REPLACE with wrong code, then SUBMIT) and a feedback model."""
    code = {
        "latency-sec": latency,
        "rules": [
            {"when": "Summarise the history", "responses": [
                "Turns so far: each replaced the file with a stub; every test failed with an import error; "
                "the researcher asked for the real implementation."]},
            {"when": r"## Result of your last action \(REPLACE\)", "responses": ["reflect: submit it\naction: SUBMIT"]},
            {"responses": [f"reflect: try a stub\naction: REPLACE\n```python\n{WRONG_CODE}```"]},
        ],
    }
    record = {"interface": "module", "category": "T2", "description": "The required functions are missing.",
              "analysis": "The file defines only a stub.", "actionable_feedback": "Implement the described API.",
              "direct_code_feedback": "def forward(x):\n    ..."}
    feedback = {"latency-sec": latency, "rules": [{"responses": [{"feedback": [record]}]}]}
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "code.yaml", folder / "feedback.yaml"
    for path, script in zip(paths, (code, feedback)):
        path.write_text(yaml.safe_dump(script, sort_keys=False))
    return paths


def make_config(folder: Path, scripts: tuple[Path, Path], **keys: object) -> RunConfig:
    values = {
        "api-provider": "scripted", "model": "bench-coder", "script": str(scripts[0]),
        "human-api-provider": "scripted", "human-agent-model": "bench-researcher", "human-script": str(scripts[1]),
        "work-dir": str(REPO / "work_dir" / "dataset"), "output-dir": str(folder / "results"),
        "sandbox": "off", **keys,
    }
    if "models" in keys:
        del values["model"]
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(values))
    return load_config(path)


@dataclass(frozen=True)
class Timed:
    """One run of the plan: wall seconds, outcomes, seeds computed, the slots' spans (monotonic seconds
    since the start) and the CPU seconds of the driver process itself (job threads, scheduler)."""

    wall: float
    outcomes: list[dict]
    seeds: int
    spans: list[Span]
    driver_cpu: float


def timed_run(cfg: RunConfig, tasks: list[int], mode: str, workers: int) -> Timed:
    """One run of the plan, the CLI's path minus the bar."""
    executor = make_executor(mode, workers, cfg.slots)
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    try:
        outcomes, stats = run_plan(cfg, plan_run(cfg, tasks), executor, poll_sec=0.05)
    finally:
        executor.shutdown()
    wall = time.monotonic() - start
    used = resource.getrusage(resource.RUSAGE_SELF)
    failed = [o["error"] for o in outcomes if o["state"] == "error"]
    if failed:
        raise SystemExit(f"bench run failed: {failed[0]}")
    spans = [Span(s.start - start, s.end - start, s.gpu, s.asked - start, s.early) for s in executor.slots.spans]
    return Timed(wall, outcomes, stats.seeds_computed, spans,
                 used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime)


@dataclass(frozen=True)
class SlotUse:
    """Where the slots' time went: slot-seconds idle while a test run waited for a slot (scheduling
    loss), idle with none waiting (every job was waiting on its model), and the first request."""

    idle_waited: float
    idle_unasked: float
    first_asked: float


def slot_use(spans: list[Span], slots: int, wall: float) -> SlotUse:
    """Integrates busy slots and waiting runs over the run from the spans' three instants."""
    events = sorted([(s.asked, 0, 1) for s in spans] + [(s.start, 0, -1) for s in spans]
                    + [(s.start, 1, 0) for s in spans] + [(s.end, -1, 0) for s in spans])
    busy = waiting = 0
    idle_waited = idle_unasked = now = 0.0
    for at, d_busy, d_waiting in [*events, (wall, 0, 0)]:
        free = max(slots - busy, 0)
        idle_waited += min(free, waiting) * (at - now)
        idle_unasked += max(free - waiting, 0) * (at - now)
        busy, waiting, now = busy + d_busy, waiting + d_waiting, at
    return SlotUse(idle_waited, idle_unasked, min((s.asked for s in spans), default=0.0))


def numpy_tasks(count: int) -> list[int]:
    """Sample tasks that run in this interpreter's packages (the numpy ones)."""
    dataset = DatasetManager(REPO / "work_dir" / "dataset")
    chosen = [m.index for m in dataset.runnable() if dataset.test_sh(m.index).env_name == "recode_sample_numpy"]
    return chosen[:count]


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every process below it (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as handle:
                total += int(handle.read().split()[1]) * PAGE_BYTES
        except (OSError, IndexError, ValueError):
            pass
        stack.extend(children.get(pid, ()))
    return total


class PeakMemory:
    """Samples the process tree's resident memory in a thread while the block runs; ``peak`` in bytes,
    and the machine's 1-minute load average (``load``: the mean of the samples)."""

    def __init__(self, every_sec: float = 0.2) -> None:
        self.every_sec = every_sec
        self.peak = 0
        self.loads: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, tree_rss(os.getpid()))
            self.loads.append(os.getloadavg()[0])
            self.stop.wait(self.every_sec)

    @property
    def load(self) -> float:
        return statistics.mean(self.loads) if self.loads else os.getloadavg()[0]

    def __enter__(self) -> PeakMemory:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def solo_test_runs(cfg: RunConfig, tasks: list[int], repeats: int = 3) -> dict[int, list[float]]:
    """Seconds of ``repeats`` test runs of each task's wrong submission, one at a time."""
    dataset = DatasetManager(cfg.work_dir)
    seconds: dict[int, list[float]] = {}
    for task in tasks:
        for _ in range(repeats):
            start = time.perf_counter()
            run_candidate(dataset, task, WRONG_CODE, cfg.runner)
            seconds.setdefault(task, []).append(time.perf_counter() - start)
    return seconds


def _calls(usage: list[dict]) -> int:
    return sum(1 for u in usage if not u.get("from_cache"))


def calls_and_runs(cfg: RunConfig, tasks: list[int]) -> tuple[int, dict[int, int]]:
    """The most model calls one job waited for, and the test runs made per task (one per seed, one per
    later turn), read back from what the run wrote.

    A job's calls include its turn 0, the shared seed's: the seed's code
    calls, and its feedback call only at a level that shows it (a level-0 job
    starts before that call answers).
    """
    most, runs = 0, dict.fromkeys(tasks, 0)
    for model in cfg.models:
        for task in tasks:
            runs[task] += 1
            for level in cfg.guidance_levels:
                path = result_folder(cfg, model, level) / f"task_{task}_result.pkl"
                turns = pickle.loads(path.read_bytes())
                runs[task] += len(turns) - 1
                most = max(most, sum(_calls(t["code_usage"]) + _calls(t["feedback_usage"]) for t in turns))
    return most, runs


def bench_slots(scripts: tuple[Path, Path], tasks: list[int], mode: str, jobs: list[int], latency: float,
                max_turn: int, early: bool) -> Iterator[tuple[str, ...]]:
    """One row per job count: jobs, seeds, test runs, early runs, test run seconds, the bounds, wall time,
    efficiency, where the slots' idle time went, the driver's CPU, peak MB.

    The ideal is max(model-bound, test-bound): the job that waits longest
    waits for its model calls, one after the other; all test runs share the
    slots. A job's test runs are not on its chain: an early run (agent/parallel/
    lookahead.py) tests the file while the model is still answering. Test
    seconds are given twice: each task's solo time (solo: median of runs
    alone on the machine just before and just after this job count's run, so
    at about its load) and the runs' own mean duration in the run (in run,
    every slot-second counted, wasted early runs included). The in-run
    figures are what the slots really had to serve, so efficiency against
    them shows time lost to scheduling alone.
    """
    levels = [0, 2]
    for count in jobs:
        models = max(1, count // (len(tasks) * len(levels)))
        with tempfile.TemporaryDirectory(prefix="bench_slots_") as tmp:
            cfg = make_config(Path(tmp), scripts, **{
                "models": [{"model": f"bench-coder-{i}"} for i in range(models)], "guidance-level": levels,
                "max-turn": max_turn, "max-workers": models * len(tasks) * len(levels), "early-tests": early})
            before = solo_test_runs(cfg, tasks)
            with PeakMemory() as memory:
                run = timed_run(cfg, tasks, mode, cfg.max_workers)
            after = solo_test_runs(cfg, tasks)
            solo = {task: statistics.median(before[task] + after[task]) for task in tasks}
            calls, runs = calls_and_runs(cfg, tasks)
        slots, total = cfg.slots.test_slots, sum(runs.values())
        busy = sum(span.end - span.start for span in run.spans)
        use = slot_use(run.spans, slots, run.wall)
        early_runs = sum(span.early for span in run.spans)
        wasted = len(run.spans) - total
        model_bound = calls * latency
        tests_solo, tests_run = sum(runs[t] * solo[t] for t in tasks) / slots, busy / slots
        ideal_solo, ideal_run = max(model_bound, tests_solo), max(model_bound, tests_run)
        yield (str(len(run.outcomes)), str(run.seeds), str(total), f"{early_runs - wasted} / {wasted}",
               f"{statistics.mean(solo.values()):.2f} / {busy / len(run.spans):.2f}", f"{model_bound:.0f}",
               f"{tests_solo:.0f} / {tests_run:.0f}", f"{run.wall:.0f}",
               f"{ideal_solo / run.wall:.2f} / {ideal_run / run.wall:.2f}",
               f"{use.first_asked:.0f} / {use.idle_unasked / slots:.0f} / {use.idle_waited / slots:.1f}",
               f"{run.driver_cpu:.1f}", f"{memory.peak / 2**20:.0f} MB", f"{memory.load:.1f}")


def bench_prompt_growth(scripts: tuple[Path, Path], task: int, turns: int) -> tuple[list[int], int]:
    """Largest prompt (tokens) of each turn of a memory_agent run that never solves its task, and the
    tokens of the test digest and feedback shown in full in the last turn (the scripted model's count)."""
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as tmp:
        cfg = make_config(Path(tmp), scripts, **{"guidance-level": 4, "max-turn": turns,
                                                  "evaluation-setting": "memory_agent"})
        timed_run(cfg, [task], "none", 1)
        result = next(cfg.output_dir.rglob(f"task_{task}_result.pkl"))
        turns_data = pickle.loads(result.read_bytes())
    shown = turns_data[-2] if len(turns_data) > 1 else {"test_digest": "", "feedback_text": ""}
    return ([max(u["input_tokens"] for u in t["code_usage"]) for t in turns_data],
            (len(shown["test_digest"]) + len(shown["feedback_text"])) // 4)


def bench_rerun(scripts: tuple[Path, Path], tasks: list[int], mode: str) -> tuple[int, float, float]:
    """(API calls, seconds) of rerunning a finished run, and the first run's seconds."""
    with tempfile.TemporaryDirectory(prefix="bench_rerun_") as tmp:
        cfg = make_config(Path(tmp), scripts, **{"guidance-level": [0, 2], "max-turn": 3})
        first = timed_run(cfg, tasks, mode, 2)
        again = timed_run(cfg, tasks, mode, 2)
    return sum(o["api_calls"] for o in again.outcomes) + again.seeds, again.wall, first.wall


PARTS = ("slots", "memory", "rerun")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=PARTS, action="append", help="run only these parts (default: all)")
    parser.add_argument("--latency", type=float, default=10.0, help="seconds per scripted model call in (a)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[8, 32, 64], help="jobs in flight in (a)")
    add_flag(parser, "--max-turn", type=int, default=3, help="turns per job in (a)")
    parser.add_argument("--mode", default="processes", choices=("processes", "threads"))
    parser.add_argument("--no-early-tests", action="store_true", help="run (a) with early-tests: false")
    parser.add_argument("--task-count", type=int, default=4, metavar="N",
                        help="how many sample tasks (jobs = models x tasks x 2 levels)")
    add_renamed(parser, "--tasks", "--task-count")
    parser.add_argument("--growth-turns", type=int, default=10, help="turns of the prompt-growth run")
    add_renamed(parser, "--turns", "--growth-turns")
    args = parser.parse_args()
    parts = args.part or PARTS
    tasks = numpy_tasks(args.task_count)
    with tempfile.TemporaryDirectory(prefix="bench_scripts_") as tmp:
        slow = write_scripts(Path(tmp) / "slow", args.latency)
        fast = write_scripts(Path(tmp) / "fast", 0.0)
        if "slots" in parts:
            print(f"(a) jobs in flight vs test slots: {args.latency:g} s per model call, {len(tasks)} sample tasks x "
                  f"2 levels x N models, max-turn {args.max_turn}, {args.mode}, test-slots {cpu_count()}, "
                  f"early-tests {'off' if args.no_early_tests else 'on'} (target efficiency >= 0.85)", flush=True)
            rows = []
            for row in bench_slots(slow, tasks, args.mode, args.jobs, args.latency, args.max_turn,
                                   not args.no_early_tests):
                rows.append(row)
                print(f"    {row[0]} jobs done, load average {row[-1]} during the run", flush=True)
            print("    seconds; 'a / b' = with solo / in-run test durations; ideal = max(model-bound, test-bound);\n"
                  "    early = early runs used / wasted (their file changed before it was submitted);\n"
                  "    slots idle = first test asked / idle with no test waiting / idle while one waited "
                  "(per slot); driver CPU = the driving process's own (job threads, scheduler);\n"
                  "    load = the machine's 1-minute load average during the run (mean)")
            header = ("jobs", "seeds", "test runs", "early", "test run", "model-bound", "test-bound", "wall",
                      "efficiency", "slots idle", "driver CPU", "peak RSS (tree)", "load")
            print("\n".join("    " + line for line in fixed_width(header, rows)))
        if "memory" in parts:
            per_turn, opening = bench_prompt_growth(fast, tasks[0], args.growth_turns)
            print_prompt_growth(per_turn, opening)
        if "rerun" in parts:
            calls, rerun_sec, first_sec = bench_rerun(fast, tasks, args.mode)
            print(f"(c) rerun of a finished run: {calls} API calls, {rerun_sec:.1f} s "
                  f"(first run {first_sec:.1f} s; target 0 calls)")


def print_prompt_growth(per_turn: list[int], opening: int) -> None:
    first, second, last = per_turn[0], per_turn[min(1, len(per_turn) - 1)], per_turn[-1]
    print(f"(b) prompt tokens, last turn / first turn over {len(per_turn)} turns (memory_agent): "
          f"{last / first:.2f} (target <= 1.5)\n"
          f"    turn 0 has no test digest or feedback; every later step shows the latest ones in full "
          f"({opening} tokens here), so even with no memory at all the ratio would be about "
          f"{(first + opening) / first:.2f}\n"
          f"    growth from memory: last / turn 1 (the first with a digest and feedback) {last / second:.2f}, "
          f"peak / turn 1 {max(per_turn[1:] or per_turn) / second:.2f}\n"
          f"    largest prompt per turn: {per_turn}")


if __name__ == "__main__":
    main()
