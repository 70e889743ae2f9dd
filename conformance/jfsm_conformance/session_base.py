"""The base of a conformance session: the world, the verifier, the recorded steps, and the
parts every step is made of (dump and verify, predict a flow of compressions, finish a step,
telemetry). The steps themselves are in `jfsm_conformance.session` and the `steps_*` modules.
"""

from __future__ import annotations

import copy
from typing import Any

from jfsm_conformance import checks as C
from jfsm_conformance import exercise
from jfsm_conformance.blame import Ctx
from jfsm_conformance.checks import Ledger
from jfsm_conformance.driver_client import DriverClient, HarnessError
from jfsm_conformance.oracle import GameModel
from jfsm_conformance.predictor import Compression, Flow, Predictor, publication_fits
from jfsm_conformance.snapshot import BaseCache
from jfsm_conformance.verify import Verifier
from jfsm_conformance.world import Held, World

__all__ = ["SessionBase"]


class SessionBase:
    """What every step uses; `jfsm_conformance.session.Session` adds the steps."""

    def __init__(
        self,
        driver: str,
        ledger: Ledger | None = None,
        *,
        thresholds: dict[str, int] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.ledger = ledger or Ledger()
        self.world = World(driver, thresholds=thresholds, timeout=timeout)
        self.check = Verifier(self.ledger, self.world.client.protocol.error_codes)
        self.world.on_blocked = self.check.blocked
        self._steps: list[dict[str, Any]] = []
        self.trace_start = 0

    # -- what the runner and the machines read -------------------------------------------
    @property
    def steps(self) -> list[dict[str, Any]]:
        """The steps of the sequence being run (for its trace)."""
        return self._steps

    @steps.setter
    def steps(self, steps: list[dict[str, Any]]) -> None:
        """A new sequence begins (the runner and the machines assign `[]`): forget the
        previous sequences' games, requests and protocol messages (`World.begin_sequence`),
        so that the suite's memory is bounded by one sequence, not by the run."""
        self._steps = steps
        self.world.begin_sequence()
        self.check.bases = BaseCache()
        self.trace_start = 0

    @property
    def client(self) -> DriverClient:
        return self.world.client

    @property
    def games(self) -> dict[str, GameModel]:
        return self.world.games

    @property
    def held(self) -> Held | None:
        return self.world.held

    @property
    def thresholds(self) -> dict[str, int]:
        return self.world.thresholds

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.world.capabilities

    @property
    def implementation(self) -> dict[str, Any]:
        return self.world.implementation

    @property
    def unsupported(self) -> dict[str, str]:
        return self.world.unsupported

    @property
    def driver_spec(self) -> str:
        return self.world.driver_spec

    @property
    def override(self) -> dict[str, int] | None:
        return self.world.override

    def fresh(self, stem: str = "g") -> str:
        """A game id no other session step used."""
        return self.world.fresh(stem)

    def can_hold(self, game: str, scene: str | None) -> bool:
        """Whether a compression of this stack would reach the fake's script now: not if the
        service already completed this logical compression (it would replay its reply)."""
        model = self.world.games[game]
        stack = model.stack(scene)
        if stack is None or not stack.chunks:
            return False
        return self.world.service.key(game, scene, model) not in self.world.service.completed

    def record(self, step: str, **args: Any) -> None:
        exercise.record("step", step)
        self._steps.append({"step": step, "args": copy.deepcopy(args)})

    def recover(self) -> None:
        """After a failed step: the games of the failed sequence are marked broken, anything
        held is released, the script dropped, unread requests skipped."""
        self.world.recover(st["args"]["game"] for st in self._steps if "game" in st["args"])

    def close(self) -> None:
        self.world.close()

    # -- the parts of a step -------------------------------------------------------------
    def _dump(self, game: str) -> dict[str, Any]:
        return self.world.dump(game)

    def _verify(self, game: str, ctx: Ctx, dump: dict[str, Any] | None = None) -> None:
        """Compare everything observable about `game` with the model."""
        w = self.world
        if dump is None:
            dump = w.dump(game)
        else:
            w.dumps[game] = dump
        self.check.store(w.games[game], dump, w.bases[game], ctx)

    def _held_or_fail(self, op: str, future: Any, ids: tuple[str, ...]) -> None:
        """Wait for the fake to hold `op`'s compression request. A request the fake rejected
        (a violation) and an operation that answered without one are requirement failures."""
        w = self.world
        got = w.await_hold(future, lambda: self.check.violations(w.fake.violations))
        if got is not None:
            self.check.violations(w.fake.violations)
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                False,
                f"{op} was expected to send a compression request and wait; it answered {got}",
                ids=ids,
            )
        w.pending = None

    def _quiet(self, op: str) -> None:
        """No compress.v2 request arrived during `op`."""
        self.check.no_request(op, self.world.new_requests())

    def _predictor(self, game: str, requests: Any) -> Predictor:
        w = self.world
        model = w.games[game]

        def fits(flight: Any, reply: dict[str, Any]) -> bool:
            return publication_fits(model, flight, reply, w.dumps.get(game), w.bases[game])

        return Predictor(game, model, w.service, w.mirror, requests, fits)

    def _arrived(self, game: str) -> Predictor:
        """The requests that arrived, checked for canaries and violations, in a predictor."""
        requests = self.world.new_requests()
        self.check.request_texts(requests)
        self.check.violations(self.world.fake.violations, game in self.world.inherited)
        return self._predictor(game, requests)

    def _flow(
        self, game: str, scene: str | None, *, forced_first: bool, check: bool, op: str
    ) -> Flow:
        """Predict a generation (or an intervene) and check its requests, in order."""
        w = self.world
        model = w.games[game]
        predictor = self._arrived(game)
        busy: set[str | None] = set(model.in_flight)
        if w.held is not None and w.held.game == game:
            busy.add(w.held.flight.scene)
        flow = predictor.generation(
            scene,
            forced_first=forced_first,
            check=check,
            threshold=w.thresholds["game" if scene is None else "catalyst"],
            busy=busy,
            intervene=op == "intervene",
        )
        self.check.flow(flow, model.participants, game in w.inherited)
        if flow.held is not None:
            raise HarnessError(f"{op} was held without a hold step")
        return flow

    def _finish(self, flow: Flow, op: str) -> None:
        """Leftover requests of a step, then drop the script."""
        answered = dict(self.world.service.answered)
        self.world.service.answered.clear()
        self.check.leftover(op, list(flow.leftover), answered)
        self.world.script([])

    def _telemetry(self, game: str, settled: list[Compression], op: str) -> None:
        """Telemetry of the step's settled compressions, then no events beyond them. Run
        after the step's store and report checks."""
        for comp in settled:
            exercise.record("outcome", comp.outcome)
        w = self.world
        events = w.telemetry(game)
        if events is None:
            return
        seen = w.telemetry_seen.get(game, 0)
        for comp in settled:
            # one operation may run several compressions (an owed forced one, then the
            # check): this compression's events are the next len(attempts) ones
            fresh = events[seen : seen + len(comp.attempts)]
            seen += len(fresh)
            w.telemetry_seen[game] = seen
            self.check.telemetry(events, fresh, comp)
        self.check.no_more_telemetry(op, events[seen:])

    def _published_call_id(self, result: dict[str, Any], game: str, scene: str | None) -> None:
        stack = self.world.games[game].stack(scene)
        assert stack is not None and stack.summary is not None
        stored = stack.summary["compressionCallId"]
        self.ledger.expect(
            C.CALL_ID,
            result.get("callId") == stored,
            f"generate reported callId {result.get('callId')!r}, the fake's was {stored!r}",
            ids=("JF-COMP-004",),
        )

    def _forced_flag(self, result: dict[str, Any], model: GameModel) -> None:
        self.ledger.expect(
            C.REPLY,
            result.get("forcedCompression") is model.game.flag,
            f"intervene reported forcedCompression {result.get('forcedCompression')}, the "
            f"model says {model.game.flag}",
            ids=("JF-INT-006",),
        )
