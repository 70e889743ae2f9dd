"""Hostile compress.v2 replies and foreign exceptions, through `httpx.MockTransport`.

Whatever the service sends, the executor ends with a `CompressionResult` (`transport` for
anything outside the contract) and no exception escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import string
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jfsm.compressor import CompressionRequest, CompressionResult
from jfsm.errors import TransportError
from jfsm.records import Participant
from jfsm.transport import (
    HttpCompressor,
    SyncHttpCompressor,
    classify_exception,
    parse_reply,
)

CAP = 4096
TEXT = "<user>\nSECRET-INPUT-TEXT\n</user>\n<assistant>\nreply\n</assistant>\n" * 4
REQUEST = CompressionRequest(
    kind="paxhistoria.game-agent-stack.v1",
    game_id="g",
    catalyst_id=None,
    text=TEXT,
    chars=len(TEXT),
    through_seq=2,
    epoch=0,
)
PEOPLE = [Participant(id="p1", human=True)]
BASE = "http://compress.test"

Handler = Callable[[httpx.Request], httpx.Response]


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def both(handler: Handler, **options: Any) -> list[CompressionResult]:
    """Run the async and the sync executor over the same handler; return both results."""
    options = {"max_response_bytes": CAP, "backoff": 0.0, "max_attempts": 2, **options}

    async def run_async() -> CompressionResult:
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        async with client:
            compressor = HttpCompressor(BASE, client=client, **options)
            return await compressor.compress(REQUEST, lambda: PEOPLE)

    with SyncHttpCompressor(BASE, transport=httpx.MockTransport(handler), **options) as compressor:
        sync = compressor.compress(REQUEST, lambda: PEOPLE)
    return [asyncio.run(run_async()), sync]


def replying(status: int, content: bytes, headers: dict[str, str] | None = None) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content, headers=headers)

    return handler


def assert_transport(results: list[CompressionResult], *codes: str) -> None:
    for result in results:
        assert result.outcome == "transport", result
        assert result.summary is None
        assert result.error_code in codes, result.error_code
        assert all(a.outcome == "transport" and a.output_chars is None for a in result.attempts)


@pytest.fixture(autouse=True)
def quiet_capture() -> Iterator[_Capture]:
    capture = _Capture()
    root = logging.getLogger()
    root.addHandler(capture)
    old = root.level
    root.setLevel(logging.DEBUG)
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        root.setLevel(old)


# --------------------------------------------------------------------------- strategies

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
CALL_ID_CHARS = string.ascii_letters + string.digits + "._:-"
CODE_CHARS = string.ascii_letters + string.digits + "._-"
NOT_STRING = JSON_VALUES.filter(lambda v: not isinstance(v, str))
NOT_BOOL = JSON_VALUES.filter(lambda v: not isinstance(v, bool))


@st.composite
def schema_violations(draw: st.DrawFn) -> dict[str, Any]:
    """A valid reply with exactly one thing wrong: a type, a missing or an extra field."""
    ok = draw(st.booleans())
    doc: dict[str, Any] = (
        {"ok": True, "callId": "c1", "summary": "short"}
        if ok
        else {"ok": False, "callId": "c1", "error": {"code": "no", "message": "m"}}
    )
    mutation = draw(st.sampled_from(["type", "missing", "extra", "nested"]))
    fields = ["ok", "callId", "summary"] if ok else ["ok", "error"]
    if mutation == "type":
        name = draw(st.sampled_from(fields if ok else [*fields, "callId"]))
        if name == "ok":
            doc[name] = draw(NOT_BOOL)
        elif name == "error":
            doc[name] = draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict)))
        else:
            doc[name] = draw(NOT_STRING)
    elif mutation == "missing":
        del doc[draw(st.sampled_from(fields))]
    elif mutation == "extra":
        allowed = set(doc) | {"callId"}
        doc[draw(st.text(min_size=1).filter(lambda k: k not in allowed))] = draw(JSON_VALUES)
    elif ok:
        doc["summary"] = {"text": "nested"}
    else:
        doc["error"] = {
            "code": "no",
            draw(st.text().filter(lambda k: k not in ("code", "message"))): 1,
        }
    return doc


INVALID_UTF8 = st.sampled_from(
    [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b"\xf8\x88\x80\x80\x80"]
)


@st.composite
def invalid_utf8_bodies(draw: st.DrawFn) -> bytes:
    head, tail = b'{"ok":true,"callId":"c","summary":"', b'"}'
    before = draw(st.text(max_size=20)).encode("utf-8").replace(b'"', b"").replace(b"\\", b"")
    return head + before + draw(INVALID_UTF8) + tail


@st.composite
def lone_surrogate_bodies(draw: st.DrawFn) -> bytes:
    unit = draw(st.integers(0xD800, 0xDFFF))
    where = draw(st.sampled_from(["summary", "callId", "key", "code", "message"]))
    escape = f"\\u{unit:04x}"
    if where == "summary":
        return f'{{"ok":true,"callId":"c","summary":"a{escape}b"}}'.encode()
    if where == "callId":
        return f'{{"ok":true,"callId":"{escape}","summary":"s"}}'.encode()
    if where == "key":
        return f'{{"ok":true,"callId":"c","summary":"s","{escape}":1}}'.encode()
    if where == "code":
        return f'{{"ok":false,"error":{{"code":"{escape}"}}}}'.encode()
    return f'{{"ok":false,"error":{{"code":"c","message":"{escape}"}}}}'.encode()


@st.composite
def deeply_nested(draw: st.DrawFn) -> bytes:
    depth = draw(st.integers(50, 200_000))
    inner = draw(st.sampled_from([b"[", b'{"a":']))
    close = b"]" if inner == b"[" else b"}"
    body = inner * depth + b"1" + close * depth
    return body[: CAP - 1] if len(body) >= CAP else body


HOSTILE_200 = st.one_of(
    schema_violations().map(lambda d: json.dumps(d).encode()),
    invalid_utf8_bodies(),
    lone_surrogate_bodies(),
    deeply_nested(),
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8")),
    JSON_VALUES.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
    st.sampled_from(
        [
            b"",
            b"null",
            b'{"ok":true,"callId":"c","summary":"s","x":NaN}',
            b'{"ok":true,"callId":"c","summary":"s","x":-Infinity}',
            b'{"ok":true,"callId":"c","summary":"s","x":1e999}',
            b'{"ok":true,"ok":true,"callId":"c","summary":"s"}',
            b'\xef\xbb\xbf{"ok":true,"callId":"c","summary":"s"}',
            b'{"ok":true,"callId":"c","summary":"s"} trailing',
            b'{"ok":true,"callId":"c","summary":"s","n":' + b"9" * 5000 + b"}",
            b"{'ok': true}",
        ]
    ),
)


# --------------------------------------------------------------------------- properties


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=HOSTILE_200)
def test_hostile_200_bodies_end_as_transport_failures(body: bytes) -> None:
    # Free-form strategies (text, JSON values) can hit a valid reply by chance: that is not
    # hostile, and the round-trip property below covers it.
    try:
        parse_reply(body)
    except TransportError:
        pass
    else:
        assume(False)
    results = both(replying(200, body))
    assert_transport(results, "malformed", "schema", "too_large")
    for result in results:
        assert len(result.attempts) == 2  # transport failures are retried, boundedly


@settings(max_examples=40, deadline=None)
@given(size=st.integers(CAP + 1, CAP * 64), chunk=st.integers(1, CAP))
def test_huge_bodies_stop_at_the_cap(size: int, chunk: int) -> None:
    read = [0]

    class Stream(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for start in range(0, size, chunk):
                read[0] += 1
                yield b"x" * min(chunk, size - start)

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for piece in self:
                yield piece

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Stream())  # no Content-Length: chunked

    read[0] = 0
    results = both(handler, max_attempts=1)
    assert_transport(results, "too_large")
    assert read[0] <= 2 * (CAP // chunk + 2), "reading stopped soon after the cap"


@settings(max_examples=60, deadline=None)
@given(status=st.integers(100, 599).filter(lambda s: s != 200), valid=st.booleans())
def test_any_other_status_is_a_transport_failure(status: int, valid: bool) -> None:
    body = b'{"ok":true,"callId":"c","summary":"s"}' if valid else b"oops"
    assert_transport(both(replying(status, body)), f"http_{status}")


@settings(max_examples=60, deadline=None)
@given(
    summary=st.text(max_size=300),
    call_id=st.text(CALL_ID_CHARS, min_size=1, max_size=128),
    code=st.text(CODE_CHARS, min_size=1, max_size=64),
    refused=st.booleans(),
)
def test_valid_replies_round_trip_exactly(
    summary: str, call_id: str, code: str, refused: bool
) -> None:
    doc: dict[str, Any] = (
        {"ok": False, "callId": call_id, "error": {"code": code}}
        if refused
        else {"ok": True, "callId": call_id, "summary": summary}
    )
    for ensure_ascii in (True, False):
        body = json.dumps(doc, ensure_ascii=ensure_ascii).encode("utf-8")
        for result in both(replying(200, body)):
            assert result.call_id == call_id
            assert len(result.attempts) == 1
            if refused:
                assert (result.outcome, result.error_code) == ("refused", code)
            else:
                assert (result.outcome, result.summary) == ("ok", summary)
                assert result.attempts[0].output_chars == len(summary)


OUT_OF_BOUNDS_CALL_IDS = [
    "a" * 129,
    "line\nbreak",
    "trailing\n",
    "\nleading",
    "spa ce",
    "tab\t",
    "ansi\x1b[31m",
    'quote"',
    "é",
    "\u2028",
    "",
]


@pytest.mark.req("JF-CALL-013")
@pytest.mark.parametrize("bad", OUT_OF_BOUNDS_CALL_IDS, ids=repr)
def test_a_call_id_or_code_out_of_bounds_is_a_transport_failure(
    bad: str, quiet_capture: _Capture
) -> None:
    """Before R29 they were copied verbatim into attempts, telemetry and log lines."""
    bad_code = bad[:65] if len(bad) > 64 else bad
    for doc in (
        {"ok": True, "callId": bad, "summary": "s"},
        {"ok": False, "callId": bad, "error": {"code": "policy"}},
        {"ok": False, "callId": "c", "error": {"code": bad_code if bad != "a" * 129 else "b" * 65}},
    ):
        results = both(replying(200, json.dumps(doc).encode()), max_attempts=1)
        assert_transport(results, "schema")
        assert all(a.call_id is None for r in results for a in r.attempts)
    logged = [r.getMessage() for r in quiet_capture.records]
    assert logged and not any(bad in line for line in logged if bad)


@settings(max_examples=60, deadline=None)
@given(
    call_id=st.text(st.sampled_from(CALL_ID_CHARS) | st.characters(), min_size=1, max_size=140),
    code=st.text(st.sampled_from(CODE_CHARS) | st.characters(), min_size=1, max_size=70),
)
def test_only_bounded_identifiers_are_accepted(call_id: str, code: str) -> None:
    ok_call = re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", call_id) is not None
    ok_code = re.fullmatch(r"[A-Za-z0-9._-]{1,64}", code) is not None
    for doc, accepted in (
        ({"ok": True, "callId": call_id, "summary": "s"}, ok_call),
        ({"ok": False, "callId": "c", "error": {"code": code}}, ok_code),
    ):
        raw = json.dumps(doc).encode()
        if accepted:
            assert parse_reply(raw).call_id in (call_id, "c")
        else:
            with pytest.raises(TransportError) as refused:
                parse_reply(raw)
            assert refused.value.details["code"] in ("schema", "malformed")


def test_hostile_bodies_are_never_logged(quiet_capture: _Capture) -> None:
    marker = "HOSTILE-MARKER-\u2603"
    bodies = [
        json.dumps({"ok": True, "callId": "c", "summary": marker, "extra": marker}).encode(),
        json.dumps({"ok": False, "error": {"code": "x", "message": marker}}).encode(),
        (f'{{"ok":true,"callId":"c","summary":"{marker}"').encode(),
    ]
    for body in bodies:
        for result in both(replying(200, body)):
            assert marker not in repr(result.attempts)
    assert quiet_capture.records
    for record in quiet_capture.records:
        assert marker not in record.getMessage()
        assert marker not in repr(record.__dict__)
        assert "SECRET-INPUT-TEXT" not in repr(record.__dict__)


def test_other_content_encodings_are_refused() -> None:
    handler = replying(200, b"\x1f\x8b\x08\x00", {"Content-Encoding": "gzip"})
    assert_transport(both(handler, max_attempts=1), "encoding")


def test_declared_length_over_the_cap_is_refused_before_reading() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        response = httpx.Response(200, content=b"{}")
        response.headers["Content-Length"] = str(CAP + 1)
        return response

    assert_transport(both(handler, max_attempts=1), "too_large")


def test_the_overall_deadline_bounds_a_stalled_reply() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(10)
        return httpx.Response(200, content=b"{}")  # pragma: no cover

    async def go() -> CompressionResult:
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        async with client:
            compressor = HttpCompressor(BASE, client=client, timeout=0.2, max_attempts=1)
            return await compressor.compress(REQUEST, lambda: PEOPLE)

    result = asyncio.run(asyncio.wait_for(go(), 5))
    assert_transport([result], "timeout")


# --------------------------------------------------------------------------- exception mapping

EXCEPTIONS: list[tuple[BaseException, str]] = [
    (httpx.ConnectError("refused"), "connect"),
    (httpx.ProxyError("proxy"), "connect"),
    (httpx.ConnectTimeout("slow connect"), "timeout"),
    (httpx.ReadTimeout("slow read"), "timeout"),
    (httpx.WriteTimeout("slow write"), "timeout"),
    (httpx.PoolTimeout("pool"), "timeout"),
    (httpx.ReadError("reset by peer"), "reset"),
    (httpx.WriteError("broken pipe"), "reset"),
    (httpx.CloseError("close"), "reset"),
    (httpx.RemoteProtocolError("disconnected"), "reset"),
    (httpx.NetworkError("net"), "reset"),
    (httpx.LocalProtocolError("bad header"), "protocol"),
    (httpx.UnsupportedProtocol("ftp"), "protocol"),
    (httpx.DecodingError("bad gzip"), "protocol"),
    (httpx.TooManyRedirects("loop"), "protocol"),
    (httpx.StreamClosed(), "protocol"),
    (ConnectionResetError(104, "reset"), "reset"),
    (ConnectionRefusedError(111, "refused"), "connect"),
    (TimeoutError(), "timeout"),
]


@pytest.mark.parametrize(("exc", "code"), EXCEPTIONS, ids=[type(e).__name__ for e, _ in EXCEPTIONS])
def test_classify_exception_maps_and_chains(exc: BaseException, code: str) -> None:
    error = classify_exception(exc)
    assert isinstance(error, TransportError)
    assert error.details["code"] == code
    assert error.__cause__ is exc
    assert error.code == "transport_error" and error.retryable


@pytest.mark.parametrize(("exc", "code"), EXCEPTIONS, ids=[type(e).__name__ for e, _ in EXCEPTIONS])
def test_exceptions_raised_by_the_transport_never_escape(exc: BaseException, code: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    assert_transport(both(handler), code)


@pytest.mark.parametrize(
    ("exc", "code"),
    [(httpx.ReadError("mid-body"), "reset"), (httpx.RemoteProtocolError("eof"), "reset")],
)
def test_exceptions_in_the_middle_of_the_body(exc: BaseException, code: str) -> None:
    class Breaking(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b'{"ok":true,"callId":"c","summ'
            raise exc

        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b'{"ok":true,"callId":"c","summ'
            raise exc

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Breaking())

    assert_transport(both(handler, max_attempts=1), code)


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        (b"\xff", UnicodeDecodeError),
        (b"{", json.JSONDecodeError),
        (b"[" * 100_000 + b"]" * 100_000, RecursionError),
    ],
)
def test_parse_failures_chain_their_cause(body: bytes, cause: type[BaseException]) -> None:
    with pytest.raises(TransportError) as info:
        parse_reply(body)
    assert info.value.details["code"] == "malformed"
    assert isinstance(info.value.__cause__, cause)


def test_requests_carry_the_contract_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True, "callId": "c", "summary": "s"})

    both(handler)
    for request in seen:
        assert request.method == "POST"
        assert request.url == BASE + "/v2/compress"
        assert request.headers["Idempotency-Key"] == REQUEST.idempotency_key
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["Accept-Encoding"] == "identity"
        assert json.loads(request.content) == REQUEST.body(["p1"])


# --------------------------------------------------------------------------- a dripping server


def _serve_once(mode: str, stop_after: float = 4.0) -> tuple[str, threading.Thread]:
    """A one-connection HTTP server on 127.0.0.1 that never completes its reply: it drips
    header bytes (`drip`) or sends interim `100 Continue` responses (`continue`) until the
    client goes away or `stop_after` seconds pass."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def run() -> None:
        with listener:
            listener.settimeout(stop_after)
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(stop_after)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    started = time.monotonic()
                    if mode == "drip":
                        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                    while time.monotonic() - started < stop_after:
                        conn.sendall(b"a" if mode == "drip" else b"HTTP/1.1 100 Continue\r\n\r\n")
                        time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{port}", thread


@pytest.mark.req("JF-CALL-014", "JF-CALL-006")
@pytest.mark.parametrize("mode", ["drip", "continue"])
@pytest.mark.parametrize("executor", ["sync", "async"])
def test_the_attempt_deadline_bounds_a_server_that_never_finishes_its_head(
    mode: str, executor: str
) -> None:
    """Before R30 the sync executor checked its deadline only between body chunks: a server
    dripping header bytes held one attempt until the server gave up (30 s in the report)."""
    url, server = _serve_once(mode)
    options: dict[str, Any] = {"timeout": 0.5, "connect_timeout": 0.5, "max_attempts": 1}
    if executor == "sync":
        with SyncHttpCompressor(url, **options) as compressor:
            result = compressor.compress(REQUEST, lambda: PEOPLE)
    else:

        async def go() -> CompressionResult:
            async with HttpCompressor(url, **options) as compressor:
                return await compressor.compress(REQUEST, lambda: PEOPLE)

        result = asyncio.run(go())
    server.join(10)
    assert_transport([result], "timeout")
