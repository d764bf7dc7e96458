"""RETRIEVE: rank the repository's functions for a free-text query, lexically.

The release ranked functions with an embedding model; that needs a model
download, which many machines cannot do. BM25 over each function's name,
docstring and body, with identifiers split into their words
(``compute_presto_scores`` -> compute, presto, scores; ``MultiHeadAttn`` ->
multi, head, attn), finds the same kind of neighbours with no model at all.
"""
from __future__ import annotations

import ast
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

NAME_WEIGHT = 3  # a query word in the function's name counts like three in its body
MAX_SOURCE_LINES = 60
MAX_FILE_BYTES = 1_000_000
SKIPPED_DIRS = {"__pycache__", ".git", ".pytest_cache", "node_modules", ".venv", "venv"}

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tokenize(text: str) -> list[str]:
    """Lower-cased words of ``text`` with identifiers split on ``_`` and camelCase.

    The whole identifier is kept too, so an exact name in the query ranks first.
    """
    tokens: list[str] = []
    for ident in _IDENT.findall(text):
        parts = [p.lower() for chunk in ident.split("_") for p in _WORD.findall(chunk)]
        tokens.extend(parts)
        whole = ident.lower().strip("_")
        if len(parts) > 1 and whole:
            tokens.append(whole)
    return tokens


@dataclass(frozen=True)
class FunctionDoc:
    """One function or method of the repository, as RETRIEVE shows it."""

    path: str          # relative to the repository root
    name: str          # qualified: Class.method for methods
    lineno: int
    source: str


def _functions_of(tree: ast.AST, lines: list[str], path: str) -> list[FunctionDoc]:
    found: list[FunctionDoc] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                end = child.end_lineno or child.lineno
                found.append(FunctionDoc(path, prefix + child.name, child.lineno, "\n".join(lines[start - 1:end])))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def collect_functions(repo: Path, exclude: set[str] = frozenset()) -> list[FunctionDoc]:
    """Every function of every parseable .py file under ``repo`` (``exclude``: relative paths)."""
    repo = repo.resolve()
    docs: list[FunctionDoc] = []
    for file in sorted(repo.rglob("*.py")):
        rel = file.relative_to(repo)
        if SKIPPED_DIRS.intersection(rel.parts) or rel.as_posix() in exclude or file.is_symlink():
            continue
        if file.stat().st_size > MAX_FILE_BYTES:
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        docs.extend(_functions_of(tree, text.splitlines(), rel.as_posix()))
    return docs


class FunctionIndex:
    """Okapi BM25 (k1=1.5, b=0.75) over the functions of one repository."""

    def __init__(self, docs: list[FunctionDoc], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs = docs
        self.k1, self.b = k1, b
        self.terms = [self._terms(doc) for doc in docs]
        self.lengths = [sum(t.values()) for t in self.terms]
        self.avg_length = (sum(self.lengths) / len(self.lengths)) if docs else 0.0
        frequency: Counter[str] = Counter()
        for terms in self.terms:
            frequency.update(terms.keys())
        n = len(docs)
        self.idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    @staticmethod
    def _terms(doc: FunctionDoc) -> Counter[str]:
        counts = Counter(tokenize(doc.source))
        for token in tokenize(doc.name):
            counts[token] += NAME_WEIGHT
        return counts

    def search(self, query: str, k: int = 5) -> list[tuple[float, FunctionDoc]]:
        """The ``k`` best functions for ``query`` (score > 0), best first; ties keep file order."""
        words = set(tokenize(query))
        scored: list[tuple[float, int]] = []
        for i, terms in enumerate(self.terms):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / (self.avg_length or 1.0))
            score = sum(
                self.idf[w] * terms[w] * (self.k1 + 1) / (terms[w] + norm) for w in words if w in terms
            )
            if score > 0:
                scored.append((score, i))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [(score, self.docs[i]) for score, i in scored[:k]]


def render_hits(hits: list[tuple[float, FunctionDoc]]) -> str:
    """The text the agent sees for a RETRIEVE: location, name and (capped) source of each hit."""
    if not hits:
        return "No repository function matches that query; try other words or BROWSE."
    blocks = []
    for rank, (score, doc) in enumerate(hits, start=1):
        lines = doc.source.splitlines()
        body = "\n".join(lines[:MAX_SOURCE_LINES])
        if len(lines) > MAX_SOURCE_LINES:
            body += f"\n... ({len(lines) - MAX_SOURCE_LINES} more lines; READ {doc.path} for all)"
        blocks.append(f"[{rank}] {doc.path}:{doc.lineno} {doc.name} (score {score:.2f})\n```python\n{body}\n```")
    return "\n\n".join(blocks)
