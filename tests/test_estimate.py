"""``--estimate``: no model called (a counting server sees nothing), the call pattern of the protocols, the
arithmetic against a hand computation, and the estimate beside the spend after a run."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import yaml

from agent import research_code_generation as main_command
from agent.task.action import RELEASE_ACTIONS
from agent.config import load_config
from agent.estimate import estimate_run, job_shape
from agent.estimate.report import format_estimate_vs_spent
from agent.estimate.tally import model_totals, price_lines
from agent.estimate.walk import (
    SOLVED, UNSOLVED, Assumptions, CallSize, TaskText, code_answer, common_prefix, failing_execution, walk_job,
)
from agent.feedback.records import FeedbackRequest
from agent.models.build import CachedModel, RemoteModel
from agent.models.scripted import ScriptedModel
from agent.protocols.base import StepView, TaskBrief, TurnInput
from tests.fake_providers import FakeProvider, no_provider_env  # noqa: F401
from tests.run_support import DATASET, REPO, WRONG_CODE, run_cli, run_record

OFFLINE = REPO / "config" / "offline.yaml"


@pytest.fixture
def no_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any model call fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was called")
    for model in (ScriptedModel, RemoteModel, CachedModel):
        monkeypatch.setattr(model, "complete", refuse)


def test_offline_estimate_prints_its_table_and_writes_nothing(tmp_path: Path, capsys, no_model_call) -> None:
    output = tmp_path / "out dir"
    code = main_command.main(["--yaml-location", str(OFFLINE), "--output-dir", str(output), "--estimate"])
    printed = capsys.readouterr().out
    assert code == 0 and not output.exists()
    assert "40 job(s) to run: 8 task(s) at level(s) 0/1/2/3/4, 8 turn-0 seed(s)" in printed
    rows = {line.split()[0]: line.split() for line in printed.splitlines()[4:7]}
    # solved: 8 seeds x (REPLACE, SUBMIT); unsolved: 8 seeds x 3 steps + 40 jobs x (9 turns x 3 steps + the
    # release's 5 summaries, before steps 9, 14, 19, 24 and 29, when memory exceeds 15 entries and keeps 6)
    assert rows["scripted-coder"][3:6] == ["16", "-", f"{8 * 3 + 40 * (27 + 5):,}"]
    assert rows["scripted-researcher"][3:6] == ["0", "-", "264"]  # 8 seeds + 32 jobs at L1-L4 x turns 1-8
    assert "no price" in printed.splitlines()[6] and "3.5 characters per token" in printed


def test_paid_config_estimate_sends_nothing_and_needs_no_key(tmp_path: Path, capsys, no_provider_env) -> None:
    with FakeProvider("openai") as openai, FakeProvider("anthropic") as anthropic:
        config = tmp_path / "paid sweep.yaml"
        config.write_text(yaml.safe_dump({
            "models": [{"model": "gpt-5-mini", "api-provider": "openai", "base-url": openai.base_url},
                       {"model": "claude-sonnet-4-20250514", "api-provider": "anthropic",
                        "base-url": anthropic.url}],
            "human-api-provider": "openai", "human-agent-model": "o4-mini", "human-base-url": openai.base_url,
            "guidance-level": [0, 4], "max-turn": 3, "task-ids": [1, 2], "work-dir": str(DATASET),
            "output-dir": str(tmp_path / "out")}))
        code = main_command.main(["--yaml-location", str(config), "--estimate"])
        assert (len(openai.requests), len(anthropic.requests)) == (0, 0)
    printed = capsys.readouterr().out
    assert code == 0
    lines = {line.split()[0]: line for line in printed.splitlines() if line.split()}
    for model in ("gpt-5-mini", "claude-sonnet-4-20250514", "o4-mini"):
        assert "$" in lines[model] and "no price" not in lines[model]


def small_task() -> TaskText:
    return TaskText(7, "Paper: the update rule is x - lr * g.\n" * 40, "Implement step(x, g, lr).\n" * 30,
                    "def step(x, g, lr):\n    return x - lr * g\n" * 20, "opt/step.py", "",
                    ("test_step", "test_lr"))


def release_shape(tmp_path: Path, **keys):
    """A run config of the offline demo (protocol release unless ``keys`` say otherwise) and its job shape."""
    cfg = load_config(OFFLINE, {"output-dir": str(tmp_path / "out"), **keys})
    return cfg, job_shape(cfg)


@pytest.mark.parametrize("protocol", ["release", "improved"])
def test_walk_sends_what_the_protocol_builds(tmp_path: Path, protocol: str) -> None:
    """Two turns of two steps at L4, never solved: 4 step calls and the turn-0 feedback, each prompt the one
    the protocol's builders make, each later step reading the prefix it shares with the one before."""
    task = small_task()
    cfg, shape = release_shape(tmp_path, **{"max-turn": 2, "max-steps": 2, "protocol": protocol})
    calls = walk_job(task, shape, 4, UNSOLVED, Assumptions())
    assert [(c.role, c.turn) for c in calls] == [("code", 0), ("code", 0), ("feedback", 0), ("code", 1),
                                                 ("code", 1)]
    protocol = shape.protocol
    system = protocol.system(RELEASE_ACTIONS, 2)
    first = protocol.messages(StepView(TaskBrief(task.latex, task.instruction, task.target), system, "", [],
                                       TurnInput(0, test_cases=task.test_cases),
                                       protocol.opening(TurnInput(0, test_cases=task.test_cases)), None, 1, 2))
    assert calls[0].prompt == len("\n".join(m["content"] for m in first))
    assert calls[0].answer == len(code_answer(task.canonical)) and calls[0].read == 0
    asked = protocol.feedback_style().messages(FeedbackRequest(
        task.index, 0, 4, task.latex, task.instruction, task.canonical, protocol.record_code(task.canonical), "",
        protocol.test_info(failing_execution(task, Assumptions()), task.test_cases)))
    assert calls[2].prompt == len("\n".join(m["content"] for m in asked))
    assert 0 < calls[1].read < calls[1].prompt and calls[0].written == calls[1].read
    assert [(c.role, c.turn) for c in walk_job(task, shape, 4, SOLVED, Assumptions())] == [("code", 0)] * 2


def test_walk_follows_dynamic_guidance_and_the_one_call_setting(tmp_path: Path) -> None:
    task = small_task()
    _, dynamic = release_shape(tmp_path, **{"max-turn": 4, "guidance-type": "dynamic", "guidance-level": 0})
    feedback_turns = [c.turn for c in walk_job(task, dynamic, 0, UNSOLVED, Assumptions()) if c.role == "feedback"]
    assert feedback_turns == [1, 2]  # L0 at turn 0 gives none; the level rises after each turn; no feedback on the last
    _, baseline = release_shape(tmp_path, **{"max-turn": 3, "evaluation-setting": "baseline"})
    assert [(c.role, c.turn) for c in walk_job(task, baseline, 2, UNSOLVED, Assumptions())] == [
        ("code", 0), ("feedback", 0), ("code", 1), ("feedback", 1), ("code", 2)]


def test_totals_and_dollars_against_a_hand_computation() -> None:
    """Two levels sharing a turn-0 seed; 3.5 characters per token; reads under 1024 tokens are not cached."""
    seed = [CallSize("code", 0, 7000, 700, written=3500), CallSize("code", 0, 7700, 70, read=3500)]
    walks = {(1, 0, SOLVED): seed, (1, 4, SOLVED): seed,
             (1, 0, UNSOLVED): seed + [CallSize("code", 1, 14000, 700, read=7000)],
             (1, 4, UNSOLVED): seed + [CallSize("feedback", 0, 9000, 1400), CallSize("code", 1, 16000, 700, read=7000)]}
    roles = model_totals(walks, [(1, 0), (1, 4)], [1], True, True, Assumptions())
    low, high = roles["code"][SOLVED], roles["code"][UNSOLVED]
    assert (low.calls, low.input_tokens, low.output_tokens, low.cached_tokens, low.cache_write_tokens) == (
        2, 2000 + 2200, 200 + 20, 0, 0)  # 3500 characters = 1000 tokens: under the caching minimum
    assert (high.calls, high.input_tokens, high.output_tokens, high.cached_tokens) == (
        4, 4200 + 4000 + 4571, 220 + 200 + 200, 2000 + 2000)
    feedback = roles["feedback"][UNSOLVED]
    assert (feedback.calls, feedback.input_tokens, feedback.output_tokens) == (1, 2571, 400)
    prices = {"m": {"input": 1.0, "cached_input": 0.1, "cache_write": 1.25, "output": 10.0},
              "fb": {"input": 2.0, "output": 8.0}}
    code_line, feedback_line = price_lines({"m": roles}, "fb", prices)
    assert code_line.dollars[UNSOLVED] == pytest.approx((12771 + 620 * 10) / 1e6)
    assert code_line.cached_dollars[UNSOLVED] == pytest.approx((8771 + 4000 * 0.1 + 620 * 10) / 1e6)
    assert feedback_line.dollars[UNSOLVED] == pytest.approx((2571 * 2 + 400 * 8) / 1e6)
    assert model_totals(walks, [(1, 0)], [1], True, False, Assumptions())["feedback"][UNSOLVED].calls == 0


def test_common_prefix_matches_a_plain_scan() -> None:
    rng = random.Random(5)
    for _ in range(200):
        a = "".join(rng.choice("ab") for _ in range(rng.randint(0, 30)))
        b = a[:rng.randint(0, len(a))] + "".join(rng.choice("ab") for _ in range(rng.randint(0, 5)))
        assert common_prefix(a, b) == len(os.path.commonprefix([a, b]))


def write_never_solving_scripts(folder: Path) -> tuple[Path, Path]:
    """A code model that REPLACEs the file at every step and never submits nor solves; a valid feedback model."""
    record = {"interface": "step", "category": "T2", "description": "Missing.", "analysis": "A stub.",
              "actionable_feedback": "Write it.", "direct_code_feedback": "def step(): ..."}
    folder.mkdir(parents=True)
    code, feedback = folder / "code.yaml", folder / "feedback.yaml"
    code.write_text(yaml.safe_dump({"rules": [
        {"when": "(?:Summarise|Condense) the history below", "responses": ["Nothing passed yet."]},
        {"responses": [f"reflect: write it\naction: REPLACE\n```python\n{WRONG_CODE}```"]}]}))
    feedback.write_text(yaml.safe_dump({"rules": [{"responses": [{"feedback": [record], "feedbacks": [record]}]}]}))
    return code, feedback


def test_after_a_run_the_estimate_stands_beside_the_spend(tmp_path: Path) -> None:
    """A run that follows the unsolved course spends exactly the calls the estimate's high end counts."""
    code, feedback = write_never_solving_scripts(tmp_path / "scripts")
    config = tmp_path / "run config.yaml"
    config.write_text(yaml.safe_dump({
        "api-provider": "scripted", "model": "coder", "script": str(code), "human-api-provider": "scripted",
        "human-agent-model": "researcher", "human-script": str(feedback), "work-dir": str(DATASET),
        "output-dir": str(tmp_path / "out"), "sandbox": "off", "guidance-level": [0, 2], "max-turn": 3,
        "max-steps": 2, "task-ids": [2], "memory-threshold": 4, "parallel-mode": "none"}))
    done = run_cli(config)
    assert done.returncode == 0, done.stderr
    record = run_record(tmp_path / "out")
    expected = record["estimate"]
    high = sum(line["totals"][UNSOLVED]["calls"] for line in expected["lines"])
    # the seed's 2 steps and its feedback; per level, 4 steps and 3 summaries (memory over 4 entries before
    # each step of turns 1-2); level 2's turn-1 feedback
    assert record["api_calls"] == high == 2 + 1 + 2 * (4 + 3) + 1
    block = done.stdout[done.stdout.index("estimate (before the run"):].splitlines()
    assert block[3].split() == ["calls", "2", "-", str(high), str(high)]  # low: the seed's REPLACE and SUBMIT
    assert block[4].split()[0:2] == ["input", "tokens"] and block[6].split()[:3] == ["dollars", "(list", "price)"]
    # Adding level 4: the stored seed (with its feedback) and the finished levels cost nothing now
    more = estimate_run(load_config(config, {"guidance-level": [0, 2, 4]}), [2]).to_dict()
    assert (more["jobs"], more["finished_jobs"], more["seeds"]) == (3, 2, 0)
    assert [line["totals"][course]["calls"] for line in more["lines"] for course in (SOLVED, UNSOLVED)] == [
        0, 4 + 3, 0, 1]


def test_estimate_vs_spent_names_jobs_of_unknown_cost() -> None:
    estimate = {"lines": [{"model": "m", "role": "code", "totals": {
        course: {"calls": n, "input_tokens": 10 * n, "output_tokens": n, "cached_tokens": 0, "cache_write_tokens": 0}
        for course, n in ((SOLVED, 2), (UNSOLVED, 20))}, "dollars": {SOLVED: 0.5, UNSOLVED: 5.0},
        "cached_dollars": {SOLVED: 0.25, UNSOLVED: 2.5}}]}
    text = format_estimate_vs_spent(estimate, [{"api_calls": 7, "input_tokens": 70, "output_tokens": 7,
                                                "cost_usd": 1.5}, {"api_calls": 1, "cost_usd": None}])
    rows = {line.split("  ")[0]: line.split() for line in text.splitlines()[3:]}
    assert rows["calls"][1:] == ["2", "-", "20", "8"]
    assert rows["dollars (list price)"][3:] == ["$0.50", "-", "$5.00", "$1.50", "(1", "job(s)", "of", "unknown",
                                                "cost)"]
    assert "$0.25 - $2.50" in text and "$1.50 (1 job(s) of unknown cost)" in text


PUBLISHED_META = REPO.parent / "shared" / "recode_h" / "annotation_meta.jsonl"


@pytest.mark.skipif(not PUBLISHED_META.is_file(), reason="the published meta file (../shared/recode_h) is absent")
def test_published_meta_estimate_from_stand_in_texts(capsys) -> None:
    """The paper's 102 tasks at the release's default config: 35 code calls per unsolved job (3 seed steps,
    9 turns x 3 steps, 5 summaries), 9 feedback calls (turns 0-8)."""
    from scripts.estimate_meta import main as estimate_meta

    assert estimate_meta(["--meta", str(PUBLISHED_META), "--yaml-location", str(REPO / "config" / "default.yaml"),
                          "--paper-chars", "20000"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Estimate, no model called: 102 job(s) to run: 102 task(s) at level(s) 4")
    rows = {line.split()[0]: line.split() for line in printed.splitlines()[4:6]}
    assert rows["gpt-4o"][3:6] == ["204", "-", f"{102 * 35:,}"] and rows["o4-mini"][3:6] == ["0", "-", "918"]
    assert "paper 20,000, task 3,702, reference file 5,188 characters per task" in printed


def test_offline_run_prints_estimate_beside_spend(tmp_path: Path) -> None:
    """The offline demo on its task solved at turn 0 (BROWSE, REPLACE, SUBMIT): the spend lies in the range."""
    done = run_cli(OFFLINE, "--output-dir", str(tmp_path / "out dir"), "--task-ids", "6", "--guidance-level", "0",
                   "--parallel-mode", "none")
    assert done.returncode == 0, done.stderr
    record = run_record(tmp_path / "out dir")
    low, high = (record["estimate"]["lines"][0]["totals"][course]["calls"] for course in (SOLVED, UNSOLVED))
    assert (low, high, record["api_calls"]) == (2, 3 + 9 * 3 + 5, 3)
    block = done.stdout[done.stdout.index("estimate (before the run, low - high) vs spent:"):].splitlines()
    assert block[3].split() == ["calls", "2", "-", str(high), "3"]


def test_a_replay_run_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    code = main_command.main(["--yaml-location", str(write_replay_config(tmp_path)), "--estimate"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--estimate does not cover replay-feedback-level runs" in err


def write_replay_config(tmp_path: Path) -> Path:
    values = yaml.safe_load(OFFLINE.read_text())
    values.update({"replay-feedback-level": 2, "guidance-level": 4, "output-dir": str(tmp_path / "out"),
                   "work-dir": str(DATASET), "script": str(REPO / values["script"]),
                   "human-script": str(REPO / values["human-script"])})
    path = tmp_path / "replay run.yaml"
    path.write_text(yaml.safe_dump(values))
    return path
