"""A headless Chromium driven over the DevTools protocol, for the HTML report's tests.

Chromium is started with ``--remote-debugging-pipe``: the protocol runs over two pipes
(the browser reads commands on its fd 3 and writes replies and events on its fd 4,
each message JSON ended by a NUL byte), so no port is opened and no websocket library
is needed.  The browser gets a fresh profile directory and every background service
off; it is stopped by its PID (and its process group) when the context ends, also on
failure.

Typical use::

    with Browser() as b:
        page = b.open(Path("report.html"))
        page.evaluate("document.title")
        png = page.screenshot()
        page.console_errors, page.requests
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--hide-scrollbars", "--remote-debugging-pipe")
TIMEOUT = 30.0


def chromium_path() -> str | None:
    """The chromium binary, if installed."""
    found = shutil.which("chromium") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    return found


class BrowserError(RuntimeError):
    pass


@dataclass
class Page:
    """One tab: what it logged and requested, and commands to it."""

    browser: Browser
    session: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.call(method, params, session=self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (by value)."""
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                          awaitPromise=True)
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression[:80]}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, clip: dict[str, float] | None = None) -> bytes:
        """PNG of the viewport, or of ``clip`` (page coordinates: x, y, width, height)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": clip is not None}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])

    def element_clip(self, selector: str) -> dict[str, float]:
        """The page rectangle of the first element matching ``selector``."""
        rect = self.evaluate(
            f"(() => {{const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return {x: r.left + window.scrollX, "
            "y: r.top + window.scrollY, width: r.width, height: r.height};})()")
        if not rect or rect["width"] <= 0 or rect["height"] <= 0:
            raise BrowserError(f"{selector}: not visible ({rect})")
        return rect

    def pdf(self) -> bytes:
        return base64.b64decode(self.call("Page.printToPDF", printBackground=False)["data"])


class Browser:
    """Start chromium (headless, fresh profile), talk to it over the pipes, stop it."""

    def __init__(self, binary: str | None = None, width: int = 1280, height: int = 900) -> None:
        self.binary = binary or chromium_path()
        if self.binary is None:
            raise BrowserError("chromium is not installed (apt-get install chromium)")
        self.width, self.height = width, height
        self.proc: subprocess.Popen | None = None
        self.profile: str | None = None
        self._next = 0
        self._buf = b""
        self._events: list[dict[str, Any]] = []
        self.pages: dict[str, Page] = {}
        self.stderr_path: str | None = None

    def __enter__(self) -> Browser:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="beoperf-chromium-")
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def fds() -> None:  # in the child: the pipes at fd 3 and 4, inheritable
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.setsid()  # its own process group: stop() ends its helpers with it

        self.stderr_path = os.path.join(self.profile, "stderr.log")
        argv = [self.binary, *FLAGS, f"--user-data-dir={self.profile}",
                f"--window-size={self.width},{self.height}", "about:blank"]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, preexec_fn=fds, close_fds=False,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err)
        os.close(to_child)
        os.close(from_child)
        self.call("Browser.getVersion")

    def stop(self) -> None:
        """Close the browser; SIGTERM then SIGKILL its process group by PID if it lingers."""
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(Exception):
                self._send("Browser.close", {}, None)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, sig)
                    try:
                        proc.wait(3)
                        break
                    except subprocess.TimeoutExpired:
                        continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # any helper left in its group
        for fd in (getattr(self, "_write", None), getattr(self, "_read", None)):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._write = self._read = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    # -- protocol

    def _send(self, method: str, params: dict[str, Any], session: str | None) -> int:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        return self._next

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"no answer from chromium within {TIMEOUT} s")
            ready, _, _ = select.select([self._read], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed the pipe (see its stderr: "
                                   f"{self.stderr_path})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message = json.loads(raw)
        if "method" in message:
            self._event(message)
        return message

    def _event(self, message: dict[str, Any]) -> None:
        self._events.append(message)
        page = self.pages.get(message.get("sessionId", ""))
        if page is None:
            return
        method, params = message["method"], message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            page.console_errors.append(json.dumps(params.get("args"))[:500])
        elif method == "Runtime.exceptionThrown":
            page.console_errors.append(json.dumps(params.get("exceptionDetails"))[:500])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            page.console_errors.append(params["entry"].get("text", "")[:500])
        elif method == "Network.requestWillBeSent":
            page.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Network.loadingFailed":
            page.failed.append(params.get("errorText", ""))
        elif method == "Page.javascriptDialogOpening":
            page.dialogs.append(params.get("message", ""))

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        """Send a command and wait for its answer (events met meanwhile are recorded)."""
        ident = self._send(method, params or {}, session)
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self._receive(deadline)
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    def wait_event(self, method: str, session: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The first event ``method`` of ``session`` not yet waited for."""
        deadline = time.monotonic() + timeout
        while True:
            for k, m in enumerate(self._events):
                if m.get("method") == method and m.get("sessionId") == session:
                    del self._events[k]
                    return m
            self._receive(deadline)

    def open(self, path: Path) -> Page:
        """A new tab with the domains that report errors and requests enabled, then the
        file loaded (returns once its load event fired)."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        page = Page(self, session)
        self.pages[session] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        self._events.clear()
        page.requests.clear()
        page.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_event("Page.loadEventFired", session)
        return page
