"""Scenarios of bounded waits on compress.v2 (JF-CALL-006, JF-CALL-013, JF-CALL-014): a
hostile service costs one transport failure within the attempt deadline, and nothing else.
The cases are built in `jfsm_conformance.probes.waits`."""

from __future__ import annotations

from jfsm_conformance.probes import waits
from jfsm_conformance.scenarios.registry import fill_to, game, ok, scenario
from jfsm_conformance.steps.session import Session


def _run(s: Session, ids: str) -> None:
    g = game(s)
    for i, case in enumerate(c for c in waits.cases() if c["id"] == ids):
        fill_to(s, g, s.world.thresholds["game"] + 1, user=f"w{i}")  # the check compresses
        s.bounded_wait(g, case, ok(f"wait{i}"))
        s.record_round(g, f"after {i}", "still served")


@scenario("bounded-deadline", "CALL-014", needs="deadlineOverride")
def bounded_deadline(s: Session) -> None:
    """A service that hangs, drips its reply or trickles an endless body: the attempt ends
    at the deadline as a transport failure, the retry publishes."""
    _run(s, "JF-CALL-014")


@scenario("bounded-size", "CALL-006", needs="deadlineOverride")
def bounded_size(s: Session) -> None:
    """A body past `response_bytes_max` (chunked, or announced): a transport failure."""
    _run(s, "JF-CALL-006")


@scenario("bounded-identifiers", "CALL-013", needs="deadlineOverride")
def bounded_identifiers(s: Session) -> None:
    """A callId or an error.code outside the reply schema's bounds: a transport failure,
    never a reply whose identifier reaches the summary or telemetry."""
    _run(s, "JF-CALL-013")
