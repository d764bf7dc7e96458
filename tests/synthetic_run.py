"""A synthetic results folder shaped like a real run, for the viewer tests and scripts/bench_report.py.

Records follow the protocol of SPEC 8.6: each code call is ``[system, user]`` whose user message holds the
whole paper, the task, the numbered file, the history of the turn's steps, the feedback and the last
action's result; three calls per turn (READ, REPLACE, SUBMIT); the feedback model sees the paper, the
reference, the attempt and the test information. ``with_calls`` writes ``code_calls`` (the lead's record
key) whose strings are the very objects of ``code_interaction_history``; without it the records have only
what older records and the release keep (each call's prompt and answer). Text is pseudo-random but
deterministic, so sizes and timings repeat.
"""
from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

WORDS = ("model attention gradient loss layer token sequence optimizer batch update weight bias policy reward "
         "sample distribution entropy kernel matrix vector norm residual embedding projection scale theorem "
         "lemma proof bound estimate variance expectation objective constraint regularization convergence").split()
SYSTEM = ("You are implementing one file of a research repository from its paper.\nActions:\n"
          "  READ <path>         show a file of the repository\n  REPLACE            replace the target file "
          "with the python block of your answer\n  SUBMIT             run the tests on the file")
FIELDS = ("category", "interface", "description", "analysis", "actionable_feedback", "direct_code_feedback")


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + "."


def paper(task: int, chars: int) -> str:
    """Pseudo-LaTeX of about ``chars`` characters: sections, equations and paragraphs (blank-line separated)."""
    rng = random.Random(task)
    parts, size, section = [], 0, 0
    while size < chars:
        if rng.random() < 0.1:
            section += 1
            part = f"\\section{{{rng.choice(WORDS).capitalize()} {section}}}"
        elif rng.random() < 0.2:
            part = f"\\begin{{equation}}\n  \\mathcal{{L}}_{section} = \\sum_i {rng.choice(WORDS)}_i^2\n\\end{{equation}}"
        else:
            part = " ".join(_sentence(rng) for _ in range(rng.randint(3, 7)))
        parts.append(part)
        size += len(part) + 2
    return "\n\n".join(parts)


def code_file(task: int, version: int, functions: int = 14) -> str:
    """A Python module; ``version`` rewrites one function per step, so successive files differ a little."""
    rng = random.Random(task * 1000)
    lines = ['"""Module of task %d."""' % task, "from __future__ import annotations", "", "import numpy as np", ""]
    for number in range(functions):
        body_seed = version if number == version % functions else 0
        local = random.Random(task * 100 + number * 7 + body_seed)
        name = f"{rng.choice(WORDS)}_{number}"
        lines += ["", f"def {name}(x: np.ndarray, scale: float = {local.randint(1, 9)}.0) -> np.ndarray:",
                  f'    """{_sentence(local)}"""']
        for k in range(local.randint(5, 12)):
            lines.append(f"    x = x * scale + {local.randint(0, 99)}  # {local.choice(WORDS)} {k}")
        lines.append("    return x")
    return "\n".join(lines) + "\n"


def numbered(code: str) -> str:
    return "\n".join(f"{i:4d}: {line}" for i, line in enumerate(code.splitlines(), start=1))


def usage(rng: random.Random, prompt: str, answer: str, purpose: str) -> dict:
    return {"provider": "openai", "model": "gpt-x", "input_tokens": len(prompt) // 4,
            "output_tokens": len(answer) // 4, "cached_tokens": 0, "reasoning_tokens": 0,
            "latency_sec": round(rng.uniform(2, 30), 2), "cost_usd": round(len(prompt) / 4e6 * 1.25, 6),
            "from_cache": False, "purpose": purpose}


def digest(solved: bool, tests: int, failed: int) -> str:
    lines = [f"Status: {'passed' if solved else 'failed'}. Tests run: {tests}"]
    lines += [f"{'FAILED' if k < failed else 'PASS'} test_case_{k}" for k in range(tests)]
    if failed:
        lines.append("Traceback (most recent call last):\n  File \"test.py\", line 12, in test_case_0\n"
                     "    assert np.allclose(out, expected)\nAssertionError: arrays differ")
    return "\n".join(lines)


def feedback_records(rng: random.Random, count: int) -> list[dict]:
    return [{"category": f"T{rng.randint(1, 5)}", "interface": f"{rng.choice(WORDS)}_{k}()",
             "description": _sentence(rng), "analysis": _sentence(rng), "actionable_feedback": _sentence(rng),
             "direct_code_feedback": f"x = x * {rng.randint(1, 9)}"} for k in range(count)]


def turn_record(task: int, level: int, turn: int, *, latex: str, solved: bool, previous_digest: str,
                previous_feedback: str, with_calls: bool, last_turn: bool, tests: int = 10) -> dict:
    """One turn of three calls: READ a file, REPLACE the target, SUBMIT."""
    rng = random.Random(f"{task}-{level}-{turn}")
    code = code_file(task, turn * 3)
    history: list[str] = []
    calls, interaction, code_usage = [], [], []
    steps = [("READ", f"action: READ utils/{rng.choice(WORDS)}.py"),
             ("REPLACE", "reflect: rewrite the update.\naction: REPLACE\n```python\n" + code_file(task, turn * 3 + 1)
              + "```"),
             ("SUBMIT", "reflect: the tests should pass now.\naction: SUBMIT")]
    last_result = "No action yet in this turn."
    for step, (action, answer) in enumerate(steps, start=1):
        shown_file = code if step < 3 else code_file(task, turn * 3 + 1)
        user = "\n\n".join([
            f"## Paper (LaTeX excerpt)\n{latex}", f"## Task\nImplement the module of task {task}.",
            f"## Target file `module.py` ({len(shown_file.splitlines())} lines)\n{numbered(shown_file)}",
            f"## History of this turn\n" + ("\n\n".join(history) or "No history yet."),
            f"## Researcher feedback\n{previous_feedback or 'No feedback.'}",
            f"## Test results of your last submission\n{previous_digest or 'Not submitted yet.'}",
            f"## Result of your last action\n{last_result}",
        ])
        call_usage = usage(rng, SYSTEM + user, answer, "step")
        code_usage.append(call_usage)
        interaction += [{"role": "user", "content": user, "kind": "step"},
                        {"role": "assistant", "content": answer, "kind": "step"}]
        calls.append({"purpose": "step", "step": step,
                      "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                      "answer": answer, "usage": call_usage, "params": {"top_p": 1}})
        last_result = code_file(task, 999)[:3000] if action == "READ" else f"{action} done."
        history += [f"### User\n{last_result}", f"### Assistant\n{answer}"]
    failed = 0 if solved else rng.randint(1, tests)
    shown_digest = digest(solved, tests, failed)
    record = {
        "task_index": task, "turn_number": turn, "final_code": code_file(task, turn * 3 + 1),
        "code_input_tokens": [u["input_tokens"] for u in code_usage],
        "code_output_tokens": [u["output_tokens"] for u in code_usage],
        "agent_memory": [{"role": "user", "content": h} for h in history[-4:]],
        "code_interaction_history": interaction,
        "execution_result": {"tests": tests, "errors": 0, "failures": failed, "skipped": 0, "status":
                             "passed" if solved else "failed", "failure_messages": [], "test_summary": {}},
        "status": "passed" if solved else "failed", "guidance_level": level, "test_digest": shown_digest,
        "wall_time_sec": round(sum(u["latency_sec"] for u in code_usage) + 20, 1), "code_usage": code_usage,
        "actions": [{"step": s, "action": a, "argument": "", "ok": True} for s, (a, _) in enumerate(steps, 1)],
        "code_cost_usd": sum(u["cost_usd"] for u in code_usage),
    }
    if with_calls:
        record["code_calls"] = calls
    feedback_needed = level > 0 and not solved and not last_turn
    items = feedback_records(rng, rng.randint(1, 3)) if feedback_needed else []
    if feedback_needed:
        request = "\n\n".join([f"## Paper\n{latex}", f"## Reference\n{code_file(task, 10_000)}",
                               f"## Attempt\n{record['final_code']}", f"## Tests\n{shown_digest}"])
        answer = json.dumps({"feedbacks": items})
        fb_usage = usage(rng, request, answer, "feedback")
        record.update(feedback_conversation=[{"role": "system", "content": "You are the researcher."},
                                             {"role": "user", "content": request},
                                             {"role": "assistant", "content": answer}],
                      feedback_usage=[fb_usage], feedback_cost_usd=fb_usage["cost_usd"],
                      feedback_input_token=[fb_usage["input_tokens"]],
                      feedback_output_token=[fb_usage["output_tokens"]])
    else:
        record.update(feedback_conversation=[], feedback_usage=[], feedback_cost_usd=0.0, feedback_input_token=[],
                      feedback_output_token=[])
    record.update(feedback_items=items, feedback_source="llm" if items else "none", feedback_error=None,
                  feedback_text="\n".join(f"{r['category']}: {r['description']} {r['actionable_feedback']}"
                                          for r in items),
                  feedback_interaction_history=[])
    return record


def trajectory(task: int, level: int, *, turns: int, latex: str, with_calls: bool = True) -> list[dict]:
    """Up to ``turns`` turns; some tasks are solved early (the run then stops), as in a real sweep."""
    solve_at = (task * 7 + level * 3) % (turns + 4)
    records, digest_text, feedback = [], "", ""
    for number in range(turns):
        solved = number == solve_at
        record = turn_record(task, level, number, latex=latex, solved=solved, previous_digest=digest_text,
                             previous_feedback=feedback, with_calls=with_calls, last_turn=number == turns - 1)
        records.append(record)
        if solved:
            break
        digest_text, feedback = record["test_digest"], record["feedback_text"]
    return records


def write_run(result_dir: Path, dataset_dir: Path, *, tasks: int, levels: list[int], turns: int, model: str,
              paper_chars: int, with_calls: bool = True, setting: str = "memory_agent") -> None:
    """The dataset's meta file, the run folders with one pickle per (level, task), and a run record."""
    dataset_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"index": t, "repo_dir_name": f"repo-{t}", "target_file_path": f"pkg/module_{t}.py", "if_test": True,
             "init_content": code_file(t, 0), "test_cases": [f"test_case_{k}" for k in range(10)]}
            for t in range(1, tasks + 1)]
    (dataset_dir / "annotation_meta.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for level in levels:
        folder = result_dir / f"{setting}_{model.replace('/', '_')}_feedback_fixed_guidance_{level}"
        folder.mkdir(parents=True, exist_ok=True)
        for task in range(1, tasks + 1):
            records = trajectory(task, level, turns=turns, latex=paper(task, paper_chars), with_calls=with_calls)
            (folder / f"task_{task}_result.pkl").write_bytes(pickle.dumps(records, protocol=4))
            (folder / f"task_{task}_state.json").write_text(json.dumps({"finished": True, "error": None}))
    record = {"status": "finished", "config": {
        "max_turn": turns, "task_ids": list(range(1, tasks + 1)), "guidance_levels": levels,
        "evaluation_setting": setting, "guidance_type": "fixed", "models": [{"provider": "openai", "model": model}]}}
    (result_dir / "run_metadata").mkdir(parents=True, exist_ok=True)
    (result_dir / "run_metadata" / "20260101-000000_1.json").write_text(json.dumps(record))
