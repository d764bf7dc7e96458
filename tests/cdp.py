<<<<<<< HEAD
"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): no server,
no port, no package beyond the standard library. Used by the browser tests and scripts/bench_report.py.

The browser reads commands on its fd 3 and writes replies and events on its fd 4, each message a JSON
object ended by a NUL byte. Clicks and typing go through ``Input.*`` (real events, as a person's), and
pages are opened as ``file://`` URLs, as a researcher opens the report.
=======
"""Drive headless Chromium through its own DevTools protocol over a pipe (no websocket, no extra package).

``--remote-debugging-pipe`` makes Chromium read commands from fd 3 and write
answers and events to fd 4, each a JSON message ended by a NUL byte. Pages are
driven as a person would: mouse clicks at an element's centre and text typed
into the focused control (``Input.*``), so the page's own event handlers run.
>>>>>>> web
"""
from __future__ import annotations

import base64
<<<<<<< HEAD
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync",
         "--disable-component-update", "--no-first-run", "--no-default-browser-check", "--mute-audio",
         "--remote-debugging-pipe")


class BrowserError(Exception):
    """The browser answered a command with an error, died, or a wait ran out of time."""


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 60.0) -> None:
        if CHROMIUM is None:
            raise BrowserError("chromium is not installed (apt-get install -y chromium)")
        self.timeout = timeout
        self.profile = tempfile.TemporaryDirectory(prefix="recode-cdp-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: the two pipe ends become fds 3 and 4 (moved high first, so
            # neither dup2 overwrites the other's source; dup2 onto a new number also clears close-on-exec)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
            for target, fd in zip((3, 4), high):
                os.dup2(fd, target)

        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile.name}", f"--window-size={width},{height}"],
            preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.command("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.command("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime"):
            self.command(f"{domain}.enable", session=True)
        self.command("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                     deviceScaleFactor=1, mobile=False)

    def __enter__(self) -> "Browser":
=======
import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium process; ``page()`` opens a tab."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 1000) -> None:
        if CHROMIUM is None:
            raise BrowserError("chromium is not installed")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:  # in the child: fd 3 = commands in, fd 4 = answers out
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-pipe",
             "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
             "--disable-backgrounding-occluded-windows",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.size = (width, height)
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._from_chrome, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                box = self._answers.get(message.get("id"))
                if box is not None:
                    box.put(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        number = next(self._ids)
        box: queue.Queue = queue.Queue()
        self._answers[number] = box
        message = {"id": number, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        with self._lock:
            os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        try:
            answer = box.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError(f"{method}: no answer in {timeout} s") from None
        finally:
            del self._answers[number]
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)
        os.close(self._to_chrome)
        os.close(self._from_chrome)

    def __enter__(self) -> Browser:
>>>>>>> web
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

<<<<<<< HEAD
    def close(self) -> None:
        try:
            self.command("Browser.close")
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
        self.profile.cleanup()

    # ------------------------------------------------------------ the protocol

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise BrowserError("the browser did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its pipe (it died)")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def command(self, method: str, session: bool = False, **params: Any) -> dict:
        """Send one command and return its result; events read meanwhile are kept in ``events``."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for number, event in enumerate(self.events):
                if event["method"] == method:
                    return self.events.pop(number)
            self.events.append(self._read_message(deadline))

    # ------------------------------------------------------------ what a person does

    def open(self, path: Path | str) -> float:
        """Open a page (a file path or a URL) and wait for its load event; returns the seconds it took."""
        url = str(path) if str(path).startswith(("file:", "about:", "http:")) else Path(path).resolve().as_uri()
        self.events = [event for event in self.events if event["method"] != "Page.loadEventFired"]
        start = time.monotonic()
        self.command("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")
        return time.monotonic() - start

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        result = self.command("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                              awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('exception', {}).get('description')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10.0) -> Any:
        """Poll until the expression is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click at the middle of the first element matching ``selector`` (scrolled into view)."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        if box is None:
            raise BrowserError(f"no element matches {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.command("Input.dispatchMouseEvent", session=True, type=kind, x=box[0], y=box[1], button="left",
                         clickCount=1)

    def type(self, selector: str, text: str) -> None:
        """Focus the field, select what it holds and type ``text`` over it."""
        self.click(selector)
        self.evaluate(f"document.querySelector({json.dumps(selector)}).select()")
        self.command("Input.insertText", session=True, text=text)

    def press(self, key: str) -> None:
        """One key: a character ("p") types it, a name ("Escape", "ArrowLeft") presses that key."""
        text = {"text": key} if len(key) == 1 else {}
        self.command("Input.dispatchKeyEvent", session=True, type="keyDown" if text else "rawKeyDown", key=key,
                     **text)
        self.command("Input.dispatchKeyEvent", session=True, type="keyUp", key=key)

    def navigating(self, action) -> None:
        """Run ``action`` (a click, a key) that opens another page, and wait for that page's load event."""
        self.events = [event for event in self.events if event["method"] != "Page.loadEventFired"]
        action()
        self.wait_event("Page.loadEventFired")

    def click_and_wait(self, selector: str) -> None:
        self.navigating(lambda: self.click(selector))

    def screenshot(self, path: Path | str, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": min(size[1], 12_000), "scale": 1}
        data = self.command("Page.captureScreenshot", session=True, **params)["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
=======

class Page:
    """One tab: navigate, read the DOM with JavaScript, click, type, screenshot."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session
        width, height = browser.size
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    def evaluate(self, expression: str) -> object:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> None:
        """Poll ``expression`` until it is truthy in the page."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(f"!!({expression})"):
                return
            time.sleep(0.1)
        raise BrowserError(f"timed out waiting for {expression}")

    def text(self, selector: str) -> str:
        return self.evaluate(f"document.querySelector({json.dumps(selector)}).textContent")

    def click(self, selector: str) -> None:
        """A real left click at the centre of the element (its tab brought to the front, the element scrolled
        into view first)."""
        self.send("Page.bringToFront")
        box = self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
        if not box:
            raise BrowserError(f"no element {selector}")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def type(self, selector: str, text: str) -> None:
        """Click into the control and type ``text`` as keyboard input (the page sees input events)."""
        self.click(selector)
        self.send("Input.insertText", {"text": text})

    def press(self, key: str, code: str, key_code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code,
                                                 "windowsVirtualKeyCode": key_code})

    def choose(self, selector: str, steps: int) -> None:
        """Pick an option of a focused <select> with the keyboard: ``steps`` presses of the down arrow."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        for _ in range(steps):
            self.press("ArrowDown", "ArrowDown", 40)

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        params: dict = {"format": "png"}
        if full_page:
            width, height = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params)["data"]))
>>>>>>> web
