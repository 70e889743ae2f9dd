"""Hostile requests to an HTTP driver (JF-ERR-011, JF-ERR-012, JF-ERR-017, JF-ERR-019): the
requests spec/driver/protocol.json's `http` rules refuse, sent on raw sockets, each with the
statuses it may get (one breaking several rules: the first rule's), and the silent sockets
of a local process without the token. Limits (`header_bytes`, `header_timeout_seconds`,
`auth_timeout_seconds`, `unauthenticated_connections`, `message_max_bytes`) are read from
the spec. Probes are JSON
like those of `jfsm_conformance.probes.protocol`.

The slots probe (JF-ERR-017, decision R91) opens `unauthenticated_connections + 16` raw
connections that send nothing, then sends one authorized request on a connection of its own
(a fresh one: a kept-alive connection is authenticated already). It must be answered within
half of `auth_timeout_seconds`: a driver whose silent sockets take its slots answers only
once they time out, a whole `auth_timeout_seconds` after they came. Then, once
`auth_timeout_seconds` plus 2 s have passed since the last silent connection was opened,
every silent connection must be closed (answered 408 or 503, or reset).

The held-slots probe (JF-ERR-019, decision R236) holds `connections` kept-alive connections,
each authenticated by one answered request, then sends an authorized request with the wrong
Content-Type on a new one: it must be refused 503 (every slot held), not 415. Once the held
connections are closed, an authorized request must be answered again within
`SLOTS_RELEASE` seconds."""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from jfsm_conformance.client.protocol import spec_dir
from jfsm_conformance.probes.protocol import describe_change, limits, make_probe
from jfsm_conformance.verify import checks as C

if TYPE_CHECKING:
    from jfsm_conformance.steps.world import World
    from jfsm_conformance.verify.checks import Ledger

__all__ = ["held_slots_probe", "http_probes", "order_probes", "run_http_probe", "slots_probe"]

SLOTS_EXTRA = 16  # silent connections past the unauthenticated budget
SLOTS_SLACK = 2.0  # seconds past auth_timeout_seconds before a silent one must be closed
SLOTS_RELEASE = 5.0  # seconds for the slots of closed connections to be served again


def _http_limits() -> dict[str, int]:
    raw = json.loads((spec_dir() / "driver" / "protocol.json").read_text(encoding="utf-8"))
    return {name: entry["value"] for name, entry in raw["http"]["limits"].items()}


def http_probes() -> list[dict[str, Any]]:
    """Requests an HTTP driver refuses (spec/driver/protocol.json, http): each names the
    statuses it may get. `$HOST`, `$AUTH` (the bearer header), `$LEN` (the body's length)
    and `$BODY` (a dump of the game) are filled in when sent, so traces never hold the token."""
    lim, http = limits(), _http_limits()
    ok_head = "Host: $HOST\r\n$AUTHContent-Type: application/json\r\n"

    def req(what: str, head: str, statuses: list[int], ids: list[str], **more: Any) -> dict:
        return make_probe(
            "http", what, "invalid_input", "null", ids, request=head, statuses=statuses, **more
        )

    post = "POST /v1/message HTTP/1.1\r\n"
    g11, g12 = ["JF-ERR-011"], ["JF-ERR-012"]
    return [
        req(
            "a foreign Host",
            post + "Host: evil.example\r\n$AUTHContent-Type: application/json"
            "\r\nContent-Length: $LEN\r\n\r\n$BODY",
            [421],
            g11,
        ),
        req(
            "a foreign Origin",
            post + ok_head + "Origin: http://evil.example\r\nContent-Length: $LEN\r\n\r\n$BODY",
            [403],
            g11,
        ),
        req(
            "no bearer token",
            post + "Host: $HOST\r\nContent-Type: application/json\r\n"
            "Content-Length: $LEN\r\n\r\n$BODY",
            [401],
            g11,
        ),
        req(
            "a wrong bearer token",
            post + "Host: $HOST\r\nAuthorization: Bearer wrong-token\r\n"
            "Content-Type: application/json\r\nContent-Length: $LEN\r\n\r\n$BODY",
            [401],
            g11,
        ),
        req(
            "Content-Type text/plain",
            post + "Host: $HOST\r\n$AUTHContent-Type: text/plain\r\n"
            "Content-Length: $LEN\r\n\r\n$BODY",
            [415],
            g11,
        ),
        req("GET", "GET /v1/message HTTP/1.1\r\n" + ok_head + "\r\n", [405, 404], g11),
        req(
            "another path",
            "POST /v2/other HTTP/1.1\r\n" + ok_head + "Content-Length: $LEN\r\n\r\n$BODY",
            [404, 405],
            g11,
        ),
        req("a negative Content-Length", post + ok_head + "Content-Length: -1\r\n\r\n", [400], g12),
        req(
            "a Content-Length that is no number",
            post + ok_head + "Content-Length: 1x\r\n\r\n",
            [400],
            g12,
        ),
        req(
            "two different Content-Lengths",
            post + ok_head + "Content-Length: $LEN\r\nContent-Length: 3\r\n\r\n$BODY",
            [400],
            g12,
        ),
        req(
            "no Content-Length", post + ok_head + "Connection: close\r\n\r\n$BODY", [411, 400], g12
        ),
        req(
            f"a body of {lim.message_max_bytes + 1} bytes announced",
            post + ok_head + f"Content-Length: {lim.message_max_bytes + 1}\r\n\r\n",
            [413],
            ["JF-ERR-012", "JF-ERR-009"],
        ),
        req(
            f"headers past {http['header_bytes']} bytes",
            post
            + ok_head
            + "X-Pad: "
            + "p" * http["header_bytes"]
            + "\r\nContent-Length: $LEN\r\n\r\n$BODY",
            [431],
            g12,
        ),
        req(
            "a body that is no JSON", post + ok_head + "Content-Length: 5\r\n\r\n{nope", [400], g12
        ),
        req(
            "headers never completed",
            post + "Host: $HOST\r\n",
            [408],
            g12,
            wait=http["header_timeout_seconds"],
        ),
        *order_probes(),
    ]


def order_probes() -> list[dict[str, Any]]:
    """Requests that break several rules at once: each must be refused for the first it
    breaks, in the order of spec/driver/protocol.json (JF-ERR-019, decision R144): Host 421,
    Origin 403, method 405, path 404, token 401, Content-Type 415, length 411, size 413."""
    lim = limits()
    post = "POST /v1/message HTTP/1.1\r\n"
    body = "Content-Length: $LEN\r\n\r\n$BODY"
    plain = "Content-Type: text/plain\r\n"
    cases = [
        (
            "a foreign Host, a foreign Origin, no token, text/plain",
            421,
            post + "Host: evil.example\r\nOrigin: http://evil.example\r\n" + plain + body,
        ),
        (
            "a foreign Origin, GET, no token",
            403,
            "GET /v1/message HTTP/1.1\r\nHost: $HOST\r\nOrigin: http://evil.example\r\n\r\n",
        ),
        ("GET of another path, no token", 405, "GET /v2/other HTTP/1.1\r\nHost: $HOST\r\n\r\n"),
        (
            "another path, no token, text/plain",
            404,
            "POST /v2/other HTTP/1.1\r\nHost: $HOST\r\n" + plain + body,
        ),
        ("no token, text/plain", 401, post + "Host: $HOST\r\n" + plain + body),
        (
            "text/plain, no Content-Length",
            415,
            post + "Host: $HOST\r\n$AUTH" + plain + "Connection: close\r\n\r\n$BODY",
        ),
        (
            f"text/plain, a body of {lim.message_max_bytes + 1} bytes announced",
            415,
            post
            + "Host: $HOST\r\n$AUTH"
            + plain
            + f"Content-Length: {lim.message_max_bytes + 1}\r\n\r\n",
        ),
    ]
    return [
        make_probe(
            "http",
            f"{what} (refused for the first rule it breaks)",
            "invalid_input",
            "null",
            ["JF-ERR-019"],
            request=request,
            statuses=[status],
        )
        for what, status, request in cases
    ]


def _http_exchange(url: str, request: bytes, wait: float) -> tuple[int | None, Any]:
    """Send `request` on a new connection; the status and the JSON body (None if not JSON),
    or `(None, why)` when the driver closed without a response."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 10) as sock:
        sock.settimeout(wait + 10)
        received, error = _send_and_read(sock, request)
    if error is not None and not received:
        return None, f"no response ({error!r})"
    head, _, body = received.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or not status_line[1].isdigit():
        return None, f"no HTTP response: {received[:200]!r}"
    try:
        return int(status_line[1]), json.loads(body)
    except ValueError:
        return int(status_line[1]), None


def _send_and_read(sock: socket.socket, request: bytes) -> tuple[bytes, OSError | None]:
    """Send `request` on `sock` and read one response: the bytes received (to the end of its
    body, or until the driver closed) and the error that cut the reading short, if any (a
    timeout, a reset). A refusal before the whole request was sent is not an error: the
    driver may answer before reading the body."""
    with contextlib.suppress(OSError):
        sock.sendall(request)
    received = b""
    try:
        while b"\r\n\r\n" not in received or not _complete(received):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    except OSError as exc:
        return received, exc
    return received, None


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(body) >= int(value.strip())
    return False


def slots_probe() -> dict[str, Any]:
    """The silent sockets of a process without the token (JF-ERR-017; module docstring)."""
    http = _http_limits()
    return make_probe(
        "http",
        f"{http['unauthenticated_connections'] + SLOTS_EXTRA} silent connections, then an "
        "authorized request on a new one",
        "invalid_input",
        "null",
        ["JF-ERR-017"],
        slots=http["unauthenticated_connections"] + SLOTS_EXTRA,
        request="POST /v1/message HTTP/1.1\r\nHost: $HOST\r\n$AUTHContent-Type: "
        "application/json\r\nContent-Length: $LEN\r\n\r\n$BODY",
    )


def held_slots_probe() -> dict[str, Any]:
    """Every slot held, then a request that also breaks the Content-Type rule (JF-ERR-019;
    module docstring)."""
    http = _http_limits()
    return make_probe(
        "http",
        f"{http['connections']} kept-alive authorized connections, then an authorized request "
        "with Content-Type text/plain on a new one (every slot held: 503, before 415)",
        "invalid_input",
        "null",
        ["JF-ERR-019"],
        held=http["connections"],
        request="POST /v1/message HTTP/1.1\r\nHost: $HOST\r\n$AUTHContent-Type: text/plain\r\n"
        "Content-Length: $LEN\r\n\r\n$BODY",
        statuses=[503],
    )


def _filled(url: str, transport: Any, request: str, body: str) -> str:
    auth = transport.headers.get("Authorization")
    return (
        request.replace("$HOST", urlsplit(url).netloc)
        .replace("$AUTH", f"Authorization: {auth}\r\n" if auth else "")
        .replace("$LEN", str(len(body)))
        .replace("$BODY", body)
    )


def _enough_descriptors(count: int) -> bool:
    """Raise this process's soft limit of open files to hold `count` more; False if the
    hard limit does not allow it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            return False
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return True


def _closed(sock: socket.socket) -> bool:
    """Whether the driver answered or closed `sock` (data, end of file or a reset)."""
    sock.setblocking(False)
    try:
        sock.recv(1)  # bytes of a 408 or 503, or b"" at the end of the stream
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def _run_slots(world: World, ledger: Ledger, url: str, game: str, probe: dict[str, Any]) -> bool:
    if not _enough_descriptors(probe["slots"]):
        return False  # not covered: this machine cannot hold that many sockets
    http = _http_limits()
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    body = json.dumps({"id": world.client.next_id(), "op": "dump", "args": {"game": game}})
    request = _filled(url, world.client.transport, probe["request"], body).encode("latin-1")
    world.client.transcript.append({"send_raw": probe["what"], "t": time.monotonic()})
    silent: list[socket.socket] = []
    try:
        for _ in range(probe["slots"]):
            try:
                silent.append(socket.create_connection(address, 5))
            except OSError:
                break  # the driver stopped accepting: the authorized request shows the harm
        opened = time.monotonic()
        status, reply = _http_exchange(url, request, http["auth_timeout_seconds"])
        took = time.monotonic() - opened
        bound = http["auth_timeout_seconds"] / 2
        ledger.expect(
            C.HTTP_GUARD,
            status == 200 and isinstance(reply, dict) and reply.get("ok") is True,
            f"{probe['what']}: the authorized request got HTTP {status} "
            f"({str(reply)[:200]}) while {len(silent)} connections without the token were "
            "open, not an answer",
            ids=("JF-ERR-017",),
        )
        ledger.expect(
            C.HTTP_GUARD,
            took <= bound,
            f"{probe['what']}: the authorized request was answered after {took:.1f} s, past "
            f"{bound:g} s (half of auth_timeout_seconds): connections without the token held "
            "the slots until they timed out",
            ids=("JF-ERR-017",),
        )
        time.sleep(max(0.0, opened + http["auth_timeout_seconds"] + SLOTS_SLACK - time.monotonic()))
        still_open = sum(not _closed(sock) for sock in silent)
        ledger.expect(
            C.HTTP_GUARD,
            still_open == 0,
            f"{probe['what']}: {still_open} of {len(silent)} silent connections were still open "
            f"{http['auth_timeout_seconds'] + SLOTS_SLACK:g} s after they were opened, past "
            f"auth_timeout_seconds ({http['auth_timeout_seconds']} s)",
            ids=("JF-ERR-017",),
        )
    finally:
        for sock in silent:
            sock.close()
    return True


def _hold(address: tuple[str, int], request: bytes) -> tuple[socket.socket, int | None, bool]:
    """A new connection with one request answered on it: the socket, the answer's status
    (None: closed without one) and whether the answer keeps the connection alive (HTTP/1.1
    without `Connection: close`)."""
    sock = socket.create_connection(address, 10)
    sock.settimeout(10)
    received, _ = _send_and_read(sock, request)
    head = received.partition(b"\r\n\r\n")[0].lower().split(b"\r\n")
    status = head[0].split()[1:2]
    closing = any(line.replace(b" ", b"") == b"connection:close" for line in head[1:])
    kept = head[0].startswith(b"http/1.1") and not closing
    return sock, int(status[0]) if status and status[0].isdigit() else None, kept


def _run_held(
    world: World, ledger: Ledger, url: str, game: str, probe: dict[str, Any]
) -> tuple[int | None, Any] | None:
    """Hold every slot, send the probe's request; its status and body, or None (not covered)
    when this machine cannot open that many sockets, the driver closed a connection it
    answered (no keep-alive), or holding took half of `idle_timeout_seconds`. Checks that
    the slots are served again after."""
    if not _enough_descriptors(probe["held"]):
        return None
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    transport = world.client.transport

    def authorized() -> bytes:
        body = json.dumps({"id": world.client.next_id(), "op": "dump", "args": {"game": game}})
        text = "POST /v1/message HTTP/1.1\r\nHost: $HOST\r\n$AUTHContent-Type: application/json\r\n"
        return _filled(url, transport, text + "Content-Length: $LEN\r\n\r\n$BODY", body).encode()

    world.client.transcript.append({"send_raw": probe["what"], "t": time.monotonic()})
    held: list[socket.socket] = []
    answer: tuple[int | None, Any] | None = None
    try:
        # The suite's own client may hold slots too: holding stops at the first 503. Held
        # past half of idle_timeout_seconds, the first ones may be closed for idling.
        give_up = time.monotonic() + _http_limits()["idle_timeout_seconds"] / 2
        kept: list[socket.socket] = []  # answered 200 and kept alive: each holds a slot
        status: int | None = None
        for _ in range(probe["held"]):
            sock, status, alive = _hold(address, authorized())
            held.append(sock)
            if status != 200 or not alive or time.monotonic() > give_up:
                break
            kept.append(sock)
        # A driver that closes a connection after its answer cannot have its slots held:
        # not covered, rather than a 415 blamed on the order.
        full = status == 503 or len(kept) == probe["held"]
        if full and time.monotonic() <= give_up and not any(_closed(sock) for sock in kept):
            body = json.dumps({"id": world.client.next_id(), "op": "dump", "args": {"game": game}})
            text = _filled(url, transport, probe["request"], body)
            answer = _http_exchange(url, text.encode("latin-1"), 0)
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + SLOTS_RELEASE
    while True:
        status, _ = _http_exchange(url, authorized(), 0)
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    ledger.expect(
        C.HTTP_GUARD,
        status == 200,
        f"{probe['what']}: {SLOTS_RELEASE:g} s after the {len(held)} held connections were "
        f"closed, an authorized request still got HTTP {status}: their slots were not released",
        ids=("JF-ERR-012",),
    )
    return answer


def run_http_probe(world: World, ledger: Ledger, game: str, probe: dict[str, Any]) -> bool:
    """One refused HTTP request: its status, an error reply with id null, the game's dump
    unchanged, and the driver still answering; or the slots probe (`slots_probe`). False for
    a driver that is not HTTP, or a machine that cannot open the probe's sockets."""
    transport = world.client.transport
    url = getattr(transport, "url", None)
    if not isinstance(url, str) or not url.startswith("http"):
        return False
    before = world.dump(game, remember=False)
    if probe.get("slots"):
        if not _run_slots(world, ledger, url, game, probe):
            return False
        after = world.dump(game, remember=False)
        ledger.expect(
            C.HTTP_GUARD,
            after == before,
            lambda: f"{probe['what']}: the game changed: {describe_change(before, after)}",
            ids=("JF-ERR-017",),
        )
        return True
    if probe.get("held"):
        answer = _run_held(world, ledger, url, game, probe)
        if answer is None:
            return False
        status, reply = answer
    else:
        body = json.dumps({"id": world.client.next_id(), "op": "dump", "args": {"game": game}})
        text = _filled(url, transport, probe["request"], body)
        world.client.transcript.append({"send_raw": probe["what"], "t": time.monotonic()})
        status, reply = _http_exchange(url, text.encode("latin-1"), probe.get("wait", 0))
    ids = tuple(probe["ids"])
    ledger.expect(
        C.HTTP_GUARD,
        status in probe["statuses"],
        f"{probe['what']}: HTTP status {status} ({str(reply)[:200]}), not one of "
        f"{probe['statuses']}",
        ids=ids,
    )
    ledger.expect(
        C.HTTP_GUARD,
        isinstance(reply, dict)
        and reply.get("id") is None
        and reply.get("ok") is False
        and isinstance(reply.get("error"), dict)
        and reply["error"].get("code") == "invalid_input",
        f"{probe['what']}: the body is not an error reply with id null and invalid_input: "
        f"{str(reply)[:300]}",
        ids=("JF-ERR-012", *ids),
    )
    after = world.dump(game, remember=False)
    ledger.expect(
        C.HTTP_GUARD,
        after == before,
        lambda: f"{probe['what']}: the game changed: {describe_change(before, after)}",
        ids=ids,
    )
    return True
