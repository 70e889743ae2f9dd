"""The suite's side of the driver protocol: transports, ids, timeouts, schema checks.

A driver spec names the implementation under test:

- `python:MODULE:FACTORY`: in process; `FACTORY()` returns an object with
  `async handle(message) -> reply` and optionally `restart()` and `close()`. Messages go
  through a JSON round trip both ways, as on the wire.
- `stdio:COMMAND`: a subprocess speaking JSON lines; replies matched by id, so several
  requests can be outstanding. `restart` kills its process group with SIGKILL and starts
  `COMMAND` again. Its stderr is kept for the report. `{worker}` in `COMMAND` becomes the
  process's stable name, the same across its restarts (`main`; `worker-K` in the workers
  machine; R82). `{state}` in `COMMAND` becomes a fresh empty directory for the run (kept
  across restarts, removed at the end).
- `http://HOST:PORT` (or `https://...`, or the older spelling `http:URL`): one POST per
  message to `URL/v1/message`, with the bearer token from the environment variable
  `JFSM_DRIVER_TOKEN` if set (kept out of the spec, which reports record). It is restarted
  with the protocol's `restart` op (R141), as is an in-process driver without `restart()`.

A driver that writes a non-JSON line on stdout fails the waiting requests at once with
`ProtocolViolation` (quoting the line); a driver that exits fails them with `HarnessError`
naming its exit status (or signal), and the report carries its stderr tail.

`DriverClient` runs the transport on its own event-loop thread and offers a blocking API
(`call`, `start` + `wait`), which is what Hypothesis rules need. Every wait is bounded: a
driver that does not answer in time, or dies, raises `HarnessError` carrying its stderr
tail (the runner exits 2). A reply that breaks the protocol raises `ProtocolViolation`.

**The one concept:** one connection to the implementation under test, whatever carries it;
its three transports share the id matching, the bounded waits and the schema checks, so they
stay one module.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import inspect
import json
import os
import shlex
import shutil
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from jfsm_conformance.client import groups
from jfsm_conformance.client.protocol import ProtocolViolation, Reply, protocol
from jfsm_conformance.record.traces import Transcript

__all__ = [
    "DriverClient",
    "DriverDied",
    "HarnessError",
    "NoWire",
    "ProtocolViolation",
    "UnsupportedOp",
    "state_folder",
]

DEFAULT_TIMEOUT = 120.0  # seconds for a reply after `hello` (`--op-timeout`)
HELLO_TIMEOUT = 10.0  # seconds for the reply to `hello` (`--hello-timeout`)


def state_folder(prefix: str) -> str:
    """A fresh empty folder for a driver's `{state}` (or a probe's state directory), removed
    at the latest when the suite's process ends, by a signal included
    (`groups.temporary_folder`). Raises `OSError` if it cannot be made."""
    return groups.temporary_folder(prefix)


class HarnessError(Exception):
    """The driver could not be started or complete `hello`, or the suite met a fault of its
    own (exit code 2)."""


class DriverDied(HarnessError):
    """The driver exited, was killed or stopped answering after its `hello`: a verdict on
    what it was doing (the runner blames the requirement being exercised, restarts the
    driver and goes on: decision R194), not the end of the run."""


class UnsupportedOp(Exception):
    """The driver answered `unsupported_op`: what needs `op` is not covered, not failed."""

    def __init__(self, op: str) -> None:
        super().__init__(f"the driver does not support op {op!r}")
        self.op = op


class NoWire(Exception):
    """The transport cannot carry these bytes to the driver as they are (an in-process driver
    without `handle_bytes`): the probe is not covered, not failed."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _encode(message: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(message, ensure_ascii=False)
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate, sent on purpose: escape it
        return json.dumps(message, ensure_ascii=True).encode("ascii") + b"\n"


class _NotPlain(Exception):
    """A value the fast copy leaves to the JSON round trip (`_wire`)."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value  # immutable: what JSON would give back, without re-reading 30 MiB
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = _copy(item)
        return out
    if kind is list or kind is tuple:
        return [_copy(item) for item in value]
    raise _NotPlain


def _wire(value: Any, through_json: Callable[[Any], Any]) -> Any:
    """`value` as the wire would deliver it: a fresh copy of plain JSON types, or, for
    anything else (a subclass, a non-string key, a set, nesting too deep), what
    `through_json` (the JSON round trip, which converts or raises) makes of it. Equal to the
    round trip on plain values (`tests/suite/test_driver_client.py`), at the cost of the
    containers only."""
    try:
        return _copy(value)
    except (_NotPlain, RecursionError):
        return through_json(value)


class _InProcess:
    def __init__(self, target: str) -> None:
        module_name, _, factory_name = target.partition(":")
        if not module_name or not factory_name:
            raise HarnessError(f"python driver spec must be python:MODULE:FACTORY, not {target!r}")
        try:
            factory = getattr(importlib.import_module(module_name), factory_name)
        except (ImportError, AttributeError) as exc:
            raise HarnessError(f"cannot load driver factory {target!r}: {exc}") from exc
        self.driver = factory()
        if not callable(getattr(self.driver, "handle", None)):
            raise HarnessError(f"{target!r} returned an object without handle()")

    # with `restart()` the suite calls it; without, it sends the protocol's `restart` op
    native_restart = property(lambda self: callable(getattr(self.driver, "restart", None)))

    async def send(self, message: dict[str, Any]) -> Any:
        wire = _wire(message, lambda m: json.loads(_encode(m)))
        reply = await self.driver.handle(wire)
        return _wire(reply, lambda r: json.loads(json.dumps(r, ensure_ascii=True)))

    async def send_raw(self, data: bytes, msg_id: int | None) -> tuple[int | None, Any]:
        """Hostile bytes: to `handle_bytes` if the driver has it, else (JSON only) `handle`."""
        handle_bytes = getattr(self.driver, "handle_bytes", None)
        if callable(handle_bytes):
            return None, json.loads(json.dumps(await handle_bytes(data), ensure_ascii=True))
        try:
            message = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise NoWire("an in-process driver without handle_bytes") from exc
        return None, json.loads(json.dumps(await self.driver.handle(message), ensure_ascii=True))

    async def restart(self) -> None:
        result = self.driver.restart()
        if inspect.isawaitable(result):
            await result

    async def close(self) -> None:
        close = getattr(self.driver, "close", None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                await result

    def stderr_tail(self) -> str:
        return ""


async def _exit(proc: asyncio.subprocess.Process) -> int:
    """The process's exit status, as soon as it exited: `proc.wait()` waits for its pipes
    too, which a process it started may hold open."""
    while proc.returncode is None:
        await asyncio.sleep(0.02)
    return proc.returncode


CLOSE_WAIT = 2.0  # seconds a driver has to exit once its stdin is closed, before SIGTERM
EXIT_DRAIN = 0.5  # seconds an exited driver's stdout and stderr have to deliver what is left


class _Stdio:
    native_restart = True  # SIGKILL and the command started again

    def __init__(self, command: str) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise HarnessError("stdio driver spec needs a command")
        # `{state}`: a fresh empty directory for the run, kept across restarts (R80)
        self.state: str | None = None
        if any("{state}" in arg for arg in self.argv):
            self.state = state_folder("jfsm-suite-state-")
            self.argv = [arg.replace("{state}", self.state) for arg in self.argv]
        # `{worker}`: this process's stable name among the processes the suite starts from the
        # command, the same across its restarts: `main`, or `worker-K` in the workers machine
        # (R82: a driver may use it as the owner id of its leases)
        self.argv = [arg.replace("{worker}", "main") for arg in self.argv]
        self.proc: asyncio.subprocess.Process | None = None
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.stderr: deque[str] = deque(maxlen=200)
        self.tasks: list[asyncio.Task[None]] = []
        self.exited: str | None = None
        # replies with id null (to hostile bytes, `send_raw`), in arrival order
        self.orphans: deque[Any] = deque(maxlen=100)
        self.orphan_arrived = asyncio.Event()
        # a non-JSON stdout line that no request was waiting for: the next request fails on it
        self.unclaimed_garbage: ProtocolViolation | None = None

    async def open(self) -> None:
        with groups.spawning():  # a signal waits until its group is recorded (R193)
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    limit=1 << 30,
                    start_new_session=True,
                )
            except OSError as exc:
                raise HarnessError(f"cannot start driver {self.argv!r}: {exc}") from exc
            groups.started(self.proc.pid)  # start_new_session: its pid is its group's id
        self.exited = None
        proc = self.proc
        self.tasks = [
            asyncio.create_task(self._read_stdout(proc)),
            asyncio.create_task(self._read_stderr(proc)),
            asyncio.create_task(self._watch_exit(proc)),
        ]

    async def _read_stdout(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            line = await proc.stdout.readline()
            if not line:
                break
            try:
                reply = json.loads(line)
            except ValueError:
                self._garbage(line)
                continue
            msg_id = reply.get("id") if isinstance(reply, dict) else None
            future = self.pending.pop(msg_id, None) if isinstance(msg_id, int) else None
            if future is None and isinstance(reply, dict) and msg_id is None:
                self.orphans.append(reply)
                self.orphan_arrived.set()
            elif future is None:
                self.stderr.append(f"[suite] reply with unknown id: {str(reply)[:200]}")
            elif not future.done():
                future.set_result(reply)
        self._ended(proc, await self._exit_status(proc))

    async def _watch_exit(self, proc: asyncio.subprocess.Process) -> None:
        """The driver's exit, even while a process it started keeps its stdout open (a
        shell's child): once it exited and its stdout had `EXIT_DRAIN` seconds to deliver
        what it wrote, the waiting requests fail with its exit status."""
        await _exit(proc)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self.tasks[0]), EXIT_DRAIN)
        self._ended(proc, await self._exit_status(proc))

    def _ended(self, proc: asyncio.subprocess.Process, status: str) -> None:
        if proc is self.proc and self.exited is None:
            self.exited = status
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(DriverDied(status))
            self.pending.clear()

    def _garbage(self, line: bytes) -> None:
        """A line on stdout that is not JSON: fail every waiting request at once, saying so."""
        shown = line[:200].decode("utf-8", "replace").rstrip("\n")
        self.stderr.append(f"[suite] non-JSON line on stdout: {shown!r}")
        problem = ProtocolViolation(
            f"the driver wrote a line that is not JSON on stdout: {shown!r} (stdout carries "
            "replies only, one JSON object per line; write logs to stderr)"
        )
        waiting = [f for f in self.pending.values() if not f.done()]
        for future in waiting:
            future.set_exception(problem)
        self.pending.clear()
        if not waiting:  # it came before any request (a banner at start): the next one fails
            self.unclaimed_garbage = problem

    async def _exit_status(self, proc: asyncio.subprocess.Process) -> str:
        """How the process ended, once its stderr is read to the end (bounded waits)."""
        code = await _exit(proc)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self.tasks[1]), EXIT_DRAIN)
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"driver killed by signal {signal.Signals(-code).name}"
        return f"driver exited with status {code}"

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        async for line in proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace").rstrip("\n"))

    async def send(self, message: dict[str, Any]) -> Any:
        if self.proc is None or self.exited or self.proc.stdin is None:
            raise DriverDied(self.exited or "driver not running")
        if self.unclaimed_garbage is not None:
            problem, self.unclaimed_garbage = self.unclaimed_garbage, None
            raise problem
        proc = self.proc
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[message["id"]] = future
        try:
            assert proc.stdin is not None
            proc.stdin.write(_encode(message))
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            # the process ended: say how (its exit status), not the pipe's side effect
            self.pending.pop(message["id"], None)
            try:
                status = await asyncio.wait_for(self._exit_status(proc), 5)
            except TimeoutError:
                status = f"the driver closed its stdin ({exc}) but is still running"
            raise DriverDied(status) from exc
        return await future

    async def send_raw(self, data: bytes, msg_id: int | None) -> tuple[int | None, Any]:
        """Write `data` and a newline; the reply: the next with id null, or with `msg_id`."""
        if self.proc is None or self.exited or self.proc.stdin is None:
            raise HarnessError(self.exited or "driver not running")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        key = -1 if msg_id is None else msg_id  # -1: no reply carries it, but an exit fails it
        self.pending[key] = future
        self.orphan_arrived.clear()
        try:
            self.proc.stdin.write(data + b"\n")
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            self.pending.pop(key, None)
            raise HarnessError("the driver closed its stdin") from exc
        orphan = asyncio.ensure_future(self.orphan_arrived.wait())
        try:
            await asyncio.wait({future, orphan}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            orphan.cancel()
        if future.done():
            return None, future.result()
        self.pending.pop(key, None)
        return None, self.orphans.popleft()

    def extra_replies(self) -> list[Any]:
        """Replies with id null that nothing waited for (a second reply to one message)."""
        extra = list(self.orphans)
        self.orphans.clear()
        return extra

    async def kill(self, grace: float = 0.0) -> None:
        """End the driver's process group (SIGKILL; with `grace`, SIGTERM first and up to
        `grace` seconds), also when its leader already exited: what it started goes too."""
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        await asyncio.get_running_loop().run_in_executor(None, groups.end, proc.pid, grace)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 10)
        here = asyncio.current_task()
        waiting = [task for task in self.tasks if task is not here]
        for task in waiting:
            task.cancel()
        if waiting:  # let the cancellations run: a loop closed after must find no task pending
            await asyncio.wait(waiting, timeout=5)
        for future in self.pending.values():
            if not future.done():
                future.set_exception(DriverDied("driver killed by the suite (restart)"))
        self.pending.clear()

    async def restart(self) -> None:
        await self.kill()
        self.stderr.append("[suite] --- driver killed (SIGKILL) and started again ---")
        await self.open()

    async def close(self) -> None:
        proc = self.proc
        if proc is not None and proc.stdin is not None and proc.returncode is None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_exit(proc), CLOSE_WAIT)
        await self.kill(groups.GRACE)
        if self.state is not None:
            shutil.rmtree(self.state, ignore_errors=True)

    def stderr_tail(self) -> str:
        return "\n".join(list(self.stderr)[-40:])


class _Http:
    native_restart = False  # the suite sends the `restart` op (R141)

    def __init__(self, url: str) -> None:
        import httpx

        self.url = url.rstrip("/") + "/v1/message"
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(DEFAULT_TIMEOUT, connect=10))
        self.headers = {"Content-Type": "application/json"}
        token = os.environ.get("JFSM_DRIVER_TOKEN")
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    async def send(self, message: dict[str, Any]) -> Any:
        import httpx

        try:
            response = await self.client.post(
                self.url, content=_encode(message), headers=self.headers
            )
        except httpx.HTTPError as exc:
            raise HarnessError(f"driver at {self.url} unreachable: {exc!r}") from exc
        if response.status_code != 200:
            raise ProtocolViolation(f"driver answered HTTP {response.status_code}, not 200")
        try:
            return response.json()
        except ValueError as exc:
            raise ProtocolViolation(f"driver reply is not JSON: {exc}") from exc

    async def send_raw(self, data: bytes, msg_id: int | None) -> tuple[int | None, Any]:
        """POST `data` as it is: the status and the body (None if it is not JSON); a
        connection closed without a response is no reply (a text saying so), for the probe
        to judge (JF-ERR-008), whether it closed (FIN) or reset (RST: it closed with the
        request unread) the connection; a driver that could not be reached at all (no
        connection) is a `HarnessError`."""
        import httpx

        try:
            response = await self.client.post(self.url, content=data, headers=self.headers)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            # connected, then closed without an answer: no reply
            return None, f"no reply: the driver closed the connection without a response ({exc!r})"
        except httpx.HTTPError as exc:
            raise HarnessError(f"driver at {self.url} unreachable: {exc!r}") from exc
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    async def close(self) -> None:
        await self.client.aclose()

    def stderr_tail(self) -> str:
        return ""


class DriverClient:
    """A blocking client over one driver, running its transport on a private loop thread.

    `transcript` records the messages sent and received, compacted and bounded (for traces).
    """

    def __init__(
        self,
        spec: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        hello_timeout: float = HELLO_TIMEOUT,
    ) -> None:
        self.spec = spec
        self.timeout = timeout
        self.hello_timeout = hello_timeout
        self.protocol = protocol()
        self.transcript = Transcript()
        self._ids = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="conformance-driver"
        )
        self._thread.start()
        kind, _, target = spec.partition(":")
        if kind in ("http", "https") and target.startswith("//"):
            target = spec  # http://host:port as written (http:URL is the older spelling)
        try:
            if kind == "python":
                self.transport: Any = self._run(self._make(_InProcess, target), 60)
            elif kind == "stdio":
                self.transport = _Stdio(target)
                self._run(self.transport.open(), 60)
            elif kind in ("http", "https"):
                self.transport = self._run(self._make(_Http, target), 60)
            else:
                raise HarnessError(
                    "driver spec must be python:MODULE:FACTORY, stdio:COMMAND or "
                    f"http://HOST:PORT, not {spec!r}"
                )
        except BaseException:
            with contextlib.suppress(Exception):
                if isinstance(getattr(self, "transport", None), _Stdio):
                    self._run(self.transport.kill(), 10)
            self._stop_loop()
            raise

    @staticmethod
    async def _make(cls: Any, target: str) -> Any:
        return cls(target)

    def _run(self, coro: Any, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise HarnessError(f"driver did not finish within {timeout:.0f} s") from exc

    @property
    def can_restart(self) -> bool:
        """Every driver can be restarted (`restart`): stdio by SIGKILL, any other by its
        `restart()` or the `restart` op."""
        return True

    def stderr_tail(self) -> str:
        return self.transport.stderr_tail()

    # -- messages ------------------------------------------------------------------------
    def start(self, op: str, args: dict[str, Any]) -> concurrent.futures.Future[Any]:
        """Send one request without waiting; `wait` collects the reply."""
        with self._lock:
            self._ids += 1
            message = {"id": self._ids, "op": op, "args": args}
        self.protocol.check_request(message)
        self.transcript.append({"send": message, "t": time.monotonic()})
        future = asyncio.run_coroutine_threadsafe(self.transport.send(message), self._loop)
        future.op = op  # type: ignore[attr-defined]
        future.msg_id = message["id"]  # type: ignore[attr-defined]
        return future

    def wait(self, future: concurrent.futures.Future[Any], timeout: float | None = None) -> Reply:
        """The reply to a started request; `DriverDied` on timeout or a dead driver."""
        op = future.op  # type: ignore[attr-defined]
        limit = self.timeout if timeout is None else timeout
        try:
            raw = future.result(limit)
        except concurrent.futures.TimeoutError as exc:
            raise DriverDied(
                f"no reply to {op!r} within {limit:g} s\n{self.stderr_tail()}"
            ) from exc
        except HarnessError as exc:
            kind = type(exc)
            raise kind(f"{exc} (waiting for {op!r})\n{self.stderr_tail()}") from exc
        self.transcript.append({"recv": raw, "t": time.monotonic()})
        self.protocol.check_reply(op, raw)
        if raw.get("id") != future.msg_id:  # type: ignore[attr-defined]
            raise ProtocolViolation(f"reply to {op!r} carries id {raw.get('id')!r}")
        return Reply(raw)

    def done(self, future: concurrent.futures.Future[Any], timeout: float) -> bool:
        """Whether the reply arrived within `timeout` seconds (without consuming it)."""
        try:
            future.exception(timeout)
        except concurrent.futures.TimeoutError:
            return False
        except concurrent.futures.CancelledError:
            return True
        return True

    def call(self, op: str, args: dict[str, Any], timeout: float | None = None) -> Reply:
        """Send one request and wait for its reply."""
        return self.wait(self.start(op, args), timeout)

    def next_id(self) -> int:
        """A message id no other message of this client carries."""
        with self._lock:
            self._ids += 1
            return self._ids

    def send_raw(self, data: bytes, msg_id: int | None) -> tuple[int | None, Any]:
        """Hostile bytes, unchecked: `(HTTP status or None, reply with id null or `msg_id`)`;
        `NoWire` if the transport cannot carry them, `HarnessError` without a reply in time."""
        shown = data[:200].decode("utf-8", "replace")
        self.transcript.append({"send_raw": shown, "bytes": len(data), "t": time.monotonic()})
        status, raw = self._run(self.transport.send_raw(data, msg_id), self.timeout)
        self.transcript.append({"recv": raw, "status": status, "t": time.monotonic()})
        return status, raw

    def restart(self) -> Reply | None:
        """Restart the driver: a stdio one is killed (SIGKILL of its process group) and its
        command started again; an in-process one with `restart()` has it called; any other
        (HTTP, in process without `restart()`) is sent the protocol's `restart` op, whose
        reply is returned for the caller to judge (None otherwise; decision R141).
        `HarnessError` if it does not come back within 60 s."""
        self.transcript.append({"restart": True, "t": time.monotonic()})
        if self.transport.native_restart:
            self._run(self.transport.restart(), 60)
            return None
        return self.call("restart", {}, timeout=60)

    def close(self) -> None:
        """Close the transport and stop the loop thread (idempotent): a stdio driver has
        `CLOSE_WAIT` seconds to exit once its stdin is closed, then its group is ended
        (SIGTERM, `groups.GRACE`, SIGKILL)."""
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._run(self.transport.close(), 15)
        if isinstance(self.transport, _Stdio) and self.transport.proc is not None:
            groups.end(self.transport.proc.pid, 0)  # the loop did not get to it in time
        self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
