"""Test slots: concurrent test runs never exceed test-slots, GPU runs get one device below jobs-per-gpu,
jobs waiting on models hold no slot, and a run under slot limits writes what a sequential run writes."""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import wait
from pathlib import Path

import pytest
import yaml

import agent.parallel.executor as executor_module
import agent.parallel.slots as slots_module
from agent.runner.core import prepare, run_candidate, sandbox_prefix
from agent.parallel.executor import InlineExecutor, ProcessExecutor, ThreadExecutor, make_executor
from agent.runner.options import RunnerOptions
from agent.run.scheduler import plan_run, run_plan
from agent.parallel.slots import SlotConfig, TestSlots, serving
from agent.task.dataset import DatasetManager
from tests.executor_jobs import FakeDataset, job_with_test, slow_test_run, timed_test_run
from tests.loop_config import REPO, comparable, make_config

DATASET = REPO / "work_dir" / "dataset"


def peak_overlap(spans: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (an end and a start at the same time do not overlap)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1]))
    peak = running = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def run_jobs(executor, jobs: list[tuple[int, float]]) -> list[dict]:
    with serving(executor.slots):
        futures = [executor.submit(job_with_test, index, seconds) for index, seconds in jobs]
        wait(futures, timeout=120)
    executor.shutdown()
    return [future.result() for future in futures]


@pytest.mark.parametrize("kind", [ThreadExecutor, ProcessExecutor])
def test_concurrent_test_runs_never_exceed_test_slots(kind) -> None:
    executor = kind(12, SlotConfig(test_slots=2), timed_test_run)
    runs = run_jobs(executor, [(2 * i, 0.3) for i in range(8)])
    assert peak_overlap([(r["start"], r["end"]) for r in runs]) == 2  # the limit, and it is reached
    assert peak_overlap([(s.start, s.end) for s in executor.slots.spans]) == 2
    assert all(r["cuda"] is None for r in runs)  # no GPU list: the environment's devices are inherited
    if kind is ProcessExecutor:
        assert all(r["pid"] != os.getpid() for r in runs) and len({r["pid"] for r in runs}) <= 2


def test_jobs_waiting_on_models_hold_no_test_slot() -> None:
    """Forty jobs in flight at once while one slot serves their test runs one at a time."""
    executor = ThreadExecutor(40, SlotConfig(test_slots=1), timed_test_run)
    in_flight, peak, lock = [0], [0], threading.Lock()

    def job(index: int) -> dict:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.3)  # "waiting on the model"
        result = job_with_test(2 * index, 0.01)
        with lock:
            in_flight[0] -= 1
        return result

    with serving(executor.slots):
        futures = [executor.submit(job, i) for i in range(40)]
        wait(futures, timeout=60)
    executor.shutdown()
    runs = [f.result() for f in futures]
    assert peak[0] == 40
    assert peak_overlap([(r["start"], r["end"]) for r in runs]) == 1


@pytest.mark.parametrize("kind", [ThreadExecutor, ProcessExecutor])
def test_each_gpu_run_gets_one_device_and_never_more_than_jobs_per_gpu(kind) -> None:
    slots = SlotConfig(test_slots=1, gpus=("3", "5"), jobs_per_gpu=2)
    executor = kind(16, slots, timed_test_run)
    runs = run_jobs(executor, [(i, 0.3) for i in range(16)])  # odd ids need a GPU, even ids do not
    gpu_runs = [r for r in runs if r["index"] % 2]
    cpu_runs = [r for r in runs if not r["index"] % 2]
    assert {r["cuda"] for r in gpu_runs} == {"3", "5"}
    assert {r["cuda"] for r in cpu_runs} == {""}  # a task that needs no GPU sees none
    for device in ("3", "5"):
        assert peak_overlap([(r["start"], r["end"]) for r in gpu_runs if r["cuda"] == device]) == 2
    assert peak_overlap([(r["start"], r["end"]) for r in cpu_runs]) == 1  # GPU runs take no CPU slot
    assert peak_overlap([(r["start"], r["end"]) for r in runs]) == 5


def test_gpu_slots_cap_gpu_runs_across_devices() -> None:
    executor = ThreadExecutor(16, SlotConfig(test_slots=1, gpus=("0", "1"), jobs_per_gpu=2, gpu_slots=3),
                              timed_test_run)
    runs = run_jobs(executor, [(2 * i + 1, 0.2) for i in range(9)])
    assert peak_overlap([(r["start"], r["end"]) for r in runs]) == 3
    assert {r["cuda"] for r in runs} == {"0", "1"}


def test_slots_count_running_tests() -> None:
    slots = TestSlots(SlotConfig(test_slots=2), timed_test_run)
    with slots.hold(needs_gpu=False), slots.hold(needs_gpu=False):
        assert slots.running == 2
    assert slots.running == 0 and len(slots.spans) == 2


def test_no_slots_served_runs_the_test_directly(monkeypatch) -> None:
    """A Ray worker or a script serves no slots: the run goes straight to the runner, devices inherited."""
    seen = []
    monkeypatch.setattr("agent.runner.core.run_candidate",
                        lambda *args, report_to: seen.append(args) or {"ok": True})
    assert slots_module.run_tests(FakeDataset(), 1, "0", RunnerOptions()) == {"ok": True}
    assert seen and seen[0][3].cuda_devices is None


def test_processes_cancel_kills_test_runs_in_flight() -> None:
    executor = ProcessExecutor(4, SlotConfig(test_slots=2), slow_test_run)
    with serving(executor.slots):
        futures = [executor.submit(job_with_test, 2 * i, 0) for i in range(3)]
        deadline = time.monotonic() + 30
        while (executor.slots.running < 2 or len(executor.tests._processes) < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = list(executor.tests._processes.values())
        started = time.monotonic()
        executor.shutdown(cancel=True)
    assert time.monotonic() - started < 10
    assert workers and not any(p.is_alive() for p in workers)
    wait(futures, timeout=10)
    assert all(f.done() and f.exception() is not None for f in futures)


def test_inline_mode_assigns_devices_too() -> None:
    executor = InlineExecutor(SlotConfig(test_slots=1, gpus=("2",)), timed_test_run)
    runs = run_jobs(executor, [(1, 0), (2, 0)])
    assert [r["cuda"] for r in runs] == ["2", ""]


def test_runner_gives_the_test_process_its_device(tmp_path: Path) -> None:
    dataset = DatasetManager(DATASET)
    probe = "import os\nraise RuntimeError('CUDA=' + os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))\n"
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    for devices, shown in (("1", "CUDA=1"), ("", "CUDA="), (None, "CUDA=unset")):
        options = RunnerOptions(sandbox="off", env_backend="current", timeout_sec=60, cuda_devices=devices)
        result = run_candidate(dataset, 1, probe, options)
        assert result["status"] != "passed"
        assert any(f"{shown}\n" in m or m.rstrip().endswith(shown) or f"{shown}'" in m
                   for m in result["failure_messages"]), result["failure_messages"]


def test_sandbox_binds_device_nodes_only_for_gpu_runs(tmp_path: Path, monkeypatch) -> None:
    fake_nodes = [str(tmp_path / "nvidia0"), str(tmp_path / "nvidiactl")]
    monkeypatch.setattr("agent.runner.core.gpu_devices", lambda: fake_nodes)
    monkeypatch.setattr("agent.runner.core.shutil.which", lambda name: f"/usr/bin/{name}")
    dataset = DatasetManager(DATASET)
    layout = prepare(dataset, 1, dataset.canonical(1), Path(os.path.realpath(tmp_path)) / "run")
    for devices, bound in (("0", fake_nodes), ("", []), (None, fake_nodes)):
        argv, problem = sandbox_prefix(RunnerOptions(cuda_devices=devices), dataset, "/usr/bin/python3", layout, False)
        assert problem is None
        pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--dev-bind"]
        assert pairs == bound


@pytest.mark.slow
def test_a_run_under_slot_limits_writes_what_a_sequential_run_writes(tmp_path: Path) -> None:
    """Two tasks x two levels (two seeds, four jobs) in flight with one test slot: the pickles equal mode none's."""
    import pickle

    # a model that takes a moment to answer, as a real one does: the written file's tests get a slot early
    script = yaml.safe_load((REPO / "config/scripted/code_model.yaml").read_text())
    (tmp_path / "code_model.yaml").write_text(yaml.safe_dump({**script, "latency-sec": 0.3}))
    written, early = {}, {}
    for mode in ("none", "threads", "processes"):
        (tmp_path / mode).mkdir()
        cfg = make_config(tmp_path / mode, guidance_level=[0, 2], task_ids=[1, 2], sandbox="off",
                          max_workers=8, test_slots=1, parallel_mode=mode, early_tests=mode != "none",
                          script=str(tmp_path / "code_model.yaml"))
        executor = make_executor(mode, cfg.max_workers, cfg.slots)
        try:
            outcomes, _ = run_plan(cfg, plan_run(cfg, [1, 2]), executor, poll_sec=0.02)
        finally:
            executor.shutdown()
        assert [o for o in outcomes if o["state"] == "error"] == []
        if mode != "none":
            assert peak_overlap([(s.start, s.end) for s in executor.slots.spans]) == 1
        written[mode] = {path.relative_to(cfg.output_dir).as_posix(): comparable(pickle.loads(path.read_bytes()))
                         for path in sorted(cfg.output_dir.glob("*/task_*_result.pkl"))}
        early[mode] = sum(span.early for span in executor.slots.spans)
        turns = [pickle.loads(path.read_bytes()) for path in cfg.output_dir.glob("*/task_*_result.pkl")]
        # each submission tested once: the two seeds, then every later turn (no double or wasted run)
        assert len(executor.slots.spans) == 2 + sum(len(t) - 1 for t in turns)
    assert len(written["none"]) == 4
    assert written["threads"] == written["none"] and written["processes"] == written["none"]
    # the sequential run had early runs off; the others tested files early (the scripted model REPLACEs, then SUBMITs)
    assert early["none"] == 0 and early["threads"] > 0 and early["processes"] > 0


def test_slot_keys_in_the_config(tmp_path: Path) -> None:
    assert make_config(tmp_path).slots == SlotConfig(test_slots=len(os.sched_getaffinity(0)))
    cfg = make_config(tmp_path, test_slots=3, gpus=[0, 1, "MIG-4f2a"], jobs_per_gpu=2, gpu_slots=5)
    assert cfg.slots == SlotConfig(test_slots=3, gpus=("0", "1", "MIG-4f2a"), jobs_per_gpu=2, gpu_slots=5)
    assert cfg.slots.gpu_capacity == 5
    assert cfg.public_dict()["slots"]["gpus"] == ["0", "1", "MIG-4f2a"]


@pytest.mark.parametrize("keys, message", [
    ({"test_slots": 0}, "'test-slots' must be an integer >= 1, got 0"),
    ({"gpus": "0,1"}, "'gpus' must be a list of CUDA device ids like [0, 1], got '0,1'"),
    ({"gpus": [0, 0]}, "'gpus' lists a device twice"),
    ({"gpus": [0], "jobs_per_gpu": 0}, "'jobs-per-gpu' must be an integer >= 1, got 0"),
    ({"gpus": [0, 1], "gpu_slots": 3}, "'gpu-slots' (3) exceeds gpus x jobs-per-gpu (2 x 1)"),
    ({"gpu_slots": 1}, "'gpu-slots' (1) exceeds gpus x jobs-per-gpu (0 x 1)"),
    ({"gpus": [0], "parallel_mode": "ray"}, "under ray set 'ray-num-gpus' per job"),
])
def test_slot_key_mistakes_are_one_line(tmp_path: Path, keys: dict, message: str) -> None:
    from agent.config import ConfigError

    with pytest.raises(ConfigError) as info:
        make_config(tmp_path, **keys)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_slots_serve_in_arrival_order() -> None:
    slots = TestSlots(SlotConfig(test_slots=1), timed_test_run)
    order: list[int] = []
    threads = []
    with slots.hold(needs_gpu=False):
        for i in range(6):
            def take(i: int = i) -> None:
                with slots.hold(needs_gpu=False):
                    order.append(i)
            threads.append(threading.Thread(target=take))
            threads[-1].start()
            while len(slots._waiting[False]) < i + 1:
                time.sleep(0.005)
    for thread in threads:
        thread.join(timeout=10)
    assert order == list(range(6))


def test_a_waiting_run_gets_the_slot_as_soon_as_it_is_given_back() -> None:
    """No slot idles while a test run waits: the handoff is a notification, not a poll."""
    slots = TestSlots(SlotConfig(test_slots=1), timed_test_run)
    second: list[float] = []

    def wait_for_slot() -> None:
        with slots.hold(needs_gpu=False):
            second.append(time.monotonic())

    with slots.hold(needs_gpu=False):
        waiter = threading.Thread(target=wait_for_slot)
        waiter.start()
        while not slots._waiting[False]:
            time.sleep(0.005)
        time.sleep(0.2)
    waiter.join(timeout=10)
    first, after = slots.spans
    assert first.asked <= first.start < first.end <= after.start and after.asked < first.end
    assert after.start - first.end < 0.25 and second[0] >= after.start  # slack for a loaded machine


def test_an_early_run_gets_a_slot_only_while_no_submission_waits() -> None:
    slots = TestSlots(SlotConfig(test_slots=1), timed_test_run)
    order: list[str] = []

    def take(name: str, early: bool) -> None:
        with slots.hold(needs_gpu=False, early=(lambda: False) if early else None):
            order.append(name)

    with slots.hold(needs_gpu=False):
        ahead = threading.Thread(target=take, args=("early", True))
        ahead.start()
        while not slots._early[False]:
            time.sleep(0.005)
        submitted = threading.Thread(target=take, args=("submission", False))
        submitted.start()
        while not slots._waiting[False]:
            time.sleep(0.005)
    for thread in (ahead, submitted):
        thread.join(timeout=10)
    assert order == ["submission", "early"]
    assert [span.early for span in slots.spans] == [False, False, True]


def test_a_withdrawn_early_run_leaves_its_line_without_a_slot() -> None:
    from agent.parallel.slots import Withdrawn

    slots = TestSlots(SlotConfig(test_slots=1), timed_test_run)
    withdrawn = threading.Event()
    outcome: list[str] = []

    def take() -> None:
        try:
            with slots.hold(needs_gpu=False, early=withdrawn.is_set):
                outcome.append("ran")
        except Withdrawn:
            outcome.append("withdrawn")

    with slots.hold(needs_gpu=False):
        thread = threading.Thread(target=take)
        thread.start()
        while not slots._early[False]:
            time.sleep(0.005)
        withdrawn.set()
        slots.nudge()
        thread.join(timeout=10)
        assert outcome == ["withdrawn"] and not slots._early[False] and slots.running == 1
    assert len(slots.spans) == 1 and slots.running == 0
