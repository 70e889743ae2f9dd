"""The httpx executor for compress.v2 (decisions D16 to D18, contract `spec/compress-v2.json`).

`HttpCompressor` (async, the engine's `Compressor`) and `SyncHttpCompressor` (the same for
sync callers) carry one `CompressionRequest` to `POST {base}/v2/compress` and report what came
back as a `CompressionResult`. They never raise for a failed call.

One attempt:

1. read the participants *now* and compute the beneficiaries (humans, not spectators, sorted);
2. send the closed body with the request's `Idempotency-Key` (the same on every retry);
3. read the reply streaming, stopping at `max_response_bytes`, under a connect timeout and an
   overall deadline for the attempt;
4. classify it: only a 200 whose body is strict UTF-8 JSON (no duplicate keys, no NaN or
   Infinity, no lone surrogates) valid against `spec/schemas/compress-reply.schema.json` is a
   reply (`ok` or `refused`); anything else is a `transport` failure with a code (`connect`,
   `timeout`, `reset`, `protocol`, `http_<status>`, `too_large`, `encoding`, `malformed`,
   `schema`).

Transport failures are retried with exponential backoff up to `max_attempts` (except 4xx
statuses other than 408, 425 and 429, which would fail the same way again); a refusal or an ok
reply ends the call. Every attempt becomes one `Attempt` and one log record on the
`jfsm.transport` logger, with sizes, codes and ids only: never the text sent or received, nor a
refusal's free-text message. A reply (ok or a refusal) logs at INFO, a transport failure at
WARNING.

**The one concept:** one compress.v2 call over HTTP, its attempts and their classification.

Internally each failure is a `jfsm.errors.TransportError` raised `from` the foreign exception
(`classify_exception` does the mapping); the loop turns it into an `Attempt`, so nothing
escapes. The caller's own errors still surface: an invalid request text raises `InvalidInput`
before any attempt, and an exception from the participants source propagates.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import httpx
from jsonschema import Draft202012Validator

import jfsm.observability as observability
from jfsm.compressor import (
    Attempt,
    CompressionRequest,
    CompressionResult,
    ParticipantSource,
    beneficiaries,
)
from jfsm.errors import InvalidInput, TransportError
from jfsm.spec import load_json
from jfsm.text import require_text

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT",
    "PATH",
    "HttpCompressor",
    "Reply",
    "SyncHttpCompressor",
    "classify_exception",
    "parse_reply",
]

logger = logging.getLogger("jfsm.transport")

PATH = "/v2/compress"
DEFAULT_TIMEOUT = 120.0
"""Overall deadline of one attempt, in seconds (compression is a model call: it can be slow)."""
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""A game-threshold summary (300,000 code points) at 12 escaped bytes each, with margin."""

_NOT_RETRIED_4XX = frozenset(range(400, 500)) - {408, 425, 429}

# First match wins: subclasses before their bases. `TimeoutError` (the asyncio deadline) is an
# `OSError`, so it comes before the plain OS errors.
_EXCEPTION_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (httpx.TimeoutException, "timeout"),
    (TimeoutError, "timeout"),
    (httpx.ConnectError, "connect"),
    (httpx.ProxyError, "connect"),
    (ConnectionRefusedError, "connect"),
    (httpx.ReadError, "reset"),
    (httpx.WriteError, "reset"),
    (httpx.CloseError, "reset"),
    (httpx.RemoteProtocolError, "reset"),
    (httpx.NetworkError, "reset"),
    (ConnectionError, "reset"),
    (OSError, "reset"),
)
_CAUGHT: tuple[type[BaseException], ...] = (httpx.HTTPError, httpx.StreamError, OSError)


def classify_exception(exc: BaseException) -> TransportError:
    """Map a foreign exception of one attempt to a `TransportError` carrying `details["code"]`.

    `connect`: no connection; `timeout`: any timeout or the attempt deadline; `reset`: the
    connection broke or closed without a reply; `protocol`: anything else (broken HTTP,
    decoding, redirects, unsupported protocol). The returned error's `__cause__` is `exc`.
    """
    code = next((c for kind, c in _EXCEPTION_CODES if isinstance(exc, kind)), "protocol")
    error = TransportError(
        f"compress.v2 transport failure: {code} ({type(exc).__name__})", code=code
    )
    error.__cause__ = exc
    return error


def _failure(code: str, what: str) -> TransportError:
    return TransportError(f"compress.v2 transport failure: {code} ({what})", code=code)


@dataclass(frozen=True, slots=True)
class Reply:
    """A schema-valid compress.v2 reply: ok (`summary` set) or a refusal (`error_code` set)."""

    ok: bool
    call_id: str | None
    summary: str | None = None
    error_code: str | None = None


@cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (certificates verified), built once per process: loading
    the certificate store costs about 20 ms, and the engine makes an executor per compressor
    URL it is given (every driver `hello`)."""
    return httpx.create_ssl_context()


@cache
def _reply_validator() -> Draft202012Validator:
    schema = load_json("schemas/compress-reply.schema.json")
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("duplicate key in JSON object")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


def _has_lone_surrogate(doc: Any) -> bool:
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_reply(raw: bytes) -> Reply:
    """Parse the body of a 200 reply strictly.

    Raises `TransportError` with code `malformed` (not UTF-8, not JSON, duplicate keys, NaN or
    Infinity, a lone surrogate, nesting too deep) or `schema` (not valid against the reply
    schema).
    """
    try:
        text = raw.decode("utf-8")
        doc = json.loads(
            text,
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise _failure("malformed", type(exc).__name__) from exc
    if _has_lone_surrogate(doc):
        raise _failure("malformed", "lone surrogate")
    try:
        valid = _reply_validator().is_valid(doc)
    except RecursionError as exc:
        raise _failure("schema", "nesting") from exc
    if not valid:
        raise _failure("schema", "reply schema")
    if doc["ok"]:
        return Reply(ok=True, call_id=doc["callId"], summary=doc["summary"])
    return Reply(ok=False, call_id=doc.get("callId"), error_code=doc["error"]["code"])


def _check_head(response: httpx.Response, cap: int) -> None:
    """What can be refused before reading the body: status, encoding, declared length."""
    if response.status_code != 200:
        raise _failure(f"http_{response.status_code}", "status")
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise _failure("encoding", "content-encoding")
    declared = response.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError as exc:
            raise _failure("protocol", "content-length") from exc
        if size > cap:
            raise _failure("too_large", "content-length")


class _Buffer:
    """The body read so far, refusing to grow past the cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        if len(self.data) + len(chunk) > self.cap:
            raise _failure("too_large", "body")
        self.data += chunk


class HttpCompressor:
    """The async compress.v2 executor; implements `jfsm.compressor.Compressor`.

    `client` may be a shared `httpx.AsyncClient` (it is then not closed here); otherwise one is
    created and closed by `aclose()` or `async with`. `timeout` is the overall deadline of one
    attempt, the whole of it (JF-CALL-014), `connect_timeout` that of connecting. `clock`
    measures durations; `sleep` waits between attempts (both injectable for tests).

    Raises `InvalidInput` for a base URL that is not http(s) or a bound that is not positive.
    """

    def __init__(
        self,
        base_url: str,
        *,
        client: httpx.AsyncClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_attempts: int = 3,
        backoff: float = 0.5,
        backoff_factor: float = 2.0,
        max_backoff: float = 8.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise InvalidInput(f"base_url must be an http(s) URL, not {base_url!r}")
        if timeout <= 0 or connect_timeout <= 0:
            raise InvalidInput("timeouts must be positive")
        if max_response_bytes < 1 or max_attempts < 1:
            raise InvalidInput("max_response_bytes and max_attempts must be at least 1")
        if backoff < 0 or backoff_factor < 1 or max_backoff < 0:
            raise InvalidInput("backoff must be >= 0, backoff_factor >= 1, max_backoff >= 0")
        self.url = str(base_url).rstrip("/") + PATH
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.backoff_factor = backoff_factor
        self.max_backoff = max_backoff
        self._clock = clock
        self._httpx_timeout = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
        self._owns_client = client is None
        self._client = (
            httpx.AsyncClient(timeout=self._httpx_timeout, verify=_tls())
            if client is None
            else client
        )
        self._sleep = sleep

    async def aclose(self) -> None:
        """Close the client if this executor created it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> HttpCompressor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def compress(
        self, request: CompressionRequest, participants: ParticipantSource
    ) -> CompressionResult:
        """Send `request`, retrying transport failures; never raises for a failed call.

        Raises `InvalidInput` if the request text is not valid Unicode (nothing is sent);
        an exception from `participants` propagates.
        """
        require_text(request.text, "text")
        key = request.idempotency_key
        attempts: list[Attempt] = []
        reply: Reply | None = None
        for number in range(1, self.max_attempts + 1):
            if number > 1:
                await self._sleep(self.backoff_delay(number - 1))
            body = self._encode(request, participants)
            started = self._clock()
            error: TransportError | None = None
            opened = self._span_start(key, number) if observability.tracing_on() else None
            with observability.span("POST", opened, kind="client") as span:
                try:
                    reply = await self._send(body, key)
                except TransportError as exc:
                    reply, error = None, exc
                attempt = self._attempt(number, started, reply, error)
                if span.is_recording():
                    _span_end(span, attempt)
            attempts.append(attempt)
            self._log(request, key, attempt)
            if not self._retryable(attempt):
                break
        return self._result(attempts, reply)

    def _span_start(self, key: str, number: int) -> dict[str, Any]:
        """The attributes of an attempt's HTTP client span: ids and the server, no text."""
        url = httpx.URL(self.url)
        return {
            "http.request.method": "POST",
            "url.template": PATH,
            "server.address": url.host,
            "server.port": url.port or (443 if url.scheme == "https" else 80),
            "jfsm.compression.idempotency_key": key,
            "jfsm.compression.attempt": number,
        }

    async def _send(self, body: bytes, key: str) -> Reply:
        """One attempt under one deadline: connecting, sending, the status line, interim
        responses, headers and body all count against `timeout`."""
        buffer = _Buffer(self.max_response_bytes)
        try:
            async with asyncio.timeout(self.timeout):
                async with self._client.stream(
                    "POST",
                    self.url,
                    content=body,
                    headers=self._headers(key),
                    timeout=self._httpx_timeout,
                    follow_redirects=False,
                ) as response:
                    _check_head(response, buffer.cap)
                    async for chunk in response.aiter_bytes():
                        buffer.add(chunk)
        except _CAUGHT as exc:
            raise classify_exception(exc) from exc
        return parse_reply(bytes(buffer.data))

    def backoff_delay(self, failed_attempts: int) -> float:
        """Seconds to wait after `failed_attempts` transport failures before the next attempt."""
        delay = self.backoff * self.backoff_factor ** (failed_attempts - 1)
        return min(self.max_backoff, delay)

    @staticmethod
    def _encode(request: CompressionRequest, participants: ParticipantSource) -> bytes:
        ids = beneficiaries(participants())
        body = request.body(ids)
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
            "utf-8"
        )

    @staticmethod
    def _headers(key: str) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "Idempotency-Key": key,
        }

    def _attempt(
        self, number: int, started: float, reply: Reply | None, error: TransportError | None
    ) -> Attempt:
        duration_ms = max(0.0, (self._clock() - started) * 1000.0)
        if reply is not None and reply.ok:
            assert reply.summary is not None
            return Attempt(number, "ok", reply.call_id, duration_ms, len(reply.summary))
        if reply is not None:
            return Attempt(number, "refused", reply.call_id, duration_ms, None, reply.error_code)
        assert error is not None
        return Attempt(number, "transport", None, duration_ms, None, error.details.get("code"))

    @staticmethod
    def _retryable(attempt: Attempt) -> bool:
        if attempt.outcome != "transport":
            return False
        detail = attempt.detail or ""
        if detail.startswith("http_") and detail[5:].isdigit():
            return int(detail[5:]) not in _NOT_RETRIED_4XX
        return True

    def _log(self, request: CompressionRequest, key: str, attempt: Attempt) -> None:
        """One record per attempt: INFO for a reply (ok or a refusal, an expected answer of
        the service), WARNING for a transport failure (the operator may have to look)."""
        fields = {
            "attempt": attempt.number,
            "max_attempts": self.max_attempts,
            "outcome": attempt.outcome,
            "detail": attempt.detail,
            "call_id": attempt.call_id,
            "idempotency_key": key,
            "kind": request.kind,
            "game_id": request.game_id,
            "catalyst_id": request.catalyst_id,
            "through_seq": request.through_seq,
            "epoch": request.epoch,
            "input_chars": request.chars,
            "output_chars": attempt.output_chars,
            "duration_ms": round(attempt.duration_ms, 3),
        }
        level = logging.WARNING if attempt.outcome == "transport" else logging.INFO
        logger.log(
            level,
            "compress.v2 attempt %d/%d outcome=%s detail=%s call_id=%s key=%s kind=%s "
            "game=%s catalyst=%s input_chars=%d output_chars=%s duration_ms=%.1f",
            attempt.number,
            self.max_attempts,
            attempt.outcome,
            attempt.detail,
            attempt.call_id,
            key,
            request.kind,
            request.game_id,
            request.catalyst_id,
            request.chars,
            attempt.output_chars,
            attempt.duration_ms,
            extra={"compress_attempt": fields},
        )

    @staticmethod
    def _result(attempts: list[Attempt], reply: Reply | None) -> CompressionResult:
        last = attempts[-1]
        if last.outcome == "ok" and reply is not None:
            return CompressionResult("ok", tuple(attempts), reply.call_id, reply.summary)
        if last.outcome == "refused" and reply is not None:
            return CompressionResult(
                "refused", tuple(attempts), reply.call_id, error_code=reply.error_code
            )
        return CompressionResult("transport", tuple(attempts), error_code=last.detail)


def _span_end(span: Any, attempt: Attempt) -> None:
    """An attempt's outcome on its span: its call id, its outcome, its status code when the
    service answered, and `error.type` (the transport failure's code) when it did not."""
    span.set_attribute("jfsm.compression.attempt.outcome", attempt.outcome)
    if attempt.call_id is not None:
        span.set_attribute("jfsm.compression.call_id", attempt.call_id)
    if attempt.output_chars is not None:
        span.set_attribute("jfsm.compression.output_chars", attempt.output_chars)
    detail = attempt.detail or ""
    if attempt.outcome != "transport":
        span.set_attribute("http.response.status_code", 200)
        if detail:
            span.set_attribute("jfsm.compression.refusal", detail)
        return
    if detail.startswith("http_") and detail[5:].isdigit():
        span.set_attribute("http.response.status_code", int(detail[5:]))
    span.set_attribute("error.type", detail or "transport")
    observability.set_error(span)


class SyncHttpCompressor:
    """The blocking twin of `HttpCompressor`, for sync callers (same contract and options).

    It runs `HttpCompressor`'s own attempt loop on a private event loop (an
    `asyncio.Runner`, as `jfsm.sync.SyncGameEngine` does), so the whole-attempt deadline is
    the same (JF-CALL-014): a server that drips header bytes or sends endless interim
    responses cannot hold an attempt past `timeout`. `transport` replaces the network (an
    `httpx.AsyncBaseTransport` such as `httpx.MockTransport`); `sleep` blocks between
    attempts. Close it (or use `with`). Not for use inside a running event loop
    (`RuntimeError`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_attempts: int = 3,
        backoff: float = 0.5,
        backoff_factor: float = 2.0,
        max_backoff: float = 8.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        async def pause(seconds: float) -> None:
            sleep(seconds)

        client = httpx.AsyncClient(transport=transport, verify=_tls())
        self._executor = HttpCompressor(
            base_url,
            client=client,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_response_bytes=max_response_bytes,
            max_attempts=max_attempts,
            backoff=backoff,
            backoff_factor=backoff_factor,
            max_backoff=max_backoff,
            clock=clock,
            sleep=pause,
        )
        self._client = client
        self._runner = asyncio.Runner()

    @property
    def url(self) -> str:
        return self._executor.url

    def compress(
        self, request: CompressionRequest, participants: ParticipantSource
    ) -> CompressionResult:
        """As `HttpCompressor.compress`, blocking."""
        return self._runner.run(self._executor.compress(request, participants))

    def close(self) -> None:
        """Close the client and the private event loop. Idempotent."""
        if not self._client.is_closed:
            self._runner.run(self._client.aclose())
        self._runner.close()

    def __enter__(self) -> SyncHttpCompressor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
