"""The requests waiting for a person's feedback, their drafts, and the answers that release them.

Jobs are threads of one process: each job thread opens a :class:`Pending`
request on the one :class:`Board` and blocks in :meth:`Board.wait` until a
submission passes :func:`agent.web.records.check_records`; the HTTP server's
threads read the board and post drafts and submissions to it. The board's lock
guards the table of requests; each request's own lock orders its draft writes
and its answer, so people working on different jobs never wait on each other.

A draft is a JSON file per request (:func:`draft_path`), replaced atomically on
every autosave. Its revision number makes a second tab that still holds an
older copy fail with a conflict instead of overwriting newer text. A restarted
run that asks for the same (job folder, task, turn, level) finds the file and
shows what was typed, with a note when the file under review changed since.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from agent.common.atomic_file import atomic_write_text
from agent.web.records import check_records

OK, CONFLICT, GONE, INVALID = 200, 409, 404, 422


@dataclass(frozen=True)
class RequestKey:
    """What identifies a request across restarts: the job's result folder and the turn asked about."""

    folder: str  # the job's result folder name: setting, model, guidance type and starting level
    model: str
    task_index: int
    turn: int
    level: int

    @property
    def rid(self) -> str:
        """A short id for URLs, stable across restarts."""
        text = f"{self.folder}|{self.task_index}|{self.turn}|{self.level}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    @property
    def label(self) -> str:
        return f"task {self.task_index} turn {self.turn} L{self.level} {self.model}"


def draft_path(root: Path, key: RequestKey) -> Path:
    """``<root>/<job folder>/task_<id>_turn_<t>_L<level>.json``."""
    return Path(root) / key.folder / f"task_{key.task_index}_turn_{key.turn}_L{key.level}.json"


def code_digest(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class Pending:
    """One request waiting for records; ``view`` is what the form page shows (builtins only)."""

    key: RequestKey
    view: dict
    path: Path
    created: float = field(default_factory=time.time)
    draft: dict = field(default_factory=dict)
    answer: list[dict] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def load_draft(self) -> None:
        """The stored draft of this key, if any; an unreadable file is set aside, not trusted."""
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            stored = None
        except (OSError, ValueError):
            self.path.replace(self.path.with_suffix(".unreadable.json"))
            stored = None
        if not isinstance(stored, dict) or not isinstance(stored.get("records"), list):
            self.draft = {"records": [], "revision": 0, "saved_at": None, "submitted_at": None,
                          "code_sha256": self.view["code_sha256"]}
            return
        self.draft = {"records": stored["records"], "revision": int(stored.get("revision") or 0),
                      "saved_at": stored.get("saved_at"), "submitted_at": stored.get("submitted_at"),
                      "code_sha256": stored.get("code_sha256")}

    def notes(self) -> list[str]:
        """What a person coming back to a stored draft should know."""
        notes = []
        if self.draft["revision"] and self.draft["code_sha256"] != self.view["code_sha256"]:
            notes.append("This draft was written for another version of the file: the turn was attempted again "
                         "after a restart. Check every record against the file shown now.")
        if self.draft["submitted_at"]:
            notes.append(f"These records were submitted at {self.draft['submitted_at']}, but the run stopped "
                         "before it saved the turn. Check them and submit again.")
        return notes

    def write(self, records: list, *, submitted: bool = False) -> dict:
        """Store ``records`` as the next revision of the draft (caller holds ``lock``)."""
        self.draft = {"records": records, "revision": self.draft["revision"] + 1, "saved_at": _now(),
                      "submitted_at": _now() if submitted else None, "code_sha256": self.view["code_sha256"]}
        document = {"key": asdict(self.key), **self.draft}
        atomic_write_text(self.path, json.dumps(document, indent=1, ensure_ascii=False))
        return self.draft

    def summary(self) -> dict:
        return {"id": self.key.rid, **asdict(self.key), "label": self.key.label,
                "waiting_sec": round(time.time() - self.created), "draft_saved_at": self.draft["saved_at"],
                "draft_records": len(self.draft["records"])}


class Board:
    """Every request of the process that waits for a person, keyed by :attr:`RequestKey.rid`."""

    def __init__(self, notify: Callable[[Pending], None] = lambda pending: None) -> None:
        self.notify = notify
        self._lock = threading.Lock()
        self._pending: dict[str, Pending] = {}

    def open(self, key: RequestKey, view: dict, path: Path) -> Pending:
        pending = Pending(key, view, path)
        pending.load_draft()
        with self._lock:
            if key.rid in self._pending:
                raise RuntimeError(f"{key.label} is already waiting for feedback")
            self._pending[key.rid] = pending
        self.notify(pending)
        return pending

    def wait(self, pending: Pending) -> list[dict]:
        """Block until a submission for ``pending`` was accepted; its clean records."""
        try:
            pending.done.wait()
        finally:
            with self._lock:
                self._pending.pop(pending.key.rid, None)
        return pending.answer or []

    def get(self, rid: str) -> Pending | None:
        with self._lock:
            return self._pending.get(rid)

    def listing(self) -> list[dict]:
        with self._lock:
            pending = sorted(self._pending.values(), key=lambda p: p.created)
        return [p.summary() for p in pending]

    def save_draft(self, rid: str, body: dict) -> tuple[int, dict]:
        """Autosave: ``body`` = {"records": [...], "revision": the revision the page started from}."""
        pending = self.get(rid)
        if pending is None:
            return GONE, {"error": "this request is no longer waiting (answered, or its run stopped)"}
        records = body.get("records")
        if not isinstance(records, list):
            return INVALID, {"error": "a draft is {\"records\": [...], \"revision\": N}"}
        with pending.lock:
            if pending.answer is not None:
                return GONE, {"error": "this request was answered"}
            if body.get("revision") != pending.draft["revision"]:
                return CONFLICT, {"error": "another page saved a newer draft of this request; reload to see it",
                                  "revision": pending.draft["revision"]}
            draft = pending.write(records)
        return OK, {"revision": draft["revision"], "saved_at": draft["saved_at"]}

    def submit(self, rid: str, body: dict) -> tuple[int, dict]:
        """The records of ``body`` ({"feedback": [...]}) answer the request when they pass the checks."""
        pending = self.get(rid)
        if pending is None:
            return GONE, {"error": "this request is no longer waiting (answered, or its run stopped)"}
        with pending.lock:
            if pending.answer is not None:
                return GONE, {"error": "this request was answered"}
            records, errors = check_records(body, pending.key.level)
            if errors:
                return INVALID, {"errors": errors}
            pending.write(body["feedback"], submitted=True)
            pending.answer = records
            pending.done.set()
        return OK, {"records": len(records)}
