"""Turn ResearchCodeBench papers into task plans: one in-memory plan per snippet, nothing written.

Everything that can fail on bad input (index, annotations, test file) fails
here, before the dataset folder is touched, so an import either writes all
of its tasks or none. Writing is :mod:`agent.rcb.writer`'s job. Reference
files never reach a repository, whatever their content: each task's test
gets them from the hidden side (see :mod:`agent.rcb.tasks`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent.rcb.annotations import (
    body_lines, count_code_lines, is_tag_like, mask_snippet, masked_line, parse_annotations, strip_tag_lines,
    strip_tags,
)
from agent.rcb.imports import local_imports
from agent.rcb.pset import PaperSpec, PsetError, is_reference
from agent.rcb.tasks import (
    DEFAULT_ENV_NAME, DEFAULT_TIMEOUT, adapt_test, collect_test_cases, enclosing_scope, reference_module_names,
    render_instruction, render_test_sh,
)

_REFERENCE_STEM = re.compile(r"(^|_)(ref|reference)($|_)", re.IGNORECASE)


@dataclass(frozen=True)
class TaskPlan:
    """Everything one snippet task consists of; ``drop`` lists repository files the copy must leave out
    (the paper's reference files), ``stubs`` the imports its test gets as stubs (module -> reason)."""

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
    env_name: str
    stubs: dict[str, str]


@dataclass(frozen=True)
class Reference:
    """A reference file of the paper: never copied into a repository, served to the tests from the hidden side."""

    path: str
    text: str
    modules: tuple[str, ...]
    same_as: str | None  # the annotated file it equals once tags are stripped (served from that task's canonical.py)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PsetError(f"cannot read {path}: {exc}") from None


def _same_code(a: str, b: str) -> bool:
    """Equal up to trailing whitespace: the reference copy and the annotated file agree."""
    return [line.rstrip() for line in a.strip().splitlines()] == [line.rstrip() for line in b.strip().splitlines()]


def _dotted(path: str) -> str:
    return PurePosixPath(path).with_suffix("").as_posix().replace("/", ".")


def find_references(paper: PaperSpec, test_source: str, canonicals: dict[str, str]) -> tuple[list[Reference], list[str]]:
    """Every reference file of ``paper`` and warnings: ``*_ref.py`` anywhere, and files the test imports that are
    named as references or carry paper2code tags without being annotated."""
    root = paper.root
    test_rel = paper.test_file.name
    imported = local_imports(root, test_rel)
    chosen = sorted({str(p.relative_to(root)) for p in root.rglob("*.py") if is_reference(p.name)}
                    | {rel for rel in imported if rel not in paper.annotated_files and rel != test_rel
                       and (_REFERENCE_STEM.search(PurePosixPath(rel).stem)
                            or any(is_tag_like(line) for line in _read(root / rel).splitlines()))})
    references, warnings = [], []
    for rel in chosen:
        stem = PurePosixPath(rel).stem
        names, unservable = reference_module_names(test_source, stem)
        if unservable:
            warnings.append(f"paper '{paper.paper_id}': {paper.test_file.name} names {stem} other than by import; "
                            f"{rel} is served only to imports, so that test may fail")
        text = _read(root / rel)
        twin = str(PurePosixPath(rel).with_name(stem[: -len("_ref")] + ".py")) if stem.endswith("_ref") else None
        same = twin if twin in canonicals and _same_code(strip_tag_lines(text), canonicals[twin]) else None
        references.append(Reference(rel, text, tuple(sorted(set(names) | {_dotted(rel)})), same))
    return references, warnings


def task_test(test_source: str, file: str, references: list[Reference], stubs: dict[str, str]) -> str:
    """The test of a task whose target is ``file``: its own reference from canonical.py, the others embedded."""
    from_canonical = [m for ref in references if ref.same_as == file for m in ref.modules]
    embedded = {m: (ref.path, ref.text) for ref in references if ref.same_as != file for m in ref.modules}
    return adapt_test(test_source, from_canonical, embedded, stubs)


def plan_paper(paper: PaperSpec, env_name: str = DEFAULT_ENV_NAME, timeout: int = DEFAULT_TIMEOUT,
               stubs: dict[str, str] | None = None) -> tuple[list[TaskPlan], list[str]]:
    """Task plans for every snippet of every annotated file of ``paper``, plus warnings to show the user.

    ``stubs`` (top-level module -> reason) are served to the tests in place of uninstallable imports.
    """
    stubs = dict(stubs or {})
    latex = _read(paper.paper_file)
    test_source = strip_tag_lines(_read(paper.test_file))
    try:
        test_cases = tuple(collect_test_cases(test_source))
    except SyntaxError as exc:
        raise PsetError(f"{paper.test_file}:{exc.lineno}: the test entry point does not parse ({exc.msg})") from None
    if not test_cases:
        raise PsetError(f"{paper.test_file}: no test methods found; the task could never be scored")
    test_sh = render_test_sh(paper.paper_id, env_name, timeout)
    parsed, warnings = {}, []
    for file in paper.annotated_files:
        text = _read(paper.root / file)
        snippets = parse_annotations(text, str(paper.root / file))
        if not snippets:
            warnings.append(f"paper '{paper.paper_id}': {file} has no paper2code snippets; nothing imported from it")
            continue
        parsed[file] = (text, snippets, strip_tags(text, snippets))
    references, ref_warnings = find_references(paper, test_source, {f: c for f, (_, _, c) in parsed.items()})
    warnings += ref_warnings
    drop = tuple(ref.path for ref in references)
    plans: list[TaskPlan] = []
    for file, (text, snippets, canonical) in parsed.items():
        test_py = task_test(test_source, file, references, stubs)
        for snippet in snippets:
            code_lines = count_code_lines(body_lines(text, snippet, snippets))
            line = masked_line(snippet, snippets)
            instruction = render_instruction(
                paper_title=paper.title, repo_dir_name=paper.paper_id, file_path=file, block=snippet.name,
                line=line, code_lines=code_lines, scope=enclosing_scope(canonical, line),
                context_files=list(paper.context_files))
            plans.append(TaskPlan(
                paper=paper.paper_id, file=file, snippet=snippet.name, code_lines=code_lines, line=line,
                init_content=mask_snippet(text, snippet, snippets), canonical=canonical, test_py=test_py,
                test_sh=test_sh, instruction=instruction, latex=latex, test_cases=test_cases,
                context_files=paper.context_files, repo_source=paper.root, drop=drop, env_name=env_name,
                stubs=stubs))
    return plans, warnings
