"""Checks of the driver's replies: success, results, refusals and compression reports.

The `replies` part of `jfsm_conformance.verify.Verifier` (see there for the blame
order); each check credits or blames requirement IDs through the run's `Ledger`, and a
failing one raises `ConformanceFailure`.
"""

from __future__ import annotations

from typing import Any

from jfsm_conformance.client.protocol import Reply
from jfsm_conformance.model.canon import QUOTA
from jfsm_conformance.verify import checks as C
from jfsm_conformance.verify.blame import outcome_ids
from jfsm_conformance.verify.checks import Ledger
from jfsm_conformance.verify.excerpts import as_json

__all__ = ["ReplyChecks"]

FAILURES = frozenset({"refused", "transport", "empty", "not_smaller", "quota", "stale"})


class ReplyChecks:
    """What a reply says, against what the model expects."""

    def __init__(self, ledger: Ledger, error_codes: frozenset[str]) -> None:
        self.ledger = ledger
        self.error_codes = error_codes

    def ok(self, reply: Reply, op: str, ids: tuple[str, ...]) -> Any:
        """The operation succeeded; its result."""
        self.ledger.expect(
            C.ERROR_CODE if reply.code != "unsupported_op" else C.REPLY,
            reply.ok,
            lambda: f"{op} was refused: {reply.get('error')}",
            ids=ids,
        )
        return reply.result

    def result(self, op: str, got: Any, want: Any, ids: tuple[str, ...]) -> None:
        """An operation's result equals what the model expects."""
        self.ledger.expect(C.REPLY, got == want, f"{op} returned {got}, expected {want}", ids=ids)

    def blocked(self, op: str, timeout: float) -> None:
        """An operation did not answer while a compression was held: it waits inside the
        critical section."""
        self.ledger.expect(
            C.CONCURRENCY,
            False,
            f"{op} did not complete within {timeout:.0f} s while a compression was held in "
            "flight: it waits on the compression inside the critical section",
            ids=("JF-CONC-002",),
        )

    def refusal(self, op: str, reply: Reply, code: str, ids: tuple[str, ...]) -> None:
        """Refused with the stable `code` and a message."""
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok and reply.code == code,
            lambda: (
                f"{op} should be refused with {code}; got "
                f"{reply.get('result') if reply.ok else reply['error']}"
            ),
            ids=ids,
        )
        self.ledger.expect(
            C.ERROR_CODE,
            reply.code in self.error_codes,
            f"error code {as_json(reply.code)} is not a stable code",
            ids=("JF-ERR-001",),
        )
        self.ledger.expect(
            C.ERROR_CODE,
            bool(reply["error"].get("message")),
            "the error has no message",
            ids=("JF-ERR-001",),
        )

    def quota_details(self, reply: Reply, current: Any, would_be: int | None) -> None:
        """quota_exceeded names current, would-be (exact when the suite knows it) and quota."""
        details = (reply.get("error") or {}).get("details") or {}
        got = details.get("would_be", details.get("wouldBe"))
        exact = got == would_be if would_be is not None else isinstance(got, int) and got > QUOTA
        self.ledger.expect(
            C.QUOTA_NUMBERS,
            details.get("current") == current and details.get("quota") == QUOTA and exact,
            f"quota_exceeded details {details}: expected current {current}, would_be "
            f"{would_be if would_be is not None else 'above the quota'}, quota {QUOTA}",
        )

    def pending(self, reply: Reply, cause: str, ids: tuple[str, ...] = ()) -> None:
        """The generation was refused with a retryable compression_pending naming `cause`."""
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok and reply.code == "compression_pending",
            lambda: (
                f"a forced compression was owed and ended {cause}, yet generate answered "
                f"{reply.get('result') or reply.get('error')} instead of compression_pending"
            ),
            ids=ids or ("JF-INT-007", "JF-INT-008"),
        )
        details = reply["error"].get("details") or {}
        self.ledger.expect(
            C.ERROR_CODE,
            reply["error"].get("retryable") is True and details.get("cause") == cause,
            f"compression_pending must be retryable and name the cause {as_json(cause)}: "
            f"{as_json(reply['error'])}",
            ids=("JF-INT-008",),
        )

    def forced(self, got: dict[str, Any], want: dict[str, Any] | None) -> None:
        """A generation's report carries the forced compression it settled first as its
        `forced` member, and none when it settled none (JF-COMP-014)."""
        member = got.get("forced")
        if want is None:
            self.ledger.expect(
                C.OUTCOME,
                member is None,
                lambda: (
                    "generate settled no forced compression, yet its report has a forced "
                    f"member: {member}"
                ),
                ids=("JF-COMP-014",),
            )
            return
        keys = ("outcome", "lengthBefore", "lengthAfter", "throughSeq")
        expected = {k: want.get(k) for k in keys}
        shown = {k: member.get(k) for k in keys} if isinstance(member, dict) else member
        self.ledger.expect(
            C.OUTCOME,
            isinstance(member, dict) and shown == expected,
            lambda: (
                "generate settled the forced compression an intervene owed before its "
                f"check; its report's forced member is {shown}, expected {expected}"
            ),
            ids=("JF-COMP-014",),
        )

    def report(self, op: str, got: dict[str, Any], want: dict[str, Any]) -> None:
        """A compression report: outcome, and the lengths and throughSeq of the request.
        `want["raw"]`: what the reply alone said; a stale result that said something else
        checks the precedence of outcomes (JF-COMP-013)."""
        raw = want.get("raw")
        ids = outcome_ids(want["outcome"])
        if want.get("scene", "?") is None:  # the game stack: no scene ended (JF-CAT-009)
            ids = tuple(i for i in ids if i != "JF-CAT-009")
        precedence = want["outcome"] == "stale" and raw not in (None, "valid")
        if precedence:
            ids = ("JF-COMP-013", *ids)
        if want["outcome"] in FAILURES and got.get("outcome") == "published":
            ids = (*ids, "JF-COMP-009")  # a failure published: memory did not stay intact
        self.ledger.expect(
            C.OUTCOME,
            got.get("outcome") == want["outcome"],
            f"{op} reported outcome {as_json(got.get('outcome'))}, expected "
            f"{as_json(want['outcome'])}"
            + (f" (the reply alone said {as_json(raw)}; stale comes first)" if precedence else ""),
            ids=ids,
        )
        if want["outcome"] in ("not_due", "in_flight"):
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                got.get("lengthBefore") == want["lengthBefore"],
                f"lengthBefore {got.get('lengthBefore')} but the canonical length is "
                f"{want['lengthBefore']}",
                ids=("JF-TEXT-003", "JF-TEXT-004"),
            )
        else:
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                got.get("lengthBefore") == want["lengthBefore"]
                and got.get("throughSeq") == want.get("throughSeq"),
                f"lengthBefore/throughSeq {got.get('lengthBefore')}/{got.get('throughSeq')}, "
                f"the request had {want['lengthBefore']}/{want.get('throughSeq')}",
                ids=("JF-CALL-003",),
            )
        if want["outcome"] == "published":
            self.ledger.expect(
                C.OUTCOME,
                got.get("lengthAfter") == want["lengthAfter"],
                f"lengthAfter {got.get('lengthAfter')}, the model's canonical length is "
                f"{want['lengthAfter']}",
                ids=("JF-TEXT-004", "JF-COMP-003"),
            )
