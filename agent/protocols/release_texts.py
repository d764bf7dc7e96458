"""The release's prompt texts, read at run time from a checkout the user names (``release-prompts``).

The project contains none of the release's sentences: with ``release-prompts:
PATH`` (or ``RECODE_RELEASE_PROMPTS``) each slot of the release protocol takes
its text from that checkout, found by PARSING its Python files with :mod:`ast`
(never importing or executing them); without it our own texts fill the same
slots (agent/protocols/prompts.py, ``RELEASE_SLOTS``). Every text a slot needs must be
found, else one line names the missing one. The checkout's file hashes go into
the run metadata, so a result says which texts it was produced with.

A slot is a template with named fields. A locator says where its text is:
a module-level string (``assign``), the string a function returns
(``return``), the n-th f-string or string constant of a function (``fstring``,
``const``), or a ``+`` chain of strings (``concat``). The release's positional
``{}`` templates and the fields of its f-strings become the slot's named
fields, in order.
"""
from __future__ import annotations

import ast
import hashlib
import os
import string
import warnings
from dataclasses import dataclass
from pathlib import Path

from agent.protocols.prompts import RELEASE_SLOTS

ENV_VAR = "RECODE_RELEASE_PROMPTS"
FILES = ("agent/constants.py", "agent/agents.py", "agent/action.py", "agent/utils.py")


class ReleaseTextsError(Exception):
    """A release checkout that does not hold a text the protocol needs; the message is one line."""


@dataclass(frozen=True)
class Locator:
    """Where a slot's text is: ``kind`` in assign/return/const/fstring/concat, in ``file`` at ``where``
    (a module-level name or a ``Class.method`` / function qualname); ``index`` picks among several."""

    file: str
    kind: str
    where: str
    index: int = 0


@dataclass(frozen=True)
class Slot:
    """A named text of the release protocol: its fields (in the release's positional order) and its place."""

    fields: tuple[str, ...]
    locator: Locator


def _slot(fields: str, file: str, kind: str, where: str, index: int = 0) -> Slot:
    return Slot(tuple(fields.split()), Locator(f"agent/{file}", kind, where, index))


# Every slot of the release protocol (the texts of agent/protocols/release.py), and where the release has it.
SLOTS: dict[str, Slot] = {
    "system": _slot("tools", "constants.py", "assign", "CODE_AGENT_SYS_PROMPT"),
    "tool_READ": _slot("", "action.py", "return", "Read.docstring"),
    "tool_RETRIEVE": _slot("", "action.py", "return", "Retrieve.docstring"),
    "tool_REPLACE": _slot("", "action.py", "return", "Replace.docstring"),
    "tool_SUBMIT": _slot("", "action.py", "return", "Submit.docstring"),
    "tool_BROWSE": _slot("", "action.py", "return", "RepoBrose.docstring"),
    "user": _slot("latex instruction history code feedback result", "constants.py", "assign",
                  "CODE_AGENT_USER_PROMPT"),
    "history_empty": _slot("", "agents.py", "const", "CodeAgent.build_history"),
    "history_entry": _slot("role content", "agents.py", "fstring", "CodeAgent.build_history"),
    "file_empty": _slot("", "agents.py", "const", "CodeAgent.build_current_code", 1),
    "feedback_none": _slot("", "agents.py", "const", "CodeAgent.generate_agent_history", 0),
    "feedback_wrap": _slot("feedback", "agents.py", "concat", "CodeAgent.process_feedback"),
    "result_none": _slot("", "agents.py", "const", "CodeAgent.generate_agent_history", 1),
    "result_wrap": _slot("result guidance", "agents.py", "concat", "CodeAgent.build_next_response"),
    "guidance": _slot("", "constants.py", "assign", "GENERATION_GUIDANCE_C"),
    "invalid": _slot("", "agents.py", "return", "CodeAgent.build_invalide_command_response"),
    "replace_done": _slot("", "action.py", "const", "Replace.execute_command", 2),
    "read_error": _slot("path", "utils.py", "concat", "DatasetManager.load_repo_content"),
    "retrieve_hit": _slot("path code", "action.py", "fstring", "Retrieve.execute_command", 2),
    "summary_system": _slot("", "agents.py", "const", "CodeAgent._summarize_history", 3),
    "summary_line": _slot("role content", "agents.py", "fstring", "CodeAgent._summarize_history", 0),
    "summary_request": _slot("conversation", "constants.py", "assign", "SUMMARIZATION_PROMP"),
    "summary_entry": _slot("summary", "agents.py", "fstring", "CodeAgent._summarize_history", 1),
    "test_info": _slot("status messages summary", "utils.py", "concat", "build_test_info"),
    "test_line": _slot("path verdict", "utils.py", "fstring", "build_test_info"),
    "test_pass": _slot("", "utils.py", "const", "build_test_info", 1),
    "test_fail": _slot("", "utils.py", "const", "build_test_info", 2),
    "count_total": _slot("n s", "utils.py", "fstring", "parse_code_result", 0),
    "count_passed": _slot("n", "utils.py", "fstring", "parse_code_result", 1),
    "count_failed": _slot("n", "utils.py", "fstring", "parse_code_result", 2),
    "count_errors": _slot("n s", "utils.py", "fstring", "parse_code_result", 3),
    "count_skipped": _slot("n", "utils.py", "fstring", "parse_code_result", 4),
    "count_last": _slot("last", "utils.py", "fstring", "parse_code_result", 5),
    "count_none": _slot("", "utils.py", "const", "parse_code_result", 9),
    "count_sep": _slot("", "utils.py", "const", "parse_code_result", 10),
    "count_invalid": _slot("", "utils.py", "const", "parse_code_result", 0),
    "fb_head": _slot("i interface", "agents.py", "fstring", "format_feedback", 0),
    "fb_description": _slot("value", "agents.py", "fstring", "format_feedback", 1),
    "fb_analysis": _slot("value", "agents.py", "fstring", "format_feedback", 2),
    "fb_actionable": _slot("value", "agents.py", "fstring", "format_feedback", 3),
    "fb_code": _slot("value", "agents.py", "fstring", "format_feedback", 4),
    "fb_none": _slot("", "agents.py", "const", "format_feedback", -1),
    "feedback_system": _slot("", "constants.py", "assign", "HUMAN_AGENT_SYS_PROMPT_CONSTANT"),
    "feedback_user": _slot("latex instruction lang canonical lang_again code test_info categories",
                           "constants.py", "assign", "HUMAN_AGENT_USER_PROMPT"),
    "feedback_categories": _slot("", "constants.py", "assign", "FEEDBACK_CATEGORY_INTRODUCTION_PROMPT"),
    "baseline_system": _slot("", "constants.py", "assign", "LLM_BASELINE_SYS_PROMPT"),
    "baseline_user": _slot("latex instruction path code feedback guidance", "constants.py", "assign",
                           "LLM_BASELINE_USER_PROMPT"),
    "baseline_guidance": _slot("", "constants.py", "assign", "BASELINE_GENERATION_GUIDANCE"),
    "baseline_no_feedback": _slot("", "agents.py", "const", "CodeAgent.build_llm_user_prompt"),
}
TOOL_ORDER = ("READ", "RETRIEVE", "REPLACE", "SUBMIT", "BROWSE")  # the release's tool list, in its order


@dataclass(frozen=True)
class ReleaseTexts:
    """The slot texts a release protocol uses, and where they came from (``origin``: "ours" or the checkout
    path; ``hashes``: sha256 of each file read)."""

    texts: dict[str, str]
    origin: str
    hashes: dict[str, str]

    def fill(self, name: str, **values: object) -> str:
        """Slot ``name`` with its fields filled."""
        return self.texts[name].format(**values)


def release_prompts_path(configured: str | Path | None) -> Path | None:
    """The checkout to read texts from: the config's ``release-prompts``, else ``RECODE_RELEASE_PROMPTS``."""
    value = configured or os.environ.get(ENV_VAR) or None
    return Path(value).expanduser().resolve() if value else None


def load_release_texts(checkout: Path | None) -> ReleaseTexts:
    """The release protocol's texts: from ``checkout`` when given (every slot must be found), else ours."""
    if checkout is None:
        return ReleaseTexts({name: _template(RELEASE_SLOTS[name], slot.fields) for name, slot in SLOTS.items()},
                            "ours", {})
    trees, hashes = {}, {}
    for name in FILES:
        path = checkout / name
        try:
            data = path.read_bytes()
        except OSError:
            raise ReleaseTextsError(f"release-prompts {checkout}: {name} is missing; point release-prompts at "
                                    "a checkout of the authors' RECODE-H release") from None
        hashes[name] = hashlib.sha256(data).hexdigest()
        trees[name] = parse_quietly(data, str(path))
    texts = {}
    for slot_name, slot in SLOTS.items():
        try:
            texts[slot_name] = _named(_find(trees[slot.locator.file], slot.locator, slot.fields), slot.fields)
        except (LookupError, ValueError, StopIteration) as exc:
            where = f"{slot.locator.file} {slot.locator.where}"
            raise ReleaseTextsError(f"release-prompts {checkout}: the text '{slot_name}' was not found in "
                                    f"{where} ({exc}); is it the release's checkout?") from None
    return ReleaseTexts(texts, str(checkout), hashes)


def parse_quietly(source: bytes | str, filename: str = "<release>") -> ast.Module:
    """``ast.parse`` without the warnings the release's files raise (invalid escapes in its prompts)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        return ast.parse(source, filename=filename)


def _scope(tree: ast.Module, where: str) -> ast.AST:
    """The module-level function, or ``Class.method``, named ``where``."""
    node: ast.AST = tree
    for part in where.split("."):
        node = next(child for child in ast.iter_child_nodes(node)
                    if isinstance(child, (ast.ClassDef, ast.FunctionDef)) and child.name == part)
    return node


def _in_order(nodes: list[ast.AST]) -> list[ast.AST]:
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def _template(text: str, fields: tuple[str, ...]) -> str:
    """A plain text as a template: a text with fields is one already, a text without any has its braces
    escaped (a JSON example in a prompt is not a field)."""
    return text if fields else _escaped(text)


def _find(tree: ast.Module, loc: Locator, fields: tuple[str, ...]) -> str:
    """The text at ``loc`` as a format template with positional ``{}`` fields."""
    if loc.kind == "assign":
        value = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                     and any(isinstance(t, ast.Name) and t.id == loc.where for t in node.targets))
        return _template(_literal(value), fields)
    scope = _scope(tree, loc.where)
    if loc.kind == "return":
        return _template(_literal(next(n.value for n in ast.walk(scope) if isinstance(n, ast.Return) and n.value)),
                         fields)
    inner = _fstring_parts(scope)
    if loc.kind == "fstring":
        found = [n for n in ast.walk(scope) if isinstance(n, ast.JoinedStr) and id(n) not in inner
                 and not _inside_fstring(scope, n)]
        return _joined(_in_order(found)[loc.index])
    if loc.kind == "const":
        found = [n for n in ast.walk(scope) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and id(n) not in inner and not _is_docstring(scope, n)]
        return _escaped(_in_order(found)[loc.index].value)
    if loc.kind == "concat":
        chains = [n for n in ast.walk(scope) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add)]
        outer = [n for n in chains if not any(n is not c and n in ast.walk(c) for c in chains)]
        return _concat(_in_order(outer)[loc.index])
    raise ValueError(f"unknown locator kind {loc.kind}")


def _fstring_parts(scope: ast.AST) -> set[int]:
    """Ids of the nodes that are pieces of an f-string (its literal parts and format specs), not texts of
    their own; a string inside a ``{...}`` expression of an f-string is a text of its own."""
    parts: set[int] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.JoinedStr):
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.add(id(value))
                elif value.format_spec is not None:
                    parts.update(id(n) for n in ast.walk(value.format_spec))
    return parts


def _inside_fstring(scope: ast.AST, node: ast.JoinedStr) -> bool:
    return any(other is not node and isinstance(other, ast.JoinedStr) and node in ast.walk(other)
               for other in ast.walk(scope))


def _is_docstring(scope: ast.AST, node: ast.Constant) -> bool:
    body = getattr(scope, "body", [])
    return bool(body) and isinstance(body[0], ast.Expr) and body[0].value is node


def _literal(node: ast.AST) -> str:
    """A string constant, or a tuple of them joined (the release's docstring() methods return both)."""
    value = ast.literal_eval(node)
    text = "".join(value) if isinstance(value, tuple) else value
    if not isinstance(text, str):
        raise ValueError("not a string")
    return text


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _joined(node: ast.JoinedStr) -> str:
    """An f-string as a positional template: its constant parts kept, each ``{...}`` part one field."""
    return "".join(_escaped(part.value) if isinstance(part, ast.Constant) else
                   "{" + (":" + _joined(part.format_spec) if part.format_spec else "") + "}"
                   for part in node.values)


def _concat(node: ast.AST) -> str:
    """A ``+`` chain of strings as a positional template: string constants kept, anything else one field."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _concat(node.left) + _concat(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _escaped(node.value)
    if isinstance(node, ast.JoinedStr):
        return _joined(node)
    return "{}"


def _named(template: str, fields: tuple[str, ...]) -> str:
    """``template``'s positional fields renamed to ``fields``, in order; their count must match."""
    parts = list(string.Formatter().parse(template))
    count = sum(1 for _, field_name, _, _ in parts if field_name is not None)
    if count != len(fields):
        raise ValueError(f"{count} fields where {len(fields)} were expected")
    names = iter(fields)
    out = []
    for literal, field_name, spec, conversion in parts:
        out.append(_escaped(literal))
        if field_name is not None:
            out.append("{" + next(names) + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
                       + "}")
    return "".join(out)
