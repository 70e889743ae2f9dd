"""The harness under every conformance session: driver, fake compress.v2, models, plumbing.

`Harness` owns the driver client and the fake, the per-game models of the oracle, the
suite's checkpoint bases and last dumps, the mirror of the fake's reply script, and the
recorded steps of the sequence being run. `conformance.session.Session` builds the steps on
top of it; `conformance.observation` and `conformance.expectation` hold the checks.
"""

from __future__ import annotations

import copy
import os
from collections import deque
from dataclasses import dataclass
from typing import Any

from conformance import checks as C
from conformance import exercise
from conformance.checks import Ledger
from conformance.driver_client import DriverClient, HarnessError, Reply
from conformance.fake_compress import FakeCompress
from conformance.oracle import GameModel, InFlight
from conformance.replies import (
    to_outcome,
)

__all__ = ["HISTORY_OPS", "IN_FLIGHT_TIMEOUT", "MAX_ATTEMPTS", "SPEC_THRESHOLDS", "Harness", "Held"]


SPEC_THRESHOLDS = {"game": 300_000, "catalyst": 150_000}
MAX_ATTEMPTS = 3
IN_FLIGHT_TIMEOUT = 15.0
HISTORY_OPS = {"create_game", "reset", "edit_round", "convert", "duplicate"}


@dataclass
class Held:
    """A compression the fake holds in flight, and the operation waiting on it."""

    game: str
    op: str
    future: Any
    flight: InFlight
    reply: dict[str, Any]
    attempts: list[dict[str, Any]]
    before_length: int
    forced: bool


class Harness:
    """Driver, fake, models and plumbing. `thresholds=None` runs at the spec thresholds."""

    def __init__(
        self,
        driver: str,
        ledger: Ledger | None = None,
        *,
        thresholds: dict[str, int] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.ledger = ledger or Ledger()
        self.driver_spec = driver
        self.override = thresholds
        self.thresholds = dict(SPEC_THRESHOLDS, **(thresholds or {}))
        self.fake = FakeCompress(hold_timeout=60.0, summary_cap=64).start()
        try:
            self.client = DriverClient(driver, timeout=timeout)
            self.capabilities = self._hello()
        except BaseException:
            self.fake.close()
            raise
        self.games: dict[str, GameModel] = {}
        self.bases: dict[str, dict[str, Any]] = {}
        self.dumps: dict[str, dict[str, Any]] = {}
        self.telemetry_seen: dict[str, int] = {}
        # telemetry checks of settled compressions, run once the step's store and report
        # checks passed (a wrong publication is blamed on the rule it breaks, not on telemetry)
        self.telemetry_due: list[tuple[str, Any, list[dict[str, Any]], str, str | None]] = []
        # Idempotency-Key -> reply of attempts answered with a non-transport reply in this step
        self.answered: dict[str, str] = {}
        self.steps: list[dict[str, Any]] = []
        self.mirror: deque[dict[str, Any]] = deque()
        self.completed: dict[str, dict[str, Any]] = {}
        # completed-but-unpublished replies per logical compression, since the driver started
        self.retries: dict[tuple[Any, ...], int] = {}
        self.cursor = 0
        self.held: Held | None = None
        self.unsupported: dict[str, str] = {}
        self.broken: set[str] = set()
        self.trace_start = 0
        self._counter = 0
        self.token = os.urandom(3).hex()

    # -- plumbing ------------------------------------------------------------------------
    def _hello(self) -> dict[str, Any]:
        args: dict[str, Any] = {"protocol": 1, "compressUrl": self.fake.url}
        if self.override:
            args["thresholds"] = self.override
        reply = self.client.call("hello", args, timeout=60)
        if not reply.ok:
            raise HarnessError(f"hello refused: {reply['error']}")
        caps = reply.result["capabilities"]
        if self.override and not caps.get("thresholdOverride"):
            raise HarnessError("the driver does not support thresholdOverride")
        self.implementation = reply.result["implementation"]
        return dict(caps)

    def close(self) -> None:
        """Release anything held, shut the driver down, stop the fake."""
        try:
            if self.held is not None:
                self.fake.release()
                self.client.done(self.held.future, 20)
                self.held = None
            self.client.close()
        finally:
            self.fake.close()

    def fresh(self, stem: str = "g") -> str:
        self._counter += 1
        return f"{stem}{self.token}-{self._counter}"

    def record(self, step: str, **args: Any) -> None:
        exercise.record("step", step)
        self.steps.append({"step": step, "args": copy.deepcopy(args)})

    def _script(self, replies: list[dict[str, Any]]) -> None:
        self.fake.reset_script()
        self.mirror.clear()
        for d in replies:
            self.fake.script(to_outcome(d))
            self.mirror.append(d)

    def _new_requests(self) -> list[dict[str, Any]]:
        requests = self.fake.requests
        fresh = requests[self.cursor :]
        self.cursor = len(requests)
        for r in fresh:
            exercise.record("reply", r.get("outcome"))
        return fresh

    def _call(self, op: str, args: dict[str, Any], timeout: float | None = None) -> Reply:
        if self.held is not None and timeout is None:
            timeout = IN_FLIGHT_TIMEOUT
        future = self.client.start(op, args)
        if timeout is not None and not self.client.done(future, timeout):
            if self.held is not None:
                self.ledger.expect(
                    C.CONCURRENCY,
                    False,
                    f"{op} did not complete within {timeout:.0f} s while a compression was "
                    "held in flight: it waits on the compression inside the critical section",
                    ids=("JF-CONC-002",),
                )
            raise HarnessError(f"no reply to {op!r} within {timeout:.0f} s")
        reply = self.client.wait(future)
        if not reply.ok and reply.code == "unsupported_op":
            self.unsupported[op] = reply["error"].get("message", "")
        return reply

    def _ok(self, reply: Reply, op: str, ids: tuple[str, ...]) -> Any:
        self.ledger.expect(
            C.ERROR_CODE if reply.code != "unsupported_op" else C.REPLY,
            reply.ok,
            lambda: f"{op} was refused: {reply.get('error')}",
            ids=ids,
        )
        return reply.result

    def _participants_to_fake(self, game: str) -> None:
        self.fake.set_participants(self.games[game].participants)

    def recover(self) -> None:
        """After a failed step: release anything held, drop the script, skip unread requests.

        The games of the failed sequence are marked broken: their model may be out of step."""
        self.broken.update(st["args"]["game"] for st in self.steps if "game" in st["args"])
        if self.held is not None:
            self.fake.release()
            self.client.done(self.held.future, 30)
            self.held = None
        for model in self.games.values():
            model.in_flight.clear()
        self.fake.reset_script()
        self.mirror.clear()
        self.cursor = len(self.fake.requests)
