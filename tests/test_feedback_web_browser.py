"""feedback-source: web end to end: the main command on a scripted run, its form driven in headless Chromium.

The run is the real command (agent/research_code_generation.py) in a subprocess with the scripted code
model on the sample tasks at guidance level 1 and max-turn 2: turn 0 fails and waits for a person's
feedback, turn 1 uses it. The browser clicks and types as a person does (tests/cdp.py). Screenshots go
to $RECODE_SCREENSHOTS when set (the closing note's), else to the test's temporary folder.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from agent.job.results import ResultStore
from tests.cdp import CHROMIUM, Browser, Page

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
REPO = Path(__file__).resolve().parents[1]
FOLDER = "memory_agent_scripted-coder_feedback_fixed_guidance_1_source_web"
WANTED = re.compile(r"^feedback wanted: task (\d+) turn (\d+) L(\d+) \S+: (http://\S+)$")
FIRST = "#records .record"


class Run:
    """The main command in a subprocess; its stderr lines are collected as they come."""

    started: list[Run] = []

    def __init__(self, tmp: Path, tasks: list[int]) -> None:
        config = {
            "api-provider": "scripted", "model": "scripted-coder",
            "script": str(REPO / "config/scripted/code_model.yaml"), "evaluation-setting": "memory_agent",
            "guidance-level": 1, "max-turn": 2, "task-ids": tasks, "work-dir": str(REPO / "work_dir"),
            "output-dir": str(tmp / "results dir"), "resume": True, "feedback-source": "web",
            "env-backend": "current", "test-timeout-sec": 120, "max-workers": 2, "parallel-mode": "threads",
        }
        path = tmp / "web.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        self.output = Path(config["output-dir"])
        self.process = subprocess.Popen([sys.executable, str(REPO / "agent/research_code_generation.py"),
                                         "--yaml-location", str(path)], cwd=tmp, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        Run.started.append(self)
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line)
            self.lines.put(line.rstrip("\n"))

    def wanted(self, count: int) -> dict[int, str]:
        """Task -> form URL of the first ``count`` requests announced; the index URL is announced first."""
        found: dict[int, str] = {}
        while len(found) < count:
            try:
                line = self.lines.get(timeout=120)
            except queue.Empty:
                raise AssertionError("no feedback request announced:\n" + "".join(self.stderr)) from None
            if (match := WANTED.match(line)) is not None:
                found[int(match[1])] = match[4]
        return found

    @property
    def index_url(self) -> str:
        return next(line.split()[3] for line in self.stderr if line.startswith("web feedback: open "))

    def finish(self) -> tuple[int, str]:
        out, _ = self.process.communicate(timeout=180)
        return self.process.returncode, out

    def turns(self, task: int) -> list[dict]:
        return ResultStore(self.output / FOLDER, task).load()


def shot(page: Page, name: str, tmp: Path) -> Path:
    path = Path(os.environ.get("RECODE_SCREENSHOTS") or tmp) / name
    page.screenshot(path, full_page=True)
    assert path.read_bytes().startswith(b"\x89PNG")
    return path


def field(page: Page, name: str, record: int = 1) -> str:
    return f"#records .record:nth-of-type({record}) [name={name}]"


def value(page: Page, selector: str) -> str:
    return page.evaluate(f"document.querySelector('{selector}').value")


def wait_saved(page: Page) -> None:
    page.wait_for("document.getElementById('save-status').textContent.startsWith('Draft saved')")


def open_form(browser: Browser, url: str) -> Page:
    page = browser.page()
    page.goto(url)
    page.wait_for(f"document.querySelector('{FIRST}')")
    return page


@pytest.fixture(autouse=True)
def no_run_left() -> None:
    """A test that fails while its run waits for feedback does not leave that run behind."""
    yield
    while Run.started:
        process = Run.started.pop().process
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture()
def browser(tmp_path: Path):
    with Browser(tmp_path / "profile") as opened:
        yield opened


def test_a_person_answers_in_the_browser_and_the_run_continues_with_web_records(browser: Browser,
                                                                                 tmp_path: Path) -> None:
    run = Run(tmp_path, [1])
    url = run.wanted(1)[1]
    page = open_form(browser, url)
    assert page.text("#title") == "Task 1 · turn 0 · guidance level L1"
    assert "FAILURE in test_dpo_loss_grad" in page.text("#digest")  # the test information as shown
    assert "def dpo_loss" in page.text("#canonical") and page.evaluate("document.querySelectorAll('#code .differs').length") > 0
    page.type(field(page, "interface"), "dpo_loss_grad")
    page.choose(field(page, "category"), 3)  # choose..., T0, T1, T2
    page.click("#submit")
    page.wait_for("document.querySelector('.invalid')")
    assert page.evaluate("[...document.querySelectorAll('.field-error')].map(e => e.textContent).filter(t => t)") == [
        "the agent is shown this field at this level: write it"]
    assert page.evaluate("document.activeElement.name") == "description"
    shot(page, "web_feedback_form_field_error.png", tmp_path)

    page.type(field(page, "description"), "The gradient of the chosen log-ratio has the wrong sign.")
    page.click("#add")
    page.type(field(page, "interface", 2), "dpo_loss")
    page.choose(field(page, "category", 2), 1)
    page.type(field(page, "description", 2), "Label smoothing is applied twice.")
    page.type(field(page, "direct_code_feedback", 2), "losses = (1 - eps) * a + eps * b")
    wait_saved(page)
    page.click("#submit")
    page.wait_for("!document.getElementById('done').hidden")
    assert page.text("#done").startswith("Submitted 2 record(s)")
    shot(page, "web_feedback_form_submitted.png", tmp_path)

    code, out = run.finish()
    assert code == 0, "".join(run.stderr)
    assert "1/1" in out  # solved at turn 1 with the person's feedback
    turn0, turn1 = run.turns(1)
    assert turn0["feedback_source"] == "web" and turn0["feedback_error"] is None
    assert [(r["interface"], r["category"]) for r in turn0["feedback_items"]] == [("dpo_loss_grad", "T2"),
                                                                                  ("dpo_loss", "T0")]
    assert "Label smoothing is applied twice." in turn0["feedback_text"]
    assert "losses = (1 - eps)" not in turn0["feedback_text"]  # a code suggestion is shown at L4 only
    assert turn1["execution_result"] and turn1["status"] == "passed"


@pytest.mark.slow
def test_a_draft_typed_before_the_run_stopped_is_in_the_form_after_the_restart(browser: Browser,
                                                                                  tmp_path: Path) -> None:
    run = Run(tmp_path, [1])
    page = open_form(browser, run.wanted(1)[1])
    page.type(field(page, "interface"), "dpo_loss_grad")
    page.choose(field(page, "category"), 2)
    page.type(field(page, "analysis"), "Eq. 7 differentiates -log sigma(beta * margin).")
    wait_saved(page)
    run.process.send_signal(signal.SIGTERM)
    assert run.finish()[0] == 130

    again = Run(tmp_path, [1])
    url = again.wanted(1)[1]
    assert url.rsplit("/", 1)[1] == page.evaluate("location.pathname").rsplit("/", 1)[1]  # the same request id
    page = open_form(browser, url)
    assert value(page, field(page, "interface")) == "dpo_loss_grad"
    assert value(page, field(page, "category")) == "T1"
    assert value(page, field(page, "analysis")) == "Eq. 7 differentiates -log sigma(beta * margin)."
    assert page.text("#save-status").startswith("Draft saved at")
    shot(page, "web_feedback_form_restored_draft.png", tmp_path)
    page.type(field(page, "description"), "The gradient has the wrong sign.")
    page.click("#submit")
    page.wait_for("!document.getElementById('done').hidden")
    assert again.finish()[0] == 0, "".join(again.stderr)
    records = again.turns(1)[0]["feedback_items"]
    assert records == [{"interface": "dpo_loss_grad", "category": "T1",
                        "description": "The gradient has the wrong sign.",
                        "analysis": "Eq. 7 differentiates -log sigma(beta * margin).", "actionable_feedback": "",
                        "direct_code_feedback": ""}]


@pytest.mark.slow
def test_two_people_answer_two_jobs_at_once(browser: Browser, tmp_path: Path) -> None:
    run = Run(tmp_path, [1, 8])
    run.wanted(2)
    index = browser.page()
    index.goto(run.index_url)
    index.wait_for("document.querySelectorAll('#pending tbody tr').length === 2")
    shot(index, "web_feedback_index.png", tmp_path)
    links = index.evaluate("[...document.querySelectorAll('#pending tbody a')].map(a => a.href)")
    first, second = (open_form(browser, link) for link in links)  # two tabs, two people
    tasks = {}
    for page in (first, second):
        tasks[page] = int(re.match(r"Task (\d+)", page.text("#title"))[1])
    for page in (first, second):  # each types a little in turn
        page.type(field(page, "interface"), f"interface of task {tasks[page]}")
    for page in (first, second):
        page.choose(field(page, "category"), 4)
        page.type(field(page, "description"), f"what is wrong in task {tasks[page]}")
    for page in (first, second):
        wait_saved(page)
        page.click("#submit")
    for page in (first, second):
        page.wait_for("!document.getElementById('done').hidden")
    code, out = run.finish()
    assert code == 0, "".join(run.stderr)
    for task in (1, 8):
        turn0 = run.turns(task)[0]
        assert turn0["feedback_source"] == "web"
        assert turn0["feedback_items"][0]["interface"] == f"interface of task {task}"
        assert turn0["feedback_items"][0]["category"] == "T3"
    index.wait_for("document.getElementById('status').textContent.includes('does not answer')")
