"""HTML building blocks of the run report: escaping by construction, tables, diffs, embedded images.

Model output is hostile text, so markup is only ever produced by :func:`tag`:
every child that is not already :class:`Html` and every attribute value is
escaped. Pages also carry a Content-Security-Policy that forbids scripts, so a
mistake here still cannot run code: the policy lets run only the one script
the report ships (metrics/report_viewer.js), pinned by its SHA-256, so markup
that slipped through could not run a script of its own. Pages need nothing but
the files written beside them: CSS and the script are inline, images are data
URIs, links are relative; every page reads fully with the script off.
"""
from __future__ import annotations

import base64
import difflib
import hashlib
import html
import pprint
from collections.abc import Iterable
from pathlib import Path

from metric_tables import Table, format_cell

MAX_BLOCK_CHARS = 200_000  # longer text (a flood of output) is cut so a page stays loadable
MAX_DIFF_LINES = 20_000
SCRIPT = (Path(__file__).with_name("report_viewer.js")).read_text(encoding="utf-8")
SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{SCRIPT_HASH}'"
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;
color:#1d2330;line-height:1.4}
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccd;padding-bottom:.2em;margin-top:1.8em}
h3{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.4em 0 .8em;font-size:.9em}
th,td{border:1px solid #ccd;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#eef0f5}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
pre{background:#f6f7f9;border:1px solid #dde;padding:.5em;overflow-x:auto;font-size:.82em;white-space:pre-wrap;
word-break:break-word;max-height:40em;overflow-y:auto}
pre.diff>span{display:block}pre.diff .add{background:#e3f7e3;color:#14541a}
pre.diff .del{background:#fbe5e5;color:#7a1414}pre.diff .hunk{color:#5a4fcf}pre.diff .head{color:#777}
details{margin:.3em 0}details>summary{cursor:pointer}
details.turn{border:1px solid #ccd;border-radius:4px;padding:.3em .7em;margin:.6em 0}
details.turn>summary{font-weight:600}
.ok{color:#14541a}.bad{color:#9b1c1c}.warn{color:#8a5a00}.muted{color:#667}
td.ok{background:#e3f7e3}td.bad{background:#fbe5e5}td.warn{background:#fff4d6}td.none{background:#f0f0f0}
ul.notes{font-size:.88em;color:#445}figure{margin:0}figure img{width:100%;border:1px solid #dde}
.figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:1em}
figcaption{font-size:.85em;color:#445}nav ul{columns:2;font-size:.9em}
a{color:#2150b0}
nav.pager{display:flex;gap:1em;align-items:baseline;flex-wrap:wrap;font-size:.92em;position:sticky;top:0;
background:#fff;padding:.3em 0;border-bottom:1px solid #dde;z-index:2}nav.pager a[aria-disabled]{color:#99a}
nav.pager .position{color:#667}
.text pre.lit{margin:0;border-radius:0;border-bottom:none}.text pre.lit+pre.lit{border-top:none}
.text{border-bottom:1px solid #dde;margin:.2em 0 .6em}.text>*:last-child{border-bottom:1px solid #dde}
a.same{display:block;background:#eef0f8;border:1px dashed #aab;padding:.15em .5em;font-size:.8em;color:#334;
text-decoration:none;cursor:pointer}a.same:hover{background:#e0e4f5}pre.exp{background:#f3f3fb}
details.call{border-left:3px solid #c9cfe6;padding-left:.6em;margin:.4em 0}
details.call.feedback{border-left-color:#e3c98f}details.msg>summary{font-size:.88em;color:#334}
.role{font-weight:600;text-transform:uppercase;font-size:.8em;letter-spacing:.04em}
button.expand-all{font-size:.75em;margin-left:.6em}
.hl .k{color:#8e24aa;font-weight:600}.hl .s,pre .hl .s{color:#1b7f3b}.hl .c{color:#7a7f8a;font-style:italic}
.hl .n{color:#b35c00}.hl .f{color:#1f55c7;font-weight:600}.hl .b{color:#0b7f8a}.hl .d{color:#a0522d}
.controls{display:flex;gap:.6em;flex-wrap:wrap;align-items:center;margin:.5em 0}
.controls input{min-width:18em;padding:.2em .4em}#trajectories th{cursor:pointer;user-select:none}
#trajectories{table-layout:fixed;width:100%}#trajectories td{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
#trajectories th:nth-child(1){width:5em}#trajectories th:nth-child(3){width:8em}#trajectories th:nth-child(4){width:10em}
#trajectories th:nth-child(5){width:3.4em}#trajectories th:nth-child(6){width:7.5em}#trajectories th:nth-child(7){width:3.6em}
#trajectories th:nth-child(8){width:5em}#trajectories th:nth-child(9){width:6em}#trajectories th:nth-child(10){width:5.6em}
#trajectories th:nth-child(11){width:5.4em}#trajectories th:nth-child(12){width:4.2em}
#trajectories th[aria-sort=ascending]::after{content:" ▲"}#trajectories th[aria-sort=descending]::after{content:" ▼"}
.scroll{max-height:70vh;overflow:auto;border:1px solid #dde}
.scroll table{margin:0}.scroll thead th{position:sticky;top:0}
"""


VOID_ELEMENTS = {"meta", "img", "br"}


class Html(str):
    """Text that is already safe markup; everything else is escaped when it meets markup."""


class Cell(Html):
    """A ready ``<td>`` (with a class or tooltip); other table items get a plain one."""


def text_of(value: object) -> str:
    """Any recorded value as display text: strings as they are, other values pretty-printed."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return pprint.pformat(value, width=110)


def esc(value: object) -> Html:
    return value if isinstance(value, Html) else Html(html.escape(text_of(value), quote=True))


def join(parts: Iterable[object]) -> Html:
    return Html("".join(esc(part) for part in parts))


def tag(name: str, /, *children: object, **attrs: object) -> Html:
    """``<name attrs>children</name>``; ``class_`` sets class, None drops an attribute, True writes it bare."""
    rendered = []
    for key, value in attrs.items():
        key = key.rstrip("_").replace("_", "-")
        if value is True:
            rendered.append(f" {key}")
        elif value is not None and value is not False:
            rendered.append(f' {key}="{esc(value)}"')
    if name in VOID_ELEMENTS:
        return Html(f"<{name}{''.join(rendered)}>")
    return Html(f"<{name}{''.join(rendered)}>{join(children)}</{name}>")


def capped(text: str, limit: int = MAX_BLOCK_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{len(text) - limit} more characters not shown; the result pickle has them all]"


def pre(value: object, class_: str | None = None) -> Html:
    return tag("pre", capped(text_of(value)), class_=class_)


def details(summary: object, *body: object, class_: str | None = None, open_: bool = False) -> Html:
    return tag("details", tag("summary", summary), *body, class_=class_, open=open_)


def bullet_list(items: Iterable[object], class_: str = "notes") -> Html:
    items = list(items)
    return tag("ul", *(tag("li", item) for item in items), class_=class_) if items else Html("")


def table(columns: Iterable[object], rows: Iterable[Iterable[object]]) -> Html:
    """A plain table; cells may be Html (links, coloured cells made with :func:`cell`)."""
    head = tag("tr", *(tag("th", column) for column in columns))
    body = [tag("tr", *(item if isinstance(item, Cell) else cell(item) for item in row)) for row in rows]
    return tag("table", head, *body)


def cell(content: object, class_: str | None = None, title: str | None = None) -> Cell:
    """A table cell; numbers are right-aligned unless a class is given."""
    if class_ is None and isinstance(content, (int, float)) and not isinstance(content, bool):
        class_ = "num"
    return Cell(tag("td", content, class_=class_, title=title))


def metric_table(metric: Table) -> Html:
    """A metric Table with its title and the skip accounting underneath, formatted like the text output."""
    rows = [[cell(format_cell(value, metric), "num" if isinstance(value, (int, float)) or hasattr(value, "formatted")
                  else None) for value in row]
            for row in metric.rows]
    return join([tag("h3", metric.title), table(metric.columns, rows), bullet_list(metric.notes)])


def diff_html(before: str, after: str, before_label: str, after_label: str) -> Html:
    """Unified diff of two files, one coloured line per span; 'no change' when identical."""
    old, new = before.splitlines(), after.splitlines()
    if old == new:
        return tag("p", "No change in the file.", class_="muted")
    if max(len(old), len(new)) > MAX_DIFF_LINES:
        return tag("p", f"File too long to diff ({len(old)} -> {len(new)} lines).", class_="warn")
    lines = difflib.unified_diff(old, new, before_label, after_label, lineterm="")
    kinds = {"+++": "head", "---": "head", "@@": "hunk", "+": "add", "-": "del"}
    spans = []
    for line in lines:
        kind = next((name for prefix, name in kinds.items() if line.startswith(prefix)), None)
        spans.append(tag("span", capped(line, 2_000) or " ", class_=kind))
    return tag("pre", *spans, class_="diff")


def image_data_uri(path: Path) -> str:
    """A file as a data URI (SVG in an ``<img>`` cannot run scripts, unlike inline SVG)."""
    mime = {"svg": "image/svg+xml", "png": "image/png"}[path.suffix.lstrip(".").lower()]
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def page(title: str, *body: object) -> str:
    """A complete standalone document (inline CSS and the report's script, no network)."""
    head = join([
        tag("meta", charset="utf-8"),
        tag("meta", http_equiv="Content-Security-Policy", content=CSP),
        tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
        tag("title", title),
        tag("style", Html(CSS)),
    ])
    script = Html(f"<script>{SCRIPT}</script>")
    return "<!DOCTYPE html>\n" + tag("html", tag("head", head), tag("body", *body, script), lang="en") + "\n"


def write_page(path: Path, document: str) -> None:
    """UTF-8; text that cannot be encoded (lone surrogates from a pickle) is replaced, not fatal."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document, encoding="utf-8", errors="replace")
