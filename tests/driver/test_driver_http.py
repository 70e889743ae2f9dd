"""The HTTP driver against a browser and a hostile local client: cross-origin "simple"
requests, DNS rebinding, missing tokens, malformed framing, slow and silent connections, a
burst of connects. Every refusal is a 4xx with an error reply and changes nothing."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from jfsm.driver.http import http_limits, serve_http_async
from tests.driver_helpers import HELLO, WAIT, HttpDriver, spec_with, status_and_body

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpDriver]:
    state = tmp_path_factory.mktemp("http") / "state"
    driver = HttpDriver(TOKEN, state=state)
    assert driver.call("hello", HELLO)["ok"]
    assert driver.call("create_game", {"game": "g"})["ok"]
    driver.state = state  # type: ignore[attr-defined]
    yield driver
    driver.close()


def _request(
    body: bytes,
    *,
    content_type: str | None = "application/json",
    token: str | None = TOKEN,
    host: str = "127.0.0.1",
    extra: str = "",
    length: str | None = None,
) -> bytes:
    lines = ["POST /v1/message HTTP/1.1", f"Host: {host}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines.append(f"Content-Length: {len(body) if length is None else length}")
    head = "\r\n".join(lines) + "\r\n" + extra + "\r\n"
    return head.encode("latin-1") + body


def _games(server: HttpDriver) -> list[str]:
    state: Path = server.state  # type: ignore[attr-defined]
    return sorted(p.name for p in state.iterdir())


def _create(game: str) -> bytes:
    return json.dumps({"id": 3, "op": "create_game", "args": {"game": game}}).encode()


def _refused(response: bytes, status: int) -> None:
    got, body = status_and_body(response)
    assert got == status, response[:300]
    assert body is not None and body["id"] is None and body["ok"] is False
    assert body["error"]["code"] == "invalid_input" and body["error"]["message"]


@pytest.mark.req("JF-ERR-011")
@pytest.mark.parametrize(
    ("status", "kwargs"),
    [
        # a web page's "simple" request: no preflight, so the old driver acted on it
        (403, {"content_type": "text/plain", "extra": "Origin: https://evil.example\r\n"}),
        (415, {"content_type": "text/plain"}),
        (415, {"content_type": "application/x-www-form-urlencoded"}),
        (415, {"content_type": None}),
        (403, {"extra": "Origin: https://evil.example\r\n"}),
        (403, {"extra": "Origin: null\r\n"}),
        (421, {"host": "evil.example"}),  # DNS rebinding: evil.example resolves to 127.0.0.1
        (421, {"host": "evil.example:8080"}),
        # an exact parse of host and optional port: the old driver cut at the last colon
        (421, {"host": "127.0.0.1:80@evil.example"}),
        (421, {"host": "[::1]evil.example"}),
        (421, {"host": "localhost.evil.example"}),
        (421, {"host": "127.0.0.1:"}),
        (401, {"token": None}),
        (401, {"token": "wrong"}),
        (401, {"token": TOKEN + "x"}),
    ],
)
def test_foreign_requests_are_refused_and_change_nothing(
    server: HttpDriver, status: int, kwargs: dict[str, str]
) -> None:
    before = _games(server)
    response = server.raw(_request(_create("intruder"), **kwargs))  # type: ignore[arg-type]
    _refused(response, status)
    assert _games(server) == before
    assert server.call("dump", {"game": "g"})["ok"]


@pytest.mark.req("JF-ERR-019")
@pytest.mark.parametrize(
    ("status", "kwargs", "body"),
    [
        # found in the head, before any rule of the list can be read: a head over the limit,
        # a head that does not parse (two lengths that disagree), each with a foreign Host
        (431, {"host": "evil.example", "extra": "X-Pad: " + "a" * 17000 + "\r\n"}, None),
        (400, {"host": "evil.example", "extra": "Content-Length: 999\r\n"}, None),
        # found in the body, after every rule of the list: a rule of the list comes first
        (415, {"content_type": "text/plain"}, b"not json"),
        (401, {"token": "wrong"}, b"not json"),
        (400, {}, b"not json"),
    ],
    ids=[
        "431-before-host",
        "400-framing-before-host",
        "415-before-body",
        "401-before-body",
        "body",
    ],
)
def test_refusals_outside_the_list_keep_their_place(
    server: HttpDriver, status: int, kwargs: dict[str, str], body: bytes | None
) -> None:
    """JF-ERR-019's list is ordered; a refusal outside it is found where it is read (issue
    39, R205): in the head (431, 400 for framing), before every rule of the list; in the body
    (400 for a body that is not a message), after every one."""
    before = _games(server)
    response = server.raw(_request(_create("intruder") if body is None else body, **kwargs))  # type: ignore[arg-type]
    _refused(response, status)
    assert _games(server) == before


@pytest.mark.req("JF-ERR-011")
def test_same_origin_loopback_and_token_are_served(server: HttpDriver) -> None:
    for host, origin in (
        ("127.0.0.1", f"http://127.0.0.1:{server.port}"),
        ("localhost", f"http://localhost:{server.port}"),
        ("[::1]", None),
    ):
        extra = "" if origin is None else f"Origin: {origin}\r\n"
        message = json.dumps({"id": 4, "op": "dump", "args": {"game": "g"}}).encode()
        status, body = status_and_body(server.raw(_request(message, host=host, extra=extra)))
        assert status == 200 and body is not None and body["ok"], body


@pytest.mark.req("JF-ERR-011")
def test_a_browser_cors_preflight_is_not_granted(server: HttpDriver) -> None:
    preflight = (
        b"OPTIONS /v1/message HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Origin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\n\r\n"
    )
    response = server.raw(preflight)
    assert b"access-control-allow" not in response.lower()
    assert status_and_body(response)[0] >= 400


@pytest.mark.req("JF-ERR-012", "JF-ERR-010")
@pytest.mark.parametrize(
    ("status", "data"),
    [
        (400, _request(b"{}", length="-1")),
        (400, _request(b"{}", length="abc")),
        (400, _request(b"{}", length="1" * 5000)),
        (400, _request(b"{}", extra="Content-Length: 3\r\n")),
        (413, _request(b"", length=str(10**12))),
        (400, _request(b'{"id":"\\ud800","op":"x"}')),
        (400, _request(b"[" * 100_000)),
        (400, _request(b"\xff\xfe")),
        (400, _request(b"not json")),
        (400, _request(b'{"id": 1, "op": "dump"}', length="40")),  # body ends early
        (400, b"GARBAGE\r\n\r\n"),
        (431, b"POST /v1/message HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n"),
        # 40 KiB of otherwise valid head in one write: one read took it whole, and the old
        # driver answered 200
        (
            431,
            _request(
                b'{"id": 1, "op": "dump", "args": {"game": "g"}}', extra=f"X: {'a' * 40960}\r\n"
            ),
        ),
        (404, _request(b"{}").replace(b"/v1/message", b"/other")),
        (405, _request(b"{}").replace(b"POST", b"PUT")),
        (411, _request(b"{}").replace(b"Content-Length: 2\r\n", b"")),
    ],
    ids=lambda v: v if isinstance(v, int) else repr(v[:40]),
)
def test_malformed_requests_get_a_4xx_with_an_error_reply(
    server: HttpDriver, status: int, data: bytes
) -> None:
    before = _games(server)
    _refused(server.raw(data), status)
    assert server.alive() and _games(server) == before
    assert server.call("dump", {"game": "g"})["ok"]


@pytest.mark.req("JF-ERR-012")
def test_a_burst_of_200_connects_is_held_and_answered(server: HttpDriver) -> None:
    """200 clients connect at the same instant. The old server's listen backlog of 5 lost
    about half of them (dropped or reset connects; 105 of 200 in a run against it)."""
    message = json.dumps({"id": 8, "op": "dump", "args": {"game": "g"}}).encode()
    request = _request(message)
    start = threading.Barrier(200)

    def client(_: int) -> str:
        start.wait(WAIT)
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
                sock.sendall(request)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return "closed"
                    data += chunk
            return data.split(b" ", 2)[1].decode()
        except OSError as exc:
            return type(exc).__name__

    with concurrent.futures.ThreadPoolExecutor(200) as pool:
        statuses = list(pool.map(client, range(200)))
    assert statuses == ["200"] * 200, collections.Counter(statuses)


@pytest.mark.req("JF-ERR-011")
def test_conformance_client_sends_the_token_from_the_environment(
    server: HttpDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jfsm_conformance.client.driver import DriverClient, ProtocolViolation

    monkeypatch.setenv("JFSM_DRIVER_TOKEN", TOKEN)
    client = DriverClient(f"http:{server.url}", timeout=WAIT)
    try:
        assert client.call("dump", {"game": "g"}).ok
    finally:
        client.close()
    monkeypatch.delenv("JFSM_DRIVER_TOKEN")
    client = DriverClient(f"http:{server.url}", timeout=WAIT)
    try:
        with pytest.raises(ProtocolViolation, match="401"):
            client.call("dump", {"game": "g"})
    finally:
        client.close()


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpDriver]:
    """A driver with short timeouts, 8 connection slots and a budget of 8 unauthenticated
    connections (spec copy via JFSM_SPEC_DIR)."""
    spec = spec_with(
        tmp_path_factory.mktemp("tight"),
        http={
            "header_timeout_seconds": 1,
            "body_timeout_seconds": 1,
            "auth_timeout_seconds": 1,
            "connections": 8,
            "unauthenticated_connections": 8,
        },
    )
    driver = HttpDriver(TOKEN, spec=spec)
    assert driver.call("hello", HELLO)["ok"]
    assert driver.call("create_game", {"game": "g"})["ok"]
    yield driver
    driver.close()


def _half_open(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    sock.sendall(data)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.req("JF-ERR-012")
def test_half_sent_headers_and_bodies_time_out_with_408(tight: HttpDriver) -> None:
    """300 half-sent requests pinned 300 threads of the old server for ever."""
    head = _half_open(tight.port, b"POST /v1/message HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    body = _half_open(tight.port, _request(b'{"id": 1', length="100"))
    try:
        _refused(_read_all(head), 408)
        _refused(_read_all(body), 408)
    finally:
        head.close()
        body.close()
    assert tight.call("dump", {"game": "g"})["ok"]


class SilentFlood:
    """`count` sockets that connect and send nothing, held open by another process: each one
    the driver closes is connected again at once, as a hostile local process would. (In a
    thread of the test's own process the flood would hold the GIL between the client's
    connect and its send, a gap no separate process makes.)"""

    def __init__(self, port: int, count: int) -> None:
        self.count = count
        self.process = subprocess.Popen(
            [sys.executable, "-c", _FLOOD, str(port), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "connected\n"

    @property
    def reconnects(self) -> int:
        """How many sockets the driver closed and the flood connected again, so far."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("?\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(WAIT)
        finally:
            self.process.kill()
            if self.process.stdout is not None:
                self.process.stdout.close()


_FLOOD = """
import selectors, socket, sys, threading

port, count = int(sys.argv[1]), int(sys.argv[2])
selector = selectors.DefaultSelector()
reconnects = 0


def connect():
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setblocking(False)
    selector.register(sock, selectors.EVENT_READ)


def hold():
    global reconnects
    while True:
        for key, _ in selector.select(0.05):
            try:
                data = key.fileobj.recv(65536)
            except OSError:
                data = b""
            if not data:  # closed by the driver (with its 408 or 503 read above)
                selector.unregister(key.fileobj)
                key.fileobj.close()
                connect()
                reconnects += 1


for _ in range(count):
    connect()
print("connected", flush=True)
threading.Thread(target=hold, daemon=True).start()
for line in sys.stdin:  # each line asks how many reconnects; the end of stdin ends the flood
    print(reconnects, flush=True)
"""


def _legitimate_requests(driver: HttpDriver, flood: SilentFlood, least: int) -> list[int]:
    """Fresh-connection requests with the token, at least `least` of them and until the
    flood's sockets were all closed by the driver and opened again at least once."""
    message = json.dumps({"id": 5, "op": "dump", "args": {"game": "g"}}).encode()
    statuses: list[int] = []
    deadline = time.monotonic() + WAIT
    while len(statuses) < least or flood.reconnects < flood.count:
        assert time.monotonic() < deadline, (collections.Counter(statuses), flood.reconnects)
        try:
            statuses.append(status_and_body(driver.raw(_request(message)))[0])
        except (OSError, IndexError):  # reset or closed without an answer
            statuses.append(0)
    return statuses


@pytest.mark.slow
@pytest.mark.req("JF-ERR-017", "JF-ERR-012")
def test_300_silent_sockets_do_not_keep_the_client_out(server: HttpDriver) -> None:
    """A local process without the token holds 300 silent sockets (reconnecting each one the
    driver closes). With 256 slots and a 10 s timeout the old driver answered 97 of 99
    requests with 503; now every request is answered 200."""
    flood = SilentFlood(server.port, 300)
    try:
        statuses = _legitimate_requests(server, flood, 99)
    finally:
        flood.close()
    assert set(statuses) == {200}, collections.Counter(statuses)
    print(f"slot attack: legitimate requests answered {statuses.count(200)}/{len(statuses)}")


@pytest.mark.req("JF-ERR-017", "JF-ERR-012")
def test_unauthenticated_connections_over_their_budget_close_the_oldest(tight: HttpDriver) -> None:
    """Five times the budget of unauthenticated connections (8): a new connection closes the
    oldest silent one (503), and the client's requests are all answered."""
    tight.drop_connections()
    flood = SilentFlood(tight.port, 40)
    try:
        statuses = _legitimate_requests(tight, flood, 30)
    finally:
        flood.close()
    assert set(statuses) == {200}, collections.Counter(statuses)


class _Answers:
    """A message handler that answers every message `ok` (the HTTP layer is under test)."""

    async def handle(self, message: Mapping[str, Any]) -> dict[str, Any]:
        return {"id": message["id"], "ok": True, "result": {}}

    def close(self) -> None:
        pass


@pytest.mark.req("JF-ERR-017")
def test_a_request_that_arrived_is_not_closed_for_the_budget() -> None:
    """The server's loop is held while a client connects and sends its request and then 8
    silent sockets connect: all nine are accepted in one batch. The budget of 8 closes a
    silent one, never the client whose request is waiting (the oldest, which the driver
    closed before R235: reset)."""
    limits = dataclasses.replace(http_limits(), unauthenticated_connections=8, auth_timeout=1)
    started: queue.Queue[tuple[int, asyncio.AbstractEventLoop]] = queue.Queue()
    done = threading.Event()

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = asyncio.ensure_future(
            serve_http_async(
                _Answers(),
                0,
                token=TOKEN,
                ready=lambda port: started.put((port, loop)),
                limits=limits,
            )
        )
        await loop.run_in_executor(None, done.wait, WAIT)
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    held, release = threading.Event(), threading.Event()
    silent: list[socket.socket] = []
    try:
        port, loop = started.get(timeout=WAIT)
        loop.call_soon_threadsafe(lambda: (held.set(), release.wait(WAIT)))
        assert held.wait(WAIT)
        message = json.dumps({"id": 7, "op": "dump", "args": {"game": "g"}}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as client:
            client.sendall(_request(message))
            client.shutdown(socket.SHUT_WR)
            silent = [socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(8)]
            release.set()
            status, reply = status_and_body(_read_all(client))
        assert (status, reply) == (200, {"id": 7, "ok": True, "result": {}})
        # The one silent socket over the budget gets its 503; the other seven are closed
        # without a word at auth_timeout_seconds.
        answers = [_read_all(sock) for sock in silent]
        assert [status_and_body(answer)[0] for answer in answers if answer] == [503]
    finally:
        release.set()
        for sock in silent:
            sock.close()
        done.set()
        thread.join(WAIT)


@pytest.mark.req("JF-ERR-012", "JF-ERR-017")
def test_only_authenticated_connections_take_the_slots(tight: HttpDriver) -> None:
    """Slow heads time out with 408 without holding a slot; kept-alive authenticated
    connections hold the 8 slots, and one more authenticated connection gets 503.

    Half the unauthenticated budget (8) is slow: every newcomer is unauthenticated until its
    head is read, so 8 slow heads plus one newcomer would close the oldest slow one (503,
    `test_unauthenticated_connections_over_their_budget_close_the_oldest`)."""
    tight.drop_connections()
    slow = [_half_open(tight.port, b"POST /v1/message HTTP/1.1\r\n") for _ in range(4)]
    kept: list[socket.socket] = []
    message = json.dumps({"id": 6, "op": "dump", "args": {"game": "g"}}).encode()
    try:
        for _ in range(8):
            sock = _half_open(tight.port, _request(message))
            kept.append(sock)
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 200"), head[:100]
        _refused(tight.raw(_request(message)), 503)
        for sock in slow:
            _refused(_read_all(sock), 408)
    finally:
        for sock in slow + kept:
            sock.close()
    deadline = time.monotonic() + WAIT
    while True:  # the slots come back when the kept connections close
        try:
            assert tight.call("dump", {"game": "g"})["ok"]
            break
        except (AssertionError, httpx.HTTPError):
            assert time.monotonic() < deadline
            time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.req("JF-ERR-011")
@pytest.mark.parametrize("from_env", [False, True])
def test_the_token_is_generated_and_printed_or_taken_from_the_environment(from_env: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JFSM_DRIVER_TOKEN"}
    if from_env:
        env["JFSM_DRIVER_TOKEN"] = "from-the-env"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jfsm.cli", "driver", "--http", "0"],
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(1 if from_env else 2)]
        printed = re.search(r"bearer token: (\S+)", "".join(lines))
        token = "from-the-env" if from_env else printed[1] if printed else ""
        assert bool(printed) is not from_env, lines
        assert len(token) >= 12
        port = re.search(r"127\.0\.0\.1:(\d+)", "".join(lines))
        assert port is not None
        url = f"http://127.0.0.1:{port[1]}/v1/message"
        hello = {"id": 1, "op": "hello", "args": HELLO}
        wrong = httpx.post(url, json=hello, headers={"Authorization": "Bearer x"}, timeout=WAIT)
        assert wrong.status_code == 401
        right = httpx.post(
            url, json=hello, headers={"Authorization": f"Bearer {token}"}, timeout=WAIT
        )
        assert right.status_code == 200 and right.json()["ok"]
    finally:
        proc.terminate()
        proc.wait(WAIT)
        if proc.stderr is not None:
            proc.stderr.close()


def test_expect_100_continue_is_answered_before_the_body(server: HttpDriver) -> None:
    """curl sends `Expect: 100-continue` for larger bodies and waits for the 100."""
    message = json.dumps({"id": 11, "op": "dump", "args": {"game": "g"}}).encode()
    head = _request(b"", extra="Expect: 100-continue\r\n", length=str(len(message)))
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:
        sock.sendall(head)
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 ")
        sock.sendall(message)
        sock.shutdown(socket.SHUT_WR)
        response = _read_all(sock)
    status, body = status_and_body(response)
    assert status == 200 and body is not None and body["id"] == 11 and body["ok"]
