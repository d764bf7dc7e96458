"""Actions: parsing of model answers, execution on a workspace, and path confinement."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.task.action import ActionFormatError, execute, extract_code_block, numbered, parse_answer, python_blocks
from agent.task.workspace import RepoWorkspace, copy_repo
from agent.task.retrieval import FunctionIndex, collect_functions, tokenize


@pytest.fixture()
def ws(tmp_path: Path) -> RepoWorkspace:
    """A task folder like the dataset's: canonical.py beside the repo, the repo holding the target."""
    task = tmp_path / "annotation_1"
    repo = task / "repo"
    (repo / "pkg").mkdir(parents=True)
    (task / "canonical.py").write_text("SECRET = 'reference'\n")
    (repo / "pkg" / "model.py").write_text("a = 1\nb = 2\nc = 3\n")
    (repo / "pkg" / "helpers.py").write_text(
        "def softmax_cross_entropy(logits, labels):\n    '''Cross entropy of softmax logits.'''\n    return 0\n\n"
        "class Attention:\n    def forward(self, query_states):\n        return query_states\n")
    (repo / "README.md").write_text("docs\n")
    return RepoWorkspace(repo, "pkg/model.py")


def test_parse_read_with_reflection() -> None:
    action = parse_answer("reflect: I need the helpers.\naction: READ pkg/helpers.py\n")
    assert (action.name, action.argument, action.reflect) == ("READ", "pkg/helpers.py", "I need the helpers.")


def test_parse_tolerates_markdown_and_case() -> None:
    action = parse_answer("**Reflect:** look around\n**Action:** `browse`")
    assert action.name == "BROWSE"


def test_parse_replace_takes_the_block_after_the_action_line() -> None:
    answer = "reflect: plan\n```python\nold = 0\n```\naction: REPLACE\n```python\nnew = 1\n```\ntrailing words"
    assert parse_answer(answer).code == "new = 1\n"


def test_action_line_inside_code_is_ignored() -> None:
    answer = "reflect: x\n```python\naction: SUBMIT\n```\naction: READ a.py"
    assert parse_answer(answer).name == "READ"


@pytest.mark.parametrize(
    "answer, problem",
    [
        ("", "empty"),
        ("reflect: thinking only", "no `action:` line"),
        ("action: DANCE", "unknown action"),
        ("action: READ", "needs an argument"),
        ("action: RETRIEVE   ", "needs an argument"),
        ("action: EDIT 3\n```python\nx\n```", "two line numbers"),
        ("action: REPLACE\nno code here", "fenced python block"),
        ("action: REPLACE\n```python\nx = 1\n", "fenced python block"),  # cut-off answer
    ],
)
def test_malformed_answers_say_what_is_wrong(answer: str, problem: str) -> None:
    with pytest.raises(ActionFormatError, match=problem):
        parse_answer(answer)


def test_extract_code_block_prefers_python() -> None:
    assert extract_code_block("```text\nhello\n```\n```python\nx = 1\n```") == "x = 1\n"
    assert extract_code_block("no block") is None


def test_read_inside_repo_is_numbered(ws: RepoWorkspace) -> None:
    result = execute(parse_answer("action: READ pkg/model.py"), ws)
    assert result.ok and "2 | b = 2" in result.text


@pytest.mark.parametrize("path", ["../canonical.py", "pkg/../../canonical.py", "/etc/passwd"])
def test_read_refuses_paths_leaving_the_repo(ws: RepoWorkspace, path: str) -> None:
    result = execute(parse_answer(f"action: READ {path}"), ws)
    assert not result.ok and "Refused" in result.text and "reference" not in result.text


def test_read_absolute_path_of_a_repo_file_is_refused(ws: RepoWorkspace) -> None:
    result = execute(parse_answer(f"action: READ {ws.repo / 'pkg' / 'model.py'}"), ws)
    assert not result.ok and "absolute" in result.text


def test_symlink_escape_is_refused_and_hidden(ws: RepoWorkspace) -> None:
    os.symlink(ws.repo.parent / "canonical.py", ws.repo / "leak.py")
    os.symlink(ws.repo.parent, ws.repo / "up")
    for path in ("leak.py", "up/canonical.py"):
        result = execute(parse_answer(f"action: READ {path}"), ws)
        assert not result.ok and "reference" not in result.text
    assert "leak.py" not in execute(parse_answer("action: BROWSE"), ws).text


def test_copy_leaves_out_links_to_nothing_and_outside(tmp_path: Path) -> None:
    """A repository whose packaging left a link dangling (tenacity's README.rst points into docs it does not
    ship) copies without a traceback; a link inside the tree is materialised, one leaving it is not."""
    repo = tmp_path / "a repo" / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "model.py").write_text("a = 1\n")
    (tmp_path / "a repo" / "canonical.py").write_text("SECRET = 1\n")
    os.symlink(repo / "docs" / "index.rst", repo / "README.rst")
    os.symlink(repo / "pkg" / "model.py", repo / "alias.py")
    os.symlink(repo.parent / "canonical.py", repo / "leak.py")
    copy = copy_repo(repo, tmp_path / "copy")
    assert sorted(p.name for p in copy.iterdir()) == ["alias.py", "pkg"]
    assert not (copy / "alias.py").is_symlink() and (copy / "alias.py").read_text() == "a = 1\n"


def test_read_missing_file_and_directory(ws: RepoWorkspace) -> None:
    assert not execute(parse_answer("action: READ nope.py"), ws).ok
    listing = execute(parse_answer("action: READ pkg"), ws)
    assert listing.ok and "helpers.py" in listing.text


def test_browse_lists_repo_files_only(ws: RepoWorkspace) -> None:
    text = execute(parse_answer("action: BROWSE"), ws).text
    assert "pkg/helpers.py" in text and "README.md" in text and "canonical.py" not in text


def test_replace_rewrites_the_target(ws: RepoWorkspace) -> None:
    result = execute(parse_answer("action: REPLACE\n```python\nz = 9\n```"), ws)
    assert result.ok and ws.code == "z = 9\n"


@pytest.mark.parametrize(
    "start, end, expected",
    [
        (2, 2, "a = 1\nX\nc = 3\n"),          # one line
        (1, 3, "X\n"),                        # whole file
        (2, 1, "a = 1\nX\nb = 2\nc = 3\n"),   # M = N-1 inserts before N
        (4, 3, "a = 1\nb = 2\nc = 3\nX\n"),   # append after the last line
    ],
)
def test_edit_replaces_line_ranges(ws: RepoWorkspace, start: int, end: int, expected: str) -> None:
    result = execute(parse_answer(f"action: EDIT {start} {end}\n```python\nX\n```"), ws)
    assert result.ok, result.text
    assert ws.code == expected


@pytest.mark.parametrize("start, end", [(0, 1), (3, 1), (2, 4), (5, 5)])
def test_edit_refuses_ranges_outside_the_file(ws: RepoWorkspace, start: int, end: int) -> None:
    result = execute(parse_answer(f"action: EDIT {start} {end}\n```python\nX\n```"), ws)
    assert not result.ok and "not a valid range" in result.text
    assert ws.code == "a = 1\nb = 2\nc = 3\n"


def test_submit_marks_submission(ws: RepoWorkspace) -> None:
    assert execute(parse_answer("reflect: done\naction: SUBMIT"), ws).submitted


def test_retrieve_ranks_by_identifier_words(ws: RepoWorkspace) -> None:
    result = execute(parse_answer("action: RETRIEVE cross entropy of logits"), ws)
    assert result.ok and result.text.startswith("[1] pkg/helpers.py:1 softmax_cross_entropy")
    assert "Attention.forward" in execute(parse_answer("action: RETRIEVE queryStates forward"), ws).text


def test_retrieval_index_skips_the_target_and_unparseable_files(tmp_path: Path) -> None:
    (tmp_path / "target.py").write_text("def hidden_target():\n    pass\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "ok.py").write_text("def visible_helper():\n    pass\n")
    docs = collect_functions(tmp_path, exclude={"target.py"})
    assert [d.name for d in docs] == ["visible_helper"]
    assert FunctionIndex(docs).search("nothing matches") == []


def test_tokenize_splits_identifiers() -> None:
    assert tokenize("MultiHeadAttn")[:3] == ["multi", "head", "attn"]
    assert {"lambda", "init", "fn"} <= set(tokenize("lambda_init_fn"))


def test_numbered_shows_one_based_lines() -> None:
    assert numbered("x\ny\n").splitlines() == ["1 | x", "2 | y"]


def test_a_real_task_workspace_hides_the_reference_and_the_tests(tmp_path: Path) -> None:
    from agent.task.dataset import DatasetManager
    from agent.task.workspace import make_workspace

    dataset = DatasetManager(Path(__file__).resolve().parents[1] / "work_dir" / "dataset")
    repo = make_workspace(dataset, 1, tmp_path / "copy")
    ws = RepoWorkspace(repo, dataset.get(1).target_file_path)
    names = {Path(p).name for p in ws.files()}
    assert "canonical.py" not in names and "test.py" not in names and "losses.py" in names
    for path in ("../canonical.py", "../../canonical.py", "../test.py", str(dataset.task_dir(1) / "canonical.py")):
        assert not execute(parse_answer(f"action: READ {path}"), ws).ok


def test_replace_keeps_a_file_whose_docstring_shows_a_fenced_example():
    code = 'def f():\n    """Use it so:\n\n    ```python\n    f()\n    ```\n    """\n    return 1\n'
    action = parse_answer(f"reflect: whole file\naction: REPLACE\n```python\n{code}```")
    assert action.code == code
    assert python_blocks(f"```python\n{code}```\nand\n```python\nx = 2\n```") == code + "\nx = 2\n"


def test_an_answer_with_windows_line_endings_is_read_like_its_unix_twin() -> None:
    answer = "reflect: write it\r\naction: REPLACE\r\n```python\r\nx = 1\r\n```\r\n"
    action = parse_answer(answer)
    assert (action.name, action.code) == ("REPLACE", "x = 1\n")
