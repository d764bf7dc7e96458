"""Fixed-width text tables for the terminal (end-of-run summary, ablation reports)."""
from __future__ import annotations

from collections.abc import Sequence


def fixed_width(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """Header, rule and rows of already formatted cells; the first column left-aligned, the rest right."""
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]

    def render(line: Sequence[str]) -> str:
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))

    return [render(header), "  ".join("-" * w for w in widths), *map(render, body)]
