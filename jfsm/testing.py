"""`jfsm.testing`: an in-process compressor for tests and demos (public, like `jfsm`).

`FakeCompressor` follows the `Compressor` protocol without any network. By default it
answers ok with a short deterministic summary that never quotes the input. A test can queue
replies (`script`) and hold a call in flight until `release()`, to append while a compression
is outstanding. Every request and the beneficiaries it would carry are recorded.

Replies are scripted with the conformance suite's reply descriptors, plain JSON objects
(`{"reply": "refuse", "code": "policy"}`, `{"reply": "success", "summary": "..."}`,
`{"reply": "hold", "then": {"reply": "default"}}`, see `jfsm_conformance.model.replies`):
one vocabulary for both fakes, the in-process one here and the HTTP one of the suite (R57).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jfsm.compressor import (
    Attempt,
    CompressionRequest,
    CompressionResult,
    ParticipantSource,
    beneficiaries,
)

__all__ = ["FakeCompressor"]


@dataclass(frozen=True, slots=True)
class _Reply:
    """What a descriptor scripts, as the fake acts on it: `ok` (with `summary`, or `extra`
    code points over the input, else the default summary), `refused` (with `code`) or
    `transport` (with `code`); `hold` keeps it in flight until released."""

    outcome: str = "ok"
    summary: str | None = None
    code: str | None = None
    hold: bool = False
    extra: int | None = None  # ok with a summary of the input's length plus `extra`
    call_id: str | None = None

    @classmethod
    def from_descriptor(cls, d: Mapping[str, Any]) -> _Reply:
        """The reply a suite descriptor scripts (`jfsm_conformance.model.replies`): a
        transport failure of the HTTP fake becomes a `transport` reply with the code the
        executor reports.

        Raises `ValueError` for an unknown or incomplete descriptor."""
        kind = d.get("reply")
        if kind == "hold" and isinstance(d.get("then"), Mapping):
            return cls.from_descriptor(d["then"]).with_hold()
        if kind == "default":
            return cls()
        if kind == "success" and isinstance(d.get("summary"), str):
            return cls(summary=d["summary"], call_id=d.get("callId"))
        if kind == "empty":
            return cls(summary=d.get("summary", ""))
        if kind == "not_smaller":
            return cls(extra=d.get("extra", 0))
        if kind == "refuse":
            return cls("refused", code=d.get("code", "refused"), call_id=d.get("callId"))
        transport = {"malformed": "malformed", "wrong_schema": "schema", "reset": "reset"}
        if kind == "http_status":
            return cls("transport", code=f"http_{d.get('status', 503)}")
        if kind in transport:
            return cls("transport", code=transport[kind])
        raise ValueError(f"unknown reply descriptor {dict(d)!r}")

    def with_hold(self) -> _Reply:
        return _Reply(self.outcome, self.summary, self.code, True, self.extra, self.call_id)


def default_summary(request: CompressionRequest, chars: int | None = None) -> str:
    """A deterministic summary derived from the request's hash, never from its words."""
    digest = hashlib.sha256(request.text.encode("utf-8")).hexdigest()
    size = max(1, request.chars // 10) if chars is None else chars
    base = f"summary {digest} "
    return (base * (size // len(base) + 1))[:size]


@dataclass
class FakeCompressor:
    """A scripted, recording compressor (see module docs)."""

    script: deque[dict[str, Any]] = field(default_factory=deque)  # descriptors, in order
    requests: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    _released: asyncio.Event | None = None
    _held: int = 0

    def queue(self, *replies: Mapping[str, Any]) -> None:
        """Append reply descriptors to the script (used in order, then the default reply).

        Raises `ValueError` for an unknown descriptor (and queues none of them)."""
        for reply in replies:
            _Reply.from_descriptor(reply)
        self.script.extend(dict(reply) for reply in replies)

    @property
    def held(self) -> int:
        """How many calls are being held now."""
        return self._held

    def release(self) -> None:
        """Let every held call answer."""
        if self._released is not None:
            self._released.set()

    async def compress(
        self, request: CompressionRequest, participants: ParticipantSource
    ) -> CompressionResult:
        self.calls += 1
        ids = beneficiaries(participants())
        self.requests.append(
            {
                "body": request.body(ids),
                "idempotencyKey": request.idempotency_key,
                "epoch": request.epoch,
            }
        )
        reply = _Reply.from_descriptor(self.script.popleft()) if self.script else _Reply()
        if reply.hold:
            if self._released is None or self._released.is_set():
                self._released = asyncio.Event()
            self._held += 1
            try:
                await self._released.wait()
            finally:
                self._held -= 1
        call_id = reply.call_id or "fake-" + request.idempotency_key[-16:] + f"-{self.calls}"
        if reply.outcome == "ok":
            summary = reply.summary
            if summary is None and reply.extra is not None:
                summary = default_summary(request, request.chars + reply.extra)
            elif summary is None:
                summary = default_summary(request)
            attempt = Attempt(1, "ok", call_id, 0.0, output_chars=len(summary))
            return CompressionResult("ok", (attempt,), call_id=call_id, summary=summary)
        if reply.outcome == "refused":
            attempt = Attempt(1, "refused", call_id, 0.0, detail=reply.code)
            return CompressionResult(
                "refused", (attempt,), call_id=call_id, error_code=reply.code or "refused"
            )
        attempt = Attempt(1, "transport", None, 0.0, detail=reply.code or "connect")
        return CompressionResult("transport", (attempt,), error_code=reply.code or "connect")
