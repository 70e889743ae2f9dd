"""Checks of the compress.v2 requests the fake received: when, how often, and what they carry.

The `requests` part of `jfsm_conformance.verify.Verifier` (see there for the blame
order); each check credits or blames requirement IDs through the run's `Ledger`, and a
failing one raises `ConformanceFailure`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jfsm.spec import constants
from jfsm_conformance.model.canon import beneficiaries, jcs
from jfsm_conformance.model.oracle import GAME_KIND, InFlight
from jfsm_conformance.model.predictor import Compression, Flow
from jfsm_conformance.model.replies import TRANSPORT
from jfsm_conformance.verify import checks as C
from jfsm_conformance.verify.checks import Ledger
from jfsm_conformance.verify.excerpts import around, as_json

__all__ = ["HISTORY_OPS", "MAX_ATTEMPTS", "RequestChecks"]

MAX_ATTEMPTS = constants().max_attempts
HISTORY_OPS = {"create_game", "reset", "edit_round", "convert", "duplicate"}


class RequestChecks:
    """The requests of a step, against the compressions the predictor expects."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def none(self, op: str, fresh: Iterable[dict[str, Any]]) -> None:
        """No compress.v2 request arrived during an operation that must not compress."""
        fresh = list(fresh)
        history = op in HISTORY_OPS
        self.ledger.expect(
            C.NO_COMPRESSION if history else C.COMPRESSION_TRIGGER,
            not fresh,
            lambda: (
                f"{op} sent {len(fresh)} compress.v2 request(s) but none was due (first: "
                f"kind {(fresh[0].get('body') or {}).get('kind')}, "
                f"{(fresh[0].get('body') or {}).get('input', {}).get('chars')} chars)"
            ),
            ids=("JF-HIST-007",) if history else ("JF-COMP-001",),
        )

    def texts(self, requests: Iterable[dict[str, Any]]) -> None:
        """No canary travels in a request body."""
        for r in requests:
            body = jcs(r.get("body")) if r.get("body") is not None else ""
            self.ledger.expect(
                C.CANARY_ABSENT,
                "DISCARDED-CANARY" not in body,
                "a compress.v2 request carried the discarded continuation of an intervene",
                ids=("JF-INT-009",),
            )
            if isinstance(r.get("body"), dict) and r["body"].get("kind") == GAME_KIND:
                self.ledger.expect(
                    C.CANARY_ABSENT,
                    "SCENE-CANARY" not in body,
                    lambda body=body: (
                        "a game-kind request carried scene transcript text: "
                        f"…{around(body, 'SCENE-CANARY')}…"
                    ),
                    ids=("JF-CAT-008",),
                )

    def violations(self, violations: list[dict[str, Any]], inherited: bool = False) -> None:
        """The fake's record of contract violations (the last one is blamed); wrong
        beneficiaries of a duplicate that inherited its participants break JF-HIST-012."""
        if violations:
            v = violations[-1]
            ids = {
                "beneficiaries": ("JF-CALL-009",),
                "beneficiaries_order": ("JF-CALL-009",),
                "chars": ("JF-CALL-003", "JF-TEXT-003"),
                "idempotency_key": ("JF-CALL-004",),
                "idempotency_conflict": ("JF-CALL-004",),
                "schema": ("JF-CALL-001", "JF-CALL-010"),
            }.get(v["reason"], ("JF-CALL-001",))
            if inherited and v["reason"].startswith("beneficiaries"):
                ids = ("JF-HIST-012", *ids)
            self.ledger.expect(
                C.REQUEST_CONTRACT,
                False,
                f"the fake compress.v2 rejected request #{v['index']}: {v['reason']} "
                f"({v['detail']})",
                ids=ids,
            )

    def flow(self, flow: Flow, participants: list[dict[str, Any]], inherited: bool = False) -> None:
        """Each compression of a predicted flow, attempt by attempt, in order."""
        for comp in flow.compressions:
            self.compression(comp, participants, inherited)

    def compression(
        self, comp: Compression, participants: list[dict[str, Any]], inherited: bool = False
    ) -> None:
        """The attempts of one compression not checked yet, then whether it was sent at all."""
        flight = comp.flight
        for i in range(comp.checked, len(comp.attempts)):
            attempt = comp.attempts[i]
            self.request(comp.game, flight, attempt.request, participants, inherited)
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                attempt.reply is not None,
                "more compress.v2 attempts arrived than the suite scripted",
                ids=("JF-COMP-001", "JF-CONC-003"),
            )
            if i > 0:
                prev = comp.attempts[i - 1].answer
                self.ledger.expect(
                    C.RETRIES,
                    prev in TRANSPORT,
                    f"attempt {i + 1} was sent after a {prev} reply: only transport failures "
                    "are retried",
                    ids=("JF-CALL-007",),
                )
            self.ledger.expect(
                C.RETRIES,
                i + 1 <= MAX_ATTEMPTS,
                f"{i + 1} attempts for one logical compression (at most {MAX_ATTEMPTS})",
                ids=("JF-CALL-008",),
            )
        comp.checked = len(comp.attempts)
        if comp.missing:
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                False,
                f"a compression of "
                f"{'scene ' + flight.scene if flight.scene else 'the game stack'} was due "
                f"({'forced' if flight.forced else f'{len(flight.text)} code points'}) but no "
                "compress.v2 request arrived",
                ids=("JF-INT-004", "JF-INT-007")
                if flight.forced
                else ("JF-COMP-001", "JF-TEXT-003"),
            )

    def request(
        self,
        game: str,
        flight: InFlight,
        r: dict[str, Any],
        participants: list[dict[str, Any]],
        inherited: bool = False,
    ) -> None:
        """One request: kind and scope, the canonical text, sizes, key, beneficiaries (of
        participants a duplicate inherited from its source, when `inherited`)."""
        body = r.get("body") or {}
        scope = (
            {"gameId": game}
            if flight.scene is None
            else {"gameId": game, "catalystId": flight.scene}
        )
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            body.get("kind") == flight.kind and body.get("scope") == scope,
            f"request kind/scope {as_json(body.get('kind'))} {as_json(body.get('scope'))}, "
            "expected "
            f"{as_json(flight.kind)} {as_json(scope)}",
            ids=("JF-CALL-002",),
        )
        given = body.get("input", {})
        text = given.get("text")
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            text == flight.text,
            lambda: _text_mismatch(flight.text, text),
            ids=("JF-CALL-003", "JF-TEXT-004", "JF-COMP-002"),
        )
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            given.get("throughSeq") == flight.through and given.get("chars") == len(flight.text),
            f"input.throughSeq {given.get('throughSeq')} / chars {given.get('chars')}, expected "
            f"{flight.through} / {len(flight.text)}",
            ids=("JF-COMP-002", "JF-TEXT-003", "JF-CALL-003"),
        )
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            r.get("idempotency_key") == flight.key,
            f"Idempotency-Key {as_json(r.get('idempotency_key'))}, the spec's derivation gives "
            f"{as_json(flight.key)}",
            ids=("JF-CALL-004",),
        )
        expected = beneficiaries(participants)
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            body.get("beneficiaries") == expected,
            f"beneficiaries {as_json(body.get('beneficiaries'))}, participants at call time give "
            f"{as_json(expected)}"
            + (" (the participants the duplicate copied)" if inherited else ""),
            ids=("JF-HIST-012", "JF-CALL-009") if inherited else ("JF-CALL-009",),
        )
        self.ledger.credit(C.REQUEST_CONTRACT, ("JF-CALL-001", "JF-CALL-010"))

    def leftover(self, op: str, leftover: list[dict[str, Any]], answered: dict[str, str]) -> None:
        """Requests of a step that no expected compression explains."""
        retried = [r for r in leftover if r.get("idempotency_key") in answered]
        if retried:  # a leftover repeating an answered attempt's key is a retry of it
            self.ledger.expect(
                C.RETRIES,
                False,
                f"{op} sent {len(retried)} further attempt(s) with the Idempotency-Key of an "
                f"attempt answered {as_json(answered[retried[0]['idempotency_key']])}: only "
                "transport failures are retried",
                ids=("JF-CALL-007",),
            )
        self.ledger.expect(
            C.COMPRESSION_TRIGGER,
            not leftover,
            lambda: (
                f"{op} sent {len(leftover)} unexpected compress.v2 request(s): "
                f"{[(r.get('body') or {}).get('kind') for r in leftover]}"
            ),
            ids=("JF-COMP-001", "JF-CONC-003"),
        )


def _text_mismatch(want: str, got: Any) -> str:
    if not isinstance(got, str):
        return f"input.text is {type(got).__name__}, expected the canonical text"
    i = next(
        (k for k, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
        min(len(want), len(got)),
    )
    return (
        "input.text differs from the canonical text of the represented prefix at code point "
        f"{i} (expected {len(want)} code points, got {len(got)}): expected "
        f"…{want[max(0, i - 40) : i + 40]!r}…, got …{got[max(0, i - 40) : i + 40]!r}…"
    )
