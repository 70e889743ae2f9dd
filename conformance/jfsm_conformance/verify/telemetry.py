"""Checks of the telemetry events: one per compress.v2 attempt, each matching it, no text.

The `telemetry` part of `jfsm_conformance.verify.Verifier` (see there for the blame
order); each check credits or blames requirement IDs through the run's `Ledger`, and a
failing one raises `ConformanceFailure`.
"""

from __future__ import annotations

from typing import Any

from jfsm_conformance.model.canon import jcs
from jfsm_conformance.model.predictor import Compression
from jfsm_conformance.model.replies import call_id_of, output_chars, settled
from jfsm_conformance.verify import checks as C
from jfsm_conformance.verify.checks import Ledger
from jfsm_conformance.verify.excerpts import around, as_json

__all__ = ["TelemetryChecks"]


class TelemetryChecks:
    """The telemetry of settled compressions, against their attempts."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def events(
        self, events: list[dict[str, Any]], fresh: list[dict[str, Any]], comp: Compression
    ) -> None:
        """The events of one settled compression: one per attempt, each matching it."""
        flight, attempts, outcome = comp.flight, comp.attempts, comp.outcome
        text = jcs(events)
        self.ledger.expect(
            C.CANARY_ABSENT,
            "CANARY" not in text and "\u27ea" not in text,
            lambda: (
                "telemetry holds text: "
                f"…{around(text, 'CANARY' if 'CANARY' in text else chr(0x27EA))}…"
            ),
            ids=("JF-CALL-012", "JF-CAT-008", "JF-INT-009"),
        )
        self.ledger.expect(
            C.TELEMETRY,
            len(fresh) == len(attempts),
            f"{len(fresh)} telemetry event(s) for a compression of {len(attempts)} attempt(s)",
            ids=("JF-CALL-011",),
        )
        scope = {"gameId": comp.game}
        if flight.scene is not None:
            scope["catalystId"] = flight.scene
        numbers: list[Any] = []
        for i, (event, attempt) in enumerate(zip(fresh, attempts, strict=True)):
            d = settled(attempt.reply or {"reply": "reset"})
            want_outcome = outcome if i == len(attempts) - 1 else "transport"
            problems = []
            if event.get("idempotencyKey") != attempt.request["idempotency_key"]:
                problems.append("idempotencyKey differs from the request's header")
            if event.get("kind") != flight.kind or event.get("scope") != scope:
                problems.append("kind/scope differ from the request's")
            if event.get("outcome") != want_outcome:
                problems.append(
                    f"outcome {as_json(event.get('outcome'))}, expected {as_json(want_outcome)}"
                )
            if (
                event.get("inputChars") != len(flight.text)
                or event.get("throughSeq") != flight.through
            ):
                problems.append("inputChars/throughSeq differ from the request's")
            want_out = output_chars(d, len(flight.text))
            if want_out is not None and event.get("outputChars") != want_out:
                problems.append(
                    f"outputChars {as_json(event.get('outputChars'))}, expected {want_out}"
                )
            cid = call_id_of(d)
            if cid is not None and event.get("callId") != cid:
                problems.append(
                    f"callId {as_json(event.get('callId'))}, the fake's reply had {as_json(cid)}"
                )
            numbers.append(event.get("attempt"))
            self.ledger.expect(
                C.TELEMETRY,
                not problems,
                f"telemetry event of attempt {i + 1}: " + "; ".join(problems),
                ids=("JF-CALL-011",),
            )
        self.ledger.expect(
            C.TELEMETRY,
            all(isinstance(n, int) for n in numbers)
            and numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            if numbers
            else True,
            f"attempt numbers {numbers} are not consecutive",
            ids=("JF-CALL-011",),
        )
        if outcome == "published":
            self.ledger.expect(
                C.CALL_ID,
                comp.call_id is not None and fresh[-1].get("callId") == comp.call_id,
                "telemetry callId differs from the summary's compressionCallId",
                ids=("JF-CALL-011", "JF-COMP-004"),
            )

    def none_left(self, op: str, extra: list[dict[str, Any]]) -> None:
        """No telemetry event is left over once every attempt of the step has its own."""
        self.ledger.expect(
            C.TELEMETRY,
            not extra,
            lambda: (
                f"{op} left {len(extra)} telemetry event(s) that match no compress.v2 "
                f"attempt: {[(e.get('outcome'), e.get('kind')) for e in extra]}"
            ),
            ids=("JF-CALL-011",),
        )
