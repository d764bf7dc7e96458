"""Turn ResearchCodeBench papers into task plans: one in-memory plan per snippet, nothing written.

Everything that can fail on bad input (index, annotations, test file) fails
here, before the dataset folder is touched, so an import either writes all
of its tasks or none. Writing is :mod:`agent.rcb.writer`'s job.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent.rcb.annotations import (
    body_lines, count_code_lines, mask_snippet, masked_line, parse_annotations, strip_tag_lines, strip_tags,
)
from agent.rcb.pset import PaperSpec, PsetError
from agent.rcb.tasks import (
    DEFAULT_ENV_NAME, DEFAULT_TIMEOUT, adapt_test, collect_test_cases, enclosing_scope, reference_module_names,
    render_instruction, render_test_sh,
)


@dataclass(frozen=True)
class TaskPlan:
    """Everything one snippet task consists of; ``drop`` lists repository files the copy must leave out."""

    paper: str
    file: str
    snippet: str
    code_lines: int
    line: int
    init_content: str
    canonical: str
    test_py: str
    test_sh: str
    instruction: str
    latex: str
    test_cases: tuple[str, ...]
    context_files: tuple[str, ...]
    repo_source: Path
    drop: tuple[str, ...]
    reference_in_repo: bool


@dataclass(frozen=True)
class FilePlan:
    """How one annotated file's reference copy is handled, shared by all of its snippets."""

    test_py: str
    drop: tuple[str, ...]
    reference_in_repo: bool
    warning: str | None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PsetError(f"cannot read {path}: {exc}") from None


def _same_code(a: str, b: str) -> bool:
    """Equal up to trailing whitespace: the reference copy and the annotated file agree."""
    return [line.rstrip() for line in a.strip().splitlines()] == [line.rstrip() for line in b.strip().splitlines()]


def _mentions(root: Path, word: str, skip: set[Path]) -> list[str]:
    """Repository .py files (other than ``skip``) whose text names ``word``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                  if p.resolve() not in skip and word in p.read_text(encoding="utf-8", errors="replace"))


def plan_reference(paper: PaperSpec, file: str, canonical: str, test_source: str) -> FilePlan:
    """Serve ``<stem>_ref.py`` from canonical.py when that is provably equivalent; else keep it (and say so)."""
    path = PurePosixPath(file)
    ref_module = f"{path.stem}_ref"
    ref_rel = str(path.with_name(f"{ref_module}.py"))
    ref_path = paper.root / ref_rel
    if not ref_path.is_file():
        return FilePlan(test_source, (), False, None)
    names, unservable = reference_module_names(test_source, ref_module)
    others = _mentions(paper.root, ref_module, {ref_path.resolve(), paper.test_file.resolve()})
    reason = None
    if not _same_code(strip_tag_lines(_read(ref_path)), canonical):
        reason = f"{ref_rel} differs from {file} without tags"
    elif unservable:
        reason = f"{paper.test_file.name} names {ref_module} other than by import"
    elif others:
        reason = f"{', '.join(others)} import(s) {ref_module}"
    if reason is None:
        return FilePlan(adapt_test(test_source, names), (ref_rel,), False, None)
    warning = (f"paper '{paper.paper_id}': {reason}, so the reference copy {ref_rel} stays in the repository "
               "(tool-using agents can read it; snippet runs are unaffected)")
    return FilePlan(test_source, (), True, warning)


def plan_paper(paper: PaperSpec, env_name: str = DEFAULT_ENV_NAME,
               timeout: int = DEFAULT_TIMEOUT) -> tuple[list[TaskPlan], list[str]]:
    """Task plans for every snippet of every annotated file of ``paper``, plus warnings to show the user."""
    latex = _read(paper.paper_file)
    test_source = strip_tag_lines(_read(paper.test_file))
    try:
        test_cases = tuple(collect_test_cases(test_source))
    except SyntaxError as exc:
        raise PsetError(f"{paper.test_file}:{exc.lineno}: the test entry point does not parse ({exc.msg})") from None
    if not test_cases:
        raise PsetError(f"{paper.test_file}: no test methods found; the task could never be scored")
    test_sh = render_test_sh(paper.paper_id, env_name, timeout)
    plans: list[TaskPlan] = []
    warnings: list[str] = []
    for file in paper.annotated_files:
        text = _read(paper.root / file)
        snippets = parse_annotations(text, str(paper.root / file))
        if not snippets:
            warnings.append(f"paper '{paper.paper_id}': {file} has no paper2code snippets; nothing imported from it")
            continue
        canonical = strip_tags(text, snippets)
        ref = plan_reference(paper, file, canonical, test_source)
        warnings += [ref.warning] if ref.warning else []
        for snippet in snippets:
            code_lines = count_code_lines(body_lines(text, snippet, snippets))
            line = masked_line(snippet, snippets)
            instruction = render_instruction(
                paper_title=paper.title, repo_dir_name=paper.paper_id, file_path=file, block=snippet.name,
                line=line, code_lines=code_lines, scope=enclosing_scope(canonical, line),
                context_files=list(paper.context_files))
            plans.append(TaskPlan(
                paper=paper.paper_id, file=file, snippet=snippet.name, code_lines=code_lines, line=line,
                init_content=mask_snippet(text, snippet, snippets), canonical=canonical, test_py=ref.test_py,
                test_sh=test_sh, instruction=instruction, latex=latex, test_cases=test_cases,
                context_files=paper.context_files, repo_source=paper.root, drop=ref.drop,
                reference_in_repo=ref.reference_in_repo))
    return plans, warnings
