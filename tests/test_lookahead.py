"""Early test runs (agent/parallel/lookahead.py): only a run of exactly the submitted text is used, its report lands
where the submission's would, and a run whose file changed never takes a slot once withdrawn."""
from __future__ import annotations

import threading
import time
from pathlib import Path

from agent.parallel.lookahead import Lookahead


class FakeSlot:
    """An early run that waits for ``gate`` (its slot) unless withdrawn first, as agent/parallel/slots.py does
    (a withdrawal wins a tie); once it holds the slot it runs until ``done``. Records what ran."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.done = threading.Event()
        self.done.set()
        self.ran: list[str] = []
        self.waiting: list[str] = []
        self.holding: list[str] = []
        self.fail = False

    def run(self, code: str, report: Path, withdrawn) -> dict | None:
        self.waiting.append(code)
        while not withdrawn():
            if self.gate.is_set():
                break
            time.sleep(0.005)
        else:
            return None
        self.holding.append(code)
        if self.fail:
            raise RuntimeError("the worker pool broke")
        self.done.wait(timeout=10)
        self.ran.append(code)
        report.write_text(f"<testsuites>{code}</testsuites>")
        return {"status": "failed", "code": code, "report_path": str(report)}


def wait_until(condition) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the early run never got there"
        time.sleep(0.005)


def make(tmp_path: Path) -> tuple[Lookahead, FakeSlot]:
    slot = FakeSlot()
    scratch = tmp_path / "early"
    scratch.mkdir()
    return Lookahead(slot.run, lambda: None, scratch), slot


def test_the_early_run_of_the_submitted_text_is_used_and_its_report_moved(tmp_path: Path) -> None:
    ahead, slot = make(tmp_path)
    slot.gate.set()
    ahead.offer("A")
    wait_until(lambda: slot.holding)
    dest = tmp_path / "reports" / "turn_0.xml"
    result = ahead.take("A", dest)
    assert result == {"status": "failed", "code": "A", "report_path": str(dest)}
    assert dest.read_text() == "<testsuites>A</testsuites>" and slot.ran == ["A"]
    ahead.close()
    assert list((tmp_path / "early").iterdir()) == []


def test_without_a_report_destination_the_result_names_none(tmp_path: Path) -> None:
    ahead, slot = make(tmp_path)
    slot.gate.set()
    ahead.offer("A")
    wait_until(lambda: slot.holding)
    assert ahead.take("A", None) == {"status": "failed", "code": "A"}


def test_a_run_that_holds_its_slot_at_submission_is_waited_for(tmp_path: Path) -> None:
    ahead, slot = make(tmp_path)
    slot.gate.set()
    slot.done.clear()
    ahead.offer("A")
    wait_until(lambda: slot.holding)
    threading.Timer(0.2, slot.done.set).start()  # the run ends after the submission
    assert ahead.take("A", tmp_path / "r.xml")["code"] == "A" and slot.ran == ["A"]


def test_a_run_still_waiting_at_submission_is_withdrawn_and_the_caller_tests_as_usual(tmp_path: Path) -> None:
    ahead, slot = make(tmp_path)
    ahead.offer("A")
    wait_until(lambda: slot.waiting)
    assert ahead.take("A", tmp_path / "r.xml") is None
    slot.gate.set()
    assert slot.ran == [] and not (tmp_path / "r.xml").exists()


def test_a_changed_file_withdraws_the_old_run_and_only_the_submitted_text_counts(tmp_path: Path) -> None:
    ahead, slot = make(tmp_path)
    ahead.offer("A")
    ahead.offer("A")  # the same file again: still one run
    ahead.offer("B")
    wait_until(lambda: slot.waiting == ["A", "B"])
    slot.gate.set()  # A was withdrawn before its slot came: only B gets it
    wait_until(lambda: slot.holding)
    assert ahead.take("B", tmp_path / "r.xml")["code"] == "B"
    ahead.close()
    assert slot.ran == ["B"]


def test_a_submission_of_another_text_gets_nothing_early(tmp_path: Path) -> None:
    ahead, slot = make(tmp_path)
    slot.gate.set()
    ahead.offer("A")
    assert ahead.take("C", tmp_path / "r.xml") is None
    ahead.close()
    assert list((tmp_path / "early").iterdir()) == []


def test_an_early_run_that_raises_leaves_the_submission_to_the_usual_run(tmp_path: Path) -> None:
    ahead, slot = make(tmp_path)
    slot.fail = True
    slot.gate.set()
    ahead.offer("A")
    wait_until(lambda: slot.holding)
    assert ahead.take("A", tmp_path / "r.xml") is None
