"""Compression telemetry: one event per compress.v2 attempt, never any text (D18).

An event links the attempt's `callId` with the `idempotencyKey` (the Broker's idempotency)
and carries kind, scope, attempt number, outcome, sizes and duration. Earlier attempts of a
call that was retried carry their transport outcome; the last attempt carries the final
outcome of the logical compression (`published` or one of the failure outcomes of D7),
or `aborted` when the store itself failed while publishing (the error reaches the caller).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from jfsm.compressor import Attempt, CompressionRequest, CompressionResult

__all__ = ["FINAL_OUTCOMES", "TelemetrySink", "attempt_events"]

#: Takes one event. It may return an awaitable (a write that does I/O): the engine then
#: awaits it in the background, in the order of the events, never on the callback that
#: emitted it (decision R151). An error, raised or awaited, is counted, never the caller's.
TelemetrySink = Callable[[dict[str, Any]], Awaitable[None] | None]

FINAL_OUTCOMES = (
    "published",
    "refused",
    "transport",
    "empty",
    "not_smaller",
    "quota",
    "stale",
    "aborted",
)


def attempt_events(
    request: CompressionRequest,
    result: CompressionResult,
    final_outcome: str,
) -> list[dict[str, Any]]:
    """The telemetry events of one logical compression."""
    events = []
    attempts = result.attempts or (
        Attempt(number=0, outcome=result.outcome, call_id=None, duration_ms=0.0),
    )
    for index, attempt in enumerate(attempts):
        last = index == len(attempts) - 1
        event: dict[str, Any] = {
            "event": "compression_attempt",
            "callId": attempt.call_id,
            "idempotencyKey": request.idempotency_key,
            "kind": request.kind,
            "scope": request.scope(),
            "attempt": attempt.number,
            "outcome": final_outcome if last else attempt.outcome,
            "inputChars": request.chars,
            "throughSeq": request.through_seq,
            "outputChars": attempt.output_chars,
            "durationMs": round(attempt.duration_ms, 3),
        }
        if attempt.detail is not None:
            event["detail"] = attempt.detail
        events.append(event)
    return events
