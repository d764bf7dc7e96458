"""What every ablation shares: the command line, a run's trajectories, fixed-seed sampling,
one resumable result file per unit of work, one more CodeAgent turn from a stored state, and
the final table.

An ablation replays stored trajectories under one changed factor. Its unit of
work (one sample under one condition) is written atomically to its own JSON
file as soon as it is done, so a rerun of the same command skips everything
already computed and never pays for a model call twice. Results live under
``<output-dir>/ablation_<name>/...``; the last folder name carries a hash of
every parameter that changes the outcome, so a changed factor gets a new
folder instead of mixing with, or being skipped because of, older results.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from tqdm import tqdm

from agent.agents import HumanAgent
from agent.atomic_file import atomic_write_bytes
from agent.config import GUIDANCE_TYPES, SETTINGS, ConfigError, RunConfig, load_config
from agent.env_cache import EnvError
from agent.feedback import LLMFeedback
from agent.inference import ChatModel, InferenceError, ModelSpec, build_model
from agent.results import ResultError, ResultStore, pass_rate, safe_model_name, turn_solved, usage_totals
from agent.session import InfraError, Session, evaluate_submission
from agent.text_table import fixed_width
from agent.utils import DatasetError, DatasetManager
from agent.workflow import result_folder

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
DEFAULT_SAMPLES = 20
_RESULT_FILE = re.compile(r"task_(\d+)_result\.pkl")
# <setting>_<model>_feedback_<type>_guidance_<level>[_suffix]: the run folder layout of agent/workflow.py.
_RUN_FOLDER = re.compile(f"(?:{'|'.join(SETTINGS)})_(.+)_feedback_(?:{'|'.join(GUIDANCE_TYPES)})_guidance_\\d(?:_.+)?")
T = TypeVar("T")


class AblationError(Exception):
    """A mistake the user can fix (no such run, nothing to sample...); one line naming the fix."""


USER_ERRORS = (AblationError, ConfigError, DatasetError, ResultError, InferenceError, EnvError, InfraError)


# ---------------------------------------------------------------------- command line

class _Parser(argparse.ArgumentParser):
    """Usage mistakes end like every other user error: one line, exit 2."""

    def error(self, message: str) -> None:
        self.exit(EXIT_USER_ERROR, f"error: {message} (see {self.prog} --help)\n")


def base_parser(doc: str) -> argparse.ArgumentParser:
    """The options every ablation takes; ``doc`` is the script's docstring (first paragraph = help)."""
    parser = _Parser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--yaml-location", required=True,
                        help="a run config: models, dataset (work-dir) and output-dir (see config/default.yaml)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (same seed, same samples)")
    parser.add_argument("--samples", type=_positive, default=DEFAULT_SAMPLES,
                        help=f"how many samples to draw (default {DEFAULT_SAMPLES}; fewer when fewer exist)")
    return parser


def add_continuation_args(parser: argparse.ArgumentParser) -> None:
    """Options of the ablations that run one more CodeAgent turn from a stored state."""
    parser.add_argument("--source-run", type=Path,
                        help="result folder of the run to sample (default: the config's first guidance level)")
    parser.add_argument("--model", help="which code model of the config continues the turns (default: the first)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def progress(items: list[T], what: str) -> Iterable[T]:
    """A progress bar on stderr when it is a terminal (long runs against paid APIs), else the items."""
    return tqdm(items, desc=what, unit="sample", file=sys.stderr, disable=None, leave=False, dynamic_ncols=True)


def run_main(parser: argparse.ArgumentParser, body: Callable[[argparse.Namespace], str],
             argv: list[str] | None) -> int:
    """Parse, run ``body`` and print its report; a user mistake is one line on stderr and exit 2."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage mistake already reported in one line
        return int(exc.code or 0)
    try:
        report = body(args)
    except USER_ERRORS as exc:
        message = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted: finished samples are saved; the same command resumes", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(report)
    return 0


# ---------------------------------------------------------------------- config and models

def pick_model(cfg: RunConfig, name: str | None) -> ModelSpec:
    """The code model named ``name`` (default: the config's first)."""
    if name is None:
        return cfg.models[0]
    for spec in cfg.models:
        if name in (spec.model, safe_model_name(spec.model)):
            return spec
    raise AblationError(f"--model {name} is not a model of the config; choose one of "
                        + ", ".join(spec.model for spec in cfg.models))


@dataclass(frozen=True)
class HumanModel:
    """A model named by the human-* keys of a config, built with that config's prices and response cache."""

    spec: ModelSpec
    cfg: RunConfig

    def build(self) -> ChatModel:
        return build(self.cfg, self.spec)


def human_model(path: str | Path, role: str) -> HumanModel:
    """The model that the human-* keys of the config at ``path`` describe (feedback model or judge)."""
    try:
        cfg = load_config(path, {"guidance-level": 4, "feedback-source": "llm", "max-turn": 2})
    except ConfigError as exc:
        raise AblationError(f"{role} model: {exc}") from None
    assert cfg.feedback_model is not None  # load_config demands it for level 4 with llm feedback
    return HumanModel(cfg.feedback_model, cfg)


def build(cfg: RunConfig, spec: ModelSpec) -> ChatModel:
    return build_model(spec, prices=cfg.prices, cache_path=cfg.cache_path)


def spec_params(spec: ModelSpec) -> dict:
    """What identifies a model's answers, without secrets (for the results folder's parameter hash)."""
    return {"provider": spec.provider, "model": spec.model, "deployment": spec.deployment,
            "temperature": spec.temperature, "max_output_tokens": spec.max_output_tokens,
            "reasoning_effort": spec.reasoning_effort, "script": spec.script}


# ---------------------------------------------------------------------- trajectories

@dataclass(frozen=True)
class Trajectory:
    """The stored turns of one task in one run folder."""

    run: Path
    task_index: int
    turns: list[dict] = field(repr=False)

    def previous_code(self, turn: int, dataset: DatasetManager) -> str:
        """The file at the start of ``turn``: the last turn's submission, or the blanked file at turn 0."""
        return self.turns[turn - 1]["final_code"] if turn else dataset.get(self.task_index).init_content


def default_source(cfg: RunConfig, model: ModelSpec) -> Path:
    return result_folder(cfg, model, cfg.guidance_levels[0])


def load_run(folder: Path) -> dict[int, Trajectory]:
    """Every task's trajectory in a result folder, by task id; an empty or missing folder is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AblationError(f"run folder {folder} does not exist; run the config first or name an existing "
                            "result folder with --source-run")
    indices = sorted(int(m.group(1)) for p in folder.iterdir() if (m := _RESULT_FILE.fullmatch(p.name)))
    runs = {i: Trajectory(folder, i, ResultStore(folder, i).load()) for i in indices}
    runs = {i: t for i, t in runs.items() if t.turns}
    if not runs:
        raise AblationError(f"run folder {folder} holds no task_<id>_result.pkl; run the config first")
    return runs


def run_model_name(folder: Path) -> str:
    """The code model's (file-safe) name read from a run folder's name, else the folder's name."""
    match = _RUN_FOLDER.fullmatch(Path(folder).name)
    return match.group(1) if match else Path(folder).name


def sample(candidates: Iterable[T], n: int, seed: int) -> list[T]:
    """``n`` of the candidates drawn with ``seed``, sorted; independent of the candidates' order."""
    pool = sorted(set(candidates))
    return sorted(random.Random(seed).sample(pool, min(n, len(pool))))


def unsolved_turns(runs: dict[int, Trajectory]) -> list[tuple[int, int]]:
    """(task, turn) pairs whose submission failed: the states feedback is given on."""
    return [(i, t["turn_number"]) for i, traj in runs.items() for t in traj.turns
            if not turn_solved(t["execution_result"])]


# ---------------------------------------------------------------------- resumable results

def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def ablation_folder(cfg: RunConfig, name: str, parts: tuple[str, ...], params: dict) -> Path:
    """``<output-dir>/ablation_<name>/<parts...>_<hash of params>``, with ``params.json`` inside."""
    *head, last = [safe_model_name(p) for p in parts]
    text = json.dumps(params, indent=1, sort_keys=True, default=str) + "\n"
    folder = Path(cfg.output_dir) / f"ablation_{name}" / Path(*head) / f"{last}_{short_hash(text)}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "params.json").exists():
        atomic_write_bytes(folder / "params.json", text.encode())
    return folder


@dataclass
class Tally:
    """What this invocation did: units computed and reused, model calls, test runs, dollars."""

    computed: int = 0
    reused: int = 0
    usage: list[dict] = field(default_factory=list)
    test_runs: int = 0

    def line(self) -> str:
        cost = usage_totals(self.usage)[2]
        calls = sum(1 for u in self.usage if not u.get("from_cache"))
        money = "unknown cost" if cost is None else f"${cost:.4f}"
        return (f"this run: {self.computed} unit(s) computed, {self.reused} reused from earlier runs; "
                f"{calls} model call(s), {self.test_runs} test run(s), {money}")


class UnitStore:
    """One JSON file per unit of work in ``folder``; a unit found on disk is never recomputed."""

    def __init__(self, folder: Path, tally: Tally) -> None:
        self.folder = Path(folder)
        self.tally = tally

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.json"

    def load(self, name: str) -> dict | None:
        path = self.path(name)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise AblationError(f"{path} is corrupt; move it away to recompute that sample") from None
        if not isinstance(data, dict):
            raise AblationError(f"{path} is not an ablation result; move it away to recompute that sample")
        return data

    def get(self, name: str, compute: Callable[[], dict]) -> dict:
        """The stored unit, or ``compute()`` written atomically (its ``usage`` counted in the tally)."""
        data = self.load(name)
        if data is not None:
            self.tally.reused += 1
            return data
        data = compute()
        atomic_write_bytes(self.path(name), (json.dumps(data, indent=1) + "\n").encode())
        self.tally.computed += 1
        self.tally.usage.extend(data.get("usage", []))
        return data


def unit_name(task_index: int, turn: int, condition: str | None = None) -> str:
    return f"task_{task_index}_turn_{turn}" + (f"_{condition}" if condition else "")


def write_summary(folder: Path, title: str, headers: list[str], rows: list[list], tally: Tally,
                  notes: list[str] = ()) -> str:
    """The report text (also saved as summary.txt) and the rows as summary.json for notebooks."""
    lines = [title, text_table(headers, rows), *notes, tally.line(), f"results: {folder}"]
    report = "\n".join(lines)
    atomic_write_bytes(folder / "summary.txt", (report + "\n").encode())
    table = [dict(zip(headers, row)) for row in rows]
    atomic_write_bytes(folder / "summary.json", (json.dumps({"title": title, "rows": table}, indent=1) + "\n").encode())
    return report


# ---------------------------------------------------------------------- tests and one more turn

def score(dataset: DatasetManager, index: int, execution: dict) -> dict:
    """Solved flag and test-case pass rate of one execution result (the run's own rules, agent/results.py)."""
    return {"solved": turn_solved(execution), "pass_rate": pass_rate(execution, len(dataset.get(index).test_cases))}


def run_tests(cfg: RunConfig, dataset: DatasetManager, index: int, code: str, report: Path, tally: Tally) -> dict:
    """The runner's result for ``code``, its JUnit report kept at ``report``; an infra error stops the unit
    (finished samples are kept)."""
    tally.test_runs += 1
    return evaluate_submission(HumanAgent(dataset, index, cfg.runner, None), code, f"task {index}", report)


def continue_turn(cfg: RunConfig, model: ChatModel, dataset: DatasetManager, record: dict, feedback: str,
                  report: Path, tally: Tally) -> dict:
    """One CodeAgent turn from the state after ``record`` (its file, digest and, for memory_agent,
    memory) with ``feedback`` as the researcher's text, then the tests on the submission: the
    workflow's Session, so every setting continues as it runs."""
    index = record["task_index"]
    with tempfile.TemporaryDirectory(prefix=f"recode_ablation_{index}_") as tmp:
        session = Session(cfg, model, index, Path(tmp), None)
        session.restore(record)
        tally.test_runs += 1
        attempt = session.attempt(record["turn_number"] + 1, record["test_digest"], feedback, report)
    return {"task_index": index, "from_turn": record["turn_number"], "feedback_text": feedback,
            "code": attempt.result.code, "actions": attempt.result.actions, "usage": attempt.result.usage,
            "execution": attempt.execution, **score(dataset, index, attempt.execution)}


@dataclass(frozen=True)
class Continuation:
    """The failed turns of one stored run, and the code model that takes one more turn from each."""

    cfg: RunConfig
    dataset: DatasetManager
    model: ModelSpec
    source: Path
    runs: dict[int, Trajectory]

    def params(self) -> dict:
        cfg = self.cfg
        return {"source": str(self.source.resolve()), "code_model": spec_params(self.model),
                "setting": cfg.evaluation_setting, "max_steps": cfg.max_steps,
                "memory": [cfg.memory_threshold, cfg.memory_to_keep]}

    def record(self, pair: tuple[int, int]) -> dict:
        return self.runs[pair[0]].turns[pair[1]]

    def fresh_feedback(self, feedback_model: ChatModel, pair: tuple[int, int]) -> dict:
        """A feedback model's raw records on the submission of ``pair``, seeing what the run's model saw."""
        task, turn = pair
        record = self.record(pair)
        human = HumanAgent(self.dataset, task, self.cfg.runner, LLMFeedback(feedback_model))
        reply = human.feedback(turn=turn, level=4, code=record["final_code"],
                               previous_code=self.runs[task].previous_code(turn, self.dataset),
                               digest=record["test_digest"])
        return {"task_index": task, "turn_number": turn, "records": reply.records, "error": reply.error,
                "usage": reply.usage, "history": reply.history}

    def continue_all(self, model: ChatModel, store: UnitStore, pair: tuple[int, int],
                     texts: dict[str, str]) -> dict[str, dict]:
        """Per condition (label -> feedback text), the stored or newly run turn after ``pair``.

        A unit's name carries a hash of its feedback text, so an edited text (say, one
        entry of a human feedback file) is run anew while the other units stay valid.
        """
        def unit(label: str) -> dict:
            name = unit_name(*pair, f"{label}_{short_hash(texts[label])}")
            return store.get(name, lambda: continue_turn(self.cfg, model, self.dataset, self.record(pair),
                                                         texts[label], store.folder / "reports" / f"{name}.xml",
                                                         store.tally))
        return {label: unit(label) for label in texts}

    def table(self, pairs: list[tuple[int, int]], outcomes: dict[str, list[dict]]) -> tuple[list[str], list[list]]:
        """Headers and rows: the recorded turns the samples start from, then one row per condition."""
        before = [score(self.dataset, pair[0], self.record(pair)["execution_result"]) for pair in pairs]
        rates = [b["pass_rate"] for b in before]
        rows = [["recorded turn (start)", len(before), mean([float(b["solved"]) for b in before]), mean(rates), None]]
        for label, units in outcomes.items():
            after = [u["pass_rate"] for u in units]
            rows.append([label, len(units), mean([float(u["solved"]) for u in units]), mean(after),
                         mean([a - b for a, b in zip(after, rates)])])
        return ["condition", "samples", "solved", "test-case pass", "pass gain"], rows


def prepare_continuation(args: argparse.Namespace) -> Continuation:
    """Config, code model and the source run named by the options of :func:`add_continuation_args`."""
    cfg = load_config(args.yaml_location)
    model = pick_model(cfg, args.model)
    source = Path(args.source_run) if args.source_run else default_source(cfg, model)
    return Continuation(cfg, DatasetManager(cfg.work_dir), model, source, load_run(source))


# ---------------------------------------------------------------------- tables

def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if isinstance(value, float) else str(value)


def text_table(headers: list[str], rows: list[list]) -> str:
    """Fixed-width text; floats are rates shown as percentages, None as '-'; first column left-aligned."""
    return "\n".join(fixed_width(headers, [[_cell(c) for c in row] for row in rows]))
