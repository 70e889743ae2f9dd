"""A fake compress.v2 service on loopback: the suite's independent stand-in for the platform.

It speaks the contract of `spec/compress-v2.json` over real HTTP on `127.0.0.1` (never any
other address) and imports nothing from `jfsm` but the spec reader `jfsm.spec`: it is checked
against the spec's schemas, not against the engine's code. Standard library plus `jsonschema` only.

```python
from jfsm_conformance.model.replies import http_status, success

with FakeCompress() as fake:
    fake.set_participants([{"id": "p1", "human": True}, {"id": "bot", "human": False}])
    fake.script(http_status(500), success(chars=40))
    ...                                   # point the implementation at fake.url
    assert fake.violations == []
    assert fake.requests[1]["idempotency_key"] == fake.requests[0]["idempotency_key"]
```

Its whole behaviour is one plain function, `FakeCompress.answer(FakeRequest) -> FakeResponse`,
which the HTTP server serves on loopback (`fake.http`) and `FakeCompress.transport()` serves in
process (`fake.inprocess`, an `httpx` transport, no socket). Replies are scripted in the
vocabulary of `jfsm_conformance.model.replies`. The exchange types are `fake.exchange`'s,
the request checks `fake.contract`'s (pure), the made-up replies `fake.summaries`'; this
module keeps the state: script, records, stored replies, held requests.

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

What it keeps is bounded too (decision R30's companion, defect 14): only the last `keep_bodies`
request records hold their parsed body (older ones keep their metadata, `body` None); a key's
logical compression is remembered by its SHA-256, not its text; and with `max_records` set (the
`jfsm fake-compress` service keeps 1,000) only that many records, stored replies and keys are
kept at all. The suite's own fake keeps every record's metadata, since it reads them by index.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from jfsm.spec import locate_spec_dir as spec_dir  # the one spec reader (no engine code)
from jfsm_conformance.fake.contract import (
    Problem,
    beneficiaries_problem,
    body_problem,
    envelope_problem,
    logical_digest,
    validator,
)
from jfsm_conformance.fake.exchange import (
    LOOPBACK,
    MAX_REQUEST_BYTES,
    PATH,
    RESET,
    FakeRequest,
    FakeResponse,
)
from jfsm_conformance.fake.http import start_server
from jfsm_conformance.fake.summaries import oversized_body, reply_doc
from jfsm_conformance.model.replies import REPLY_KINDS, Outcome

__all__ = [
    "LOOPBACK",
    "MAX_REQUEST_BYTES",
    "PATH",
    "FakeCompress",
    "FakeRequest",
    "FakeResponse",
    "command",
    "serve",
    "spec_dir",
]


def _participant(item: Any) -> tuple[str, bool, bool]:
    if isinstance(item, Mapping):
        return str(item["id"]), bool(item["human"]), bool(item.get("spectator", False))
    return str(item.id), bool(item.human), bool(getattr(item, "spectator", False))


@dataclass
class _Held:
    index: int
    released: threading.Event


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
        keep_bodies: int = 256,
        max_records: int | None = None,
    ) -> None:
        if keep_bodies < 0 or (max_records is not None and max_records < 1):
            raise ValueError("keep_bodies must be >= 0 and max_records >= 1")
        if host != LOOPBACK:
            raise ValueError(f"the fake binds only {LOOPBACK}, not {host!r}")
        self._requested_port = port or 0
        self.summary_cap = summary_cap
        self.hold_timeout = hold_timeout
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._script: deque[Outcome] = deque()
        self.keep_bodies = keep_bodies
        self.max_records = max_records
        self._requests: deque[dict[str, Any]] = deque(maxlen=max_records)
        self._count = 0  # requests received, also the next record's index
        self._violations: deque[dict[str, Any]] = deque(maxlen=max_records)
        self._replies: dict[str, bytes] = {}
        self._logical: dict[str, str] = {}
        self._held: list[_Held] = []
        self._participants: list[tuple[str, bool, bool]] | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> FakeCompress:
        """Bind `127.0.0.1` and serve in a daemon thread."""
        if self._server is not None:
            return self
        validator("compress-request.schema.json")  # fail here, not in a request thread
        self._server, self._thread = start_server(self.answer, self._requested_port)
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
        """A copy of every request record kept, in arrival order (all of them unless
        `max_records` is set; only the last `keep_bodies` hold their body)."""
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
            self._count = 0
            self._violations.clear()
            self._replies.clear()
            self._logical.clear()

    def wait_requests(self, count: int, timeout: float) -> bool:
        """Wait until `count` requests have arrived; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._count >= count, timeout)

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

    def transport(self) -> Any:
        """An `httpx` transport (sync and async) that serves `answer()` in this process, with
        no socket: the same checks, script, replays and records as over HTTP, for any base
        URL. A `reset` raises `httpx.ReadError`; `delay` and `hold` block a worker thread
        (async) or the caller (sync). Imports `httpx`, which the HTTP fake does not need."""
        from jfsm_conformance.fake.inprocess import InProcess

        return InProcess(self.answer)

    # -- request handling (server threads)

    def answer(self, request: FakeRequest) -> FakeResponse:
        """The fake's whole behaviour for one request (checks, script, replay, records), as
        a plain function: the HTTP server and `transport()` both serve it. It may block
        (`delay`, `hold`), so call it from a thread."""
        h = request
        record: dict[str, Any] = {
            "time": time.time(),
            "monotonic": time.monotonic(),
            "method": h.method,
            "path": h.path,
            "headers": {k.lower(): v for k, v in h.headers},
            "idempotency_key": h.header("Idempotency-Key"),
            "body": None,
            "raw_bytes": 0,
            "beneficiaries": None,
            "expected_beneficiaries": None,
            "valid": False,
            "outcome": None,
            "status": None,
        }
        with self._changed:
            record["index"] = self._count
            record["expected_beneficiaries"] = self._expected()
            self._requests.append(record)
            self._count += 1
            if len(self._requests) > self.keep_bodies:
                self._requests[-1 - self.keep_bodies]["body"] = None
            self._changed.notify_all()
        problem = self._check(h, record)
        if problem is not None:
            status, reason, detail = problem
            with self._changed:
                self._violations.append(
                    {"index": record["index"], "reason": reason, "detail": detail}
                )
                record["outcome"], record["status"] = "invalid", status
            extra = (("Allow", "POST"),) if status == 405 else ()
            body = {"ok": False, "error": {"code": "invalid_request", "message": reason}}
            return FakeResponse(status, json.dumps(body).encode("utf-8"), extra)
        key = record["idempotency_key"]
        with self._changed:
            record["valid"] = True
            stored = self._replies.get(key)
            outcome = None if stored is not None else self._next()
        if stored is not None:
            self._set(record, "replay", 200)
            return FakeResponse(200, stored)
        return self._answer(h, record, outcome)

    def _remember(self, table: dict[str, Any], key: str, value: Any) -> Any:
        """`table.setdefault(key, value)`, forgetting the oldest keys past `max_records`."""
        found = table.setdefault(key, value)
        while self.max_records is not None and len(table) > self.max_records:
            del table[next(iter(table))]
        return found

    def _next(self) -> Outcome | None:
        return self._script.popleft() if self._script else None

    def _set(self, record: dict[str, Any], outcome: str, status: int | None) -> None:
        """Note what was answered; the outermost outcome name (delay, hold) is kept."""
        with self._lock:
            if record["outcome"] is None:
                record["outcome"] = outcome
            record["status"] = status

    def _check(self, h: FakeRequest, record: dict[str, Any]) -> Problem | None:
        """The first contract problem of the request (`fake_contract`), as (status, reason,
        detail), or None; notes its size, body and beneficiaries in `record` as far as the
        checks got, and remembers its key's logical compression."""
        record["raw_bytes"] = len(h.body if h.body is not None else b"")
        problem = envelope_problem(h)
        if problem is not None:
            return problem
        doc = h.parsed
        with self._lock:
            if self._count - record["index"] <= self.keep_bodies:
                record["body"] = doc
        problem = body_problem(doc)
        if problem is not None:
            return problem
        sent = doc["beneficiaries"]
        record["beneficiaries"] = list(sent)
        problem = beneficiaries_problem(sent, record["expected_beneficiaries"])
        if problem is not None:
            return problem
        digest = logical_digest(doc)
        with self._lock:
            first = self._remember(self._logical, record["idempotency_key"], digest)
        if first != digest:
            return 400, "idempotency_conflict", "key reused for another logical compression"
        return None

    def _answer(
        self, h: FakeRequest, record: dict[str, Any], outcome: Outcome | None
    ) -> FakeResponse:
        key: str = record["idempotency_key"]
        doc = h.parsed
        name = "default" if outcome is None else outcome.kind
        with self._lock:
            if record["outcome"] is None:
                record["outcome"] = name
        if outcome is not None and outcome.kind == "delay":
            if self._closing.wait(outcome.seconds):
                return RESET
            return self._answer(h, record, outcome.then)
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
                return RESET
            return self._answer(h, record, outcome.then)
        if outcome is not None and outcome.kind == "reset":
            return RESET
        if outcome is not None and outcome.kind == "hang":
            self._set(record, name, None)
            self._closing.wait(outcome.seconds)
            return RESET
        if outcome is not None and outcome.kind in ("drip", "endless"):
            self._set(record, name, 200)
            body = json.dumps(reply_doc(None, key, doc, self.summary_cap)).encode("utf-8")
            return FakeResponse(200, body, slow=outcome.kind, seconds=outcome.seconds)
        if outcome is None or outcome.kind in REPLY_KINDS:
            reply = reply_doc(outcome, key, doc, self.summary_cap)
            body = json.dumps(reply, ensure_ascii=False).encode("utf-8")
            with self._lock:
                body = self._remember(self._replies, key, body)
            self._set(record, name, 200)
            return FakeResponse(200, body)
        if outcome.kind == "oversized":
            self._set(record, name, 200)
            return FakeResponse(200, oversized_body(outcome.n_bytes), chunked=outcome.chunked)
        assert outcome.body is not None
        self._set(record, name, outcome.status)
        return FakeResponse(outcome.status, outcome.body)


SERVE_MAX_RECORDS = 1000
"""What the `jfsm fake-compress` service keeps: records, stored replies and keys."""


def serve(port: int | None = None, host: str = LOOPBACK) -> None:
    """Serve the fake on loopback until KeyboardInterrupt (the `jfsm fake-compress` command),
    keeping at most `SERVE_MAX_RECORDS` records, none with its body."""
    fake = FakeCompress(port=port, host=host, keep_bodies=0, max_records=SERVE_MAX_RECORDS)
    with fake, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C even just after the line
        print(f"jfsm fake-compress listening on {fake.url}", flush=True)
        while True:
            time.sleep(0.5)


def command(argv: list[str]) -> int:
    """`jfsm fake-compress [--port N]`: `serve` until interrupted; 0 after Ctrl-C, 2 for a
    usage error (argparse's one line)."""
    from jfsm_conformance.usage import UsageParser, port_number, usage_error

    parser = UsageParser(
        prog="jfsm fake-compress", description="Serve the fake compress.v2 on 127.0.0.1."
    )
    parser.add_argument(
        "--port", type=port_number, default=0, help="port, 0 to 65535 (default 0: a free one)"
    )
    args = parser.parse_args(argv)
    try:
        serve(args.port or None)
    except OSError as exc:  # the port is taken, or not ours to bind
        return usage_error("jfsm fake-compress", f"cannot listen on port {args.port}: {exc}")
    return 0
