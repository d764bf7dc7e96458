"""Which environment each imported paper runs in, derived from the papers, and the files that describe them.

For every paper: derive its needs (:mod:`agent.rcb.requirements`), ask the
resolver which of them cannot be installed offline (those become stubs of
the imports they provide; the gold check then shows whether the tests use
them), then group papers that can share an environment without any of them
getting other versions than alone. The result is written as
``requirements/<env>.txt`` per group plus one constraints file, which the
environment cache builds like any other requirements group.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent.common.atomic_file import atomic_write_text
from agent.rcb.pset import PaperSpec
from agent.rcb.requirements import (
    CONSTRAINTS_FILE, EnvGroup, PaperNeeds, constraints_text, derive_needs, group_papers, requirements_text,
    stubs_for, without,
)
from agent.rcb.resolve import Resolver


@dataclass
class EnvPlan:
    """Environments of an import: groups, the shared constraints, per paper its env, stubs and notes."""

    groups: list[EnvGroup]
    constraints: dict[str, str]
    env_of: dict[str, str]
    needs: dict[str, PaperNeeds]
    notes: list[str] = field(default_factory=list)

    def stubs(self, paper: str) -> dict[str, str]:
        return stubs_for(self.needs[paper])


def start_files(paper: PaperSpec) -> list[str]:
    """Where the import scan starts: the test entry point and the annotated files."""
    return [paper.test_file.name, *paper.annotated_files]


def plan_environments(papers: list[PaperSpec], resolver: Resolver | None,
                      torch_pair: dict[str, str] | None = None) -> EnvPlan:
    """Derive, check and group; without a resolver nothing is checked and only static sharing applies."""
    pair = torch_pair or (resolver.torch_pair() if resolver else {})
    needs = []
    for paper in papers:
        item = derive_needs(paper.paper_id, paper.root, start_files(paper))
        if resolver is not None:
            item = without(item, resolver.unavailable(item.requirements, pair))
        needs.append(item)
    joinable = (lambda group, lines: resolver.shares_cleanly(group, lines, pair)) if resolver else None
    groups = group_papers(needs, joinable)
    env_of = {paper: group.name for group in groups for paper in group.papers}
    plan = EnvPlan(groups=groups, constraints=pair, env_of=env_of, needs={n.paper: n for n in needs})
    for item in needs:
        plan.notes += [f"paper '{item.paper}': {note}" for note in item.notes]
        for dist, reason in item.unavailable.items():
            modules = [m for m, d in item.modules.items() if d == dist]
            effect = f"stubbed import(s) {', '.join(modules)}" if modules else "left out (nothing imports it)"
            plan.notes.append(f"paper '{item.paper}': {dist} cannot be installed offline ({reason}); {effect}")
    return plan


def write_requirements(out: Path, plan: EnvPlan) -> list[Path]:
    """``requirements/<env>.txt`` of every group and the shared constraints file; returns the files written."""
    folder = out / "requirements"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    if plan.constraints:
        atomic_write_text(folder / CONSTRAINTS_FILE, constraints_text(plan.constraints))
        written.append(folder / CONSTRAINTS_FILE)
    for group in plan.groups:
        path = folder / f"{group.name}.txt"
        atomic_write_text(path, requirements_text(group, bool(plan.constraints)))
        written.append(path)
    return written
