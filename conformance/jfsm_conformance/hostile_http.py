"""Hostile requests to an HTTP driver (JF-ERR-011, JF-ERR-012): the requests
spec/driver/protocol.json's `http` rules refuse, sent on raw sockets, each with the statuses
it may get. Limits (`header_bytes`, `header_timeout_seconds`, `message_max_bytes`) are read
from the spec. Probes are JSON like those of `jfsm_conformance.hostile`."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from jfsm_conformance import checks as C
from jfsm_conformance.hostile import describe_change, limits, make_probe
from jfsm_conformance.protocol import spec_dir

if TYPE_CHECKING:
    from jfsm_conformance.checks import Ledger
    from jfsm_conformance.world import World

__all__ = ["http_probes", "run_http_probe"]


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
    ]


def _http_exchange(url: str, request: bytes, wait: float) -> tuple[int | None, Any]:
    """Send `request` on a new connection; the status and the JSON body (None if not JSON),
    or `(None, why)` when the driver closed without a response."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 10) as sock:
        sock.settimeout(wait + 10)
        with contextlib.suppress(OSError):  # the driver may refuse before the body is sent
            sock.sendall(request)
        received = b""
        try:
            while b"\r\n\r\n" not in received or not _complete(received):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except (TimeoutError, ConnectionResetError) as exc:
            if not received:
                return None, f"no response ({exc!r})"
    head, _, body = received.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or not status_line[1].isdigit():
        return None, f"no HTTP response: {received[:200]!r}"
    try:
        return int(status_line[1]), json.loads(body)
    except ValueError:
        return int(status_line[1]), None


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(body) >= int(value.strip())
    return False


def run_http_probe(world: World, ledger: Ledger, game: str, probe: dict[str, Any]) -> bool:
    """One refused HTTP request: its status, an error reply with id null, the game's dump
    unchanged, and the driver still answering. False for a driver that is not HTTP."""
    transport = world.client.transport
    url = getattr(transport, "url", None)
    if not isinstance(url, str) or not url.startswith("http"):
        return False
    before = world.dump(game, remember=False)
    auth = transport.headers.get("Authorization")
    body = json.dumps({"id": world.client.next_id(), "op": "dump", "args": {"game": game}})
    text = (
        probe["request"]
        .replace("$HOST", urlsplit(url).netloc)
        .replace("$AUTH", f"Authorization: {auth}\r\n" if auth else "")
        .replace("$LEN", str(len(body)))
        .replace("$BODY", body)
    )
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
