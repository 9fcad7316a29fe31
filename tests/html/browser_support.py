"""A headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4): no driver,
no websocket library, no network port. Enough to load a page, watch the console and the
network, evaluate a script and take a screenshot."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--remote-debugging-pipe"]


def chromium_path() -> str | None:
    """The distribution's Chromium (KVREPLAY_CHROMIUM overrides), or None."""
    given = os.environ.get("KVREPLAY_CHROMIUM")
    if given:
        return given
    return shutil.which("chromium") or shutil.which("chromium-browser")


class ProtocolError(RuntimeError):
    pass


class Chromium:
    """One browser with one page; `events` keeps every protocol event received."""

    def __init__(self, executable: str, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Above fd 100, so the child's dup2 onto 3 and 4 cannot clobber one of them.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)
                for fd in (to_child_r, from_child_w)]
        for fd in (to_child_r, from_child_w):
            os.close(fd)

        def child() -> None:
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # Python opens every descriptor non-inheritable (PEP 446): without close_fds, only
            # the two dup2'd onto 3 and 4 reach the browser (pass_fds would need 3 and 4 open
            # in this process).
            preexec_fn=child, close_fds=False)
        for fd in high:
            os.close(fd)
        self.write_fd, self.read_fd = to_child_w, from_child_r
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.send("Browser.close", session=False, wait=False)
                self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired, ProtocolError):
            self.proc.kill()
            self.proc.wait()
        finally:
            for fd in (self.write_fd, self.read_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError("Chromium did not answer in time")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise ProtocolError("Chromium closed the pipe (did it start?)")
                self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True,
             wait: bool = True) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session is not None:
            message["sessionId"] = self.session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        if not wait:
            return {}
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise ProtocolError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, found: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event (already received or coming) for which `found` is true."""
        for event in self.events:
            if found(event):
                return event
        deadline = time.monotonic() + self.timeout
        while True:
            event = self._message(deadline)
            self.events.append(event)
            if found(event):
                return event

    def open_page(self, width: int, height: int) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send("Target.attachToTarget",
                             {"targetId": target["targetId"], "flatten": True}, session=False)
        self.session = attached["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable")
        self.resize(width, height)

    def resize(self, width: int, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for(lambda e: e.get("method") == "Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise ProtocolError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """The whole page as a PNG."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        width = int(self.evaluate("document.documentElement.clientWidth"))
        self.resize(width, height)
        shot = self.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))

    def console_errors(self) -> list[str]:
        """Uncaught exceptions, console.error calls and error log entries, as text."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(json.dumps(params.get("exceptionDetails"))[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error",
                                                                                  "assert"):
                found.append(json.dumps(params.get("args"))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append(json.dumps(params["entry"])[:500])
        return found

    def requests(self) -> list[str]:
        """Every URL the page asked the network stack for."""
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]
