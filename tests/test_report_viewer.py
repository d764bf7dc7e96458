"""The trajectory page shows every call of every step, the feedback conversation and the test information,
from records with ``code_calls`` and from older ones (``code_interaction_history`` only, or the release's);
text repeated across calls is on the page once and nothing is lost."""
from __future__ import annotations

import html
import json
import random
import re
import sys
from pathlib import Path

import pytest

from tests.metrics_helpers import METRICS_DIR  # noqa: F401 - puts metrics/ on sys.path
from tests.report_helpers import HOSTILE, PageScan
from tests.synthetic_run import SYSTEM, paper, trajectory, write_run
from analysis import main_analysis
from report_calls import code_calls, feedback_calls
from report_list import data_block
from report_text import Ref, Registry, Shown, segments, split_lines
from report_trajectory import TaskView, trajectory_page

VIEW = TaskView(title="memory_agent · fixed · m · L2", folder="/tmp/x", task_id=3, n_cases=10, init_content="",
                state={"finished": True}, index_href="../index.html")


def rebuild(text_id: str, texts: dict[str, list[str | Ref]]) -> list[str]:
    """Every line of a registered text from its segments, references followed (what the page script does)."""
    lines: list[str] = []
    for part in texts[text_id]:
        lines += part.split("\n") if isinstance(part, str) else rebuild(part.source, texts)[part.first:part.end]
    return lines


def test_segments_lose_nothing_and_fold_repeats() -> None:
    """Successive prompts that repeat the paper and grow a history: each rebuilt exactly from its segments."""
    rng = random.Random(7)
    latex = paper(1, 20_000)
    registry, texts, previous = Registry(), {}, None
    history: list[str] = []
    literal_chars = 0
    for call in range(12):
        history.append(f"### Step {call}\n" + "\n".join(f"line {rng.random()}" for _ in range(rng.randint(1, 40))))
        numbered = "\n".join(f"{i:4d}: x = {rng.randint(0, 3) if i % 17 == call else 0}" for i in range(300))
        text = "\n\n".join([f"## Paper\n{latex}", numbered, "\n\n".join(history), f"## Step {call}"])
        shown = Shown(f"t{call}", f"call {call}", split_lines(text))
        parts = segments(shown.lines, registry, previous)
        texts[shown.id] = parts
        registry.add(shown)
        previous = shown
        assert "\n".join(rebuild(shown.id, texts)) == text
        literal_chars += sum(len(part) for part in parts if isinstance(part, str))
        if call:
            assert any(isinstance(part, Ref) and part.source == "t0" for part in parts)  # the paper, folded
    total = sum(len("\n".join(rebuild(f"t{call}", texts))) for call in range(12))
    assert literal_chars < total / 3    # the twelve prompts cost a fraction of their size


def page_of(turns: list[dict]) -> tuple[str, PageScan]:
    document = trajectory_page(VIEW, turns)
    return document, PageScan(document)


def test_page_from_code_calls_shows_every_call_message_answer_and_usage() -> None:
    turns = trajectory(3, 2, turns=3, latex=paper(3, 8_000))
    document, scan = page_of(turns)
    calls = [call for turn in turns for call in code_calls(turn)]
    assert len(calls) == 9 and all(call.messages[0]["content"] == SYSTEM for call in calls)
    for number in range(1, 10):
        assert f'id="call-{number}"' in document
    # the system prompt and the first prompt in full; later prompts fold the paper into a link
    assert SYSTEM in scan.text
    first_prompt = calls[0].messages[1]["content"]
    assert first_prompt in scan.text
    paragraph = next(p for p in paper(3, 8_000).split("\n\n")[1:] if len(p) > 300)
    assert scan.text.count(paragraph) == 1
    assert "as in call 1 message 2" in scan.text
    # answers whole, Python blocks marked for the highlighter; parameters, tokens, cost and latency per call
    assert calls[1].answer in scan.text and '<code class="py">```python' in document
    assert "Parameters: top_p=1" in scan.text
    usage = calls[0].usage
    assert f"Call 1 · step 1 · {usage['input_tokens']:,} in · {usage['output_tokens']:,} out · " \
           f"${usage['cost_usd']:.4f} · {usage['latency_sec']:.1f} s" in scan.text
    # actions point to where their results were shown; the digest as shown to the model
    assert 'href="#call-2"' in document and "prompt of call 2" in scan.text
    assert turns[0]["test_digest"] in scan.text


def test_feedback_conversation_with_a_retry_is_shown_call_by_call() -> None:
    turns = trajectory(5, 3, turns=2, latex=paper(5, 4_000))
    turn = turns[0]
    assert turn["feedback_conversation"], "the scenario needs a turn with feedback"
    bad = {"role": "assistant", "content": "not json <b>"}
    retry = {"role": "user", "content": "Your answer did not parse: answer with the schema."}
    conversation = turn["feedback_conversation"]
    turn["feedback_conversation"] = conversation[:2] + [bad, retry] + conversation[2:]
    turn["feedback_usage"] = [dict(turn["feedback_usage"][0], latency_sec=1.25), turn["feedback_usage"][0]]
    calls = feedback_calls(turn)
    assert [call.purpose for call in calls] == ["feedback", "retry"]
    assert [m["role"] for m in calls[1].messages] == ["system", "user", "assistant", "user"]
    document, scan = page_of(turns)
    assert "Feedback model conversation" in scan.text
    assert "You are the researcher." in scan.text and retry["content"] in scan.text
    assert "not json <b>" in scan.text and "not json <b>" not in document   # escaped
    assert "Call 4 · feedback" in scan.text and "1.2 s" in scan.text and "Call 5 · retry" in scan.text
    assert turn["feedback_text"].splitlines()[0] in scan.text


def test_older_records_fall_back_to_the_interaction_history() -> None:
    turns = trajectory(3, 2, turns=2, latex=paper(3, 4_000), with_calls=False)
    assert "code_calls" not in turns[0]
    calls = code_calls(turns[0])
    assert [(c.purpose, c.step) for c in calls] == [("step", 1), ("step", 2), ("step", 3)]
    assert calls[0].usage == turns[0]["code_usage"][0] and calls[0].messages[0]["role"] == "user"
    _, scan = page_of(turns)
    assert turns[0]["code_interaction_history"][0]["content"] in scan.text
    assert "no system prompt, no sampling parameters" in scan.text
    release = [{"turn_number": 0, "final_code": "x = 1\n", "code_input_tokens": [120, 80],
                "code_output_tokens": [7, 9], "execution_result": {"tests": 1, "failures": 1, "errors": 0,
                                                                   "skipped": 0},
                "code_interaction_history": [{"role": "user", "content": "the prompt " + HOSTILE},
                                             {"role": "assistant", "content": "action: SUBMIT"},
                                             {"role": "user", "content": "second prompt"},
                                             {"role": "assistant", "content": "action: SUBMIT"}],
                "feedback_interaction_history": [{"role": "user", "content": "feedback request"},
                                                 {"role": "assistant", "content": [{"category": "T1"}]}]}]
    document, scan = page_of(release)
    assert "Call 2 · step 2 · 80 in · 9 out" in scan.text
    assert "the prompt " + HOSTILE in scan.text and HOSTILE not in document
    assert "feedback request" in scan.text and "'category': 'T1'" in scan.text
    assert "the release's record of the feedback exchange" in scan.text


def test_report_of_a_run_with_calls_stays_bounded(tmp_path: Path) -> None:
    """Ten turns of three calls, each prompt holding the 30 KB paper: the page holds it once."""
    write_run(tmp_path / "res", tmp_path / "ds", tasks=2, levels=[2], turns=10, model="org/m", paper_chars=30_000)
    _, analysis = main_analysis("", ["--output-dir", str(tmp_path / "res"), "--dataset-dir", str(tmp_path / "ds"),
                                     "--skip", "codebert,codebleu", "--out", str(tmp_path / "out")])
    pages = sorted((analysis.out / "trajectories").glob("*.html"))
    assert len(pages) == 2
    for path in pages:
        task = int(re.search(r"task_(\d+)", path.name).group(1))
        turns = trajectory(task, 2, turns=10, latex=paper(task, 30_000))
        prompts = sum(len(m["content"]) for turn in turns for call in turn["code_calls"] for m in call["messages"])
        size = path.stat().st_size
        assert size < prompts / 2, (path.name, size, prompts)
        assert html.unescape(path.read_text()).count(paper(task, 30_000).split("\n\n")[3]) == 1


def test_list_data_block_cannot_close_its_element() -> None:
    block = data_block("trajectory-data", [{"repo": HOSTILE + "</script><!--"}])
    inner = block.split(">", 1)[1].rsplit("</script>", 1)[0]
    assert "<" not in inner and ">" not in inner and "&" not in inner
    assert json.loads(inner) == [{"repo": HOSTILE + "</script><!--"}]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
