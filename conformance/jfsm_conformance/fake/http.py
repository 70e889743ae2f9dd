"""The fake compress.v2 over real HTTP on `127.0.0.1`: a threading server that hands each
request to an `answer` function and writes what it returns (a status and body, a chunked
body, or a reset). One request per connection; no access log; clients that go away are
ignored. Standard library only.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jfsm_conformance.fake.exchange import LOOPBACK, MAX_REQUEST_BYTES, FakeRequest, FakeResponse

__all__ = ["Answer", "start_server"]

Answer = Callable[[FakeRequest], FakeResponse]
"""The fake's whole behaviour for one request (`FakeCompress.answer`)."""

_CHUNK = 64 * 1024


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = False
    answer: Answer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that go away mid-reply are expected here; stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "jfsm-fake-compress"
    timeout = 10.0  # a stalled client never pins a thread for long
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: request lines are recorded in `FakeCompress.requests`."""

    def do_POST(self) -> None:
        self.close_connection = True  # one request per connection, whatever happens
        length = self.headers.get("Content-Length")
        size = int(length) if length is not None and length.isdigit() else None
        # Read the body even when the request will be refused: closing a socket with unread
        # data makes the kernel send a reset, and the client would never see our status.
        raw = self.rfile.read(size) if size is not None and size <= MAX_REQUEST_BYTES else None
        if raw is not None and size is not None and len(raw) < size:
            return  # the client went away mid-body (a killed caller): no request, no reply
        request = FakeRequest(self.command, self.path, list(self.headers.items()), raw)
        response = self.server.answer(request)
        if response.reset:
            self.abort()
        elif response.chunked:
            self.send_chunked(response.body)
        else:
            self.send_bytes(response.status, response.body, dict(response.headers))

    do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_POST

    # -- writing

    def send_bytes(self, status: int, body: bytes, extra: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        no_body = status in (204, 304) or self.command == "HEAD"
        self.send_header("Content-Length", "0" if no_body else str(len(body)))
        self.end_headers()
        if not no_body:
            self.wfile.write(body)
        self.close_connection = True

    def send_chunked(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for start in range(0, len(body), _CHUNK):
            piece = body[start : start + _CHUNK]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    def abort(self) -> None:
        """Drop the connection with a reset, sending nothing."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True


def start_server(answer: Answer, port: int) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Bind `127.0.0.1:port` (0: a free port) and serve `answer` in a daemon thread.

    Raises `OSError` if the port cannot be bound, `RuntimeError` if the socket bound another
    address than loopback (it is closed then).
    """
    server = _Server((LOOPBACK, port), _Handler)
    bound = server.server_address[0]
    if bound != LOOPBACK:  # pragma: no cover - the constructor bound LOOPBACK explicitly
        server.server_close()
        raise RuntimeError(f"fake compress bound {bound!r}, not {LOOPBACK}")
    server.answer = answer
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    return server, thread
