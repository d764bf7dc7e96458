"""Run the authors' release (``../shared/recode_release``) as an ORACLE against our fake servers.

The lead's ``protocol: release`` profile must send, call by call, what the
release sends. This module runs the release's own main command
(``agent/research_code_generation.py --yaml-location CFG --parallel-mode none``)
on our sample tasks against the logging servers of ``tests/fake_providers.py``
and hands back every request it sent, its result pickles and its seeds. None
of the release's code or text is copied here: it is run from its checkout.

API
---
``release_checkout() -> Path | None``
    The checkout beside ours (``shared/recode_release``), None when absent.
``release_unavailable() -> str | None``
    The skip reason when the release cannot run here (no checkout, or a module
    it imports is missing, e.g. scipy on a core-only install), else None.
``prepare_tree(root, dataset=SAMPLE_DATASET, checkout=None) -> ReleaseTree``
    Lays out, once per ``root``, the folder the release runs in (its cwd):
    ``agent`` (a symlink to the checkout's agent folder), a stub ``retrieval``
    package, ``shims/bin/conda``, ``shims/site`` (stub ``tiktoken``, and
    ``together`` when that SDK is missing), ``config/``, and a fresh COPY of
    the dataset at ``work_dir/dataset`` (the release writes candidates and
    reports into it). Nothing is written into the checkout or our product code.
``run_release(config, server, cwd, dataset=SAMPLE_DATASET, timeout_sec=...) -> ReleaseRun``
    Writes ``config`` (the release's YAML keys, merged over the checkout's
    ``config/default.yaml``) to ``cwd/config/oracle_<n>.yaml`` and runs the
    main command in ``cwd`` with the servers' URLs in the environment. Runs in
    the same ``cwd`` share the dataset copy and ``experiment_results/`` (seeds,
    resume, replay). ``server``: one FakeProvider or several (one per protocol).
``ReleaseRun``: ``rc``, ``ok``, ``stdout``/``stderr`` (tails), ``config`` (as
    written), ``root``, ``output_dir``, ``result_dir``, ``seed_dir``,
    ``requests`` (what the servers logged during the run, in arrival order),
    ``test_runs`` (the conda stand-in's calls), ``seconds``, ``results(task)``,
    ``seed(task)``, ``seed_path(task)``, ``replay(task, level)``, ``describe()``.
``ReleaseScript(dataset, {task: TaskScript(code=[...], feedback=[[...]])})``
    A responder for FakeProvider: answers each code-agent call with the task's
    next scripted answer, each ``/v1/responses`` call with its next feedback
    list, each memory-summary call with ``summary``. ``kind(request)`` tells
    ("code" | "feedback" | "summary", task id). An exhausted script answers
    HTTP 400 (the release then retries and the task fails, visibly).
Answer builders the release's parser accepts: ``answer``, ``replace``,
    ``read``, ``browse``, ``retrieve``, ``submit``; ``feedback_records``.

Pointing each of the release's clients at a fake server (all by environment)
----------------------------------------------------------------------------
- openai (code and feedback): ``OpenAI(api_key=<yaml>)`` reads
  ``OPENAI_BASE_URL``; chat calls go to ``/v1/chat/completions``, the
  feedback to ``/v1/responses``.
- anthropic: ``anthropic.Anthropic()`` (no arguments) reads
  ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``; served at ``/v1/messages``
  (but the anthropic 2.x SDK refuses the release's call before sending it,
  see the facts below).
- gemini (the release's provider name is ``google``, although its YAML
  comment says ``gemini``): ``genai.Client(api_key=<yaml>)``; google-genai
  3.x takes its base URL from ``GOOGLE_GEMINI_BASE_URL`` when no
  ``http_options`` are given (``google/genai/_base_url.py``); served at
  ``/v1/models/<model>:generateContent``.
- together: not runnable here (the SDK is not installed; the stub only lets
  the release import). A real together SDK would read ``TOGETHER_BASE_URL``.
- azure-openai: no environment needed: ``endpoint`` / ``deployment`` /
  ``api-version`` from the YAML (endpoint = ``server.url``); served at
  ``/openai/deployments/<deployment>/chat/completions``.
- deepseek: NOT redirectable: its client hard-codes
  ``base_url="https://api.deepseek.com"``, which beats the environment.
``run_release`` sets these for every server it is given. The feedback model can
only be ``openai`` (``query_llm_parse`` raises for any other provider).

Shims, and why
--------------
- ``conda``: the release's ``clean_test_runner.py`` runs
  ``conda run -n ENV --no-capture-output python -m pytest ...``; the stand-in
  runs ``python ...`` with this interpreter and logs env, cwd and args to
  ``shims/conda_calls.jsonl`` (``ReleaseRun.test_runs``). Anything else exits 2.
  Like a task env, its pytest loads only the pytest-timeout plugin.
- ``retrieval``: the release's builds an embedding index from a hard-coded
  model path when ``ActionHandler`` is created. The stub ranks the repository's
  functions with the project's BM25 (``agent/task/retrieval.py``, loaded by path),
  indexed when ``ActionHandler`` is created (the target file then holds its
  ``init_content``), top 5, handed over worst-to-best as the release's dense
  search does (``argsort(...)[-5:]``), so its ``reversed()`` shows the best
  first as ``# Path:<path relative to the repo>`` + the function source.
- ``tiktoken``: the real one downloads its tables at import; the stub's
  encoder counts words (only ``query_model``, unused by the main command,
  would use it).
- ``together`` (only when the SDK is missing): the release imports it at
  module level; constructing its client raises.
- The dataset copy's ``test.sh`` files get ``|| exit`` after their
  ``cd "${TARGET_DIR}/<sub>"`` line: the release's parser only accepts that
  shape (the published runners', ``clean_test_runner.py:_RE_CD``), and our
  sample runners leave it out. ``cd "${TARGET_DIR}"`` (no sub-folder, sample
  task 7) cannot be parsed by the release at all: task 7 is not runnable here.
- Bytecode writing is off (``PYTHONDONTWRITEBYTECODE``), so the read-only
  checkout gets no ``__pycache__``.

Facts observed (release e5b99e8, openai 3.57, anthropic 2.16, google-genai 3.6.1)
-------------------------------------------------------------------------------
Per-scenario call counts are in the docstring of ``tests/test_release_oracle.py``.
- Code-agent call (openai): body keys exactly ``model``, ``messages``,
  ``top_p`` (= 1): no ``temperature``, ``max_tokens`` or ``stream``.
  ``messages`` = [system, user]; one system prompt for every step and turn.
- The release reads ``usage.prompt_tokens_details.cached_tokens`` of every
  chat answer: a server that leaves it out (vLLM, many local servers) makes
  each call fail after it was answered (AttributeError, retried, then the task
  errors). Our scripted answers carry it (``CODE_USAGE``).
- Feedback call: ``POST /v1/responses``, body keys exactly ``model``,
  ``input`` ([system, user]), ``text``, ``top_p`` (= 1); no ``temperature``,
  ``reasoning`` or ``max_output_tokens``. ``text.format`` = ``{"type":
  "json_schema", "strict": true, "name": "Feedbacks", "schema": ...}``; the
  schema requires only ``feedbacks``, an array of ``$defs/FeedbackInstance``
  objects with the six required string fields; both objects have
  ``additionalProperties: false``.
- A record's ``feedback_interaction_history`` is [user prompt, assistant
  LIST of six-key dicts]; the feedback system prompt is not recorded. The last
  turn's is ``[]``, and so is every replayed turn's.
- Memory summary call: same endpoint and body keys as a code call, [system,
  user], a one-sentence system prompt unlike the code agent's; the user message
  is a fixed preamble then the entries to summarise as ``<role>: <content>``
  lines. Its tokens are not in the record. With keep stuck at 5 (the misspelt
  key), a history of 6 entries over a threshold of 3 sends ONE entry to be
  summarised; the summary entry is itself re-summarised by the next call; and
  while threshold < 6 a summary call precedes EVERY step once the history has
  passed 5 entries (a summary leaves 6, each step adds 2). The kept window
  starts mid-pair (an assistant answer without the result before it).
- After a summary, ``agent_memory[0]`` is a ``system`` entry: a fixed heading
  line, then the summary text.
- BROWSE lists files in ``os.walk`` order (file-system order, not sorted).
- The conda stand-in is called once per submission, also when ``max-steps``
  ran out without SUBMIT: ``python -m pytest <overlay>/<sub>/test.py
  --junitxml=<annotation>/pytest_report/report.xml --timeout=60`` in the
  runner's ``cd`` folder, with the env name of ``test.sh``.
- ``work-dir: "work_dir"`` (the shipped, relative value) cannot work: the
  junit path is passed relative and pytest runs in the repo sub-folder, so the
  report lands under ``<repo>/<sub>/work_dir/...``, the release raises
  FileNotFoundError after the first submission, and the task fails with the
  candidate left in the dataset. ``run_release`` therefore passes the absolute
  path of the dataset copy's parent unless ``config`` names a ``work-dir``.
- The release exits 0 when a task fails (``ReleaseRun.ok`` reads its summary).
- gemini (``google``): ``POST /v1/models/<model>:generateContent`` (the SDK's
  default API version is v1), body keys ``contents`` and ``generationConfig``
  only: one user content with one text (system + newline + user), no
  ``systemInstruction``; ``temperature`` 0.0, ``topP`` 1.0, ``thinkingConfig``
  ``{"thinking_budget": 1000}`` for gemini-2.5-pro (0 otherwise), sent
  snake-case.
- azure-openai: body keys ``model`` (the deployment), ``messages``,
  ``temperature`` 0, ``top_p`` 1.
- anthropic: the release passes ``temperature`` and ``top_p`` to
  ``messages.create``, which the anthropic 2.x SDK no longer takes: TypeError
  before anything is sent, 4 attempts x 3 step retries, then the task fails.
  Its parameters (a hard-coded model, ``max_tokens`` 4096, temperature 0,
  top_p 1) are only readable in its source with the SDK this project installs.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pickle
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.models.providers import PROVIDER_ENV_VARS
from tests.fake_providers import (
    TEST_KEY,
    FakeProvider,
    FakeUsage,
    ReceivedRequest,
    Reply,
    error_body,
    openai_response,
    success_body,
)

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATASET = REPO / "work_dir" / "dataset"
MAIN = "agent/research_code_generation.py"
RUN_TIMEOUT_SEC = 300
# Third-party modules the release's main command imports (agent/*.py), beyond what the shims stand in for.
RELEASE_IMPORTS = ("openai", "anthropic", "google.genai", "pydantic", "yaml", "numpy", "scipy", "requests",
                   "pytest_timeout")
TAIL_CHARS = 6000
# Token counts the scripted answers report, one per kind of call, so a record's token lists tell which calls it counted.
# Chat answers must carry usage.prompt_tokens_details.cached_tokens: without it the release retries, then fails.
CODE_USAGE = FakeUsage(input_tokens=1000, output_tokens=100, cached_tokens=0)
FEEDBACK_USAGE = FakeUsage(input_tokens=2000, output_tokens=200)
SUMMARY_USAGE = FakeUsage(input_tokens=3000, output_tokens=300, cached_tokens=0)
FEEDBACK_FIELDS = ("interface", "category", "description", "analysis", "actionable_feedback", "direct_code_feedback")
# Environment prefixes that must not leak into the release's process (real keys, endpoints, the outer pytest's options).
_SCRUBBED_PREFIXES = ("OPENAI_", "ANTHROPIC_", "GOOGLE_", "GEMINI_", "TOGETHER_", "AZURE_", "DEEPSEEK_",
                      "PYTEST", "PYTHON")


def release_checkout() -> Path | None:
    """The authors' release beside this checkout (``shared/recode_release``), or None."""
    for base in (REPO.parent, REPO.parent.parent):
        candidate = base / "shared" / "recode_release"
        if (candidate / MAIN).is_file():
            return candidate
    return None


def release_unavailable() -> str | None:
    """Why the release cannot run here (a skip reason), or None when it can."""
    if release_checkout() is None:
        return "the authors' release (shared/recode_release) is not beside the checkout"
    missing = [name for name in RELEASE_IMPORTS if importlib.util.find_spec(name) is None]
    if missing:
        return f"the release imports {', '.join(missing)}, not installed here"
    import openai.resources.responses as responses

    if not hasattr(responses.Responses, "parse"):
        return "the release's feedback call needs an openai SDK with responses.parse"
    return None


# ---------------------------------------------------------------- shims (written at run time)

_CONDA_SHIM = '''"""conda stand-in for the release oracle: `conda run -n ENV [--no-capture-output] python ARGS`."""
import json, os, sys

args = sys.argv[1:]
env_name, rest = None, args[1:] if args[:1] == ["run"] else None
while rest and rest[0].startswith("-"):
    flag = rest.pop(0)
    if flag in ("-n", "--name", "-p", "--prefix") and rest:
        env_name = rest.pop(0)
if rest and rest[0] == "python":
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps({"env": env_name, "cwd": os.getcwd(), "args": rest[1:]}) + "\\n")
    # A task env holds pytest and pytest-timeout, not this interpreter's other plugins (2 s of start-up each run).
    os.environ.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTEST_PLUGINS="pytest_timeout")
    os.execv(sys.executable, [sys.executable, *rest[1:]])
sys.stderr.write("conda stand-in (tests/release_oracle.py) only runs `conda run -n ENV python ...`, not: %s\\n" % args)
sys.exit(2)
'''

_RETRIEVAL_STUB = '''"""Stand-in for the release's retrieval package: the project's BM25, no model (release oracle)."""
import importlib.util, sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("recode_oracle_bm25", BM25_PATH)
_bm25 = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _bm25
_spec.loader.exec_module(_bm25)
TOP_K = 5


class RetrievalParam:
    def __init__(self, window_size, slice_size, vectorizer, window_type, max_line, task_id):
        self.task_id = task_id


class Retrieval:
    def __init__(self, repo_dir, retrieval_param, cache_dir):
        self.repo_dir = Path(repo_dir)
        self.index = _bm25.FunctionIndex(_bm25.collect_functions(self.repo_dir))

    def retrieve(self, query_text):
        hits = self.index.search(query_text, k=TOP_K)
        return [{"context": doc.source, "fpath_tuple": (self.repo_dir.name, *Path(doc.path).parts)}
                for _, doc in reversed(hits)]
'''

_TIKTOKEN_STUB = '''"""Stand-in for tiktoken (the real one downloads its tables at import): one token per word."""


class Encoding:
    def __init__(self, name):
        self.name = name

    def encode(self, text, **kwargs):
        return [len(word) for word in text.split()]


def get_encoding(name):
    return Encoding(name)


def encoding_for_model(model):
    return Encoding(model)
'''

_TOGETHER_STUB = '''"""Import stand-in for the together SDK (not installed here), which the release imports."""


class Together:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("the together SDK is not installed; the release oracle only stubs its import")
'''

_RUNNER_CD = re.compile(r'^(\s*cd\s+"\$\{TARGET_DIR\}/([^"]+)")[ \t]*$')
_RUNNER_CP_HERE = re.compile(r'^(\s*cp\s+"\$\{SCRIPT_DIR\}/[^"]+")\s+\./\S*[ \t]*$')


@dataclass(frozen=True)
class ReleaseTree:
    """The folder one or more release runs share (their cwd)."""

    root: Path
    checkout: Path

    @property
    def shims(self) -> Path:
        return self.root / "shims"

    @property
    def conda_log(self) -> Path:
        return self.shims / "conda_calls.jsonl"

    @property
    def dataset(self) -> Path:
        return self.root / "work_dir" / "dataset"


def _bm25_path() -> str:
    """The project's retrieval module, which the stub loads by path (the release's sys.path has its own ``agent``)."""
    spec = importlib.util.find_spec("agent.task.retrieval")
    if spec is None or spec.origin is None:
        raise RuntimeError("the project's agent/task/retrieval.py (BM25) is needed by the release oracle's retrieval stub")
    return spec.origin


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def published_runner(text: str) -> str:
    """``test.sh`` text in the published runners' shape, the only one the release parses (see module doc).

    ``cd "${TARGET_DIR}/SUB"`` gets ``|| exit``; a following ``cp "${SCRIPT_DIR}/F" ./F`` becomes
    ``cp "${SCRIPT_DIR}/F" "${TARGET_DIR}/SUB/"``. Other lines are kept.
    """
    lines, sub = [], None
    for line in text.splitlines():
        cd = _RUNNER_CD.match(line)
        cp = _RUNNER_CP_HERE.match(line)
        if cd:
            sub = cd.group(2)
            line = f"{cd.group(1)} || exit"
        elif cp and sub is not None:
            line = f'{cp.group(1)} "${{TARGET_DIR}}/{sub}/"'
        lines.append(line)
    return "\n".join(lines) + "\n"


def _copy_dataset(source: Path, dest: Path) -> None:
    """A private copy of ``source`` whose runners have the published shape (``published_runner``)."""
    leftovers = shutil.ignore_patterns("__pycache__", ".pytest_cache", "pytest_report", "_runner_*")
    shutil.copytree(source, dest, ignore=leftovers)
    for runner in dest.glob("annotations/*/test.sh"):
        runner.write_text(published_runner(runner.read_text(encoding="utf-8")), encoding="utf-8")


def prepare_tree(root: Path, dataset: Path = SAMPLE_DATASET, checkout: Path | None = None) -> ReleaseTree:
    """Lay out ``root`` for the release (once; a prepared root is reused as it is)."""
    checkout = checkout or release_checkout()
    if checkout is None:
        raise RuntimeError("the release checkout (shared/recode_release) is absent")
    tree = ReleaseTree(Path(root), Path(checkout))
    if (tree.root / "agent").exists():
        return tree
    tree.root.mkdir(parents=True, exist_ok=True)
    (tree.root / "agent").symlink_to(tree.checkout / "agent", target_is_directory=True)
    (tree.root / "config").mkdir()
    _write(tree.root / "retrieval" / "__init__.py", f"BM25_PATH = {_bm25_path()!r}\n" + _RETRIEVAL_STUB)
    _write(tree.shims / "conda_shim.py", f"LOG = {str(tree.conda_log)!r}\n" + _CONDA_SHIM)
    conda = f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(tree.shims / 'conda_shim.py'))} \"$@\"\n"
    _write(tree.shims / "bin" / "conda", conda, 0o755)
    _write(tree.shims / "site" / "tiktoken" / "__init__.py", _TIKTOKEN_STUB)
    if importlib.util.find_spec("together") is None:
        _write(tree.shims / "site" / "together" / "__init__.py", _TOGETHER_STUB)
    tree.conda_log.touch()
    _copy_dataset(Path(dataset), tree.dataset)
    return tree


# ---------------------------------------------------------------- running


def release_config(checkout: Path, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The checkout's ``config/default.yaml`` with ``overrides``; a key the release does not have is an error."""
    config = yaml.safe_load((checkout / "config" / "default.yaml").read_text(encoding="utf-8"))
    unknown = sorted(set(overrides) - set(config))
    if unknown:
        raise ValueError(f"not keys of the release's config/default.yaml: {unknown}")
    config.update(overrides)
    return config


def _server_env(server: FakeProvider) -> dict[str, str]:
    """The variables that send the release's client(s) of ``server.protocol`` to ``server`` (see module doc)."""
    if server.protocol == "openai":
        return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": TEST_KEY}
    if server.protocol == "anthropic":
        return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": TEST_KEY}
    return {"GOOGLE_GEMINI_BASE_URL": server.url}


def release_env(tree: ReleaseTree, servers: Sequence[FakeProvider]) -> dict[str, str]:
    """This process's environment without keys, endpoints or pytest/python settings, plus shims and servers."""
    env = {
        name: value for name, value in os.environ.items()
        if name not in PROVIDER_ENV_VARS and not name.startswith(_SCRUBBED_PREFIXES)
    }
    env["PATH"] = f"{tree.shims / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    env["PYTHONPATH"] = str(tree.shims / "site")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    for server in servers:
        env.update(_server_env(server))
    return env


def _conda_calls(tree: ReleaseTree) -> list[dict[str, Any]]:
    return [json.loads(line) for line in tree.conda_log.read_text(encoding="utf-8").splitlines() if line]


@dataclass
class ReleaseRun:
    """One run of the release's main command and what it left behind."""

    rc: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    config: dict[str, Any]
    root: Path
    requests: list[ReceivedRequest]
    test_runs: list[dict[str, Any]]
    seconds: float

    @property
    def output_dir(self) -> Path:
        return self.root / self.config["output-dir"]

    @property
    def result_dir(self) -> Path:
        """``<output-dir>/<setting>_<model>_feedback_<type>_guidance_<level>``, the release's naming."""
        c = self.config
        name = f"{c['evaluation-setting']}_{c['model']}_feedback_{c['guidance-type']}_guidance_{c['guidance-level']}"
        return self.output_dir / name

    @property
    def seed_dir(self) -> Path:
        return self.output_dir / self.config["init_seed"]

    @property
    def ok(self) -> bool:
        """Exit 0 and the release's own summary reporting no failed task (it exits 0 on task errors)."""
        return self.rc == 0 and "\nFailed: 0" in self.stdout

    def describe(self) -> str:
        """For assertion messages: the exit code and the output tails."""
        return f"rc={self.rc} after {self.seconds:.1f}s\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"

    def _load(self, path: Path) -> list[dict[str, Any]]:
        with path.open("rb") as handle:
            return pickle.load(handle)

    def results(self, task_id: int) -> list[dict[str, Any]]:
        return self._load(self.result_dir / f"task_{task_id}_result.pkl")

    def replay(self, task_id: int, level: int) -> list[dict[str, Any]]:
        return self._load(self.result_dir / f"task_{task_id}_result_replay_level{level}.pkl")

    def seed_path(self, task_id: int) -> Path:
        return self.seed_dir / f"{self.config['model']}_task{task_id}_init.pkl"

    def seed(self, task_id: int) -> list[dict[str, Any]]:
        return self._load(self.seed_path(task_id))


def run_release(
    config: Mapping[str, Any],
    server: FakeProvider | Sequence[FakeProvider],
    cwd: Path,
    dataset: Path = SAMPLE_DATASET,
    timeout_sec: float = RUN_TIMEOUT_SEC,
) -> ReleaseRun:
    """Run the release's main command in ``cwd`` (prepared on first use) with ``config`` against ``server``."""
    tree = prepare_tree(Path(cwd), dataset)
    servers = [server] if isinstance(server, FakeProvider) else list(server)
    merged = release_config(tree.checkout, {"work-dir": str(tree.dataset.parent), **config})
    config_name = f"config/oracle_{len(list((tree.root / 'config').glob('oracle_*.yaml'))) + 1}.yaml"
    (tree.root / config_name).write_text(yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
    request_marks = [len(s.requests) for s in servers]
    test_mark = len(_conda_calls(tree))
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, MAIN, "--yaml-location", config_name, "--parallel-mode", "none"],
        cwd=tree.root, env=release_env(tree, servers), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_sec)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the run's own process group: the release and its pytest children
        stdout, stderr = proc.communicate()
        rc = None
    seconds = time.monotonic() - started
    requests = [r for s, mark in zip(servers, request_marks) for r in s.requests[mark:]]
    requests.sort(key=lambda r: r.received_at)
    return ReleaseRun(rc, stdout[-TAIL_CHARS:], stderr[-TAIL_CHARS:], merged, tree.root,
                      requests, _conda_calls(tree)[test_mark:], seconds)


# ---------------------------------------------------------------- scripted answers


def answer(command: str, reflect: str = "the file needs this next step") -> str:
    """A reply in the release's ``reflect:`` / ``action:`` format, the command on the line after ``action:``.

    The release starts the command at the FIRST case-insensitive "action" of the
    whole answer (action.py:326), so the reflection must not contain that word.
    """
    if "action" in reflect.lower():
        raise ValueError("the release would take the command from the reflection: it mentions 'action'")
    return f"reflect: {reflect}\naction:\n{command}"


def replace(code: str, **kwargs: str) -> str:
    """REPLACE the whole target file with ``code``.

    The release's command extraction stops at the first line that starts with
    ``word:`` (``\\n\\w+:``), so such a line would cut the code short.
    """
    cut = re.search(r"\n\w+:", "\n" + code)
    if cut:
        raise ValueError(f"the release would cut this code at {cut.group(0).strip()!r}")
    return answer(f"```REPLACE\n{code.rstrip()}\n```", **kwargs)


def read(path: str, **kwargs: str) -> str:
    return answer(f"READ {path}", **kwargs)


def browse(**kwargs: str) -> str:
    return answer("BROWSE", **kwargs)


def retrieve(query: str, **kwargs: str) -> str:
    return answer(f"RETRIEVE {query}", **kwargs)


def submit(**kwargs: str) -> str:
    return answer("SUBMIT", **kwargs)


def feedback_records(tag: str, count: int = 2) -> list[dict[str, str]]:
    """``count`` feedback records whose every field is a unique marker (``<tag>-<i>-<field>``)."""
    return [{name: f"{tag}-{i}-{name}" for name in FEEDBACK_FIELDS} for i in range(count)]


@dataclass
class TaskScript:
    """One task's scripted answers: code-agent replies in order, and one feedback list per feedback call."""

    code: list[str]
    feedback: list[list[dict[str, str]]] = field(default_factory=list)


class ReleaseScript:
    """A FakeProvider responder for the release's calls (see module doc).

    Calls are told apart without the release's text: a feedback call is a
    ``/v1/responses`` request; a request holding a task's instruction.txt is a
    code call of that task (the code agent's user prompt always has it, the
    summary call's transcript never does); any other chat call is a summary.
    """

    def __init__(self, dataset: Path, tasks: Mapping[int, TaskScript], summary: str = "oracle-summary") -> None:
        annotations = Path(dataset) / "annotations"
        self.instructions = {
            task: (annotations / f"annotation_{task}" / "instruction.txt").read_text(encoding="utf-8").strip()
            for task in tasks
        }
        self.code = {task: deque(script.code) for task, script in tasks.items()}
        self.feedback = {task: deque(script.feedback) for task, script in tasks.items()}
        self.summary = summary
        self.exhausted: list[tuple[str, int | None]] = []

    def kind(self, request: ReceivedRequest) -> tuple[str, int | None]:
        text = "\n".join(m["content"] for m in request.messages)
        task = next((t for t, instruction in self.instructions.items() if instruction in text), None)
        if request.route.endswith("/responses"):
            return "feedback", task
        return ("summary", None) if task is None else ("code", task)

    def __call__(self, request: ReceivedRequest) -> Reply:
        kind, task = self.kind(request)
        if kind == "summary":
            return Reply(body=success_body(request.protocol, self.summary, **vars(SUMMARY_USAGE)))
        queue = (self.feedback if kind == "feedback" else self.code).get(task)
        if not queue:
            self.exhausted.append((kind, task))
            message = f"oracle script: no {kind} answer left for task {task}"
            return Reply(status=400, body=error_body(request.protocol, 400, message))
        if kind == "feedback":
            return Reply(body=openai_response({"feedbacks": queue.popleft()}, FEEDBACK_USAGE))
        return Reply(body=success_body(request.protocol, queue.popleft(), **vars(CODE_USAGE)))

    def kinds(self, requests: Iterable[ReceivedRequest]) -> list[str]:
        """The kind of each request, in order."""
        return [self.kind(r)[0] for r in requests]
