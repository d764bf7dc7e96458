"""What every ablation shares: the command line, a run's trajectories, fixed-seed sampling,
one resumable result file per unit of work, the release's replay of one stored turn, and the
final table.

An ablation replays stored trajectories under one changed factor. Its unit of
work (one sample under one condition) is written atomically to its own JSON
file as soon as it is done, so a rerun of the same command skips everything
already computed and never pays for a model call twice. Results live under
``<output-dir>/ablation_<name>/...``; the last folder name carries a hash of
every parameter that changes the outcome, so a changed factor gets a new
folder instead of mixing with, or being skipped because of, older results.

The ablations that continue a stored turn take that turn through the main
job's own replay (``replay_turn`` of agent/job/replay.py, the one
``replay-feedback-level`` uses), so each unit holds the very record the main
job would write for it. A condition whose feedback cannot be delivered, or
whose source turn the run does not have, is reported as incomplete and never
scored.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from tqdm import tqdm

from agent.common.atomic_file import atomic_write_bytes
from agent.config import GUIDANCE_TYPES, SETTINGS, ConfigError, RunConfig, load_config
from agent.envs.cache import EnvError
from agent.feedback import LLMFeedback
from agent.job.layout import result_folder
from agent.models.build import ChatModel, InferenceError, ModelSpec, build_model
from agent.job.parts import RunParts
from agent.common.progress import drain
from agent.protocols.base import ResearcherProtocol
from agent.job.record import pass_rate, turn_solved, usage_totals
from agent.job.replay import replay_turn
from agent.job.results import ResultError, ResultStore
from agent.job.session import InfraError, evaluate_submission, request_feedback
from agent.common.tempdirs import private_dir
from agent.common.text_table import fixed_width
from agent.task.dataset import DatasetError, DatasetManager
from metrics.result_format import folder_model_name
from metrics.cli_flags import Parser, add_flag
from metrics.run_status import UNTRUSTED_STATUSES

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
DEFAULT_SAMPLES = 20
_RESULT_FILE = re.compile(r"task_(\d+)_result\.pkl")
# <setting>_<model>_feedback_<type>_guidance_<level>[_suffix]: the run folder layout of agent/job/workflow.py.
_RUN_FOLDER = re.compile(f"(?:{'|'.join(SETTINGS)})_(.+)_feedback_(?:{'|'.join(GUIDANCE_TYPES)})"
                         r"_guidance_(\d)(?:_.+)?")
T = TypeVar("T")
R = TypeVar("R")


class AblationError(Exception):
    """A mistake the user can fix (no such run, nothing to sample...); one line naming the fix."""


USER_ERRORS = (AblationError, ConfigError, DatasetError, ResultError, InferenceError, EnvError, InfraError)


# ---------------------------------------------------------------------- command line

def base_parser(doc: str) -> argparse.ArgumentParser:
    """The options every ablation takes; ``doc`` is the script's docstring (first paragraph = help)."""
    parser = Parser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--yaml-location", required=True,
                        help="a run config: models, dataset (work-dir) and output-dir (see config/default.yaml)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (same seed, same samples)")
    parser.add_argument("--samples", type=_positive, default=DEFAULT_SAMPLES,
                        help=f"how many samples to draw (default {DEFAULT_SAMPLES}; fewer when fewer exist)")
    parser.add_argument("--max-workers", type=_positive, default=1,
                        help="samples worked on at once (default 1: one after the other)")
    return parser


def add_continuation_args(parser: argparse.ArgumentParser) -> None:
    """Options of the ablations that run one more CodeAgent turn from a stored state."""
    parser.add_argument("--source-run", type=Path,
                        help="result folder of the run to sample (default: the config's first guidance level)")
    add_flag(parser, "--model", help="which code model of the config continues the turns (default: the first)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def for_each(items: list[T], work: Callable[[T], R], what: str, workers: int) -> list[R]:
    """``work`` on every item, ``workers`` at once (model calls wait on the network), results in the
    items' order; a progress bar on stderr when it is a terminal, else a line per finished sample and one at
    least every HEARTBEAT_SEC. The first failure stops the rest (finished units are stored)."""
    bar = tqdm(total=len(items), desc=what, unit="sample", file=sys.stderr, disable=not sys.stderr.isatty(),
               leave=False, dynamic_ncols=True)
    start = time.monotonic()

    def finished(future: Future) -> None:
        future.result()  # the first failure stops the rest
        bar.update()

    with bar, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="recode-ablation") as pool:
        futures = [pool.submit(work, item) for item in items]
        try:
            drain(futures, finished, lambda done: f"{what}: {done}/{len(items)} sample(s) done "
                                                  f"({time.monotonic() - start:.0f} s)")
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()


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
        if name in (spec.model, folder_model_name(spec.model)):
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
    level: int | None = None  # the run's guidance level, read from its folder name

    def previous_code(self, turn: int, dataset: DatasetManager) -> str:
        """The file at the start of ``turn``: the last turn's submission, or the blanked file at turn 0."""
        return self.turns[turn - 1]["final_code"] if turn else dataset.get(self.task_index).init_content


def default_source(cfg: RunConfig, model: ModelSpec) -> Path:
    return result_folder(cfg, model, cfg.guidance_levels[0])


def load_run(folder: Path, parts: RunParts) -> dict[int, Trajectory]:
    """Every task's trajectory in a result folder, by task id, each turn with every key of ours
    (a folder the release wrote works too); an empty or missing folder is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AblationError(f"run folder {folder} does not exist; run the config first or name an existing "
                            "result folder with --source-run")
    level = run_level(folder)
    indices = sorted(int(m.group(1)) for p in folder.iterdir() if (m := _RESULT_FILE.fullmatch(p.name)))
    runs = {i: Trajectory(folder, i, parts.load(ResultStore(folder, i), level), level) for i in indices}
    runs = {i: t for i, t in runs.items() if t.turns}
    if not runs:
        raise AblationError(f"run folder {folder} holds no task_<id>_result.pkl; run the config first")
    return runs


def run_model_name(folder: Path) -> str:
    """The code model's (file-safe) name read from a run folder's name, else the folder's name."""
    match = _RUN_FOLDER.fullmatch(Path(folder).name)
    return match.group(1) if match else Path(folder).name


def run_level(folder: Path) -> int | None:
    """The guidance level read from a run folder's name, None for a folder named otherwise."""
    match = _RUN_FOLDER.fullmatch(Path(folder).name)
    return int(match.group(2)) if match else None


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
    *head, last = [folder_model_name(p) for p in parts]
    text = json.dumps(params, indent=1, sort_keys=True, default=str) + "\n"
    folder = Path(cfg.output_dir) / f"ablation_{name}" / Path(*head) / f"{last}_{short_hash(text)}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "params.json").exists():
        atomic_write_bytes(folder / "params.json", text.encode())
    return folder


@dataclass
class Tally:
    """What this invocation did: units computed and reused, model calls, test runs, dollars
    (updated from several workers at once)."""

    computed: int = 0
    reused: int = 0
    usage: list[dict] = field(default_factory=list)
    test_runs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count_unit(self, data: dict | None) -> None:
        """One unit reused (None) or computed (its ``usage`` counted)."""
        with self.lock:
            if data is None:
                self.reused += 1
            else:
                self.computed += 1
                self.usage.extend(data.get("usage", []))

    def count_test_runs(self, n: int) -> None:
        with self.lock:
            self.test_runs += n

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
        """The stored unit, or ``compute()`` written atomically (its ``usage`` counted in the tally).

        A stored unit marked ``incomplete`` (say, feedback that could not be
        produced) is computed again, so a rerun retries it.
        """
        data = self.load(name)
        if data is not None and not data.get("incomplete"):
            self.tally.count_unit(None)
            return data
        data = compute()
        atomic_write_bytes(self.path(name), (json.dumps(data, indent=1) + "\n").encode())
        self.tally.count_unit(data)
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


# ---------------------------------------------------------------------- tests and the release's replay

def score(dataset: DatasetManager, index: int, execution: dict) -> dict:
    """Solved flag and test-case pass rate of one execution result (the run's own rules, agent/job/results.py)."""
    return {"solved": turn_solved(execution), "pass_rate": pass_rate(execution, len(dataset.get(index).test_cases))}


def run_tests(parts: RunParts, index: int, code: str, report: Path, tally: Tally) -> dict:
    """The runner's result for ``code``, its JUnit report kept at ``report``; an infra error stops the unit
    (finished samples are kept)."""
    tally.count_test_runs(1)
    return evaluate_submission(parts.human(index, None), code, f"task {index}", report)


@dataclass(frozen=True)
class Shown:
    """What one condition shows on the turn it replays: raw records at a level (``source`` names
    where they came from), or ``missing``: why that level's information cannot be delivered."""

    records: list[dict]
    level: int
    source: str
    missing: str | None = None

    def text(self, protocol: ResearcherProtocol) -> str:
        return protocol.feedback_text(self.records, self.level)


@dataclass(frozen=True)
class Continuation:
    """The failed turns of one stored run, and the code model that replays one turn from each."""

    cfg: RunConfig
    parts: RunParts
    model: ModelSpec
    source: Path
    runs: dict[int, Trajectory]

    @property
    def dataset(self) -> DatasetManager:
        return self.parts.dataset

    def params(self) -> dict:
        cfg = self.cfg
        return {"source": str(self.source.resolve()), "code_model": spec_params(self.model),
                "setting": cfg.evaluation_setting, "max_steps": cfg.max_steps,
                "memory": [cfg.memory_threshold, cfg.memory_to_keep]}

    def record(self, pair: tuple[int, int]) -> dict | None:
        """The stored turn ``pair`` names, None when the run has no such turn."""
        traj = self.runs.get(pair[0])
        return traj.turns[pair[1]] if traj is not None and 0 <= pair[1] < len(traj.turns) else None

    def stored_feedback(self, pair: tuple[int, int], level: int) -> Shown:
        """The run's own records of ``pair`` at ``level``: what ``replay-feedback-level`` shows
        (``missing`` when the turn has none and the level shows some)."""
        record = self.record(pair) or {"feedback_items": [], "feedback_error": None}
        run_level = self.runs[pair[0]].level if pair[0] in self.runs else None
        missing = None if record["feedback_items"] or level == 0 else (
            f"the turn has no feedback records ({record['feedback_error'] or 'none given'})")
        return Shown(record["feedback_items"], level, "replay" if run_level is None else f"replay:L{run_level}",
                     missing)

    def fresh_feedback(self, feedback_model: ChatModel, pair: tuple[int, int]) -> dict:
        """A feedback model's raw records on the submission of ``pair``, seeing what the run's model saw;
        ``incomplete`` (asked again next time) when no valid records came."""
        task, turn = pair
        record = self.record(pair)
        human = self.parts.human(task, LLMFeedback(feedback_model, self.parts.protocol.feedback_style()))
        reply = request_feedback(human, turn=turn, level=4, code=record["final_code"],
                                 previous_code=self.runs[task].previous_code(turn, self.dataset),
                                 execution=record["execution_result"])
        return {"task_index": task, "turn_number": turn, "records": reply.records, "error": reply.error,
                "usage": reply.usage, "history": reply.history,
                "incomplete": f"no feedback: {reply.error}" if reply.error else None}

    def replay(self, store: UnitStore, pair: tuple[int, int], shown: dict[str, Shown]) -> dict[str, dict]:
        """Per condition (label -> what it shows), the stored or new replay of the turn after ``pair``.

        A unit's name carries a hash of what it shows, so an edited text (say, one
        entry of a human feedback file) is run anew while the other units stay valid.
        A condition that cannot run (no source turn, feedback not delivered) is an
        incomplete unit: not run, not stored, never scored.
        """
        def unit(label: str) -> dict:
            why = (f"no such turn in {self.source}" if self.record(pair) is None
                   else shown[label].missing)
            if why is not None:
                return {"task_index": pair[0], "from_turn": pair[1], "incomplete": why}
            text = shown[label].text(self.parts.protocol)
            name = unit_name(*pair, f"{label}_{short_hash(shown[label].source + text)}")
            report = store.folder / "reports" / f"{name}.xml"
            return store.get(name, lambda: self._replay_unit(pair, shown[label], report, store.tally))
        return {label: unit(label) for label in shown}

    def _replay_unit(self, pair: tuple[int, int], shown: Shown, report: Path, tally: Tally) -> dict:
        """One turn by the main job's replay (``replay_turn`` of agent/job/replay.py), as a unit."""
        task = pair[0]
        tally.count_test_runs(1)
        with private_dir("ablation") as tmp:
            session = self.parts.session(self.model, task, tmp, None)
            record = replay_turn(session, self.record(pair), shown.records, shown.level, shown.source, report)
        return {"task_index": task, "from_turn": pair[1], "feedback_text": shown.text(self.parts.protocol),
                "record": record,
                "usage": record["code_usage"], "incomplete": None,
                **score(self.dataset, task, record["execution_result"])}

    def table(self, pairs: list[tuple[int, int]], outcomes: dict[str, list[dict]]) -> tuple[list[str], list[list]]:
        """Headers and rows: the recorded turns the samples start from, then one row per condition;
        incomplete units (:func:`why_incomplete`) are counted apart and left out of every rate."""
        start = {pair: score(self.dataset, pair[0], record["execution_result"])
                 for pair in pairs if (record := self.record(pair)) is not None}
        rows = [["recorded turn (start)", len(start), mean([float(b["solved"]) for b in start.values()]),
                 mean([b["pass_rate"] for b in start.values()]), None, len(pairs) - len(start)]]
        for label, units in outcomes.items():
            done = [u for u in units if why_incomplete(u) is None]
            gains = [u["pass_rate"] - start[(u["task_index"], u["from_turn"])]["pass_rate"] for u in done]
            rows.append([label, len(done), mean([float(u["solved"]) for u in done]),
                         mean([u["pass_rate"] for u in done]), mean(gains), len(units) - len(done)])
        return ["condition", "samples", "solved", "test-case pass", "pass gain", "incomplete"], rows


def why_incomplete(unit: dict) -> str | None:
    """Why a replay unit has no score: not run (``incomplete``), or a test result that measures
    nothing about the code (the harness failed, or the code used the hidden reference)."""
    if unit.get("incomplete"):
        return unit["incomplete"]
    status = unit["record"]["status"]
    return f"the test result is {status}" if status in UNTRUSTED_STATUSES else None


def incomplete_notes(outcomes: dict[str, list[dict]]) -> list[str]:
    """One line per sample with incomplete units: why, and which conditions."""
    labels: dict[tuple[int, int, str], list[str]] = {}
    for label, units in outcomes.items():
        for unit in units:
            if (why := why_incomplete(unit)) is not None:
                labels.setdefault((unit["task_index"], unit["from_turn"], why), []).append(label)
    return [f"incomplete, not scored: task {task} turn {turn} ({', '.join(names)}): {why}"
            for (task, turn, why), names in sorted(labels.items())]


def prepare_continuation(args: argparse.Namespace) -> Continuation:
    """Config, code model and the source run named by the options of :func:`add_continuation_args`."""
    cfg = load_config(args.yaml_location)
    model = pick_model(cfg, args.model)
    source = Path(args.source_run) if args.source_run else default_source(cfg, model)
    parts = RunParts(cfg)
    return Continuation(cfg, parts, model, source, load_run(source, parts))


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
