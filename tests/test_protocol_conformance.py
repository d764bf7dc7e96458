"""Our ``protocol: release`` against the authors' release itself, call by call.

The release's own main command (tests/release_oracle.py runs it from
``../shared/recode_release``) and ours run the same scenarios on the same
sample tasks with the same scripted answers, each against a logging fake
server. For every call both sent, in order: the same kind (code step, memory
summary, feedback), endpoint, roles, message count, request parameters
(sampling, schema name and its record key), with our prompt-caching markers stripped. With ``release-prompts`` naming
the release's checkout, each task's first code request and every feedback
request are byte-identical once temporary paths and object addresses in the
test information are masked; ``test_every_call_is_identical`` goes further and
compares every call's messages.

Both harnesses read the same dataset copy (the release's, whose runners have the
published shape). In the ``own_test_py`` scenarios its runners copy ``test.py``
in a shape the release's parser skips, so the release runs the annotation's own
``test.py`` from the task's sub-folder and its tracebacks say ``../../test.py:N``
(agent/protocols/release_paths.py): a level run from the shared seed opens with
that text, and ours must send the same bytes (only absolute paths masked).
"""
from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fake_providers import FakeProvider, ReceivedRequest, strip_cache_markers
from tests.release_oracle import (
    SAMPLE_DATASET,
    ReleaseScript,
    TaskScript,
    feedback_records,
    prepare_tree,
    read,
    release_checkout,
    release_config,
    release_unavailable,
    replace,
    run_release,
    submit,
)
from tests.run_support import REPO, cli_env

UNAVAILABLE = release_unavailable()
pytestmark = [pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""), pytest.mark.timeout(900),
              pytest.mark.slow]  # the release and ours on five scenarios: about a minute
CLI = REPO / "agent" / "research_code_generation.py"
WRONG = "def placeholder():\n    return None\n"
WRONG_AGAIN = "def placeholder():\n    return 0\n"
# The folders of absolute paths (a run's private folders differ between harnesses and runs: the release's
# tests run from a temporary overlay folder, ours from the private copy), object addresses, and the test names
# of the release's verdict lines, which embed that overlay folder's random name when pytest's rootdir lies
# above it ("overlay_task_1_x3k.py::dpo.test::test_a"; ours, as SPEC 8.3 names them: "test.py::test_a").
_PATH = re.compile(r"(?:/[\w.@+-]+)+/(?=[\w.@+-]+)")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_TEST_ID = re.compile(r"^[\w.@+-]+\.py::(?:[\w.]+::)?(?=\w+(?:\[[^\]]*\])?: )", re.MULTILINE)
# Absolute paths only (a folder of a run's own); relative ones (../../test.py) are text both must send alike.
_ABSOLUTE = re.compile(r"(?:(?<=\\n)|(?<![\w.]))(?:/[\w.@+-]+)+/(?=[\w.@+-]+)")  # after a quote, (, \n...
_OVERLAY_ID = re.compile(r"^overlay_task_\d+_\w+\.py::(?:[\w.]+::)?", re.MULTILINE)


def canonical(task: int) -> str:
    return (SAMPLE_DATASET / "annotations" / f"annotation_{task}" / "canonical.py").read_text(encoding="utf-8")


def masked(text: str) -> str:
    """``text`` with the folders of absolute paths, object addresses and test-file prefixes masked."""
    return _TEST_ID.sub("", _ADDRESS.sub("0x?", _PATH.sub("", text)))


def absolute_masked(text: str) -> str:
    """``text`` with only the folders of absolute paths, object addresses and the random module name of the
    release's temporary test copy (``overlay_task_1_x3k.py::dpo.test::``, ours ``test.py::``) masked."""
    return _OVERLAY_ID.sub("test.py::", _ADDRESS.sub("0x?", _ABSOLUTE.sub("", text)))


@dataclass
class Scenario:
    """One run: the config keys beyond the release's default.yaml, and each task's scripted answers."""

    name: str
    keys: dict[str, Any]
    tasks: dict[int, TaskScript]

    def tasks_feedback(self) -> bool:
        return any(script.feedback for script in self.tasks.values())


def first_run(task: int = 1) -> dict[int, TaskScript]:
    """Turn 0 wrong, feedback; turn 1 wrong again, feedback; turn 2 right (max-turn 3, max-steps 2)."""
    return {task: TaskScript(code=[replace(WRONG), submit(), replace(WRONG_AGAIN), submit(),
                                   replace(canonical(task)), submit()],
                             feedback=[feedback_records("first"), feedback_records("second", 1)])}


SCENARIOS = {
    "memory_agent_L4": Scenario("memory_agent_L4", {"guidance-level": 4, "max-turn": 3, "max-steps": 2}, first_run()),
    "memory_agent_L2_same_seed": Scenario(
        "memory_agent_L2_same_seed", {"guidance-level": 2, "max-turn": 3, "max-steps": 2},
        {1: TaskScript(code=[replace(canonical(1)), submit()], feedback=[])}),
    "memory_summary": Scenario(
        "memory_summary", {"guidance-level": 3, "max-turn": 2, "max-steps": 3, "memory-threshold": 3},
        {1: TaskScript(code=[read("dpo/trainer.py"), replace(WRONG), submit(), read("dpo/__init__.py"),
                             read("dpo/trainer.py"), replace(WRONG_AGAIN)],
                       feedback=[feedback_records("summary")])}),
    "agent_setting": Scenario(
        "agent_setting", {"evaluation-setting": "agent", "guidance-level": 2, "max-turn": 3, "max-steps": 2},
        {2: TaskScript(code=[replace(WRONG), submit(), replace(canonical(2)), submit()],
                       feedback=[feedback_records("agent")])}),
    "replay_at_L1": Scenario(
        "replay_at_L1", {"guidance-level": 4, "max-turn": 3, "max-steps": 2, "replay-feedback-level": 1,
                         "resume": True},
        {1: TaskScript(code=[submit(), submit()], feedback=[])}),
}
SCENARIOS["own_test_py_L4"] = Scenario("own_test_py_L4", SCENARIOS["memory_agent_L4"].keys, first_run())
SCENARIOS["own_test_py_L2_same_seed"] = Scenario("own_test_py_L2_same_seed",
                                                 SCENARIOS["memory_agent_L2_same_seed"].keys,
                                                 SCENARIOS["memory_agent_L2_same_seed"].tasks)
# Scenarios run in this order in one output folder per harness: the second and the last read the first's results.
ORDER = ("memory_agent_L4", "memory_agent_L2_same_seed", "replay_at_L1", "memory_summary", "agent_setting",
         "own_test_py_L4", "own_test_py_L2_same_seed")
FOLDER_OF = {"memory_summary": "summary", "agent_setting": "agent", "own_test_py_L4": "own_test_py",
             "own_test_py_L2_same_seed": "own_test_py"}  # the others share the first run's folder
STARTS_FROM_STORED = ("memory_agent_L2_same_seed", "replay_at_L1", "own_test_py_L2_same_seed")  # the seed, stored turns
OWN_TEST_PY = "own_test_py"  # the folder whose runners copy test.py as ./test.py (the release then runs its own)
_COPY_TEST_PY = re.compile(r'^(cp "\$\{SCRIPT_DIR\}/test\.py") "\$\{TARGET_DIR\}/[^"]+"$', re.MULTILINE)


def datasets(release_root: Path, our_root: Path, folder: str) -> Path:
    """Our copy of the dataset the release reads in ``folder``, both made once, before the release runs there
    (it tests files where they are: its copy changes as it runs). ``own_test_py``'s runners copy ``test.py``
    into the working folder as ``./test.py``, a shape the release's parser skips."""
    ours = our_root / folder / "dataset"
    if not ours.exists():
        tree = prepare_tree(release_root / folder)
        if folder == OWN_TEST_PY:
            for runner in tree.dataset.glob("annotations/*/test.sh"):
                text = runner.read_text(encoding="utf-8")
                runner.write_text(_COPY_TEST_PY.sub(r"\1 ./test.py", text), encoding="utf-8")
        shutil.copytree(tree.dataset, ours)
    return ours


@dataclass
class Calls:
    """What one harness sent in one scenario."""

    requests: list[ReceivedRequest]
    script: ReleaseScript

    def kinds(self) -> list[tuple[str, int | None]]:
        return [self.script.kind(r) for r in self.requests]


def run_ours(scenario: Scenario, root: Path, server: FakeProvider, checkout: Path,
             dataset: Path = SAMPLE_DATASET) -> subprocess.CompletedProcess:
    """Our main command on the release's default.yaml plus the scenario's keys (and where our files go)."""
    config = {**release_config(checkout, {
        **scenario.keys, "task-ids": sorted(scenario.tasks), "work-dir": str(dataset),
        "output-dir": str(root / FOLDER_OF.get(scenario.name, "shared")), "api-key": "", "human-api-key": ""}),
        "release-prompts": str(checkout), "env-backend": "current", "parallel-mode": "none"}
    path = root / f"{scenario.name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**cli_env(), "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key-not-secret"}
    return subprocess.run([sys.executable, str(CLI), "--yaml-location", str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Calls, Calls]]:
    """Every scenario through the release and through ours: (release's calls, ours)."""
    checkout = release_checkout()
    release_root, our_root = tmp_path_factory.mktemp("release"), tmp_path_factory.mktemp("ours")
    found = {}
    for name in ORDER:
        scenario = SCENARIOS[name]
        dataset = datasets(release_root, our_root, FOLDER_OF.get(name, "shared"))  # the release's runners
        pair = []
        for harness in ("release", "ours"):
            script = ReleaseScript(SAMPLE_DATASET, copy.deepcopy(scenario.tasks))
            with FakeProvider("openai", script) as server:
                if harness == "release":
                    cwd = release_root / FOLDER_OF.get(name, "shared")
                    done = run_release({**scenario.keys, "task-ids": sorted(scenario.tasks)}, server, cwd)
                    assert done.ok, done.describe()
                else:
                    done = run_ours(scenario, our_root, server, checkout, dataset)
                    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
                assert not script.exhausted, (harness, name, script.exhausted)
                pair.append(Calls(list(server.requests), script))
        found[name] = (pair[0], pair[1])
    return found


def parameters(request: ReceivedRequest) -> dict:
    """A request's parameters besides its messages, numbers compared as floats, prompt-caching markers (which
    change no text the model sees; on by default) stripped."""
    body = {k: v for k, v in strip_cache_markers(request.body).items() if k not in ("messages", "input")}
    return json.loads(json.dumps(body), parse_int=float)


@pytest.mark.parametrize("name", ORDER)
def test_call_by_call_the_same_kind_endpoint_roles_count_and_parameters(runs, name: str) -> None:
    release, ours = runs[name]
    assert ours.kinds() == release.kinds(), name
    for mine, theirs in zip(ours.requests, release.requests):
        assert mine.route == theirs.route
        assert [m["role"] for m in mine.messages] == [m["role"] for m in theirs.messages]
        assert parameters(mine) == parameters(theirs)
        if theirs.route.endswith("/responses"):
            fmt = mine.body["text"]["format"]
            assert fmt["name"] == "Feedbacks" and fmt["schema"]["required"] == ["feedbacks"]


@pytest.mark.parametrize("name", [name for name in ORDER if name not in STARTS_FROM_STORED])
def test_a_task_s_first_code_request_is_byte_identical(runs, name: str) -> None:
    release, ours = runs[name]
    first = release.kinds().index(("code", sorted(SCENARIOS[name].tasks)[0]))
    assert ours.requests[first].messages == release.requests[first].messages


@pytest.mark.parametrize("name", STARTS_FROM_STORED)
def test_a_level_run_from_stored_turns_opens_with_the_release_s_bytes(runs, name: str) -> None:
    """The first request of a level run that starts from the shared seed (or stored turns) shows their test
    information: byte-identical with the release's but for absolute folders and object addresses."""
    release, ours = runs[name]
    first = release.kinds().index(("code", sorted(SCENARIOS[name].tasks)[0]))
    mine, theirs = ours.requests[first].messages, release.requests[first].messages
    assert [absolute_masked(m["content"]) for m in mine] == [absolute_masked(m["content"]) for m in theirs]
    if name.startswith(OWN_TEST_PY):
        assert "\\n\\n../../test.py:" in theirs[1]["content"]  # the release's own test.py, from the sub-folder
        assert "\\n\\ntest.py:" not in mine[1]["content"]


@pytest.mark.parametrize("name", [name for name in ORDER if SCENARIOS[name].tasks_feedback()])
def test_feedback_requests_are_byte_identical_with_paths_and_addresses_masked(runs, name: str) -> None:
    release, ours = runs[name]
    asked = [index for index, (kind, _) in enumerate(release.kinds()) if kind == "feedback"]
    assert asked
    for index in asked:
        assert ([masked(m["content"]) for m in ours.requests[index].messages]
                == [masked(m["content"]) for m in release.requests[index].messages])


@pytest.mark.parametrize("name", ORDER)
def test_every_call_is_identical(runs, name: str) -> None:
    """Beyond the issue's bar: every call's messages, paths and addresses masked."""
    release, ours = runs[name]
    for index, (mine, theirs) in enumerate(zip(ours.requests, release.requests)):
        assert [masked(m["content"]) for m in mine.messages] == [masked(m["content"]) for m in theirs.messages], \
            (name, index, release.kinds()[index])
