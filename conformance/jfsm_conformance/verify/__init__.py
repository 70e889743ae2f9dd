"""The verifier: what was observed, against what was expected, as named checks.

Every method turns observations (a reply, a dumped store, the requests the fake recorded,
telemetry events) and the expected side (the oracle's model, a predicted `Flow`) into checks
of `jfsm_conformance.checks`, each crediting or blaming requirement IDs through the run's
`Ledger`. A failing check raises `ConformanceFailure`; nothing here talks to the driver.

The session calls these in a fixed order per step, which is the blame order: a fault is
reported first under the requirement it violates (the stored intervene exchange before the
request that carries it, the store before the compression report, the report before
telemetry).

The checks live in one module per kind of observation: `verify_replies` (the driver's
replies), `verify_store` (the dumped store), `verify_requests` (what compress.v2 received) and
`verify_telemetry` (the telemetry events); `Verifier` is all of them over one ledger.
"""

from __future__ import annotations

from collections.abc import Iterable

from jfsm_conformance.checks import Ledger
from jfsm_conformance.snapshot import BaseCache
from jfsm_conformance.verify.replies import ReplyChecks
from jfsm_conformance.verify.requests import MAX_ATTEMPTS, RequestChecks
from jfsm_conformance.verify.store import StoreChecks
from jfsm_conformance.verify.telemetry import TelemetryChecks

__all__ = ["MAX_ATTEMPTS", "Verifier"]


class Verifier(ReplyChecks, StoreChecks, RequestChecks, TelemetryChecks):
    """Named checks over observations (see the module docs)."""

    def __init__(self, ledger: Ledger, error_codes: Iterable[str]) -> None:
        self.ledger = ledger
        self.error_codes = frozenset(error_codes)
        self.bases = BaseCache()  # each game's checkpoint base, encoded once
