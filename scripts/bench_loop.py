"""Benchmarks of the run loop on the sample tasks, with scripted models (no network, no key):

(a) parallel efficiency T1 / (n * Tn) at 1, 2 and 4 workers, each model call
    taking a fixed latency so the workload is dominated by waiting on the
    model, as real runs are (target >= 0.85 at 4 workers). Each turn also
    runs the task's tests (~0.7 s of CPU here), which is why the default
    latency is 2 s rather than less: on 2 cores, 4 workers' test runs contend;
(b) prompt tokens of the last turn over the first in a long memory_agent run
    that never solves its task, so memory summarisation is what bounds the
    prompt (target <= 1.5). Turn 0 shows no test digest or feedback, later
    turns show the latest ones in full, so the bench also prints that floor
    and the growth from turn 1 (the first turn with both) on;
(c) API calls and seconds to rerun a finished run (target 0 calls).

    RECODE_ENV_BACKEND=current python scripts/bench_loop.py [--latency 2.0] [--mode processes]

Prints ratios; asserts nothing (timings depend on the machine).
"""
from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from agent.config import RunConfig, load_config  # noqa: E402
from agent.executor import make_executor  # noqa: E402
from agent.scheduler import plan_run, run_plan  # noqa: E402
from agent.utils import DatasetManager  # noqa: E402

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
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(values))
    return load_config(path)


def timed_run(cfg: RunConfig, tasks: list[int], mode: str, workers: int) -> tuple[float, list[dict], int]:
    """Seconds, outcomes and seeds computed for one run of the plan (the CLI's path minus the bar)."""
    executor = make_executor(mode, workers)
    start = time.perf_counter()
    try:
        outcomes, stats = run_plan(cfg, plan_run(cfg, tasks), executor, poll_sec=0.05)
    finally:
        executor.shutdown()
    return time.perf_counter() - start, outcomes, stats.seeds_computed


def numpy_tasks(count: int) -> list[int]:
    """Sample tasks that run in this interpreter's packages (the numpy ones)."""
    dataset = DatasetManager(REPO / "work_dir" / "dataset")
    chosen = [m.index for m in dataset.runnable() if dataset.test_sh(m.index).env_name == "recode_sample_numpy"]
    return chosen[:count]


def bench_parallel(scripts: tuple[Path, Path], tasks: list[int], mode: str) -> dict[int, tuple[float, float]]:
    """n -> (seconds, efficiency) for 1, 2, 4 workers; every run starts from empty results."""
    times: dict[int, float] = {}
    for workers in (1, 2, 4):
        with tempfile.TemporaryDirectory(prefix="bench_parallel_") as tmp:
            cfg = make_config(Path(tmp), scripts, **{"guidance-level": [0, 2], "max-turn": 2, "max-workers": workers})
            times[workers], outcomes, _ = timed_run(cfg, tasks, mode, workers)
            failed = [o["error"] for o in outcomes if o["state"] == "error"]
            if failed:
                raise SystemExit(f"bench run failed: {failed[0]}")
    return {n: (t, times[1] / (n * t)) for n, t in times.items()}


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
        first, _, _ = timed_run(cfg, tasks, mode, 2)
        again, outcomes, seeds = timed_run(cfg, tasks, mode, 2)
    return sum(o["api_calls"] for o in outcomes) + seeds, again, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per scripted model call")
    parser.add_argument("--mode", default="processes", choices=("processes", "threads", "ray"))
    parser.add_argument("--tasks", type=int, default=4, help="sample tasks in the parallel benchmark")
    parser.add_argument("--turns", type=int, default=10, help="turns of the prompt-growth run")
    args = parser.parse_args()
    tasks = numpy_tasks(args.tasks)
    with tempfile.TemporaryDirectory(prefix="bench_scripts_") as tmp:
        slow = write_scripts(Path(tmp) / "slow", args.latency)
        fast = write_scripts(Path(tmp) / "fast", 0.0)
        parallel = bench_parallel(slow, tasks, args.mode)
        per_turn, opening = bench_prompt_growth(fast, tasks[0], args.turns)
        calls, rerun_sec, first_sec = bench_rerun(fast, tasks, args.mode)
    print(f"(a) parallel efficiency T1/(n*Tn), {len(tasks)} tasks x 2 levels, {args.latency}s per model call, "
          f"{args.mode}:")
    for n, (seconds, efficiency) in parallel.items():
        target = "  (target >= 0.85)" if n == 4 else ""
        print(f"    {n} worker(s): {seconds:6.1f} s  efficiency {efficiency:.2f}{target}")
    first, second, last = per_turn[0], per_turn[min(1, len(per_turn) - 1)], per_turn[-1]
    print(f"(b) prompt tokens, last turn / first turn over {len(per_turn)} turns (memory_agent): "
          f"{last / first:.2f} (target <= 1.5)\n"
          f"    turn 0 has no test digest or feedback; every later step shows the latest ones in full "
          f"({opening} tokens here), so even with no memory at all the ratio would be about "
          f"{(first + opening) / first:.2f}\n"
          f"    growth from memory: last / turn 1 (the first with a digest and feedback) {last / second:.2f}, "
          f"peak / turn 1 {max(per_turn[1:] or per_turn) / second:.2f}\n"
          f"    largest prompt per turn: {per_turn}")
    print(f"(c) rerun of a finished run: {calls} API calls, {rerun_sec:.1f} s "
          f"(first run {first_sec:.1f} s; target 0 calls)")


if __name__ == "__main__":
    main()
