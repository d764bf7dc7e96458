"""Where the release's pytest says the test module is: the path text of its tracebacks (``../../test.py:131:``).

The release runs ``python -m pytest <test file>`` from the task's sub-folder (test.sh's ``cd``), on the
annotation's own ``test.py`` unless test.sh copies ``test.py`` in a shape its parser reads (then on a copy in
a temporary folder, an absolute path that differs on every run). pytest writes a traceback's path relative to
its working folder when that is shorter than the absolute one. Ours runs ``test.py`` copied into that
sub-folder, so its tracebacks say ``test.py:131:``; the release protocol rewrites them to the release's text
(SPEC 8.6: the model reads pytest's long tracebacks), so first requests are byte-identical. Facts from the
release's ``agent/clean_test_runner.py`` (parse_test_sh, run_annotation_tests), not its code.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

OURS = "test.py"  # how our runner's pytest names the test module (copied into its working folder)
# The two test.sh lines the release's parser reads for this (it skips every other shape).
_CD = re.compile(r'^cd\s+"\$\{TARGET_DIR\}/([^"]+)"\s*\|\|\s*exit$')
_COPY = re.compile(r'^cp\s+"\$\{SCRIPT_DIR\}/([^"]+)"\s+"\$\{TARGET_DIR\}/[^"]+"$')
# A traceback line locating code of our test module: "test.py:131: AssertionError", "test.py:1: in <module>".
TEST_LOCATION = re.compile(rf"^{re.escape(OURS)}:(?=\d+:)", re.MULTILINE)


def release_test_path(test_sh: str, task_dir: Path, repo_dir: str, workdir: str) -> str:
    """The release's name of the test module of the task in ``task_dir`` (its ``repo_dir`` run from
    ``workdir``, our reading of test.sh's ``cd``, where the release's parser finds none)."""
    lines = [line.strip() for line in test_sh.splitlines()]
    if any((copy := _COPY.match(line)) and Path(copy.group(1)).name == OURS for line in lines):
        return OURS  # a temporary copy: an absolute path of its own per run, the same as ours once masked
    cd = next((found.group(1) for line in lines if (found := _CD.match(line))), workdir)
    test = task_dir / OURS
    relative = os.path.relpath(test, task_dir / repo_dir / cd)
    return relative if len(relative) < len(str(test)) else str(test)


def as_release(message: str, test_path: str) -> str:
    """A failure message with our test module's traceback locations named as the release's are."""
    return message if test_path == OURS else TEST_LOCATION.sub(f"{test_path}:", message)
