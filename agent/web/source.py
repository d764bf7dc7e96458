"""``feedback-source: web``: a person answers each feedback request in a browser form.

One server per process (:func:`shared_server`), started by the first job that
builds its source, so the URL is printed once, at the start of the run; each
request that starts waiting prints its own page's URL (above the progress bar
on a terminal). Jobs are threads of the run's process in every local parallel
mode, so many requests wait at once and several people can answer different
jobs. Drafts live under ``<output-dir>/web_feedback/`` (agent/web/board.py).
"""
from __future__ import annotations

import difflib
import json
import sys
import threading
from pathlib import Path

from tqdm import tqdm

from agent.feedback import CATEGORIES, FIELDS, FeedbackReply, FeedbackRequest, unified_diff
from agent.feedback.guidance import shown_fields
from agent.web.board import Board, Pending, RequestKey, code_digest, draft_path
from agent.web.server import FeedbackServer

DRAFTS_DIR = "web_feedback"
CATEGORY_HINTS = dict(zip(CATEGORIES, ("structure or planning", "correctness: the code does not run",
                                       "alignment with the paper or the task", "missing knowledge or context",
                                       "repository integration")))

_LOCK = threading.Lock()
_SERVERS: dict[int, FeedbackServer] = {}


class WebFeedbackError(RuntimeError):
    """The feedback page cannot be served (the port is taken); one line naming the fix."""


def _announce(server: FeedbackServer, pending: Pending) -> None:
    tqdm.write(f"feedback wanted: {pending.key.label}: {server.url}r/{pending.key.rid}", file=sys.stderr)


def shared_server(port: int = 0) -> FeedbackServer:
    """The process's feedback server on ``port`` (0: the one already running, else any free port)."""
    with _LOCK:
        server = _SERVERS.get(port) or (next(iter(_SERVERS.values()), None) if port == 0 else None)
        if server is not None:
            return server
        board = Board()
        try:
            server = FeedbackServer(board, port)
        except OSError as exc:
            raise WebFeedbackError(f"web-port {port}: cannot listen on 127.0.0.1 ({exc.strerror}); choose another "
                                   "web-port, or 0 for any free port") from None
        board.notify = lambda pending: _announce(server, pending)
        _SERVERS[port] = server.start()
        print(f"web feedback: open {server.url} to answer the turns that wait for feedback", file=sys.stderr,
              flush=True)
        return server


def differing_lines(code: str, reference: str) -> tuple[list[int], list[int]]:
    """1-based numbers of the lines of ``code`` and of ``reference`` that the other does not match."""
    ours, theirs = code.split("\n"), reference.split("\n")
    mine: list[int] = []
    other: list[int] = []
    for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, ours, theirs, autojunk=False).get_opcodes():
        if tag != "equal":
            mine += range(a1 + 1, a2 + 1)
            other += range(b1 + 1, b2 + 1)
    return mine, other


def request_view(request: FeedbackRequest) -> dict:
    """What the form page shows for ``request`` (builtins; the code is text, never markup)."""
    code_differs, canonical_differs = differing_lines(request.code, request.canonical)
    return {"task_index": request.task_index, "turn": request.turn, "level": request.level,
            "digest": request.digest, "diff": unified_diff(request.previous_code, request.code),
            "code": request.code, "canonical": request.canonical, "instruction": request.instruction,
            "code_differs": code_differs, "canonical_differs": canonical_differs,
            "latex": request.latex, "code_sha256": code_digest(request.code), "fields": list(FIELDS),
            "shown_fields": list(shown_fields(request.level)), "categories": CATEGORY_HINTS}


class WebFeedback:
    """The FeedbackSource of one job: each request waits on the shared server until a person submits."""

    def __init__(self, folder: str, model: str, output_dir: Path, port: int = 0) -> None:
        self.folder = folder
        self.model = model
        self.drafts = Path(output_dir) / DRAFTS_DIR
        self.server = shared_server(port)

    def __call__(self, request: FeedbackRequest) -> FeedbackReply:
        key = RequestKey(self.folder, self.model, request.task_index, request.turn, request.level)
        view = request_view(request)
        records = self.server.board.wait(self.server.board.open(key, view, draft_path(self.drafts, key)))
        shown = "\n".join([f"Web form: task {request.task_index}, turn {request.turn} (guidance level "
                           f"L{request.level})", request.digest, "----- Changes since the previous turn -----",
                           view["diff"]])
        history = [{"role": "user", "content": shown},
                   {"role": "assistant", "content": json.dumps({"feedback": records})}]
        return FeedbackReply(records, "web", history=history)
