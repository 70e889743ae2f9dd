"""One headless Chromium that opens many pages of the built site and measures them.

`test_docs.py`'s other browser tests start a Chromium per page with `--dump-dom`; that costs
a few seconds a page, too much for every page of the site. `Chromium` starts one browser in
its own process group and speaks the DevTools protocol to it over a pipe
(`--remote-debugging-pipe`: commands on the child's fd 3, replies on its fd 4, each message
JSON ended by a NUL byte), so no port is opened. `measure(url, script)` loads a page in a
window of the given width, waits for its load event and its fonts, and returns what the
script's expression evaluates to (a JSON value; a Promise is awaited).

Every call has a deadline: a reply that does not come in `timeout` seconds raises
`TimeoutError`. `close()` asks the browser to quit and kills its process group if it has
not ended within 10 s; use it as a context manager.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["FLAGS", "Chromium"]

# the flags of every headless start: no network of its own, no first-run work
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


class Chromium:
    """A headless Chromium driven over its DevTools pipe (see the module's docstring)."""

    def __init__(
        self,
        binary: Path,
        user_data: Path,
        *,
        width: int = 1280,
        height: int = 2000,
        timeout: float = 60.0,
    ) -> None:
        self.width, self.height, self.timeout = width, height, timeout
        cmd_r, self._cmd = os.pipe()
        self._out, out_w = os.pipe()
        argv = [str(binary), *FLAGS, f"--user-data-dir={user_data}", "about:blank"]
        try:
            self.pid = os.posix_spawn(
                str(binary),
                argv,
                dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, cmd_r, 3),
                    (os.POSIX_SPAWN_DUP2, out_w, 4),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),  # its D-Bus noise
                ],
                setpgroup=0,  # its own process group, ended as a whole in close()
            )
        finally:
            os.close(cmd_r)
            os.close(out_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self._closed = False
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self.call(
                "Target.attachToTarget", {"targetId": target, "flatten": True}
            )["sessionId"]
            self.call("Page.enable", session=True)
            self.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                session=True,
            )
        except BaseException:
            self.close()
            raise

    # -- the protocol ---------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._out], [], [], left)
            if ready:
                chunk = os.read(self._out, 1 << 16)
                if not chunk:
                    raise ConnectionError("Chromium closed its DevTools pipe")
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = False
    ) -> dict[str, Any]:
        """Send one command and return its `result`; raises `RuntimeError` on its error."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._cmd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)

    def _wait_event(self, method: str) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method:
                    del self._events[: i + 1]
                    return
            self._events.clear()
            reply = self._read_message(deadline)
            if "method" in reply:
                self._events.append(reply)

    # -- pages ----------------------------------------------------------------------------

    def measure(self, url: str, script: str) -> Any:
        """Load `url`, wait for its load event and fonts, and return the JSON value of the
        expression `script` evaluated in the page (a Promise is awaited). Raises
        `RuntimeError` when the script throws."""
        self._events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        self._wait_event("Page.loadEventFired")
        self.call(
            "Runtime.evaluate",
            {"expression": "document.fonts.ready.then(() => true)", "awaitPromise": True},
            session=True,
        )
        done = self.call(
            "Runtime.evaluate",
            {"expression": script, "awaitPromise": True, "returnByValue": True},
            session=True,
        )
        if "exceptionDetails" in done:
            raise RuntimeError(f"{url}: {done['exceptionDetails']}")
        return done["result"].get("value")

    def close(self) -> None:
        """Quit the browser; kill its process group if it is still there after 10 s."""
        if self._closed:
            return
        self._closed = True
        try:
            self._next_id += 1
            os.write(
                self._cmd,
                json.dumps({"id": self._next_id, "method": "Browser.close"}).encode() + b"\0",
            )
        except OSError:
            pass
        os.close(self._cmd)
        deadline, pid = time.monotonic() + 10, 0
        while time.monotonic() < deadline:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)  # its helpers (zygote, GPU) too
        if not pid:
            os.waitpid(self.pid, 0)
        os.close(self._out)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
