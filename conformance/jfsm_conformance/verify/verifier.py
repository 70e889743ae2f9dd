"""The verifier: what was observed, against what was expected, as named checks.

Every check turns observations (a reply, a dumped store, the requests the fake recorded,
telemetry events) and the expected side (the oracle's model, a predicted `Flow`) into checks
of `jfsm_conformance.verify.checks`, each crediting or blaming requirement IDs through the run's
`Ledger`. A failing check raises `ConformanceFailure`; nothing here talks to the driver, and
nothing here imports the world, the fake's server or the driver client.

The session calls these in a fixed order per step, which is the blame order: a fault is
reported first under the requirement it violates (the stored intervene exchange before the
request that carries it, the store before the compression report, the report before
telemetry).

`Verifier` is composed of one part per kind of observation, all over one shared ledger, so a
call site names the part it checks: `check.replies` (the driver's replies, `replies.py`),
`check.store` (the dumped store, `store.py`: `check.store.dump(...)`), `check.requests`
(what compress.v2 received, `requests.py`) and `check.telemetry` (the telemetry events,
`telemetry.py`).
"""

from __future__ import annotations

from collections.abc import Iterable

from jfsm_conformance.verify.checks import Ledger
from jfsm_conformance.verify.replies import ReplyChecks
from jfsm_conformance.verify.requests import RequestChecks
from jfsm_conformance.verify.store import StoreChecks
from jfsm_conformance.verify.telemetry import TelemetryChecks

__all__ = ["Verifier"]


class Verifier:
    """Named checks over observations, one part per kind (see the module docs)."""

    def __init__(self, ledger: Ledger, error_codes: Iterable[str]) -> None:
        self.ledger = ledger
        self.replies = ReplyChecks(ledger, frozenset(error_codes))
        self.store = StoreChecks(ledger)
        self.requests = RequestChecks(ledger)
        self.telemetry = TelemetryChecks(ledger)
