"""feedback-source: web, its parts over real HTTP: the checks of the form, the board of waiting requests and
their drafts, the token, and the config keys. The form driven in Chromium is tests/test_feedback_web_browser.py."""
from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agent.config import ConfigError
from agent.feedback import FeedbackRequest, validate_records
from agent.web import WebFeedbackError, shared_server
from agent.web.board import Board, RequestKey, draft_path
from agent.web.records import EMPTY, NO_RECORDS, check_records
from agent.web.server import FeedbackServer
from agent.web.source import request_view
from tests.loop_config import make_config

REPO = Path(__file__).resolve().parents[1]

FULL = {"interface": "scale", "category": "t2", "description": "x is doubled", "analysis": "the paper adds one",
        "actionable_feedback": "add one", "direct_code_feedback": "x += 1"}


def request(task: int = 7, turn: int = 1, level: int = 2, code: str = "x = 2\n") -> FeedbackRequest:
    return FeedbackRequest(task_index=task, turn=turn, level=level, latex="\\section{x}", instruction="write x",
                           canonical="x = 1\n", code=code, previous_code="x = 0\n", digest="FAILED test_x")


def key(task: int = 7, turn: int = 1, level: int = 2, folder: str = "memory_agent_m_feedback_fixed_guidance_2_source_web"
        ) -> RequestKey:
    return RequestKey(folder, "m", task, turn, level)


# ---------------------------------------------------------------------- the checks of a submission

def test_a_complete_record_is_accepted_as_validate_records_accepts_it() -> None:
    records, errors = check_records({"feedback": [FULL]}, level=4)
    assert errors == {}
    assert records == validate_records({"feedback": [FULL]}) and records[0]["category"] == "T2"


def test_errors_are_attached_to_their_field_with_the_llm_validators_message() -> None:
    bad = {**FULL, "category": "T9", "analysis": 3}
    del bad["direct_code_feedback"]
    records, errors = check_records({"feedback": [FULL, bad]}, level=1)
    assert records == [] and errors["form"] == []
    assert errors["records"][0] == {}
    assert errors["records"][1] == {"category": "category 'T9' is not one of T0, T1, T2, T3, T4",
                                    "analysis": "analysis must be strings",
                                    "direct_code_feedback": "lacks direct_code_feedback"}


@pytest.mark.parametrize("level, required", [(1, {"interface", "description"}),
                                             (3, {"interface", "description", "analysis", "actionable_feedback"})])
def test_the_fields_the_agent_is_shown_at_the_level_must_not_be_empty(level: int, required: set[str]) -> None:
    blank = {**{name: " " for name in FULL}, "category": "T0"}
    _, errors = check_records({"feedback": [blank]}, level=level)
    assert errors["records"] == [{name: EMPTY for name in required}]


def test_no_record_is_a_form_error() -> None:
    assert check_records({"feedback": []}, level=2) == ([], {"form": [NO_RECORDS], "records": []})
    assert check_records({"records": []}, level=2)[1]["form"]


# ---------------------------------------------------------------------- the board and its drafts

def test_a_draft_survives_a_restart_and_says_when_the_file_changed(tmp_path: Path) -> None:
    path = draft_path(tmp_path / "web feedback", key())
    board = Board()
    first = board.open(key(), request_view(request()), path)
    assert board.save_draft(first.key.rid, {"records": [{"interface": "half"}], "revision": 0})[0] == 200
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["records"] == [{"interface": "half"}] and saved["revision"] == 1 and saved["key"]["task_index"] == 7

    again = Board().open(key(), request_view(request()), path)  # a new process asks the same question
    assert again.draft["records"] == [{"interface": "half"}] and again.draft["revision"] == 1
    assert again.notes() == []
    changed = Board().open(key(), request_view(request(code="x = 3\n")), path)
    assert "another version of the file" in changed.notes()[0]


def test_a_stale_page_cannot_overwrite_a_newer_draft(tmp_path: Path) -> None:
    board = Board()
    pending = board.open(key(), request_view(request()), draft_path(tmp_path, key()))
    assert board.save_draft(pending.key.rid, {"records": [{"interface": "tab 1"}], "revision": 0})[0] == 200
    status, body = board.save_draft(pending.key.rid, {"records": [{"interface": "tab 2"}], "revision": 0})
    assert status == 409 and body["revision"] == 1
    assert pending.draft["records"] == [{"interface": "tab 1"}]


def test_waiting_jobs_are_answered_independently_and_once(tmp_path: Path) -> None:
    board = Board()
    answers: dict[int, list] = {}

    def job(task: int) -> None:
        pending = board.open(key(task), request_view(request(task)), draft_path(tmp_path, key(task)))
        answers[task] = board.wait(pending)

    threads = [threading.Thread(target=job, args=(task,)) for task in (1, 2, 3)]
    for thread in threads:
        thread.start()
    while len(board.listing()) < 3:
        threading.Event().wait(0.01)
    assert [item["task_index"] for item in board.listing()] == [1, 2, 3]
    assert board.submit(key(2).rid, {"feedback": [{**FULL, "interface": "two"}]})[0] == 200
    assert board.submit(key(2).rid, {"feedback": [FULL]})[0] == 404  # answered: no longer waiting
    assert board.submit(key(3).rid, {"feedback": [{**FULL, "description": ""}]})[0] == 422
    assert board.submit(key(3).rid, {"feedback": [{**FULL, "interface": "three"}]})[0] == 200
    assert board.submit(key(1).rid, {"feedback": [{**FULL, "interface": "one"}]})[0] == 200
    for thread in threads:
        thread.join(timeout=10)
    assert {task: records[0]["interface"] for task, records in answers.items()} == {1: "one", 2: "two", 3: "three"}
    assert board.listing() == []
    stored = json.loads(draft_path(tmp_path, key(3)).read_text(encoding="utf-8"))
    assert stored["submitted_at"] and stored["records"][0]["interface"] == "three"


# ---------------------------------------------------------------------- the server and its token

@pytest.fixture()
def server(tmp_path: Path):
    board = Board()
    board.open(key(), request_view(request()), draft_path(tmp_path, key()))
    served = FeedbackServer(board).start()
    yield served
    served.stop()


def fetch(url: str, body: object = None, content_type: str = "application/json",
          host: str | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": content_type})
    if host is not None:
        req.add_unredirected_header("Host", host)
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_pages_answer_only_with_the_token_from_this_host(server: FeedbackServer) -> None:
    root = f"http://127.0.0.1:{server.port}/"
    status, body = fetch(server.url + "api/pending")
    assert status == 200 and json.loads(body)["pending"][0]["id"] == key().rid
    assert fetch(server.url)[0] == 200 and fetch(server.url + "r/" + key().rid)[0] == 200
    assert fetch(root + "api/pending")[0] == 403
    wrong = ("y" if server.token[0] == "x" else "x") + server.token[1:]
    assert fetch(root + wrong + "/api/pending")[0] == 403
    assert fetch(server.url + "api/pending", host="attacker.example")[0] == 403
    submit = server.url + f"api/r/{key().rid}/submit"
    assert fetch(submit, {"feedback": [FULL]}, content_type="text/plain")[0] == 403
    status, body = fetch(submit, {"feedback": [{**FULL, "category": ""}]})
    assert status == 422 and "category" in json.loads(body)["errors"]["records"][0]
    assert fetch(submit, {"feedback": [FULL]})[0] == 200


def test_the_page_data_is_served_as_json_text(server: FeedbackServer) -> None:
    status, body = fetch(server.url + f"api/r/{key().rid}")
    data = json.loads(body)
    assert status == 200 and data["view"]["canonical"] == "x = 1\n" and data["view"]["shown_fields"] == [
        "interface", "description", "analysis"]
    assert data["view"]["code_differs"] == [1] and data["view"]["canonical_differs"] == [1]
    assert fetch(server.url + "api/r/" + "0" * 16)[0] == 404


# ---------------------------------------------------------------------- configuration

def test_web_port_is_read_and_checked(tmp_path: Path) -> None:
    assert make_config(tmp_path, feedback_source="web", web_port=8765).web_port == 8765
    assert make_config(tmp_path, feedback_source="web").web_port == 0
    with pytest.raises(ConfigError, match="'web-port' must be an integer from 0 to 65535"):
        make_config(tmp_path, feedback_source="web", web_port=70000)
    with pytest.raises(ConfigError, match="serves its form from this process"):
        make_config(tmp_path, feedback_source="web", parallel_mode="ray")


def test_a_malformed_post_gets_an_answer_not_a_traceback(server: FeedbackServer, capfd) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.putrequest("POST", f"/{server.token}/api/r/{key().rid}/draft", skip_host=True)
    connection.putheader("Host", f"127.0.0.1:{server.port}")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", "many")
    connection.endheaders()
    answer = connection.getresponse()
    assert answer.status == 422 and b"bytes is expected" in answer.read()
    status, _ = fetch(server.url + f"api/r/{key().rid}/draft", {"records": "not a list", "revision": 0})
    assert status == 422
    assert "Traceback" not in capfd.readouterr().err


def test_a_taken_web_port_is_one_line_naming_the_fix() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(WebFeedbackError, match=f"web-port {port}: cannot listen on 127.0.0.1 .*choose another "
                                                   "web-port, or 0 for any free port"):
            shared_server(port)


def test_a_run_waiting_for_a_person_ends_on_sigterm_after_its_terminal_is_gone(tmp_path: Path) -> None:
    """A job thread blocked on the form cannot be stopped; the run must still exit (130), not wait for it
    at interpreter shutdown, even when printing the goodbye fails on a closed pipe."""
    config = tmp_path / "web config.yaml"
    config.write_text(json.dumps({
        "api-provider": "scripted", "model": "scripted-coder", "script": str(REPO / "config/scripted/code_model.yaml"),
        "guidance-level": 1, "max-turn": 2, "task-ids": [1], "work-dir": str(REPO / "work_dir"),
        "output-dir": str(tmp_path / "results dir"), "resume": True, "feedback-source": "web", "web-port": 0,
        "env-backend": "current", "parallel-mode": "threads", "max-workers": 2}), encoding="utf-8")
    run = subprocess.Popen([sys.executable, str(REPO / "agent/research_code_generation.py"), "--yaml-location",
                            str(config)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert any(line.startswith("feedback wanted: task 1 turn 0") for line in run.stderr)
        run.stdout.close()
        run.stderr.close()
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 130
    finally:
        run.kill()
        run.wait()
    meta = json.loads(next((tmp_path / "results dir/run_metadata").glob("*.json")).read_text(encoding="utf-8"))
    assert meta["status"] == "interrupted"
