"""A response cache keyed by the whole provider-independent request, in one SQLite file.

Runs last for days across many processes and threads, so: WAL mode (readers
never block the writer), a generous busy timeout, one short-lived connection
per operation (sqlite connections must not cross threads or forks), and
first-writer-wins inserts (two processes asking the same question store one
answer). Only the request (model, messages, schema, sampling parameters) and
the answer (text, usage, why it ended) are stored: never a key or a base URL.
Files made before the ``stop`` column existed gain it on first open; their rows
read as an ordinary end (``Stop()``).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from agent.models.types import ChatRequest, InferenceError, Stop

KEY_VERSION = 1
BUSY_TIMEOUT_SEC = 60.0
SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    request TEXT NOT NULL,
    text TEXT NOT NULL,
    usage TEXT NOT NULL,
    created REAL NOT NULL,
    stop TEXT
)
"""


def request_key(request: ChatRequest) -> str:
    """SHA-256 of the canonical JSON of the request (plus a format version)."""
    payload = json.dumps({"v": KEY_VERSION, **request.to_dict()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """``get``/``put`` of answers by request; safe to share across threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._initialise()
        except (OSError, sqlite3.Error) as error:
            raise self._unusable(error) from None

    def _initialise(self) -> None:
        """Switch to WAL and create the table; processes racing on a new file retry.

        Changing the journal mode needs an exclusive lock and SQLite reports
        SQLITE_BUSY for it without consulting the busy timeout, so a process
        that loses the race waits briefly and tries again.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_SEC
        while True:
            try:
                with closing(self._connect()) as db, db:
                    if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                        db.execute("PRAGMA journal_mode=WAL")
                    db.execute(SCHEMA)
                    columns = {row[1] for row in db.execute("PRAGMA table_info(responses)")}
                    if "stop" not in columns:
                        db.execute("ALTER TABLE responses ADD COLUMN stop TEXT")
                return
            except sqlite3.OperationalError as error:
                if not _racing(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def get(self, request: ChatRequest) -> dict[str, Any] | None:
        """``{"text", "usage", "stop"}`` stored for ``request``, or None."""
        try:
            with closing(self._connect()) as db:
                row = db.execute("SELECT text, usage, stop FROM responses WHERE key = ?",
                                 (request_key(request),)).fetchone()
        except sqlite3.Error as error:
            raise self._unusable(error) from None
        if row is None:
            return None
        stop = Stop(**json.loads(row[2])) if row[2] else Stop()
        return {"text": row[0], "usage": json.loads(row[1]), "stop": stop}

    def put(self, request: ChatRequest, text: str, usage: dict[str, Any], stop: Stop = Stop()) -> None:
        """Store an answer unless one is already stored for this request."""
        row = (request_key(request), json.dumps(request.to_dict()), text, json.dumps(usage), time.time(),
               json.dumps({"reason": stop.reason, "provider_words": stop.provider_words}))
        try:
            with closing(self._connect()) as db, db:
                db.execute("INSERT OR IGNORE INTO responses (key, request, text, usage, created, stop) "
                           "VALUES (?, ?, ?, ?, ?, ?)", row)
        except sqlite3.Error as error:
            raise self._unusable(error) from None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SEC)
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SEC * 1000)}")
        db.execute("PRAGMA synchronous = NORMAL")  # with WAL: no corruption on a crash, far fewer fsyncs
        return db

    def _unusable(self, error: Exception) -> InferenceError:
        return InferenceError(
            f"response cache {self.path} is unusable ({error}); fix its folder or choose another cache-path"
        )


def _racing(error: sqlite3.OperationalError) -> bool:
    """Another process is setting the file up at the same moment (locked, or it added the column first)."""
    return "locked" in str(error) or "duplicate column" in str(error)
