"""The predictor: from the expected model and the scripted replies, the expected flow of a
generation (or an intervene, or a released compression).

It walks a step the way the spec's machines do: an owed forced compression first, then the
stack's own check (`Predictor.generation`). For each logical compression it takes the next
requests the fake recorded (transport retries share a body and an Idempotency-Key), pairs
each with the reply it received (the next scripted one, or the fake's replay of a completed
reply), decides the outcome (published, refused, transport, empty, not_smaller, quota,
stale) and applies it to the model. It does no I/O and judges nothing: what the requests
*should* have been is `jfsm_conformance.verify`'s job, which walks the returned `Flow` in order.

A compression whose first request never arrived is `missing`; an attempt nothing was
scripted for has `reply=None`. Either ends the flow there (the verifier fails the step).
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jfsm_conformance.model.canon import QUOTA, change_log, footprint, idempotency_key, jcs
from jfsm_conformance.model.oracle import GameModel, InFlight
from jfsm_conformance.model.replies import COMPLETED, TRANSPORT, attempt_outcome, settled

__all__ = ["Attempt", "Compression", "Flow", "Predictor", "Service", "publication_fits"]

Fits = Callable[[InFlight, dict[str, Any]], bool]


@dataclass
class Service:
    """What compress.v2 (and the implementation's retry count) remember between steps.

    `completed`: Idempotency-Key -> the completed reply the fake replays for that key.
    `retries`: completed-but-unpublished replies per logical compression since the driver
    started (the `retry` element of the key). `answered`: keys answered with a non-transport
    reply during the current step (a later attempt with one of them is a forbidden retry)."""

    completed: dict[str, dict[str, Any]] = field(default_factory=dict)
    retries: dict[tuple[Any, ...], int] = field(default_factory=dict)
    answered: dict[str, str] = field(default_factory=dict)

    def key(self, game: str, scene: str | None, model: GameModel) -> str:
        """The Idempotency-Key of the next ask of this stack's logical compression."""
        stack = model.stack(scene)
        assert stack is not None and stack.chunks
        through, text = max(stack.chunks), stack.text()
        retry = self.retries.get((game, scene, stack.epoch, through, text), 0)
        return idempotency_key(game, scene, stack.epoch, through, text, retry)


@dataclass
class Attempt:
    """One compress.v2 request and the reply descriptor it received (None: unscripted)."""

    request: dict[str, Any]
    reply: dict[str, Any] | None

    @property
    def answer(self) -> str:
        """The reply kind the caller finally saw (`hold` resolved to what it releases)."""
        assert self.reply is not None
        return str(settled(self.reply)["reply"])

    @property
    def held(self) -> bool:
        return (self.reply is not None and self.reply["reply"] == "hold") or self.request.get(
            "outcome"
        ) == "hold"


@dataclass
class Compression:
    """One logical compression: its flight, its attempts, and how it ended."""

    game: str
    flight: InFlight
    attempts: list[Attempt] = field(default_factory=list)
    missing: bool = False  # it was due, but no request arrived
    outcome: str | None = None  # None while in flight (held) or when the flow broke off
    raw: str | None = None  # what the reply alone says (valid, refused, ...), before stale/quota
    call_id: str | None = None  # the published summary's compressionCallId
    checked: int = 0  # attempts the verifier has checked already

    @property
    def broken(self) -> bool:
        return self.missing or any(a.reply is None for a in self.attempts)


@dataclass
class Flow:
    """What one step must have done: its compressions in order, and then either a report,
    a compression_pending refusal (`pending` = the cause), or a compression held in flight."""

    compressions: list[Compression] = field(default_factory=list)
    leftover: deque[dict[str, Any]] = field(default_factory=deque)
    report: dict[str, Any] | None = None
    pending: str | None = None
    held: Compression | None = None
    # the report of the forced compression a generation settled before its check, which
    # the generation's report carries as its `forced` member (JF-COMP-014)
    forced: dict[str, Any] | None = None

    @property
    def settled(self) -> list[Compression]:
        return [c for c in self.compressions if c.outcome is not None]

    @property
    def published(self) -> list[InFlight]:
        return [c.flight for c in self.compressions if c.outcome == "published"]

    @property
    def failed(self) -> list[str]:
        return [c.outcome for c in self.settled if c.outcome != "published" and c.outcome]


class Predictor:
    """Expected compressions of one step on one game (see the module docs)."""

    def __init__(
        self,
        game: str,
        model: GameModel,
        service: Service,
        script: deque[dict[str, Any]],
        requests: deque[dict[str, Any]],
        fits: Fits,
    ) -> None:
        self.game = game
        self.model = model
        self.service = service
        self.script = script
        self.requests = requests
        self.fits = fits

    # -- one generation ------------------------------------------------------------------
    def generation(
        self,
        scene: str | None,
        *,
        forced_first: bool,
        check: bool,
        threshold: int,
        busy: set[str | None],
        intervene: bool = False,
    ) -> Flow:
        """An owed forced compression first (unless the game stack is busy: pending), then,
        if `check`, the compression check of `scene`'s stack."""
        model, flow = self.model, Flow(leftover=self.requests)
        if forced_first:
            if None in busy:
                flow.pending = "in_flight"
                return flow
            comp = self.compression(None, forced=True)
            flow.compressions.append(comp)
            if comp.broken:
                return flow
            if comp.outcome is None:
                flow.held = comp
                return flow
            if intervene:  # the intervene reports its forced compression
                flow.report = self.report(comp)
            elif model.game.flag:
                flow.pending = comp.outcome
                return flow
            else:
                flow.forced = self.report(comp)
        if not check:
            return flow
        stack = model.stack(scene)
        length = 0 if stack is None else stack.length()
        if scene in busy or not model.due(scene, threshold):
            outcome = "in_flight" if scene in busy else "not_due"
            flow.report = {"outcome": outcome, "lengthBefore": length, "lengthAfter": length}
            return flow
        comp = self.compression(scene, forced=False)
        flow.compressions.append(comp)
        if comp.broken:
            return flow
        if comp.outcome is None:
            flow.held = comp
            return flow
        flow.report = self.report(comp)
        return flow

    def report(self, comp: Compression) -> dict[str, Any]:
        """The compression report the operation must return for a settled compression."""
        after = self.model.stack(comp.flight.scene)
        return {
            "outcome": comp.outcome,
            "raw": comp.raw,
            "lengthBefore": len(comp.flight.text),
            "lengthAfter": 0 if after is None else after.length(),
            "throughSeq": comp.flight.through,
            "scene": comp.flight.scene,  # for blame only: None is the game stack
        }

    # -- one logical compression ---------------------------------------------------------
    def compression(self, scene: str | None, forced: bool) -> Compression:
        """Begin a compression of `scene`'s stack and run its attempts (settled unless held)."""
        key = self.service.key(self.game, scene, self.model)
        comp = Compression(self.game, self.model.flight_for(scene, key, forced))
        if self.run(comp):
            self.settle(comp)
        return comp

    def resume(self, comp: Compression) -> Compression:
        """A held compression was released: take its retries, if any, then settle it."""
        if comp.attempts and comp.attempts[-1].answer in TRANSPORT:
            self.run(comp)
        if not comp.broken:
            self.settle(comp)
        return comp

    def run(self, comp: Compression) -> bool:
        """Take the attempts of `comp` from the requests; True once it is complete."""
        while True:
            got = self.take(comp)
            if got is None:
                return bool(comp.attempts) and not comp.broken
            comp.attempts.append(got)
            if got.reply is None:
                return False
            if got.held:
                return False
            if got.answer not in TRANSPORT:
                key = got.request.get("idempotency_key")
                if key is not None:
                    self.service.answered[key] = got.answer
                return True

    def take(self, comp: Compression) -> Attempt | None:
        """The next request, if it is an attempt of `comp` (any request for a first one)."""
        first = not comp.attempts
        if not self.requests:
            comp.missing = first
            return None
        r = self.requests[0]
        flight, body = comp.flight, r.get("body") or {}
        same = (
            body.get("kind") == flight.kind
            and body.get("input", {}).get("text") == flight.text
            and body.get("input", {}).get("throughSeq") == flight.through
        )
        if not first and not same:
            return None
        self.requests.popleft()
        if r.get("outcome") == "replay":
            return Attempt(r, self.service.completed.get(r["idempotency_key"]))
        return Attempt(r, self.script.popleft() if self.script else None)

    def settle(self, comp: Compression) -> None:
        """Decide the outcome of a complete compression and apply it to the model."""
        model, flight = self.model, comp.flight
        last = settled(comp.attempts[-1].reply or {"reply": "reset"})
        for a in comp.attempts:
            if a.reply is not None and settled(a.reply)["reply"] in COMPLETED:
                self.service.completed.setdefault(a.request["idempotency_key"], settled(a.reply))
        outcome = comp.raw = attempt_outcome(last, len(flight.text))
        if last["reply"] in COMPLETED:  # a completed reply: asking again takes a new key
            material = (self.game, flight.scene, flight.epoch, flight.through, flight.text)
            self.service.retries[material] = self.service.retries.get(material, 0) + 1
        if model.is_stale(flight):
            outcome = "stale"
        elif outcome == "valid":
            if self.fits(flight, last):
                model.publish_summary(flight, last["summary"], last["callId"])
                stack = model.stack(flight.scene)
                assert stack is not None and stack.summary is not None
                comp.call_id = stack.summary["compressionCallId"]
                outcome = "published"
            else:
                outcome = "quota"
        comp.outcome = outcome


def publication_fits(
    model: GameModel,
    flight: InFlight,
    reply: dict[str, Any],
    dumped: dict[str, Any] | None,
    base: dict[str, Any],
) -> bool:
    """Whether publishing `reply` fits the quota, counted on the last dumped store with the
    publication's changes applied (the post-state alone, JF-ATOM-002/003)."""
    before = model.store()
    trial = copy.deepcopy(model)
    trial.publish_summary(flight, reply["summary"], reply["callId"])
    after = trial.store()
    actual = dict(dumped["store"]) if dumped is not None else {}
    for key in set(before) - set(after):
        actual.pop(key, None)
    for key, value in after.items():
        if key not in before or jcs(before[key]) != jcs(value):
            actual[key] = value
    return footprint(actual, change_log(base, actual)) <= QUOTA
