"""The driver protocol over HTTP (`jfsm driver --http PORT`), for local callers only.

**The one concept: the HTTP transport of the driver protocol, and who it answers.**

One asyncio server on 127.0.0.1, HTTP/1.1 parsed by h11, one `POST /v1/message` per message.
A request is answered only if it comes from a local program that knows the token
(decision R24, JF-ERR-011); in order, it is refused with a protocol error body
(`{"id": null, "ok": false, "error": {"code": "invalid_input", ...}}`) and the connection
closed when:

| status | when |
| --- | --- |
| 400 | HTTP framing h11 rejects (bad or negative `Content-Length`, bad header lines) |
| 421 | `Host` is not a loopback name (`127.0.0.1`, `localhost`, `[::1]`): DNS rebinding |
| 403 | an `Origin` other than the driver's own: a web page in a browser |
| 405 / 404 | not `POST` / not `/v1/message` |
| 401 | no `Authorization: Bearer <token>` with the driver's token |
| 503 | every connection slot held by other authenticated connections (R236) |
| 415 | `Content-Type` is not `application/json` (a browser's "simple" request) |
| 411 / 413 | no length / a body over the spec's `message_max_bytes` |
| 408 | headers or body not complete within their timeout |
| 431 | request headers over the header limit |
| 400 | a body that is not a readable message (not JSON, too deep, no valid id) |

A new connection over the budget of unauthenticated connections closes the oldest silent one
(nothing arrived from it; the oldest, when none is silent) with 503, whatever it has sent
(R235).

Everything else is answered 200 with the driver's reply and the connection kept alive.
Started with `metrics` (`jfsm driver --http PORT --metrics`), the driver also answers
`GET /metrics` with the token, after the same checks, with its OpenTelemetry metrics in
Prometheus' text format (decision R210).
The limits (timeouts, header bytes, connection slots, listen backlog) are the `http`
section of `spec/driver/protocol.json` (JF-ERR-012); a half-sent request never holds a
slot past its timeout, and a burst of connects waits in the listen backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import re
import secrets
import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import h11

from jfsm.driver.stdio import MessageHandler, close_handler
from jfsm.driver.wire import Refusal, decode, encode, error_reply
from jfsm.spec import constants, load_json

__all__ = ["HttpLimits", "http_limits", "new_token", "serve_http", "serve_http_async"]

PATH = "/v1/message"
METRICS_PATH = "/metrics"  # with `metrics`: Prometheus text, GET, the same token (R210)
LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]"})
_HOST = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?", re.IGNORECASE)
_HEAD_END = re.compile(rb"\n\r?\n")  # h11 ends a head at a blank line, CRLF or LF
#: What `/metrics` serves: a function rendering the metrics, and their content type.
Metrics = tuple[Callable[[], bytes], str]
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The HTTP transport's bounds (`spec/driver/protocol.json` `http.limits`)."""

    header_bytes: int
    header_timeout: float
    body_timeout: float
    idle_timeout: float
    connections: int
    backlog: int
    body_bytes: int
    auth_timeout: float = 3.0
    unauthenticated_connections: int = 512


@cache
def http_limits() -> HttpLimits:
    """The HTTP limits from the spec."""
    raw = {k: v["value"] for k, v in load_json("driver/protocol.json")["http"]["limits"].items()}
    return HttpLimits(
        header_bytes=raw["header_bytes"],
        header_timeout=raw["header_timeout_seconds"],
        body_timeout=raw["body_timeout_seconds"],
        idle_timeout=raw["idle_timeout_seconds"],
        connections=raw["connections"],
        backlog=raw["backlog"],
        body_bytes=constants().message_max_bytes,
        auth_timeout=raw["auth_timeout_seconds"],
        unauthenticated_connections=raw["unauthenticated_connections"],
    )


def new_token() -> str:
    """A fresh random bearer token (URL-safe text)."""
    return secrets.token_urlsafe(24)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _response_bytes(status: int, body: bytes, *, close: bool) -> bytes:
    head = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
    ]
    if status == 401:
        head.append('WWW-Authenticate: Bearer realm="jfsm-driver"')
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


def _refusal_body(message: str) -> bytes:
    return encode(error_reply(None, "invalid_input", message + "; nothing was done"))


def _pending_bytes(writer: asyncio.StreamWriter) -> int:
    """Bytes received by the kernel and not read yet on the connection's socket; 0 where
    that cannot be asked (no `FIONREAD`)."""
    sock = writer.get_extra_info("socket")
    try:
        import fcntl
        import termios

        answer = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except (ImportError, AttributeError, OSError, ValueError):
        return 0
    return int.from_bytes(answer, sys.byteorder, signed=True)


def _loopback_host(value: str) -> bool:
    """Whether a `Host` value is exactly a loopback name and an optional port."""
    return _HOST.fullmatch(value) is not None


class _Connection:
    def __init__(
        self,
        driver: MessageHandler,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        token: str,
        port: int,
        limits: HttpLimits,
        on_shutdown: Callable[[], None],
        admit: Callable[[], bool] = lambda: True,
        metrics: Metrics | None = None,
    ) -> None:
        self.driver = driver
        self.metrics = metrics
        self.reader = reader
        self.writer = writer
        self.token = token.encode("utf-8")
        self.origins = {f"http://{host}:{port}" for host in LOOPBACK}
        self.limits = limits
        self.on_shutdown = on_shutdown
        self.admit = admit  # takes a slot for an authenticated connection; False: none left
        self.admitted = False
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.header_bytes)
        self.loop = asyncio.get_running_loop()
        self.accepted = self.loop.time()
        self.heard = False  # a byte has arrived: the connection is not silent
        self._head: bytearray | None = None  # the current head's first bytes, while it comes

    def silent(self) -> bool:
        """Whether nothing has arrived from the client yet: no byte read, none in the
        stream's buffer, none waiting in the kernel (a request sent just now counts)."""
        if self.heard or getattr(self.reader, "_buffer", None):  # asyncio keeps it private
            return False
        return _pending_bytes(self.writer) == 0

    def _count_head(self, data: bytes) -> None:
        """Refuse with 431 a head over the limit, counted on the bytes received."""
        assert self._head is not None
        limit = self.limits.header_bytes
        self._head += data[: limit + 2 - len(self._head)]
        end = _HEAD_END.search(self._head)
        if (end.end() if end else len(self._head)) > limit:
            raise _Refused(431, f"the request head exceeds {limit} bytes")
        if end is not None:
            self._head = None  # the head is complete: what follows is the body

    async def _event(
        self, deadline: float, *, idle: float | None = None, head: bool = False
    ) -> Any:
        """The next h11 event; `idle`: a later deadline that holds until the first byte;
        `head`: a request head is awaited (its bytes are counted against the limit)."""
        if head:
            self._head = bytearray()
            self._count_head(self.h11.trailing_data[0])
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError:
                raise
            except ValueError as exc:  # e.g. a Content-Length of thousands of digits
                raise _Refused(400, f"malformed HTTP request: {exc}") from None
            if event is not h11.NEED_DATA:
                return event
            wait = (idle if idle is not None else deadline) - self.loop.time()
            if wait <= 0:
                raise _Refused(408, "the request did not arrive within its timeout")
            try:
                data = await asyncio.wait_for(self.reader.read(65536), wait)
            except TimeoutError:
                raise _Refused(408, "the request did not arrive within its timeout") from None
            if data and idle is not None:
                idle = None
                deadline = self.loop.time() + self.limits.header_timeout
            self.heard = self.heard or bool(data)
            self.h11.receive_data(data)
            if self._head is not None:
                self._count_head(data)

    def _check_head(self, request: h11.Request) -> bool:
        """Refuse a request the driver does not serve (`_Refused`); True for a scrape of
        `/metrics` (served when the driver was started with `metrics`)."""
        # h11 bounds only a head that arrives in pieces; one that arrives whole is measured
        size = len(request.method) + len(request.target) + 11
        if size + sum(len(n) + len(v) + 4 for n, v in request.headers) > self.limits.header_bytes:
            raise _Refused(431, f"the headers exceed {self.limits.header_bytes} bytes")
        headers: dict[bytes, list[bytes]] = {}
        for name, value in request.headers:
            headers.setdefault(name.lower(), []).append(value)
        hosts = headers.get(b"host", [])
        host = hosts[0].decode("latin-1") if len(hosts) == 1 else ""
        if not _loopback_host(host):
            raise _Refused(421, "Host must be a loopback name (127.0.0.1, localhost, [::1])")
        for origin in headers.get(b"origin", []):
            if origin.decode("latin-1").lower() not in self.origins:
                raise _Refused(403, "requests from another origin (a web page) are refused")
        scrape = self.metrics is not None and request.target == METRICS_PATH.encode()
        if scrape:
            if request.method != b"GET":
                raise _Refused(405, f"only GET is served on {METRICS_PATH}")
        elif request.method != b"POST":
            raise _Refused(405, "only POST is served")
        elif request.target != PATH.encode():
            raise _Refused(404, f"the only resource is {PATH}")
        auth = headers.get(b"authorization", [])
        given = auth[0] if len(auth) == 1 else b""
        if not (given[:7].lower() == b"bearer " and hmac.compare_digest(given[7:], self.token)):
            raise _Refused(401, "missing or wrong bearer token (Authorization: Bearer TOKEN)")
        if not self.admitted:
            if not self.admit():
                raise _Refused(503, "every connection slot is busy; try again")
            self.admitted = True
        if scrape:
            return True
        types = headers.get(b"content-type", [])
        media = types[0].split(b";")[0].strip().lower() if len(types) == 1 else b""
        if media != b"application/json":
            raise _Refused(415, "Content-Type must be application/json")
        lengths = headers.get(b"content-length", [])
        chunked = b"chunked" in b",".join(headers.get(b"transfer-encoding", [])).lower()
        if not lengths and not chunked:
            raise _Refused(411, "Content-Length is required")
        if lengths and int(lengths[0].strip() or b"0") > self.limits.body_bytes:
            raise _Refused(413, f"the body exceeds the limit of {self.limits.body_bytes} bytes")
        return False

    async def _body(self) -> bytes:
        deadline = self.loop.time() + self.limits.body_timeout
        body = bytearray()
        while True:
            event = await self._event(deadline)
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.limits.body_bytes:
                    raise _Refused(
                        413, f"the body exceeds the limit of {self.limits.body_bytes} bytes"
                    )
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:
                raise _Refused(400, "the connection ended inside the body")

    async def run(self) -> None:
        first = True
        while True:
            now = self.loop.time()
            try:
                if first:
                    event = await self._event(
                        min(
                            now + self.limits.header_timeout,
                            self.accepted + self.limits.auth_timeout,
                        ),
                        head=True,
                    )
                else:
                    event = await self._event(
                        now + self.limits.header_timeout,
                        idle=now + self.limits.idle_timeout,
                        head=True,
                    )
            except _Refused as refused:
                if self.h11.their_state is h11.IDLE and not self.h11.trailing_data[0]:
                    return  # an idle keep-alive connection: close it without a word
                await self._refuse(refused.status, refused.message)
                return
            except h11.RemoteProtocolError as exc:
                await self._refuse(exc.error_status_hint, f"malformed HTTP request: {exc}")
                return
            first = False
            if isinstance(event, h11.ConnectionClosed) or not isinstance(event, h11.Request):
                return
            try:
                scrape = self._check_head(event)
                if self.h11.they_are_waiting_for_100_continue:
                    self.writer.write(
                        self.h11.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
                body = await self._body()
            except _Refused as refused:
                await self._refuse(refused.status, refused.message)
                return
            except h11.RemoteProtocolError as exc:
                await self._refuse(exc.error_status_hint, f"malformed HTTP request: {exc}")
                return
            if scrape:
                await self._scrape()
            elif not await self._answer(body):
                return
            if self.h11.our_state is h11.MUST_CLOSE or self.h11.their_state is h11.MUST_CLOSE:
                return
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                return

    async def _answer(self, body: bytes) -> bool:
        message = decode(body)
        if isinstance(message, Refusal):
            await self._refuse(400, message.message)
            return False
        reply = await self.driver.handle(message)
        data = encode(reply)
        if reply.get("id") is None:  # the body was not a readable message
            await self._send_raw(_response_bytes(400, data, close=True))
            return False
        response = h11.Response(
            status_code=200,
            headers=[
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(data))),
                ("Cache-Control", "no-store"),
            ],
        )
        self.writer.write(self.h11.send(response) + self.h11.send(h11.Data(data=data)))
        self.writer.write(self.h11.send(h11.EndOfMessage()))
        await self.writer.drain()
        if isinstance(message, dict) and message.get("op") == "shutdown" and reply.get("ok"):
            self.on_shutdown()
            return False
        return True

    async def _scrape(self) -> None:
        """Answer `GET /metrics`: the metrics in Prometheus' text format, collected off the
        event loop (the SDK's collection is CPU work, and runs the observable callbacks)."""
        assert self.metrics is not None
        collect, content_type = self.metrics
        data = await asyncio.to_thread(collect)
        response = h11.Response(
            status_code=200,
            headers=[
                ("Content-Type", content_type),
                ("Content-Length", str(len(data))),
                ("Cache-Control", "no-store"),
            ],
        )
        self.writer.write(self.h11.send(response) + self.h11.send(h11.Data(data=data)))
        self.writer.write(self.h11.send(h11.EndOfMessage()))
        await self.writer.drain()

    async def _refuse(self, status: int, message: str) -> None:
        await self._send_raw(_response_bytes(status, _refusal_body(message), close=True))

    async def _send_raw(self, data: bytes) -> None:
        with contextlib.suppress(OSError, ConnectionError, RuntimeError):
            self.writer.write(data)
            await asyncio.wait_for(self.writer.drain(), self.limits.header_timeout)
            self.writer.write_eof()
            # Read what the client still sends for a moment, so that closing does not reset
            # the connection before it has read the answer.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._discard(1 << 20), 1.0)

    async def _discard(self, budget: int) -> None:
        while budget > 0:
            data = await self.reader.read(65536)
            if not data:
                return
            budget -= len(data)


async def serve_http_async(
    driver: MessageHandler,
    port: int,
    *,
    token: str,
    ready: Callable[[int], None] | None = None,
    limits: HttpLimits | None = None,
    metrics: Metrics | None = None,
) -> None:
    """Serve `POST /v1/message` on 127.0.0.1:`port` until `shutdown` or cancellation;
    closes the driver at the end. `metrics` (`jfsm.observability.prometheus_text()`'s pair):
    also serve `GET /metrics`, with the same token."""
    if not token:
        raise ValueError("the HTTP driver needs a non-empty bearer token")
    limits = limits or http_limits()
    _raise_open_files_limit(limits)
    stop = asyncio.Event()
    tasks: set[asyncio.Task[Any]] = set()  # every connection's
    # unauthenticated, oldest first
    waiting: OrderedDict[asyncio.Task[Any], _Connection] = OrderedDict()
    served: set[asyncio.Task[Any]] = set()  # authenticated: they hold the slots
    evicted: set[asyncio.Task[Any]] = set()
    bound = port

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None

        def admit() -> bool:
            waiting.pop(task, None)
            if len(served) >= limits.connections:
                return False
            served.add(task)
            return True

        try:
            connection = _Connection(
                driver,
                reader,
                writer,
                token=token,
                port=bound,
                limits=limits,
                on_shutdown=stop.set,
                admit=admit,
                metrics=metrics,
            )
            while len(waiting) >= limits.unauthenticated_connections:
                # The oldest silent one: a client whose request is on its way keeps its
                # place; only when none is silent does the oldest go, to keep the budget.
                victims = (other for other, held in waiting.items() if held.silent())
                oldest = next(victims, None) or next(iter(waiting))
                del waiting[oldest]
                evicted.add(oldest)
                oldest.cancel()  # closed without a word: it never sent a valid token
            tasks.add(task)
            waiting[task] = connection
            await connection.run()
        except (OSError, ConnectionError):
            pass  # the client went away
        except asyncio.CancelledError:
            if task not in evicted:
                raise
            over = _refusal_body("too many connections without a token; the oldest silent closes")
            with contextlib.suppress(OSError, ConnectionError, RuntimeError):
                writer.write(_response_bytes(503, over, close=True))  # buffered, not awaited
        except Exception as exc:  # never a traceback, never the server: one line
            print(f"jfsm driver: connection dropped: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            tasks.discard(task)
            waiting.pop(task, None)
            served.discard(task)
            evicted.discard(task)
            writer.close()

    server = await asyncio.start_server(
        connected, "127.0.0.1", port, backlog=limits.backlog, limit=1 << 16
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"jfsm driver listening on http://127.0.0.1:{bound}", file=sys.stderr, flush=True)
    if ready is not None:
        ready(bound)
    try:
        async with server:
            await stop.wait()
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await close_handler(driver)


def _raise_open_files_limit(limits: HttpLimits) -> None:
    """Raise the soft limit of open files (best effort) so that every connection the limits
    allow, plus the stores', can be open at once."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = limits.connections + limits.unauthenticated_connections + 256
        if soft != resource.RLIM_INFINITY and soft < wanted:
            top = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))


def serve_http(
    driver: MessageHandler,
    port: int,
    *,
    token: str | None = None,
    ready: Callable[[int], None] | None = None,
    metrics: Metrics | None = None,
) -> None:
    """Serve until `shutdown` or Ctrl-C (blocking). Without `token`, a random one is made
    and printed on stderr. `metrics`: see `serve_http_async`."""
    if token is None:
        token = new_token()
        print(f"jfsm driver bearer token: {token}", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_http_async(driver, port, token=token, ready=ready, metrics=metrics))
