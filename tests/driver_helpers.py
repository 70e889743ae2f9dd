"""Helpers for the driver tests: a `jfsm driver` subprocess over stdio or HTTP, a spec copy
with other limits, and a hash of every file under a directory."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from jfsm.spec import spec_dir

HELLO = {"protocol": 1, "compressUrl": "http://127.0.0.1:9"}
WAIT = 60.0  # a generous bound on every wait: a hung driver fails the test, never hangs it


def spec_with(
    tmp: Path, *, limits: dict[str, Any] | None = None, http: dict[str, Any] | None = None
) -> Path:
    """A copy of `spec/` whose `limits` (and HTTP limits) are updated; for `JFSM_SPEC_DIR`."""
    copy = tmp / "spec"
    shutil.copytree(spec_dir(), copy)
    constants = json.loads((copy / "constants.json").read_text("utf-8"))
    constants["limits"].update(limits or {})
    (copy / "constants.json").write_text(json.dumps(constants), "utf-8")
    protocol = json.loads((copy / "driver" / "protocol.json").read_text("utf-8"))
    for name, value in (http or {}).items():
        protocol["http"]["limits"][name]["value"] = value
    (copy / "driver" / "protocol.json").write_text(json.dumps(protocol), "utf-8")
    return copy


def tree_hashes(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file under `root` (the lock file left out)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name != "lock":
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _env(spec: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if spec is not None:
        env["JFSM_SPEC_DIR"] = str(spec)
    return env


class StdioDriver:
    """`python -m jfsm.cli driver [--state DIR] [EXTRA...]` with line-based send and
    receive."""

    def __init__(
        self, state: Path | None = None, *, spec: Path | None = None, extra: tuple[str, ...] = ()
    ) -> None:
        argv = [sys.executable, "-m", "jfsm.cli", "driver"]
        if state is not None:
            argv += ["--state", str(state)]
        argv += list(extra)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(spec),
            start_new_session=True,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        self._ids = 0

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def reply(self, timeout: float = WAIT) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line, f"driver closed stdout; stderr: {b''.join(self.stderr)[-2000:]!r}"
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply

    def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        message = {"id": self._ids, "op": op, "args": args}
        self.send_raw(json.dumps(message).encode() + b"\n")
        reply = self.reply()
        assert reply["id"] == self._ids, reply
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def high_water_kib(self) -> int:
        """Peak resident memory of the driver so far (Linux VmHWM), in KiB."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        match = re.search(r"VmHWM:\s+(\d+) kB", status)
        assert match is not None
        return int(match[1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(WAIT)
        self._close_pipes()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class HttpDriver:
    """`python -m jfsm.cli driver --http 0 --token TOKEN`; `port` read from its stderr."""

    def __init__(
        self,
        token: str = "test-token",
        *,
        state: Path | None = None,
        spec: Path | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        argv = [sys.executable, "-m", "jfsm.cli", "driver", "--http", "0", "--token", token]
        if state is not None:
            argv += ["--state", str(state)]
        argv += extra
        self.token = token
        self.proc = subprocess.Popen(
            argv, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=_env(spec)
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline().decode()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match is not None, line
        self.port = int(match[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._ids = 0
        self._client: Any = None
        self.stderr: list[bytes] = []
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}

    def raw(self, data: bytes, *, timeout: float = WAIT) -> bytes:
        """Send raw bytes on a fresh connection; everything the driver answers until close."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)

    @property
    def client(self) -> Any:
        """One kept-alive httpx client (making one per request costs a TLS context)."""
        import httpx

        if self._client is None:
            self._client = httpx.Client(timeout=WAIT)
        return self._client

    def drop_connections(self) -> None:
        """Close the kept-alive connection (it holds one of the driver's slots)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        response = self.client.post(
            self.url + "/v1/message",
            json={"id": self._ids, "op": op, "args": args},
            headers=self.headers(),
        )
        assert response.status_code == 200, response.text
        reply = response.json()
        assert reply["id"] == self._ids
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(WAIT)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def status_and_body(response: bytes) -> tuple[int, dict[str, Any] | None]:
    """The status code and the JSON body (None if none) of a raw HTTP/1.1 response."""
    head, _, body = response.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body.strip() else None


_ZYGOTE = r"""
import json, os, signal, sys
import jfsm.cli, jfsm.driver, jfsm.stores.file, jfsm.transport  # imported once, shared by forks
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
for line in sys.stdin:
    command = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.dup2(os.open(command["stdin"], os.O_RDONLY), 0)
        os.dup2(os.open(command["stdout"], os.O_WRONLY), 1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        os._exit(jfsm.cli.main(command["argv"]))
    print(pid, flush=True)
"""


class DriverZygote:
    """Starts `jfsm driver` processes fast: one Python process imports jfsm once and forks a
    child per driver, which runs `jfsm.cli.main(["driver", ...])` on FIFOs as stdin/stdout.
    The children are real processes (killed with a real SIGKILL)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.count = 0

    def start(self, argv: list[str]) -> ForkedDriver:
        self.count += 1
        stdin = self.tmp / f"in-{self.count}"
        stdout = self.tmp / f"out-{self.count}"
        os.mkfifo(stdin)
        os.mkfifo(stdout)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        command = {"stdin": str(stdin), "stdout": str(stdout), "argv": argv}
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        writer = open(stdin, "wb", buffering=0)  # noqa: SIM115 (closed by ForkedDriver)
        reader = open(stdout, "rb")  # noqa: SIM115
        pid = int(self.proc.stdout.readline())
        return ForkedDriver(pid, writer, reader)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(WAIT)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class ForkedDriver:
    """A driver forked by `DriverZygote`, spoken to over FIFOs."""

    def __init__(self, pid: int, writer: Any, reader: Any) -> None:
        self.pid = pid
        self.writer = writer
        self.reader = reader
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._ids = 0
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        for line in self.reader:
            self.lines.put(line)
        self.lines.put(b"")

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    def reply(self, timeout: float = WAIT) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line, "the driver closed its stdout"
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply

    def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        self.send_raw(json.dumps({"id": self._ids, "op": op, "args": args}).encode() + b"\n")
        reply = self.reply()
        assert reply["id"] == self._ids, reply
        return reply

    def kill(self) -> None:
        """SIGKILL, then wait until the process is gone (its stdout reaches EOF)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self._pump_thread.join(WAIT)
        assert not self._pump_thread.is_alive(), "the killed driver's stdout stayed open"
        with contextlib.suppress(OSError):
            self.writer.close()
        self.reader.close()
        deadline = time.monotonic() + WAIT
        while Path(f"/proc/{self.pid}").exists():  # the kernel reaps it (SIGCHLD ignored)
            assert time.monotonic() < deadline, "the killed driver did not go away"
            time.sleep(0.01)
