"""Scenarios that pin what issue 22 found implementers guessing (decision R80): `reset` to
round 0 of an empty game, and to a round above the count."""

from __future__ import annotations

from jfsm_conformance.scenarios.registry import game, scenario
from jfsm_conformance.steps.session import Session


@scenario("reset-edges", "HIST-001 HIST-010 ERR-005")
def reset_edges(s: Session) -> None:
    """`reset(0)` of a game without rounds is a reset like any other (the stack rebuilt
    empty, the epoch raised); a round above the count is refused with invalid_input, on an
    empty game as on one with rounds."""
    g = game(s)
    s.invalid(g, "reset", {"round": 1}, "invalid_input", ["JF-ERR-005"])
    s.reset(g, 0)
    s.reset(g, 0)
    s.record_round(g, "r1", "one")
    s.invalid(g, "reset", {"round": 2}, "invalid_input", ["JF-ERR-005"])
    s.reset(g, 1)
    s.reset(g, 0)
