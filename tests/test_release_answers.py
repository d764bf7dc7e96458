"""agent/protocols/release_answers.py against the authors' release on a corpus of answers.

The oracle is the release itself (../shared/recode_release): its ``CodeAgent.clean_text`` and its
``ActionHandler.process_command`` run on every corpus answer against a private copy of the sample
dataset, with stubs (written here) for the imports its parsing never reaches. Every decision and
value must agree: accepted or not, submitted or not, the text REPLACE leaves in the file, the path
READ opens, the query RETRIEVE searches, EDIT's numbers; where the release crashes, our parse is
invalid and names the defect. ``python -m tests.test_release_answers`` prints how the corpus splits
and where the project's own parser (agent/task/action.py) reads answers differently.
"""
from __future__ import annotations

import ast
import importlib.util
import shutil
import sys
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from agent.task.action import RELEASE_ACTIONS, ActionFormatError, parse_answer
from agent.protocols.release_answers import (
    EDIT_DISABLED, EDIT_WITHOUT_LINES, REFLECT_UNHANDLED, REPLACE_NOT_UTF8, ReleaseCommand, clean_answer,
    parse_release_answer,
)

REPO = Path(__file__).resolve().parents[1]
CORPUS_FILE = REPO / "tests" / "fixtures" / "release_answers" / "corpus.yaml"
SAMPLE_DATASET = REPO / "work_dir" / "dataset"
TASK_ID = 1  # dpo-numpy: its target file dpo/losses.py starts empty
RELEASE = next((base / "shared" / "recode_release" for base in (REPO.parent, REPO.parents[1])
                if (base / "shared" / "recode_release" / "agent" / "action.py").is_file()), None)
needs_release = pytest.mark.skipif(RELEASE is None, reason="the authors' release (../shared/recode_release) is absent")

# The exception the release raises for each defect our parse names.
DEFECT_ERRORS = {
    REFLECT_UNHANDLED: {"TypeError"},
    EDIT_DISABLED: {"KeyError"},
    EDIT_WITHOUT_LINES: {"TypeError", "ValueError"},
    REPLACE_NOT_UTF8: {"UnicodeEncodeError"},
}

_CODE = "import numpy as np\n\n\ndef dpo_loss(margin, beta=0.1):\n    return -np.logaddexp(0.0, -beta * margin).mean()\n"
_LABELS = ("action:", "Action:", "ACTION:", "action", "**action:**", "**Action**:", "### Action", "> action:")
_COMMANDS = {
    "submit": "SUBMIT",
    "browse": "BROWSE",
    "read": "READ dpo/trainer.py",
    "retrieve": "RETRIEVE implicit reward of the policy",
    "replace": "REPLACE\n```python\n" + _CODE + "```",
}


def _generated() -> list[dict[str, str]]:
    """Every label style x every command x command on the label's line or the next, and large inputs."""
    answers = [
        {"id": f"grid-{label}-{name}-{where}", "category": "label-grid",
         "answer": f"reflect: The margin uses the reference model.\n{label}{sep}{command}\n"}
        for label in _LABELS for name, command in _COMMANDS.items() for where, sep in (("same", " "), ("next", "\n"))
    ]
    long_code = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(3000))
    huge = "9" * 5000  # past int()'s digit limit
    answers += [
        {"id": "long-code-fenced", "category": "long", "answer": f"reflect: Long.\naction: REPLACE\n```python\n{long_code}```\n"},
        {"id": "long-code-cut", "category": "long",
         "answer": f"reflect: Long.\naction: REPLACE\n```python\n{long_code}try:\n    pass\nexcept:\n    pass\n```\n"},
        {"id": "long-reflect", "category": "long", "answer": "reflect: " + "word " * 20000 + "\naction: SUBMIT\n"},
        {"id": "long-edit-huge-number", "category": "edit", "answer": f"reflect: Huge.\naction: EDIT 1 {huge}\nx = 1\n"},
    ]
    return answers


def corpus() -> list[dict[str, str]]:
    """The corpus file's answers (CRLF ones converted) followed by the generated ones."""
    entries = yaml.safe_load(CORPUS_FILE.read_text(encoding="utf-8"))
    for entry in entries:
        if entry.pop("crlf", False):
            entry["answer"] = entry["answer"].replace("\n", "\r\n")
    return entries + _generated()


CORPUS = corpus()


@dataclass(frozen=True)
class ReleaseOutcome:
    """What the release did with one answer."""

    cleaned: str
    command: str  # extract_action's text
    parsed: Any  # parse_response's (ok, dict) result, or the exception's type name
    success: bool | None = None
    submitted: bool | None = None
    written: str | None = None  # the target file's text after REPLACE wrote it
    read_path: str | None = None
    query: str | None = None
    error: str | None = None  # the type name of what process_command raised


def _module_from(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _StubRetrieval:
    """Stands in for the release's retrieval index (it loads a model): records each query."""

    queries: list[str] = []

    def __init__(self, **_kwargs: Any) -> None:
        pass

    def retrieve(self, query: str) -> list[dict[str, Any]]:
        self.queries.append(query)
        return [{"fpath_tuple": ("dpo-numpy", "dpo", "trainer.py"), "context": "def step(batch):\n    pass"}]


def _release_clean_text(agents_py: Path) -> Callable[[str], str]:
    """``CodeAgent.clean_text`` alone, compiled from the release's source (agents.py imports SDKs)."""
    tree = ast.parse(agents_py.read_text(encoding="utf-8"))
    agent_class = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "CodeAgent")
    function = next(node for node in agent_class.body if isinstance(node, ast.FunctionDef) and node.name == "clean_text")
    function.decorator_list = []
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=[function], type_ignores=[]), str(agents_py), "exec"), namespace)
    return namespace["clean_text"]


def _record_last_argument(manager: type, name: str, log: list[str]) -> None:
    """Wrap a DatasetManager static method so each call's last argument (READ's path, the text
    REPLACE writes) is logged before the release's own method runs."""
    original = getattr(manager, name)

    def recording(*args: Any) -> Any:
        log.append(args[-1])
        return original(*args)

    setattr(manager, name, staticmethod(recording))


class ReleaseOracle:
    """The release's handler on a private copy of the sample dataset, loaded once."""

    def __init__(self, release: Path, work_dir: Path) -> None:
        shutil.copytree(SAMPLE_DATASET, work_dir / "dataset")
        agent_dir = release / "agent"
        stubs = {"utils": _module_from(agent_dir / "utils.py", "release_utils"),
                 "retrieval": types.ModuleType("retrieval"), "constants": types.ModuleType("constants")}
        stubs["retrieval"].Retrieval, stubs["retrieval"].RetrievalParam = _StubRetrieval, dict
        stubs["constants"].RESPONSE_FORMAT = "reflect: ...\naction: ..."
        saved = {name: sys.modules.get(name) for name in stubs}
        sys.modules.update(stubs)
        try:
            action = _module_from(agent_dir / "action.py", "release_action")
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name)
                else:
                    sys.modules[name] = module
        self.clean_text = _release_clean_text(agent_dir / "agents.py")
        manager = stubs["utils"].DatasetManager
        self.target = Path(manager.code_repo_dir(str(work_dir), TASK_ID)) / manager.load_task_info(
            str(work_dir), TASK_ID)["target_file_path"]
        self.initial = self.target.read_bytes()
        self.reads: list[str] = []
        self.writes: list[str] = []
        _record_last_argument(manager, "load_repo_content", self.reads)
        _record_last_argument(manager, "write_code_content", self.writes)
        self.handler = action.ActionHandler(types.SimpleNamespace(work_dir=str(work_dir)), TASK_ID)

    def run(self, answer: str) -> ReleaseOutcome:
        """clean_text, then extract_action/parse_response (to see the parse) and process_command."""
        cleaned = self.clean_text(answer)
        command = self.handler.extract_action(cleaned)
        try:
            parsed = self.handler.parse_response(command)
        except Exception as error:  # noqa: BLE001 - the release's crash is the observation
            parsed = type(error).__name__
        self.reads.clear()
        self.writes.clear()
        _StubRetrieval.queries.clear()
        self.target.write_bytes(self.initial)
        outcome = dict(cleaned=cleaned, command=command, parsed=parsed,
                       read_path=None, query=None, written=None)
        try:
            success, _result, submitted = self.handler.process_command(cleaned)
        except Exception as error:  # noqa: BLE001 - the release's crash is the observation
            return ReleaseOutcome(**outcome, error=type(error).__name__)
        if self.writes:
            with open(self.target, encoding="utf-8", newline="") as written:
                outcome["written"] = written.read()
        if self.reads:
            outcome["read_path"] = self.reads[0]
        if _StubRetrieval.queries:
            outcome["query"] = _StubRetrieval.queries[0]
        return ReleaseOutcome(**outcome, success=success, submitted=submitted)


@pytest.fixture(scope="session")
def release_oracle(tmp_path_factory: pytest.TempPathFactory) -> ReleaseOracle:
    """One oracle per session: loading the release and copying the dataset once keeps the corpus fast."""
    return ReleaseOracle(RELEASE, tmp_path_factory.mktemp("release answers"))


def release_kind(outcome: ReleaseOutcome) -> str:
    """The command the release ran, in our kinds ("invalid" for a rejection or a crash)."""
    if outcome.error or not outcome.success:
        return "invalid"
    return "submit" if outcome.submitted else outcome.parsed[1]["command_type"].lower()


def assert_agrees(ours: ReleaseCommand, outcome: ReleaseOutcome) -> None:
    """Our parse gives the release's decision and values for one answer."""
    assert ours.command == outcome.command
    if outcome.error:
        assert ours.kind == "invalid" and outcome.error in DEFECT_ERRORS.get(ours.defect, ()), (ours, outcome.error)
    else:
        assert ours.defect is None and ours.kind == release_kind(outcome)
    parse_ok = isinstance(outcome.parsed, tuple) and outcome.parsed[0]
    params = outcome.parsed[1]["parameters"] if parse_ok else {}
    if parse_ok and outcome.parsed[1]["command_type"] == "EDIT":
        assert (ours.start, ours.end, ours.code) == (params["start"], params["end"], params["code"])
    if ours.kind == "replace" or ours.defect == REPLACE_NOT_UTF8:
        assert ours.code == outcome.written or (outcome.written is None and outcome.error)
    else:
        assert outcome.written is None and ours.code == params.get("code")
    assert ours.path == outcome.read_path == params.get("file_path")
    assert ours.query == outcome.query == params.get("query")


@needs_release
@pytest.mark.parametrize("entry", CORPUS, ids=[entry["id"] for entry in CORPUS])
def test_parse_agrees_with_the_release(entry: dict[str, str], release_oracle: ReleaseOracle) -> None:
    outcome = release_oracle.run(entry["answer"])
    cleaned = clean_answer(entry["answer"])
    assert cleaned == outcome.cleaned
    assert_agrees(parse_release_answer(cleaned), outcome)


def test_corpus_covers_every_kind_and_defect() -> None:
    """The corpus reaches every command and every crash (checked without the release, from our parse)."""
    parses = [parse_release_answer(clean_answer(entry["answer"])) for entry in CORPUS]
    assert len(CORPUS) >= 200 and len({entry["id"] for entry in CORPUS}) == len(CORPUS)
    assert {parse.kind for parse in parses} == {"invalid", "submit", "replace", "read", "retrieve", "browse"}
    assert {parse.defect for parse in parses} - {None} == set(DEFECT_ERRORS)


def test_replace_keeps_the_release_quirks() -> None:
    """The forms the release's prompt invites, spelled out: what lands in the file."""
    def written(answer: str) -> str | None:
        return parse_release_answer(clean_answer(answer)).code

    assert written("reflect: r\naction: REPLACE\n```python\nx = 1\n```\n") == "\nx = 1"
    assert written("reflect: r\naction: REPLACE\n```python\nx = 1\n```\nDone.") == "\nx = 1\n```Done."  # prose glued to the fence
    assert written("reflect: r\naction:\n```REPLACE\nx = 1\n```\n") == "x = 1"
    assert written("action: REPLACE\n```\npy_x = 1\n```") == "_x = 1"
    assert written("action: REPLACE\ndef f():\n    '''doc'''\n    \"\"\"end\"\"\"") == "def f():\n    '''doc'''\n    \"\"\"end"
    assert written("action: REPLACE\n```python\nif a:\n    b = 1\nelse:\n    b = 2\n```") == "\nif a:\n    b = 1"


def _robust(answer: str) -> tuple[str, str | None]:
    """agent/task/action.py's reading of an answer: (command, its argument or code), ("invalid", None) on refusal."""
    try:
        action = parse_answer(answer, RELEASE_ACTIONS)
    except ActionFormatError:
        return "invalid", None
    return action.name.lower(), action.code if action.code is not None else action.argument


def _release_value(parse: ReleaseCommand) -> str | None:
    return parse.code if parse.kind == "replace" else parse.path if parse.kind == "read" else parse.query


def difference_table() -> dict[str, Counter]:
    """How the release splits the corpus, and where the project's own parser reads answers differently.

    Codes are compared as the record keeps them (final_code is the file's text stripped)."""
    split: Counter = Counter()
    differences: Counter = Counter()
    for entry in CORPUS:
        ours = parse_release_answer(clean_answer(entry["answer"]))
        split["crash" if ours.defect else "reject" if ours.kind == "invalid" else "accept"] += 1
        kind, value = _robust(entry["answer"])
        release = _release_value(ours)
        if (ours.kind == "invalid") != (kind == "invalid"):
            differences["release accepts, ours rejects" if kind == "invalid" else "release rejects, ours accepts"] += 1
        elif kind != ours.kind:
            differences["different command"] += 1
        elif kind in ("replace", "read", "retrieve") and (value or "").strip() != (release or "").strip():
            differences[f"different {kind} {'code' if kind == 'replace' else 'argument'}"] += 1
        elif kind in ("replace", "read", "retrieve") and value != release:
            differences[f"{kind} differs only in surrounding whitespace"] += 1
        else:
            differences["same"] += 1
    return {"release": split, "project parser": differences}


if __name__ == "__main__":
    print(f"{len(CORPUS)} answers; by category: {dict(Counter(entry['category'] for entry in CORPUS))}")
    for title, counts in difference_table().items():
        print(f"{title}: {dict(counts)}")
