"""Headless Chromium driven over its own DevTools protocol on a pipe (``--remote-debugging-pipe``): no server,
no port, no package beyond the standard library. Used by the browser tests and scripts/bench_report.py.

The browser reads commands on its fd 3 and writes answers and events on its fd 4, each message a JSON
object ended by a NUL byte; a reader thread sorts them by command id and by tab. Pages are driven as a
person would: mouse clicks at an element's centre and text typed into the focused control (``Input.*``),
so the page's own event handlers run. ``Browser.page()`` opens a tab; several tabs may be open at once.
"""
from __future__ import annotations

import base64
import fcntl
import itertools
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync",
         "--disable-component-update", "--no-first-run", "--no-default-browser-check", "--mute-audio",
         "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
         "--disable-backgrounding-occluded-windows", "--remote-debugging-pipe")
LOADED = "Page.loadEventFired"


class BrowserError(RuntimeError):
    """The browser answered a command with an error, died, or a wait ran out of time."""


class Browser:
    """One headless Chromium process; ``page()`` opens a tab. Use as a context manager."""

    def __init__(self, profile: Path | None = None, width: int = 1280, height: int = 900,
                 timeout: float = 60.0) -> None:
        if CHROMIUM is None:
            raise BrowserError("chromium is not installed (apt-get install -y chromium)")
        self.size, self.timeout = (width, height), timeout
        self._scratch = None if profile is not None else tempfile.TemporaryDirectory(prefix="recode-cdp-")
        folder = profile if profile is not None else Path(self._scratch.name)
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: the two pipe ends become fds 3 and 4 (moved high first, so
            # neither dup2 overwrites the other's source; dup2 onto a new number also clears close-on-exec)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
            for target, fd in zip((3, 4), high):
                os.dup2(fd, target)

        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={folder}", f"--window-size={width},{height}"],
            preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue] = {}
        self._events: dict[str, queue.Queue] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        """Sort every message: an answer to the command waiting for it, an event to its tab's queue."""
        buffer = b""
        while chunk := os.read(self._from_browser, 1 << 20):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message and message["id"] in self._answers:
                    self._answers[message["id"]].put(message)
                elif "method" in message and message.get("sessionId") in self._events:
                    self._events[message["sessionId"]].put(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and return its result."""
        number = next(self._ids)
        box: queue.Queue = queue.Queue()
        self._answers[number] = box
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        with self._lock:
            os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        try:
            answer = box.get(timeout=self.timeout)
        except queue.Empty:
            raise BrowserError(f"{method}: no answer in {self.timeout} s") from None
        finally:
            del self._answers[number]
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message')}")
        return answer.get("result", {})

    def page(self) -> Page:
        """A new tab (its events kept apart from the other tabs')."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self._events[session] = queue.Queue()
        return Page(self, session)

    def events(self, session: str) -> queue.Queue:
        return self._events[session]

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._scratch is not None:
            self._scratch.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    """One tab: open pages, read the DOM with JavaScript, click, type, press keys, screenshot."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable")
        width, height = browser.size
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    def _drain_loads(self) -> None:
        events = self.browser.events(self.session)
        while not events.empty():
            events.get_nowait()

    def _wait_load(self) -> None:
        events, deadline = self.browser.events(self.session), time.monotonic() + self.browser.timeout
        while True:
            try:
                if events.get(timeout=max(0.0, deadline - time.monotonic()))["method"] == LOADED:
                    return
            except queue.Empty:
                raise BrowserError("the page did not finish loading in time") from None

    def navigating(self, action: Callable[[], object]) -> None:
        """Run ``action`` (a click, a key, a navigation) that opens a page, and wait for its load event."""
        self._drain_loads()
        action()
        self._wait_load()

    def open(self, path: Path | str) -> float:
        """Open a page (a file path or a URL) and wait for its load event; returns the seconds it took."""
        text = str(path)
        url = text if text.startswith(("file:", "about:", "http:", "https:")) else Path(path).resolve().as_uri()
        start = time.monotonic()
        self.navigating(lambda: self.send("Page.navigate", {"url": url}))
        return time.monotonic() - start

    def goto(self, url: str) -> None:
        self.open(url)

    def click_and_wait(self, selector: str) -> None:
        self.navigating(lambda: self.click(selector))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression}: {details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll until the expression is truthy in the page; returns its value (True for an element, which does
        not cross the protocol by value)."""
        deadline = time.monotonic() + timeout
        probe = f"(v => v instanceof Node ? true : v)({expression})"
        while True:
            value = self.evaluate(probe)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def text(self, selector: str) -> str:
        return self.evaluate(f"document.querySelector({json.dumps(selector)}).textContent")

    def click(self, selector: str) -> None:
        """A real left click at the centre of the first element matching ``selector`` (its tab brought to the
        front, the element scrolled into view first)."""
        self.send("Page.bringToFront")
        box = self.wait_for(  # until the point is the element's: layout may still move as the page settles
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return 'missing';"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " const x = r.left + r.width / 2, y = r.top + r.height / 2, hit = document.elementFromPoint(x, y);"
            " return hit && (hit === e || e.contains(hit)) ? [x, y] : null; })()", timeout=10.0)
        if box == "missing":
            raise BrowserError(f"no element matches {selector}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1})

    def type(self, selector: str, text: str) -> None:
        """Click into the control, select what it holds, and type ``text`` over it (the page sees input
        events)."""
        self.click(selector)
        self.evaluate(f"(e => e.select && e.select())(document.querySelector({json.dumps(selector)}))")
        self.send("Input.insertText", {"text": text})

    def press(self, key: str, code: str | None = None, key_code: int | None = None) -> None:
        """One key: a character ("p") types it, a name ("Escape", "ArrowDown") presses that key."""
        typed = {"text": key} if len(key) == 1 else {}
        names = {"key": key, "code": code or key, **({"windowsVirtualKeyCode": key_code} if key_code else {})}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown" if typed else "rawKeyDown", **names, **typed})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **names})

    def choose(self, selector: str, steps: int) -> None:
        """Pick an option of a <select> with the keyboard: ``steps`` presses of the down arrow."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        for _ in range(steps):
            self.press("ArrowDown", "ArrowDown", 40)

    def screenshot(self, path: Path | str, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": min(size[1], 12_000), "scale": 1}
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params)["data"]))
        return path
