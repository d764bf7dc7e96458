"""Feedback records: schema validation and retry, level formatting (our improved protocol's wording; the
release's: tests/test_protocol_release.py), and the file/replay sources."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.feedback import (
    CATEGORIES, FIELDS, FeedbackFormatError, FeedbackReply, FeedbackRequest, FileFeedback, LLMFeedback,
    ReplayFeedback, load_feedback_file, parse_feedback, validate_records,
)
from agent.protocols.improved import FEEDBACK_SCHEMA, ImprovedProtocol, feedback_brief, format_feedback
from agent.models.build import Completion, Usage
from agent.common.text import one_line

RECORD = {
    "interface": "dpo_loss", "category": "T2", "description": "DESC-the loss ignores beta",
    "analysis": "ANALYSIS-the paper scales the margin by beta", "actionable_feedback": "ACTION-multiply by beta",
    "direct_code_feedback": "logits = beta * margin",
}


class ListModel:
    """A ChatModel answering from a fixed list, recording every request."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[list[dict], dict | None]] = []

    def complete(self, messages: list[dict], *, response_schema: dict | None = None) -> Completion:
        self.requests.append(([dict(m) for m in messages], response_schema))
        text = self.answers.pop(0)
        return Completion(text, Usage("fake", "m", 10, len(text), 0, 0, 0.0, 0.001))


def request(turn: int = 1, task: int = 1) -> FeedbackRequest:
    return FeedbackRequest(task_index=task, turn=turn, level=2, latex="LATEX", instruction="INSTR",
                           canonical="CANON", code="new = 1\n", previous_code="old = 1\n", digest="DIGEST")


def test_valid_records_pass_and_category_is_normalised() -> None:
    records = validate_records({"feedback": [{**RECORD, "category": "t3"}]})
    assert records == [{**RECORD, "category": "T3"}]
    assert validate_records({"feedback": []}) == []


@pytest.mark.parametrize(
    "payload, problem",
    [
        ([], 'key "feedback"'),
        ({"feedback": {}}, "must be a list"),
        ({"feedback": ["x"]}, "not an object"),
        ({"feedback": [{k: v for k, v in RECORD.items() if k != "analysis"}]}, "lacks analysis"),
        ({"feedback": [{**RECORD, "description": 3}]}, "description must be strings"),
        ({"feedback": [{**RECORD, "category": "T9"}]}, "not one of"),
    ],
)
def test_invalid_records_are_rejected(payload: object, problem: str) -> None:
    with pytest.raises(FeedbackFormatError, match=problem):
        validate_records(payload)


def test_parse_tolerates_a_json_fence_and_reports_bad_json() -> None:
    assert parse_feedback('```json\n{"feedback": []}\n```') == []
    with pytest.raises(FeedbackFormatError, match="not valid JSON"):
        parse_feedback("the loss is wrong")


def test_schema_lists_every_field_and_category() -> None:
    item = FEEDBACK_SCHEMA["properties"]["feedback"]["items"]
    assert item["required"] == list(FIELDS)
    assert item["properties"]["category"]["enum"] == list(CATEGORIES)


def test_llm_feedback_retries_invalid_then_accepts_valid() -> None:
    model = ListModel(["not json", json.dumps({"feedback": [{**RECORD, "category": "T7"}]}),
                       json.dumps({"feedback": [RECORD]})])
    reply = LLMFeedback(model, ImprovedProtocol(15, 10).feedback_style())(request())
    assert reply.records == [RECORD] and reply.error is None and reply.source == "llm"
    assert len(reply.usage) == 3
    assert all(schema == FEEDBACK_SCHEMA for _, schema in model.requests)
    retry_prompt = model.requests[2][0][-1]["content"]
    assert "category 'T7' is not one of" in retry_prompt
    first_prompt = model.requests[0][0][1]["content"]
    for part in ("LATEX", "INSTR", "CANON", "new = 1", "DIGEST"):
        assert part in first_prompt


def test_llm_feedback_gives_up_with_an_error_not_an_exception() -> None:
    model = ListModel(["{}", "{}", "{}"])
    reply = LLMFeedback(model, ImprovedProtocol(15, 10).feedback_style())(request())
    assert reply.records == [] and "3 attempts" in reply.error and len(reply.usage) == 3
    assert reply.history[-1]["role"] == "assistant"


@pytest.mark.parametrize(
    "level, shown, hidden",
    [
        (0, [], ["dpo_loss", "DESC", "ANALYSIS", "ACTION", "beta * margin"]),
        (1, ["dpo_loss", "DESC"], ["ANALYSIS", "ACTION", "beta * margin"]),
        (2, ["dpo_loss", "DESC", "ANALYSIS"], ["ACTION", "beta * margin"]),
        (3, ["dpo_loss", "DESC", "ANALYSIS", "ACTION"], ["beta * margin"]),
        (4, ["dpo_loss", "DESC", "ANALYSIS", "ACTION", "```python\nlogits = beta * margin\n```"], []),
    ],
)
def test_levels_reveal_fields_cumulatively_and_never_the_category(level: int, shown: list[str],
                                                                  hidden: list[str]) -> None:
    text = format_feedback([RECORD, {**RECORD, "interface": "second"}], level)
    for part in shown:
        assert part in text
    for part in hidden:
        assert part not in text
    assert "T2" not in text and "category" not in text.lower()
    assert (text == "") == (level == 0)
    if level:
        assert "Feedback 2: `second`" in text


def test_a_feedback_brief_keeps_interfaces_and_descriptions_only() -> None:
    records = [RECORD, {**RECORD, "interface": "second", "description": "DESC-2\nmore"}]
    assert feedback_brief(records, 4) == "`dpo_loss`: DESC-the loss ignores beta; `second`: DESC-2 more"
    assert feedback_brief(records, 0) == ""
    assert one_line("x" * 400).endswith("[...]") and len(one_line("x" * 400)) == 306


def test_feedback_file_jsonl_and_yaml(tmp_path: Path) -> None:
    jsonl = tmp_path / "fb.jsonl"
    jsonl.write_text(json.dumps({"task_index": 1, "turn_number": 0, "feedback": [RECORD]}) + "\n\n")
    source = FileFeedback(jsonl)
    assert source(request(turn=0)).records == [RECORD]
    missing = source(request(turn=1))
    assert missing.records == [] and "no entry for task 1 turn 1" in missing.error
    yml = tmp_path / "fb.yaml"
    yml.write_text(yaml.safe_dump([{"task_index": 2, "turn_number": 3, "feedback": [RECORD]}]))
    assert load_feedback_file(yml) == {(2, 3): [RECORD]}


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{bad", "does not parse"),
        (json.dumps({"task_index": 1, "feedback": []}), "integer task_index and turn_number"),
        (json.dumps({"task_index": 1, "turn_number": 0, "feedback": [{**RECORD, "category": "X"}]}), "entry 1"),
        (json.dumps({"task_index": 1, "turn_number": 0, "feedback": []}) + "\n"
         + json.dumps({"task_index": 1, "turn_number": 0, "feedback": []}), "appears twice"),
    ],
)
def test_feedback_file_errors_name_the_entry(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "fb.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=problem):
        load_feedback_file(path)


def test_feedback_file_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be read"):
        FileFeedback(tmp_path / "absent.jsonl")


def test_replay_uses_recorded_turns_and_falls_back_with_a_note() -> None:
    generated = FeedbackReply([{**RECORD, "interface": "fresh"}], "llm")
    replay = ReplayFeedback({0: [RECORD], 1: []}, level=4, fallback=lambda req: generated)
    assert replay(request(turn=0)) == FeedbackReply([RECORD], "replay:L4")
    fallback = replay(request(turn=1))
    assert fallback.records == generated.records
    assert fallback.source == "llm (replay level 4 has no feedback at turn 1)"


def test_every_feedback_source_the_configuration_accepts_has_a_maker() -> None:
    from agent.feedback import SOURCES
    from agent.job.parts import MAKERS

    assert tuple(MAKERS) == SOURCES
