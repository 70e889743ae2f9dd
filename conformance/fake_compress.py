"""A fake compress.v2 service on loopback: the suite's independent stand-in for the platform.

It speaks the contract of `spec/compress-v2.json` over real HTTP on `127.0.0.1` (never any
other address) and imports nothing from `jfsm` but the spec reader `jfsm.spec`: it is checked
against the spec's schemas, not against the engine's code. Standard library plus `jsonschema` only.

```python
with FakeCompress() as fake:
    fake.set_participants([{"id": "p1", "human": True}, {"id": "bot", "human": False}])
    fake.script(http_status(500), success(chars=40))
    ...                                   # point the implementation at fake.url
    assert fake.violations == []
    assert fake.requests[1]["idempotency_key"] == fake.requests[0]["idempotency_key"]
```

What it does with each request, in order:

1. checks method and path (`POST /v2/compress`, else 405 or 404), `Content-Length`
   (else 411, or 413 past `MAX_REQUEST_BYTES`), `Content-Type: application/json` (else 415), one
   non-empty `Idempotency-Key`, strict UTF-8 JSON (no duplicate keys, NaN, lone surrogates),
   the request schema, `input.chars` equal to the code points of `input.text`, and
   beneficiaries sorted and equal to the humans-not-spectators set by `set_participants` at that
   moment. A failed check is recorded in `violations` and answered 400 (or the status above);
   it consumes no script entry;
2. flags a key reused for a different logical compression (`idempotency_conflict`, 400);
3. replays the stored reply if this key already received a completed reply (ok or refusal),
   without consuming a script entry (transport failures are not replies and are not stored);
4. otherwise takes the next scripted outcome (FIFO), or the default policy when the script is
   empty: an ok reply whose summary is a hash-derived hex text of about an eighth of the input's
   code points (at most `summary_cap`), so it never quotes the input, with a callId derived from
   the idempotency key.

Every wait is bounded (`delay` and `hold` end early when the fake closes; a hold gives up after
`hold_timeout`), server threads are daemons, and `close()` returns promptly.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jsonschema import Draft202012Validator

from jfsm.spec import locate_spec_dir as spec_dir  # the one spec reader (no engine code)

__all__ = [
    "LOOPBACK",
    "MAX_REQUEST_BYTES",
    "PATH",
    "FakeCompress",
    "Outcome",
    "delay",
    "empty",
    "hold",
    "http_status",
    "malformed_json",
    "not_smaller",
    "oversized",
    "refuse",
    "reset",
    "serve",
    "spec_dir",
    "success",
    "wrong_schema",
]

LOOPBACK = "127.0.0.1"
PATH = "/v2/compress"
MAX_REQUEST_BYTES = 32 * 1024 * 1024
_CHUNK = 64 * 1024


# --------------------------------------------------------------------------- spec


@cache
def _validator(name: str) -> Draft202012Validator:
    path = spec_dir() / "schemas" / name
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Outcome:
    """One scripted answer; build it with the functions below, not directly."""

    kind: str
    chars: int | None = None
    summary: str | None = None
    code: str | None = None
    message: str | None = None
    call_id: str | bool = True
    status: int = 200
    body: bytes | None = None
    n_bytes: int = 0
    chunked: bool = False
    seconds: float = 0.0
    then: Outcome | None = None


def success(
    *, chars: int | None = None, summary: str | None = None, call_id: str | None = None
) -> Outcome:
    """An ok reply: `summary` verbatim, or a hash text of `chars` code points, else the default."""
    if chars is not None and summary is not None:
        raise ValueError("give chars or summary, not both")
    if chars is not None and chars < 0:
        raise ValueError("chars must be >= 0")
    return Outcome("success", chars=chars, summary=summary, call_id=call_id or True)


def refuse(
    code: str = "refused", *, message: str | None = None, call_id: str | bool = True
) -> Outcome:
    """A refusal reply `{"ok": false, "error": {"code"}}`; `call_id=False` omits the callId."""
    return Outcome("refuse", code=code, message=message, call_id=call_id)


def empty(summary: str = "") -> Outcome:
    """An ok reply whose summary is empty (or only the white space given)."""
    if summary.strip():
        raise ValueError("an empty summary may hold only white space")
    return Outcome("empty", summary=summary)


def not_smaller(extra: int = 0) -> Outcome:
    """An ok reply whose summary has the input's code point count plus `extra`."""
    return Outcome("not_smaller", chars=extra)


def http_status(status: int = 500, body: bytes | None = None) -> Outcome:
    """A non-200 status; the default body is refusal-shaped, which must not fool the client."""
    if not 201 <= status <= 599:
        raise ValueError("http_status takes a status from 201 to 599")
    if body is None:
        body = b'{"ok":false,"error":{"code":"internal"}}'
    return Outcome("http_status", status=status, body=body)


def malformed_json(body: bytes | None = None) -> Outcome:
    """A 200 whose body is not valid JSON (default: truncated)."""
    return Outcome("malformed_json", body=body or b'{"ok": true, "callId": "c", "summary": "unt')


def wrong_schema(body: Mapping[str, Any] | bytes | None = None) -> Outcome:
    """A 200 with JSON that violates the reply schema (default: a numeric callId)."""
    if body is None:
        body = {"ok": True, "callId": 42, "summary": "x"}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    return Outcome("wrong_schema", body=raw)


def oversized(n_bytes: int, *, chunked: bool = False) -> Outcome:
    """A 200 with an ok-shaped body of `n_bytes`; `chunked` hides the size from the headers."""
    if n_bytes < 64:
        raise ValueError("oversized needs at least 64 bytes")
    return Outcome("oversized", n_bytes=n_bytes, chunked=chunked)


def reset() -> Outcome:
    """Close the connection without any reply (with a TCP reset)."""
    return Outcome("reset")


def delay(seconds: float, then: Outcome | None = None) -> Outcome:
    """Wait `seconds` (meant to exceed the client's timeout), then answer `then` or the default."""
    return Outcome("delay", seconds=seconds, then=then)


def hold(then: Outcome | None = None) -> Outcome:
    """Block the reply until `release()`, then answer `then` or the default."""
    return Outcome("hold", then=then)


_REPLY_KINDS = frozenset({"success", "refuse", "empty", "not_smaller", "default"})


# --------------------------------------------------------------------------- strict JSON


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strings_are_scalar(doc: Any) -> bool:
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _parse_strict(raw: bytes) -> Any:
    doc = json.loads(
        raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_reject_constant
    )
    if not _strings_are_scalar(doc):
        raise ValueError("lone surrogate in a string")
    return doc


def _hash_text(seed: str, n: int) -> str:
    """`n` hex code points derived from `seed` (never quotes the seed)."""
    out: list[str] = []
    block = hashlib.sha256(("summary:" + seed).encode("utf-8")).hexdigest()
    while sum(map(len, out)) < n:
        out.append(block)
        block = hashlib.sha256(block.encode("ascii")).hexdigest()
    return "".join(out)[:n]


def _participant(item: Any) -> tuple[str, bool, bool]:
    if isinstance(item, Mapping):
        return str(item["id"]), bool(item["human"]), bool(item.get("spectator", False))
    return str(item.id), bool(item.human), bool(getattr(item, "spectator", False))


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = False
    fake: FakeCompress

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that go away mid-reply are expected here; stay quiet."""


@dataclass
class _Held:
    index: int
    released: threading.Event


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "jfsm-fake-compress"
    timeout = 10.0  # a stalled client never pins a thread for long
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: request lines are recorded in `FakeCompress.requests`."""

    def do_POST(self) -> None:
        self.server.fake._handle(self)

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


class FakeCompress:
    """A scripted compress.v2 on `127.0.0.1`; use as a context manager or `start()`/`close()`.

    `port=None` picks a free port. `summary_cap` bounds default summaries; `hold_timeout` is the
    longest a `hold()` waits for `release()` before dropping the connection.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        host: str = LOOPBACK,
        summary_cap: int = 200,
        hold_timeout: float = 10.0,
    ) -> None:
        if host != LOOPBACK:
            raise ValueError(f"the fake binds only {LOOPBACK}, not {host!r}")
        self._requested_port = port or 0
        self.summary_cap = summary_cap
        self.hold_timeout = hold_timeout
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._script: deque[Outcome] = deque()
        self._requests: list[dict[str, Any]] = []
        self._violations: list[dict[str, Any]] = []
        self._replies: dict[str, bytes] = {}
        self._logical: dict[str, str] = {}
        self._held: list[_Held] = []
        self._participants: list[tuple[str, bool, bool]] | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> FakeCompress:
        """Bind `127.0.0.1` and serve in a daemon thread."""
        if self._server is not None:
            return self
        _validator("compress-request.schema.json")  # fail here, not in a request thread
        server = _Server((LOOPBACK, self._requested_port), _Handler)
        bound = server.server_address[0]
        if bound != LOOPBACK:  # pragma: no cover - the constructor bound LOOPBACK explicitly
            server.server_close()
            raise RuntimeError(f"fake compress bound {bound!r}, not {LOOPBACK}")
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; waiting handlers (delay, hold) give up at once."""
        self._closing.set()
        with self._changed:
            for held in self._held:
                held.released.set()
            self._changed.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> FakeCompress:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port)."""
        if self._server is None:
            raise RuntimeError("the fake is not running")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def url(self) -> str:
        """The base URL (`http://127.0.0.1:PORT`); the endpoint is `url + PATH`."""
        return f"http://{LOOPBACK}:{self.port}"

    # -- test controls

    def script(self, *outcomes: Outcome) -> None:
        """Append outcomes to the FIFO script."""
        with self._lock:
            self._script.extend(outcomes)

    def reset_script(self) -> None:
        """Drop every scripted outcome not yet used."""
        with self._lock:
            self._script.clear()

    @property
    def script_left(self) -> int:
        with self._lock:
            return len(self._script)

    def set_participants(self, participants: Iterable[Any] | None) -> None:
        """The participants *now*: mappings or objects with `id`, `human`, `spectator`.

        `None` turns the beneficiaries check off (only their order is checked).
        """
        normalized = None if participants is None else [_participant(p) for p in participants]
        with self._lock:
            self._participants = normalized

    def expected_beneficiaries(self) -> list[str] | None:
        with self._lock:
            return self._expected()

    def _expected(self) -> list[str] | None:
        if self._participants is None:
            return None
        return sorted(
            {pid for pid, human, spectator in self._participants if human and not spectator}
        )

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of every request record, in arrival order."""
        with self._lock:
            return [dict(r) for r in self._requests]

    @property
    def violations(self) -> list[dict[str, Any]]:
        """A copy of every contract violation: `{"index", "reason", "detail"}`."""
        with self._lock:
            return [dict(v) for v in self._violations]

    def clear_records(self) -> None:
        """Forget requests, violations and stored replies (the script is kept)."""
        with self._lock:
            self._requests.clear()
            self._violations.clear()
            self._replies.clear()
            self._logical.clear()

    def wait_requests(self, count: int, timeout: float) -> bool:
        """Wait until `count` requests have arrived; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._requests) >= count, timeout)

    def wait_held(self, timeout: float, count: int = 1) -> bool:
        """Wait until `count` requests are held; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._held) >= count, timeout)

    def release(self, count: int | None = None) -> int:
        """Let held replies go, oldest first (all by default); returns how many."""
        with self._changed:
            chosen = self._held if count is None else self._held[:count]
            for held in chosen:
                held.released.set()
            self._held = self._held[len(chosen) :]
            self._changed.notify_all()
            return len(chosen)

    # -- request handling (server threads)

    def _handle(self, h: _Handler) -> None:
        h.close_connection = True  # one request per connection, whatever happens
        record: dict[str, Any] = {
            "time": time.time(),
            "monotonic": time.monotonic(),
            "method": h.command,
            "path": h.path,
            "headers": {k.lower(): v for k, v in h.headers.items()},
            "idempotency_key": h.headers.get("Idempotency-Key"),
            "body": None,
            "raw_bytes": 0,
            "beneficiaries": None,
            "expected_beneficiaries": None,
            "valid": False,
            "outcome": None,
            "status": None,
        }
        with self._changed:
            record["index"] = len(self._requests)
            record["expected_beneficiaries"] = self._expected()
            self._requests.append(record)
            self._changed.notify_all()
        problem = self._check(h, record)
        if problem is not None:
            status, reason, detail = problem
            with self._changed:
                self._violations.append(
                    {"index": record["index"], "reason": reason, "detail": detail}
                )
                record["outcome"], record["status"] = "invalid", status
            extra = {"Allow": "POST"} if status == 405 else None
            body = {"ok": False, "error": {"code": "invalid_request", "message": reason}}
            h.send_bytes(status, json.dumps(body).encode("utf-8"), extra)
            return
        key = record["idempotency_key"]
        with self._changed:
            record["valid"] = True
            stored = self._replies.get(key)
            outcome = None if stored is not None else self._next()
        if stored is not None:
            self._set(record, "replay", 200)
            h.send_bytes(200, stored)
            return
        self._answer(h, record, outcome)

    def _next(self) -> Outcome | None:
        return self._script.popleft() if self._script else None

    def _set(self, record: dict[str, Any], outcome: str, status: int | None) -> None:
        """Note what was answered; the outermost outcome name (delay, hold) is kept."""
        with self._lock:
            if record["outcome"] is None:
                record["outcome"] = outcome
            record["status"] = status

    def _check(self, h: _Handler, record: dict[str, Any]) -> tuple[int, str, str] | None:
        """The first contract problem of the request, as (status, reason, detail), or None."""
        length = h.headers.get("Content-Length")
        size = int(length) if length is not None and length.isdigit() else None
        raw = b""
        if size is not None and size <= MAX_REQUEST_BYTES:
            # Read the body even when the request is refused: closing a socket with unread
            # data makes the kernel send a reset, and the client would never see our status.
            raw = h.rfile.read(size)
            record["raw_bytes"] = len(raw)
        if h.path != PATH:
            return 404, "path", f"{h.command} {h.path}"
        if h.command != "POST":
            return 405, "method", h.command
        if size is None:
            return 411, "content_length", "missing or invalid Content-Length"
        if size > MAX_REQUEST_BYTES:
            return 413, "too_large", f"{size} bytes"
        media = (h.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if media != "application/json":
            return 415, "content_type", media or "missing"
        keys = h.headers.get_all("Idempotency-Key") or []
        if len(keys) != 1 or not keys[0].strip():
            return 400, "idempotency_key", f"{len(keys)} Idempotency-Key headers"
        try:
            doc = _parse_strict(raw)
        except (ValueError, RecursionError) as exc:
            return 400, "json", type(exc).__name__
        record["body"] = doc
        errors = sorted(
            f"{e.json_path}: {e.validator}"
            for e in _validator("compress-request.schema.json").iter_errors(doc)
        )
        if errors:
            return 400, "schema", "; ".join(errors)
        text = doc["input"]["text"]
        if doc["input"]["chars"] != len(text):
            return 400, "chars", f"chars {doc['input']['chars']} != {len(text)} code points"
        sent = doc["beneficiaries"]
        record["beneficiaries"] = list(sent)
        if sent != sorted(sent):
            return 400, "beneficiaries_order", "beneficiaries are not sorted by code point"
        expected = record["expected_beneficiaries"]
        if expected is not None and sent != expected:
            return 400, "beneficiaries", f"sent {len(sent)} ids, expected {len(expected)}"
        logical = json.dumps([doc["kind"], doc["scope"], doc["input"]], sort_keys=True)
        with self._lock:
            first = self._logical.setdefault(keys[0], logical)
        if first != logical:
            return 400, "idempotency_conflict", "key reused for another logical compression"
        return None

    def _answer(self, h: _Handler, record: dict[str, Any], outcome: Outcome | None) -> None:
        key: str = record["idempotency_key"]
        doc = record["body"]
        name = "default" if outcome is None else outcome.kind
        with self._lock:
            if record["outcome"] is None:
                record["outcome"] = name
        if outcome is not None and outcome.kind == "delay":
            if self._closing.wait(outcome.seconds):
                h.abort()
                return
            self._answer(h, record, outcome.then)
            return
        if outcome is not None and outcome.kind == "hold":
            held = _Held(record["index"], threading.Event())
            with self._changed:
                self._held.append(held)
                self._changed.notify_all()
            released = held.released.wait(self.hold_timeout)
            with self._changed:
                if held in self._held:
                    self._held.remove(held)
            if not released or self._closing.is_set():
                h.abort()
                return
            self._answer(h, record, outcome.then)
            return
        if outcome is not None and outcome.kind == "reset":
            h.abort()
            return
        if outcome is None or outcome.kind in _REPLY_KINDS:
            body = json.dumps(self._reply(outcome, key, doc), ensure_ascii=False).encode("utf-8")
            with self._lock:
                body = self._replies.setdefault(key, body)
            self._set(record, name, 200)
            h.send_bytes(200, body)
            return
        if outcome.kind == "oversized":
            body = self._oversized(outcome.n_bytes)
            self._set(record, name, 200)
            if outcome.chunked:
                h.send_chunked(body)
            else:
                h.send_bytes(200, body)
            return
        assert outcome.body is not None
        self._set(record, name, outcome.status)
        h.send_bytes(outcome.status, outcome.body)

    def _reply(self, outcome: Outcome | None, key: str, doc: dict[str, Any]) -> dict[str, Any]:
        text: str = doc["input"]["text"]
        call_id = "fake-" + hashlib.sha256(("call:" + key).encode("utf-8")).hexdigest()[:24]
        if outcome is not None and isinstance(outcome.call_id, str):
            call_id = outcome.call_id
        if outcome is None or outcome.kind == "default":
            n = max(1, min(self.summary_cap, len(text) // 8))
            return {"ok": True, "callId": call_id, "summary": _hash_text(text, n)}
        if outcome.kind == "refuse":
            error: dict[str, Any] = {"code": outcome.code}
            if outcome.message is not None:
                error["message"] = outcome.message
            reply: dict[str, Any] = {"ok": False, "error": error}
            if outcome.call_id is not False:
                reply["callId"] = call_id
            return reply
        if outcome.kind == "empty":
            summary = outcome.summary or ""
        elif outcome.kind == "not_smaller":
            summary = _hash_text(text, len(text) + (outcome.chars or 0))
        elif outcome.summary is not None:
            summary = outcome.summary
        elif outcome.chars is not None:
            summary = _hash_text(text, outcome.chars)
        else:
            summary = _hash_text(text, max(1, min(self.summary_cap, len(text) // 8)))
        return {"ok": True, "callId": call_id, "summary": summary}

    @staticmethod
    def _oversized(n_bytes: int) -> bytes:
        head, tail = b'{"ok":true,"callId":"fake-oversized","summary":"', b'"}'
        return head + b"x" * (n_bytes - len(head) - len(tail)) + tail


def serve(port: int | None = None, host: str = LOOPBACK) -> None:
    """Serve the fake on loopback until KeyboardInterrupt (the `jfsm fake-compress` command)."""
    with FakeCompress(port=port, host=host) as fake:
        print(f"jfsm fake-compress listening on {fake.url}", flush=True)
        try:
            while True:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
