"""The local HTTP server of web feedback: 127.0.0.1 only, every path behind a random token.

Pages (under ``/<token>/``): the list of requests that wait (``""``), one form
per request (``r/<id>``) and their script and style (``static/<name>``). The
pages' script talks JSON to ``api/pending``, ``api/r/<id>``, and POSTs to
``api/r/<id>/draft`` (autosave) and ``api/r/<id>/submit``. A request without
the token, from another Host (DNS rebinding) or a POST that is not JSON gets
403 and nothing else. Each connection is served in its own thread.
"""
from __future__ import annotations

import hmac
import json
import re
import secrets
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from agent.web.board import GONE, INVALID, OK, Board

HOST = "127.0.0.1"
MAX_BODY = 4 << 20  # a draft of six text fields per record; far above what a person types
STATIC = {"index.html": "text/html", "form.html": "text/html", "form.js": "text/javascript",
          "index.js": "text/javascript", "style.css": "text/css"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}
_ROUTE = re.compile(r"^/(?P<token>[^/]+)/(?P<rest>.*)$")


def _static(name: str) -> bytes:
    return resources.files("agent.web").joinpath("static", name).read_bytes()


class _Handler(BaseHTTPRequestHandler):
    server: FeedbackServer

    def log_message(self, format: str, *args: object) -> None:  # the run's stderr is for the run
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        for name, value in HEADERS.items():
            self.send_header(name, value)
        self.send_header("Content-Type", f"{content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: object) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json")

    def _refuse(self) -> None:
        self._send(HTTPStatus.FORBIDDEN, b"forbidden\n", "text/plain")

    def _route(self) -> str | None:
        """The path after the token, or None when the request must be refused."""
        match = _ROUTE.match(self.path.split("?", 1)[0])
        if match is None or not hmac.compare_digest(match["token"].encode(), self.server.token.encode()):
            return None
        if self.headers.get("Host") not in self.server.hosts:
            return None
        return match["rest"]

    def do_GET(self) -> None:
        rest = self._route()
        if rest is None:
            return self._refuse()
        if rest == "":
            return self._send(OK, _static("index.html"), "text/html")
        if re.fullmatch(r"r/[0-9a-f]{16}", rest):
            return self._send(OK, _static("form.html"), "text/html")
        if rest.startswith("static/") and rest[len("static/"):] in STATIC:
            name = rest[len("static/"):]
            return self._send(OK, _static(name), STATIC[name])
        if rest == "api/pending":
            return self._json(OK, {"pending": self.server.board.listing()})
        if (match := re.fullmatch(r"api/r/([0-9a-f]{16})", rest)) is not None:
            pending = self.server.board.get(match[1])
            if pending is None:
                return self._json(GONE, {"error": "this request is no longer waiting (answered, or its run stopped)"})
            with pending.lock:
                draft = dict(pending.draft)
            return self._json(OK, {**pending.summary(), "view": pending.view, "draft": draft,
                                   "notes": pending.notes()})
        return self._json(GONE, {"error": "no such page"})

    def do_POST(self) -> None:
        rest = self._route()
        if rest is None or self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            return self._refuse()
        match = re.fullmatch(r"api/r/([0-9a-f]{16})/(draft|submit)", rest)
        if match is None:
            return self._json(GONE, {"error": "no such endpoint"})
        length = self.headers.get("Content-Length", "")
        length = int(length) if length.isdigit() else 0
        if not 0 < length <= MAX_BODY:
            return self._json(INVALID, {"error": f"a body of 1 to {MAX_BODY} bytes is expected"})
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            return self._json(INVALID, {"error": "the body is not JSON"})
        if not isinstance(body, dict):
            return self._json(INVALID, {"error": "the body must be a JSON object"})
        board = self.server.board
        status, payload = (board.save_draft if match[2] == "draft" else board.submit)(match[1], body)
        self._json(status, payload)


class FeedbackServer(ThreadingHTTPServer):
    """Serves one board on ``127.0.0.1:port`` (0: any free port) from a daemon thread."""

    daemon_threads = True

    def __init__(self, board: Board, port: int = 0) -> None:
        super().__init__((HOST, port), _Handler)
        self.board = board
        self.token = secrets.token_urlsafe(18)
        self.port = self.server_address[1]
        self.hosts = {f"{HOST}:{self.port}", f"localhost:{self.port}"}
        self.thread = threading.Thread(target=self.serve_forever, name="recode-web-feedback", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/{self.token}/"

    def handle_error(self, request, client_address) -> None:
        """A browser that went away mid-answer is not the run's business: no traceback on its stderr."""

    def start(self) -> FeedbackServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
