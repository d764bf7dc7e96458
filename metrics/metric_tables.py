"""Plain tables of metric values and their rendering as markdown, CSV or JSON.

Cells hold raw values (fractions, counts, or dataclasses such as an interval); ``scale`` and ``digits`` only
affect the text formats, so JSON keeps full precision (a dataclass cell becomes an object) for plots and reports.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import asdict, dataclass, field

FORMATS = ("markdown", "csv", "json")


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scale: float = 1.0
    digits: int = 3


def format_cell(value: object, table: Table) -> str:
    """Text of one cell; a value with a ``formatted(scale, digits)`` method (an interval, a test) renders itself."""
    if value is None:
        return "-"
    if hasattr(value, "formatted"):
        return value.formatted(table.scale, table.digits)
    if isinstance(value, float):
        return f"{value * table.scale:.{table.digits}f}"
    return str(value)


def format_passrates(values: list[float | None], digits: int = 1) -> str:
    """One value per guidance level as percentages joined by " & " (a LaTeX table row); "-" where no task."""
    return " & ".join("-" if value is None else f"{100 * value:.{digits}f}" for value in values)


def _text_rows(table: Table) -> list[list[str]]:
    return [[format_cell(value, table) for value in row] for row in table.rows]


def to_markdown(table: Table) -> str:
    lines = [f"## {table.title}", "", "| " + " | ".join(table.columns) + " |",
             "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(row) + " |" for row in _text_rows(table)]
    if table.notes:
        lines += [""] + [f"- {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """A titled CSV block (``# title`` line first: pandas reads it with ``comment='#'``)."""
    out = io.StringIO()
    out.write(f"# {table.title}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(_text_rows(table))
    return out.getvalue()


def render(tables: list[Table], fmt: str) -> str:
    """All tables in one format. CSV leaves notes out of stdout (see :func:`emit`)."""
    if fmt == "json":
        return json.dumps([asdict(table) for table in tables], indent=2) + "\n"
    if fmt == "csv":
        return "\n".join(to_csv(table) for table in tables)
    return "\n".join(to_markdown(table) for table in tables)


def emit(tables: list[Table], fmt: str) -> None:
    """Print tables; for CSV the notes go to stderr so stdout stays machine-readable."""
    sys.stdout.write(render(tables, fmt))
    if fmt == "csv":
        for table in tables:
            for note in table.notes:
                print(f"{table.title}: {note}", file=sys.stderr)
