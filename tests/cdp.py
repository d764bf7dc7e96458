"""Drive headless Chromium through its own DevTools protocol over a pipe (no websocket, no extra package).

``--remote-debugging-pipe`` makes Chromium read commands from fd 3 and write
answers and events to fd 4, each a JSON message ended by a NUL byte. Pages are
driven as a person would: mouse clicks at an element's centre and text typed
into the focused control (``Input.*``), so the page's own event handlers run.
"""
from __future__ import annotations

import base64
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
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
