"""The world a conformance session acts in: the driver, the fake compress.v2, and what the
suite expects of them.

`World` owns the things with identity and state, and nothing that judges:

- the driver client (`jfsm_conformance.client.driver`) and the implementation's hello answer;
- the fake compress.v2 (`jfsm_conformance.fake.compress`), the FIFO of scripted replies the suite
  mirrors (`script`), and the requests not read yet (`new_requests`);
- the expected side: one oracle model per game (`jfsm_conformance.model.oracle`), the suite's own
  checkpoint base per game, the last dump of each game, the telemetry read so far, and the
  service's memory of completed replies (a `jfsm_conformance.model.predictor.Service`, which the
  prediction reads);
- the compression the fake holds in flight, if any (`Held`).

Nothing here raises `ConformanceFailure`; a driver that cannot be started or stops answering
raises `HarnessError` (from the client).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jfsm.spec import constants
from jfsm_conformance.client.driver import (
    DEFAULT_TIMEOUT,
    HELLO_TIMEOUT,
    DriverClient,
    DriverDied,
    HarnessError,
)
from jfsm_conformance.client.protocol import ProtocolViolation, Reply
from jfsm_conformance.fake.compress import FakeCompress
from jfsm_conformance.model.oracle import GameModel, InFlight
from jfsm_conformance.model.predictor import Compression, Service
from jfsm_conformance.model.replies import to_outcome
from jfsm_conformance.record import exercise

__all__ = ["IN_FLIGHT_TIMEOUT", "SPEC_THRESHOLDS", "Held", "World"]

SPEC_THRESHOLDS = {"game": constants().game_threshold, "catalyst": constants().catalyst_threshold}
IN_FLIGHT_TIMEOUT = 15.0  # how long an operation may take while a compression is held
HOLD_WAIT = 30.0  # how long an operation may take to send the request the fake is to hold


@dataclass
class Held:
    """A compression the fake holds in flight, and the operation waiting on it."""

    game: str
    op: str
    future: Any
    comp: Compression
    forced: bool

    @property
    def flight(self) -> InFlight:
        return self.comp.flight


class World:
    """Driver, fake and expected state. `thresholds=None` runs at the spec thresholds."""

    def __init__(
        self,
        driver: str,
        *,
        thresholds: dict[str, int] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        hello_timeout: float = HELLO_TIMEOUT,
    ) -> None:
        self.driver_spec = driver
        self.override = thresholds
        self.thresholds = dict(SPEC_THRESHOLDS, **(thresholds or {}))
        self.fake = FakeCompress(hold_timeout=60.0, summary_cap=64).start()
        client: DriverClient | None = None
        try:
            client = DriverClient(driver, timeout=timeout, hello_timeout=hello_timeout)
            self.client = client
            self.implementation: dict[str, Any] = {}
            self.capabilities = self.hello()
        except BaseException:
            try:
                if client is not None:  # a driver that never completed hello: ended
                    client.close()
            finally:
                self.fake.close()
            raise
        self.games: dict[str, GameModel] = {}
        self.bases: dict[str, dict[str, Any]] = {}
        self.dumps: dict[str, dict[str, Any]] = {}
        self.telemetry_seen: dict[str, int] = {}
        self.service = Service()
        self.mirror: deque[dict[str, Any]] = deque()
        self.held: Held | None = None
        self.pending: Any = None  # an operation waited on by `await_hold`, its hold not recorded
        self.unsupported: dict[str, str] = {}
        self.broken: set[str] = set()
        # games whose participants were copied by duplicate and not set since (JF-HIST-012)
        self.inherited: set[str] = set()
        self.cursor = 0
        self.on_blocked: Callable[[str, float], None] | None = None
        self.token = os.urandom(3).hex()
        self._counter = 0

    # -- the driver ----------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        """Say hello (again, after a restart); `HarnessError` if refused or unsupported."""
        args: dict[str, Any] = {"protocol": 1, "compressUrl": self.fake.url}
        if self.override:
            args["thresholds"] = self.override
        exercise.record("message", "hello")
        try:
            reply = self.client.call("hello", args, timeout=self.client.hello_timeout)
        except DriverDied as exc:  # no hello, no run: a harness error, never a verdict
            raise HarnessError(f"the driver did not complete hello: {exc}") from exc
        if not reply.ok:
            raise HarnessError(f"hello refused: {reply['error']}")
        caps = reply.result["capabilities"]
        if self.override and not caps.get("thresholdOverride"):
            raise HarnessError("the driver does not support thresholdOverride")
        self.implementation = reply.result["implementation"]
        return dict(caps)

    def start(self, op: str, args: dict[str, Any]) -> Any:
        exercise.record("message", op)
        return self.client.start(op, args)

    def call(self, op: str, args: dict[str, Any]) -> Reply:
        """Send one operation and wait for its reply. While a compression is held, an
        operation that does not answer within `IN_FLIGHT_TIMEOUT` is reported to
        `on_blocked` (the verifier's JF-CONC-002 check), then a `HarnessError`."""
        future = self.start(op, args)
        if self.held is not None and not self.client.done(future, IN_FLIGHT_TIMEOUT):
            if self.on_blocked is not None:
                self.on_blocked(op, IN_FLIGHT_TIMEOUT)
            raise HarnessError(f"no reply to {op!r} within {IN_FLIGHT_TIMEOUT:.0f} s")
        return self.wait(future)

    def wait(self, future: Any) -> Reply:
        reply = self.client.wait(future)
        if not reply.ok and reply.code == "unsupported_op":
            self.unsupported[future.op] = reply["error"].get("message", "")
        return reply

    def dump(self, game: str, *, remember: bool = True) -> dict[str, Any]:
        """Dump `game` (and remember it as its last dump). A refusal is the driver's doing,
        never a harness error: `ProtocolViolation` (a failure of the run, exit 1)."""
        reply = self.call("dump", {"game": game})
        if not reply.ok:
            raise ProtocolViolation(f"dump of game {game} was refused: {reply['error']}")
        if remember:
            self.dumps[game] = reply.result
        return dict(reply.result)

    def telemetry(self, game: str) -> list[dict[str, Any]] | None:
        """The game's telemetry events, or None when the driver does not offer them."""
        reply = self.call("telemetry", {"game": game})
        if not reply.ok:
            self.unsupported.setdefault("telemetry", str(reply.get("error")))
            return None
        return list(reply.result)

    def restart_driver(self) -> Reply | None:
        """Kill and restart the driver: its retry counts restart with it. Returns the reply
        to the `restart` op when the driver was sent one (`DriverClient.restart`)."""
        reply = self.client.restart()
        self.service.retries.clear()
        if self.driver_spec.startswith("stdio:"):
            self.hello()
        return reply

    def revive(self) -> None:
        """After the driver died or stopped answering mid-sequence (`DriverDied`): end it,
        start it again (a stdio one on the same command and `{state}`; any other as a new
        client on the same spec) and say hello. `HarnessError` if it cannot complete hello
        again (decision R194)."""
        client = self.client
        if client.spec.startswith("stdio:"):
            client.restart()
        else:
            client.close()
            self.client = DriverClient(
                client.spec, timeout=client.timeout, hello_timeout=client.hello_timeout
            )
        self.held = self.pending = None
        self.service.retries.clear()
        self.capabilities = self.hello()

    def resync_telemetry(self) -> None:
        """After a restart: the events the implementation kept are the ones already read."""
        self.telemetry_seen = {g: len(self.telemetry(g) or []) for g in self.games}

    # -- the fake ------------------------------------------------------------------------
    def script(self, replies: Iterable[dict[str, Any]]) -> None:
        """Script the fake with reply descriptors (dropping what was left) and mirror them."""
        self.fake.reset_script()
        self.mirror.clear()
        for d in replies:
            self.fake.script(to_outcome(d))
            self.mirror.append(d)

    def new_requests(self) -> deque[dict[str, Any]]:
        """The requests the fake recorded since the last call."""
        requests = self.fake.requests
        fresh = requests[self.cursor :]
        self.cursor = len(requests)
        for request in fresh:
            exercise.record("reply", request.get("outcome"))
        return deque(fresh)

    def participants_to_fake(self, game: str) -> None:
        self.fake.set_participants(self.games[game].participants)

    # -- life cycle ----------------------------------------------------------------------
    def fresh(self, stem: str = "g") -> str:
        self._counter += 1
        return f"{stem}{self.token}-{self._counter}"

    def add_game(self, game: str, model: GameModel, base: dict[str, Any]) -> None:
        self.games[game] = model
        self.bases[game] = base
        self.telemetry_seen[game] = 0

    def begin_sequence(self) -> None:
        """A new sequence of steps (a scenario, a machine example) begins on fresh games:
        forget the games of earlier sequences, the fake's records and the protocol transcript,
        so that what the suite holds is bounded by one sequence, not by the run. A driver
        with `forgetGames` is told which games it may release (R59)."""
        self.release_held(30)
        self.forget_games()
        self.client.transcript.clear()
        self.fake.reset_script()
        self.fake.clear_records()
        self.cursor = 0
        self.mirror.clear()
        self.service = Service()
        for table in (self.games, self.bases, self.dumps, self.telemetry_seen):
            table.clear()
        self.broken.clear()
        self.inherited.clear()

    def forget_games(self) -> None:
        """Tell a driver with `capabilities.forgetGames` that the games of the sequence that
        ended will never be named again. Its answer judges nothing: releasing is optional."""
        names = sorted(self.games)
        if not names or not self.capabilities.get("forgetGames"):
            return
        for at in range(0, len(names), 10_000):
            with contextlib.suppress(ProtocolViolation):
                self.call("forget_games", {"games": names[at : at + 10_000]})

    def await_hold(self, future: Any, on_poll: Callable[[], None]) -> Reply | None:
        """Wait until the fake holds the compression request of `future`'s operation (None),
        or that operation answered first (its reply: it sent no request, or gave up on one
        the fake rejected). `on_poll` runs every 50 ms (the caller's check of the fake's
        violations). `HarnessError` only when neither happened within `HOLD_WAIT` seconds.

        While it waits, `future` is remembered as pending: `release_held` waits for it too,
        should the step fail before it records its hold."""
        self.pending = future
        deadline = time.monotonic() + HOLD_WAIT
        while not self.fake.wait_held(0.05):
            on_poll()
            if self.client.done(future, 0):
                self.pending = None
                return self.wait(future)
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"{future.op}: neither a compression request reached the fake nor a reply "
                    f"came within {HOLD_WAIT:.0f} s"
                )
        return None

    def release_held(self, timeout: float) -> None:
        """Drop the script, so that no request is held from here on, and let go EVERY request
        the fake holds: also one held for a step that failed before it recorded its hold
        (`self.held`), which a later sequence would otherwise wait on. Then wait up to
        `timeout` seconds for the recorded held operation's reply."""
        self.fake.reset_script()
        self.fake.release()
        waited = [self.pending, self.held.future if self.held is not None else None]
        for future in dict.fromkeys(f for f in waited if f is not None):
            self.client.done(future, timeout)
        self.held = self.pending = None

    def recover(self, games: Iterable[str]) -> None:
        """After a failed step: mark `games` broken (their models may be out of step),
        release anything held, drop the script, skip unread requests."""
        self.broken.update(games)
        self.release_held(30)
        for model in self.games.values():
            model.in_flight.clear()
        self.fake.reset_script()
        self.mirror.clear()
        self.service.answered.clear()
        self.cursor = len(self.fake.requests)

    def close(self) -> None:
        """Release anything held, shut the driver down, stop the fake."""
        try:
            self.release_held(20)
            self.client.close()
        finally:
            self.fake.close()
