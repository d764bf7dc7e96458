"""Prompt texts, and nothing else: those of our improved protocol, and our own wording of every slot of the
release protocol (``RELEASE_SLOTS``, used unless ``release-prompts`` names the authors' checkout).

Section headers ("## Researcher feedback", "## Result of your last action", ...)
are stable strings: scripted demo models and tests match on them, so change
them only together with ``config/scripted/*.yaml``. ``RELEASE_SLOTS`` has the
slots and fields of agent/protocols/release_texts.py, with words of our own.
"""

# ---------------------------------------------------------------- CodeAgent

AGENT_SYSTEM = """\
You are a research engineer re-implementing one file of a research code repository from the \
paper it comes from. The file was blanked; you write it again so that the repository works as \
the paper and the task description say. Hidden unit tests compare your file with the authors' \
version, and a researcher who knows that version may give you feedback after each submission.

Every answer you give has exactly this shape:
reflect: <what you know, what is still wrong, what you will do next>
action: <ONE action from the list below>

Actions:
{actions}

Example:
reflect: The file is empty; I will write the whole module.
action: REPLACE
```python
import numpy as np
...
```

You have {max_steps} actions per turn; when they are used up the target file is submitted as \
it is. Write complete code: no placeholders, no elided parts."""

BASELINE_SYSTEM = """\
You are a research engineer re-implementing one file of a research code repository from the \
paper it comes from. Hidden unit tests compare your file with the authors' version, and a \
researcher who knows that version may give you feedback after each attempt. Answer with the \
COMPLETE new content of the target file in a single fenced python block (```python ... ```); \
text outside the block is ignored."""

SECTION_PAPER = "## Paper (LaTeX excerpt)\n{latex}"
SECTION_TASK = "## Task\n{instruction}"
SECTION_FILE = "## Target file `{path}` ({count} lines)\n{numbered}"
SECTION_FILE_PLAIN = "## Target file `{path}` ({count} lines)\n```python\n{code}\n```"
SECTION_FILE_EMPTY = "## Target file `{path}` (empty)\nThe file is empty: you write all of it."
SECTION_DIGEST = "## Test results of your last submission\n{digest}"
SECTION_FEEDBACK = "## Researcher feedback on your last submission\n{feedback}"
SECTION_LAST_ACTION = "## Result of your last action ({action})\n{result}"
SECTION_STEP = (
    "## Turn {turn}, step {step} of {max_steps}\n"
    "Answer with `reflect:` then `action:` (one action)."
)
SECTION_SNIPPET_PREVIOUS = (
    "## Your previous attempt: `{path}` with your block inserted\n```python\n{code}\n```\n"
    "Answer again with the block's code only."
)
SECTION_BASELINE_ASK = (
    "## Turn {turn}\nWrite the complete new content of `{path}` in one ```python block."
)

# One line of the action list per action; the agent's prompt lists the actions it may use.
ACTION_HELP = {
    "READ": ("READ <path>", "show a file of the repository (path relative to the repository root)"),
    "BROWSE": ("BROWSE", "list the files of the repository"),
    "RETRIEVE": ("RETRIEVE <query>", "show the 5 repository functions that best match the query words"),
    "REPLACE": ("REPLACE", "rewrite the whole target file with the fenced python block that follows"),
    "EDIT": ("EDIT <N> <M>", "replace lines N..M of the target file with the fenced python block that\n"
                             "                     follows (line numbers as shown; M = N-1 inserts before line N)"),
    "SUBMIT": ("SUBMIT", "submit the target file for testing; this ends the turn"),
}

FORMAT_ERROR = """\
Your answer could not be used: {problem}
Answer in exactly this shape (one action per answer):
reflect: <your reasoning>
action: {usage}
{code_actions} must be followed by a fenced python block (```python ... ```) holding the new code."""

# ---------------------------------------------------------------- snippet setting (ResearchCodeBench)

SNIPPET_PROMPT = """\
You are given a research paper and part of the code repository that implements it. One block of code \
has been removed from a file of that repository; your job is to write it.

## Paper
{paper}
{context}
## File `{file_path}` with the missing block
```python
{masked_file}
```

## Task
Write the code of the block "{block}": the lines that replace the placeholder comment \
`{todo}` and the line after it. The rest of the file stays as it is. Answer with the block's code only, \
in a single ```python fenced code block, indented exactly as it must appear in the file."""

SNIPPET_CONTEXT_FILE = "### `{path}`\n```python\n{text}\n```\n"

# ---------------------------------------------------------------- memory notes and summaries

# Memory keeps past steps as notes (agent/protocols/notes.py); these label them.
MEMORY_STEP = "[Turn {turn}, step {step}]"
MEMORY_DIGEST = "Tests of the previous submission, in brief: {brief}"
MEMORY_FEEDBACK = "Researcher feedback on it, in brief: {brief}"
MEMORY_RESULT = "Result of {action}: {note}"

SUMMARY_SYSTEM = """\
You condense the working notes of a research engineer who is re-implementing a file over \
several turns of submissions, test results and researcher feedback. The summary replaces the \
older notes, so keep every fact the engineer still needs, and nothing else."""

SUMMARY_REQUEST = """\
Summarise the history below for the engineer in at most {max_words} words of plain text. Keep, \
in order of turns:
- each change made to the target file (which functions, in a few words) and why;
- after each submission, which tests passed and which failed, with the essential error;
- the researcher's feedback and whether it has been addressed yet;
- what the engineer learned from reading the repository (paths, helper names, signatures).
Fold an earlier summary into the new one. Drop what is superseded: the engineer always sees the \
current file, the latest test results and the latest feedback in full.

## History to summarise
{history}"""
SUMMARY_MEMORY = "Summary of the earlier turns (older history was condensed):\n{summary}"

# ---------------------------------------------------------------- HumanAgent

FEEDBACK_SYSTEM = """\
You are the researcher who wrote the reference implementation of a file in a research \
repository. An engineer is re-implementing that file. You compare the engineer's attempt with \
your reference and with the test results, and you report EVERY difference you find as one \
feedback record. Never paste the reference file as a whole.

Each record has these fields, all strings:
- interface: the function, class or method concerned (e.g. "Presto.fit" or "module imports")
- category: one of
    T0 code structure or planning (missing/extra functions, wrong decomposition)
    T1 code correctness (the code does not run: syntax, import, shape or type errors)
    T2 implementation alignment with the paper or the task description
    T3 missing knowledge or context (a convention, constant or detail not inferable)
    T4 repository integration (wrong use of the repository's own modules or APIs)
- description: what is wrong, as observed (one or two sentences)
- analysis: why it is wrong: what the paper, the task or the tests expect instead
- actionable_feedback: concrete steps that fix it, without code
- direct_code_feedback: the corrected code fragment for this issue only

Answer with a JSON object {"feedback": [records]} and nothing else. If the attempt has no \
remaining problem, answer {"feedback": []}."""

FEEDBACK_REQUEST = """\
## Paper (LaTeX excerpt)
{latex}

## Task given to the engineer
{instruction}

## Reference implementation (hidden from the engineer)
```python
{canonical}
```

## Engineer's attempt (turn {turn})
```python
{code}
```

## Test results of this attempt
{digest}

Report every difference between the attempt and the reference, not only the ones that cause errors \
or failing tests."""

FEEDBACK_RETRY = """\
Your answer could not be used: {problem}
Answer again with only a JSON object {{"feedback": [...]}} whose records each have the string \
fields interface, category (one of T0, T1, T2, T3, T4), description, analysis, \
actionable_feedback and direct_code_feedback."""


# ---------------------------------------------------------------- the release protocol's slots, our words

RELEASE_SLOTS = {
    "system": """\
You are a research engineer re-implementing one file of a research code repository from the paper \
it comes from and a task description. The file must fit the repository it belongs to.
Tools you can use, one per answer:
{tools}
Think before each tool use, then answer in exactly this form:
reflect: <what you know so far and what you will do next>
action:
<one tool command>
In your reflection, weigh the latest test results and error messages, how far the file follows the \
paper and the repository's interfaces, the researcher's feedback if any, what earlier attempts \
taught you, and which step matters most now.
""",
    "tool_READ": """\
## READ: show a repository file
READ <relative path>
Prints the whole file, so you can see how the repository's code looks and what the target file must \
fit.
""",
    "tool_RETRIEVE": """\
## RETRIEVE: find related functions
RETRIEVE
<what you are looking for, in plain words>
Prints the repository functions that match the request best, with their location.
""",
    "tool_REPLACE": """\
## REPLACE: write the whole target file
```REPLACE
<the complete new content of the target file>
```
The code you give replaces everything the file held.""",
    "tool_SUBMIT": """\
## SUBMIT: hand the target file in for testing
SUBMIT
The unit tests run on the file as it is; you get their results and error messages back.
""",
    "tool_BROWSE": """\
## BROWSE: list the repository
BROWSE
Prints the path of every file of the repository.
""",
    "user": """\
# Implementation request

## A. Paper excerpt (LaTeX)
{latex}

## B. Task
{instruction}

## C. Earlier steps
{history}

## D. Target file now
{code}

## E. Researcher feedback on the last submission
{feedback}

## F. Result of the last action
{result}
""",
    "history_empty": "(no earlier step)",
    "history_entry": "<{role}>\n{content}",
    "file_empty": "# (the target file is empty so far)",
    "feedback_none": "(no feedback so far)",
    "feedback_wrap": "\nResearcher's remarks:\n{feedback}",
    "result_none": "(no action has run yet)",
    "result_wrap": "Output of the action:\n{result}\n{guidance}",
    "guidance": """
Tests that passed tell you which interfaces are right already: change them only if you must.
Answer with one reflection and one tool command now:
""",
    "invalid": """\
The answer could not be understood as a tool command. Answer in this form:
```
reflect: <your reasoning>
action: <one tool command>
```""",
    "replace_done": "The target file now holds the new code.",
    "read_error": "cannot read this path: {path}",
    "retrieve_hit": "# In {path}\n{code}\n",
    "summary_system": "You condense an engineer's working history.",
    "summary_line": "[{role}] {content}",
    "summary_request": """
Condense the history below for the engineer who wrote it; it becomes their long-term memory. Keep:
- every change made to the code, and what it was for;
- the test results each change led to: which tests passed and which failed, and why;
- problems that came back, and fixes that worked.

History:
{conversation}
""",
    "summary_entry": "Condensed history of the earlier steps:\n{summary}",
    "test_info": "Tests: {status}\nMessages of failed tests: {messages}\nTest by test:\n{summary}",
    "test_line": "{path} -> {verdict}",
    "test_pass": "ok",
    "test_fail": "not ok",
    "count_total": "{n} test{s} in all",
    "count_passed": "{n} ok",
    "count_failed": "{n} not ok",
    "count_errors": "{n} error{s} that stopped the module",
    "count_skipped": "{n} left out",
    "count_last": " plus {last}",
    "count_none": "no test ran",
    "count_sep": "; ",
    "count_invalid": "the test result could not be read",
    "fb_head": "Remark {i} on `{interface}`\n",
    "fb_description": "What is wrong: {value}\n",
    "fb_analysis": "Why: {value}\n",
    "fb_actionable": "How to fix it: {value}\n",
    "fb_code": "Corrected code: {value}\n",
    "fb_none": "(nothing to report at this level)",
    "feedback_system": FEEDBACK_SYSTEM.replace('{"feedback": [records]}', '{"feedbacks": [records]}').replace(
        '{"feedback": []}', '{"feedbacks": []}'),
    "feedback_user": """
## Paper excerpt (LaTeX)
```latex
{latex}
```

## Task given to the engineer
```
{instruction}
```

## Reference implementation (hidden from the engineer)
```{lang}
{canonical}
```

## Engineer's attempt
```{lang_again}
{code}
```

## Test results of the attempt
```{test_info}
```

## Feedback categories
{categories}

Report every difference between the attempt and the reference, not only the ones that cause errors.
""",
    "feedback_categories": """\
T0 code structure or planning: missing or extra functions, another decomposition than the reference's.
T1 code correctness: the code does not run (syntax, import, shape or type errors).
T2 implementation alignment with the paper or the task description.
T3 missing knowledge or context: a convention, constant or detail the engineer could not infer.
T4 repository integration: wrong use of the repository's own modules or APIs.
""",
    "baseline_system": """\
You are a research engineer re-implementing one file of a research code repository from the paper it \
comes from and a task description.
""",
    "baseline_user": """\
# Implementation request

## A. Paper excerpt (LaTeX)
{latex}

## B. Task
{instruction}

## C. Target file `{path}` now
{code}

## D. Researcher feedback on it
{feedback}

## E. What to write
{guidance}
""",
    "baseline_guidance": "\nWrite the complete new file in one ```python block below:\n",
    "baseline_no_feedback": "(no feedback)",
}
