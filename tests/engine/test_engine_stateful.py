"""One Hypothesis state machine over the whole engine, checked against the suite's oracle.

Rules interleave rounds, scenes (start, exchange, generate, publish, cancel), intervenes,
resets, retrospective edits, ordinary writes, checkpoints, duplications and compressions
whose fake replies succeed, fail in every way, or are held in flight and released later.

The model is the conformance suite's own (`jfsm_conformance.model.oracle.GameModel`, R57): per
stack the expected exact chunks, summary and meta; the canonical rounds; the archives; the
game data. Replies are the suite's descriptors (`jfsm_conformance.model.replies`), whose
`attempt_outcome` classifies them. The test predicts every compress.v2 request (text, chars,
throughSeq, kind, scope) and every outcome except the choice between `published` and `quota`
for a valid reply (read from telemetry, then checked through the state). After every step
the invariants compare the whole store with the oracle's and check the spec's global
properties (no exchange lost or duplicated, quota, footprint, the optimized change log,
canaries, the forced-compression flag rule, the canonical length).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from engine_helpers import (
    CATALYST_KIND,
    GAME_KIND,
    TELEMETRY_MEMBERS,
    AdaptiveFake,
    as_text,
    fill,
)
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from jfsm.engine import GameEngine
from jfsm.errors import CompressionPending, InvalidInput, InvalidTransition, QuotaExceeded
from jfsm.stores.memory import MemoryStore
from jfsm_conformance.model.oracle import GameModel, InFlight, diff_store, normalize
from jfsm_conformance.model.replies import attempt_outcome, summary_of

THRESHOLDS = {"game": 2000, "catalyst": 1000}
QUOTA = 40_000
SCENE_IDS = ["s0", "s1", "s2"]
DISCARD = "CANARY-DISCARD-77aa"
SCENE_CANARY = "CANARY-SCENE-TEXT-41bd"
SCENE_SUMMARY_CANARY = "CANARY-SCENE-SUM-9c3e"
MODES = ["ok", "refused", "transport", "empty", "not_smaller"]

PIECE = st.text(alphabet="ab é😀<\n", max_size=5)
TEXT = st.builds(lambda piece, k: (piece * k)[:900], PIECE, st.integers(1, 200))
MODE = st.sampled_from(["ok", "ok", "ok", *MODES[1:]])  # successes are the common case
HOLD = st.booleans()


def dumps(value: Any) -> str:
    """Compact JSON with sorted keys: C-fast, and for the values stored here (strings,
    integers, booleans) the same size in UTF-8 as their JCS serialization (JCS escapes the
    same characters; only its member order differs), and equal iff the values are."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def utf16(key: str) -> bytes:
    """JCS member order: by UTF-16 code units."""
    return key.encode("utf-16-be")


def jcs_size(value: Any) -> int:
    return len(dumps(value).encode("utf-8"))


def fingerprint(engine: GameEngine) -> str:
    """The whole dump (store, change log, footprint) as one comparable string."""
    return dumps(engine.dump())


def summary_for(uid: int, chars: int, scene: bool) -> str:
    """The summary an `ok` reply carries: a third of the submitted size, tagged, with
    leading and trailing white space (stored verbatim, never trimmed)."""
    tag = f" {SCENE_SUMMARY_CANARY}#{uid} 😀 " if scene else f" G#{uid} 😀 "
    n = max(2, chars // 3)
    return (tag + "~" * n)[: n - 1] + "\n"


def descriptor(mode: str, uid: int, chars: int, scene: bool) -> dict[str, Any]:
    """The reply descriptor (`jfsm_conformance.model.replies`) a `mode` scripts for a request of
    `chars` code points."""
    if mode == "ok":
        return {"reply": "success", "summary": summary_for(uid, chars, scene)}
    if mode == "refused":
        return {"reply": "refuse", "code": "policy"}
    if mode == "transport":
        return {"reply": "http_status", "status": 503}
    if mode == "empty":
        return {"reply": "empty", "summary": " \n\u3000 "}
    return {"reply": "success", "summary": fill(chars, "😀")}  # not_smaller: as long as the input


def make_plan(mode: str, uid: int, hold: bool):  # type: ignore[no-untyped-def]
    def reply(req) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        d = descriptor(mode, uid, req.chars, req.catalyst_id is not None)
        return {"reply": "hold", "then": d} if hold else d

    return reply


# -- the flights -----------------------------------------------------------------------------
@dataclass
class Flight:
    """A compression request the test expects to be in flight (or settling now): the oracle's
    view of the request, the reply scripted for it and the operation awaiting it."""

    request: InFlight
    mode: str
    reply: dict[str, Any]  # the descriptor, without its hold
    task: asyncio.Task[Any] | None = None
    op: str = "generate"  # the operation awaiting it: "generate" or "intervene"

    @property
    def target(self) -> str | None:  # None: the game; else a scene id
        return self.request.scene


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.fake = AdaptiveFake()
        self.model = GameModel("g")
        self.engine = GameEngine(
            MemoryStore(quota=QUOTA), self.fake, game_id=self.model.game_id, thresholds=THRESHOLDS
        )
        self.base: dict[str, Any] = {}  # the store at the last checkpoint
        self.flights: list[Flight] = []  # held, oldest first
        self.uid = 0
        self.requests_seen = 0
        self.consumed: set[int] = set()  # indices of engine.telemetry already matched
        self.requests_checked = 0
        self.telemetry_checked = 0

    def teardown(self) -> None:
        pending = [f.task for f in self.flights if f.task is not None]
        if pending:
            self.fake.release()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()

    # -- plumbing -----------------------------------------------------------------------------
    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def start(self, coro: Any) -> asyncio.Task[Any]:
        """Run `coro` until it ends or a new call is held by the fake."""
        held = self.fake.held

        async def go() -> asyncio.Task[Any]:
            task = asyncio.ensure_future(coro)
            for _ in range(10_000):
                if task.done() or self.fake.held > held:
                    return task
                await asyncio.sleep(0)
            raise AssertionError("operation neither ended nor held a call")

        return self.run(go())

    def plan(self, *modes: tuple[str, bool]) -> list[int]:
        uids = []
        for mode, hold in modes:
            self.uid += 1
            uids.append(self.uid)
            self.fake.plan(make_plan(mode, self.uid, hold))
        return uids

    def unplan(self) -> None:
        self.fake.plans.clear()
        self.fake.script.clear()
        assert len(self.fake.requests) == self.requests_seen, "an unexpected compress.v2 call"

    def live(self) -> list[str]:
        """The ids of the scenes that are running or created (sorted)."""
        return sorted(sid for sid in self.model.scenes if self.model.stack(sid) is not None)

    def in_flight(self, target: str | None) -> bool:
        """Whether the stack has a call in flight: the game's, or the live scene's (a call of
        an earlier scene of the same id has an older epoch, R12)."""
        stack = self.model.stack(target)
        assert stack is not None
        return any(
            f.target == target and (target is None or f.request.epoch == stack.epoch)
            for f in self.flights
        )

    def refused(self, exc: BaseException, before: str, status: Any) -> None:
        assert fingerprint(self.engine) == before, f"{type(exc).__name__} wrote something"
        assert self.engine.status() == status
        event(f"refused: {type(exc).__name__}")

    # -- compression in the model -------------------------------------------------------------
    def expect_request(self, target: str | None, mode: str, uid: int) -> Flight:
        """A request for `target` must have been built now: check it, return its flight."""
        stack = self.model.stack(target)
        assert stack is not None and stack.chunks, "a request for a stack without exact chunks"
        assert len(self.fake.requests) > self.requests_seen, f"no request for {target!r}"
        recorded = self.fake.requests[self.requests_seen]
        self.requests_seen += 1
        request = self.model.flight_for(target, recorded["idempotencyKey"])
        scope = {"gameId": self.model.game_id}
        if target is not None:
            scope["catalystId"] = target
        body = {
            "kind": GAME_KIND if target is None else CATALYST_KIND,
            "scope": scope,
            "input": {
                "text": request.text,
                "chars": len(request.text),
                "throughSeq": request.through,
            },
            "beneficiaries": [],
        }
        assert recorded["body"] == body
        reply = descriptor(mode, uid, len(request.text), target is not None)
        return Flight(request, mode, reply)

    def telemetry_for(self, flight: Flight) -> dict[str, Any]:
        """The (one-attempt) call's telemetry event, consumed once."""
        for i, ev in enumerate(self.engine.telemetry):
            if i not in self.consumed and ev["idempotencyKey"] == flight.request.key:
                self.consumed.add(i)
                return ev
        raise AssertionError(f"no telemetry event for the call {flight.request.key}")

    def settle(self, flight: Flight) -> str:
        """The engine settled `flight`: check its outcome and apply it to the model."""
        ev = self.telemetry_for(flight)
        outcome = str(ev["outcome"])
        request = flight.request
        predicted = attempt_outcome(flight.reply, len(request.text))
        assert predicted == ("valid" if flight.mode == "ok" else flight.mode), predicted
        if self.model.is_stale(request):
            assert outcome == "stale", outcome
        elif predicted == "valid":
            assert outcome in ("published", "quota"), outcome
        else:
            assert outcome == predicted, outcome
        event(f"outcome: {outcome}")
        if outcome == "published":
            call_id = ev["callId"]
            assert isinstance(call_id, str) and call_id.startswith("fake-"), call_id
            summary = summary_of(flight.reply, len(request.text))
            assert summary is not None
            self.model.publish_summary(request, summary, call_id)
            stack = self.model.stack(request.scene)
            if stack is not None and stack.chunks:
                event("published with an unrepresented suffix")
            if request.scene is not None:
                event("a scene summary published")
        return outcome

    def compress_now(
        self, target: str | None, mode: str, uid: int, task: Any, op: str = "generate"
    ) -> str | None:
        """A request for `target` was built in this step: settled now, or held (None)."""
        flight = self.expect_request(target, mode, uid)
        if task is not None and not task.done():
            flight.task, flight.op = task, op
            self.flights.append(flight)
            return None
        return self.settle(flight)

    # -- rules --------------------------------------------------------------------------------
    @initialize(rounds=st.lists(st.tuples(TEXT, TEXT), max_size=8))
    def some_rounds(self, rounds: list[tuple[str, str]]) -> None:
        """Start from a game that may already be near its threshold."""
        for user, assistant in rounds:
            self.record_round(user, assistant)

    @precondition(lambda self: bool(self.flights))
    @rule(
        user=TEXT,
        assistant=TEXT,
        intervene=st.booleans(),
        then_release=st.booleans(),
        modes=st.lists(MODE, min_size=3, max_size=3),
    )
    def append_while_held(
        self, user: str, assistant: str, intervene: bool, then_release: bool, modes: list[str]
    ) -> None:
        """Appends while a compression is in flight (a round or an intervene to the game, an
        exchange to every scene whose stack has one) are what the unrepresented suffix, the
        owed forced compression and stale replies are about."""
        if intervene:
            self.intervene(user, assistant, user, modes[0], hold=False)
        else:
            self.record_round(user, assistant)
        for flight in list(self.flights):
            if flight.target is not None and self.model.stack(flight.target) is not None:
                self.scene_exchange(flight.target, user, assistant)
        if then_release:
            self.release(modes)

    @precondition(lambda self: bool(self.live()))
    @rule(
        data=st.data(),
        user=TEXT,
        assistant=TEXT,
        mode=MODE,
        hold=HOLD,
        then=st.sampled_from(["append", "generate", "generate and publish"]),
    )
    def live_scene(
        self, data: st.DataObject, user: str, assistant: str, mode: str, hold: bool, then: str
    ) -> None:
        """Exchanges, generations and publication on a running scene (the id-based rules
        mostly probe unknown and ended scenes)."""
        sid = data.draw(st.sampled_from(self.live()), label="live scene")
        self.scene_exchange(sid, user, assistant)
        self.scene_exchange(sid, assistant, user)
        if then != "append" and self.model.stack(sid) is not None:
            self.generate(sid, mode, mode, hold)
        if then == "generate and publish" and self.model.stack(sid) is not None:
            self.end_scene(sid, f"closing {user}", f"meanwhile {assistant}", publish=True)

    @rule(user=TEXT, assistant=TEXT)
    def record_round(self, user: str, assistant: str) -> None:
        before, status = fingerprint(self.engine), self.engine.status()
        try:
            result = self.run(self.engine.record_round(user, assistant))
        except QuotaExceeded as exc:
            return self.refused(exc, before, status)
        assert result == self.model.record_round(user, assistant)

    @rule(
        user=TEXT,
        shown=TEXT,
        hidden=TEXT,
        mode=MODE,
        hold=HOLD,
    )
    def intervene(self, user: str, shown: str, hidden: str, mode: str, hold: bool) -> None:
        [uid] = self.plan((mode, hold))
        before, status = fingerprint(self.engine), self.engine.status()
        task = self.start(self.engine.intervene(user, shown + DISCARD + hidden, len(shown)))
        if task.done() and isinstance(task.exception(), QuotaExceeded):
            self.unplan()
            return self.refused(task.exception(), before, status)
        n = self.model.intervene(user, shown)["round"]
        if self.in_flight(None):
            outcome = "none"  # the forced compression waits for the one in flight
        else:
            outcome = self.compress_now(None, mode, uid, task, op="intervene") or "held"
        self.unplan()
        if task.done():
            result = task.result()
            assert result["round"] == n
            assert result["forcedCompression"] == self.model.game.flag
            if outcome == "none":
                assert result["compression"] is None
            else:
                assert result["compression"]["outcome"] == outcome

    @rule(on=st.sampled_from([None, *SCENE_IDS]), m1=MODE, m2=MODE, hold=HOLD)
    def generate(self, on: str | None, m1: str, m2: str, hold: bool) -> None:
        target = on
        if target is not None and self.model.stack(target) is None:
            return
        forced = self.model.game.flag and not self.in_flight(None)
        if forced:
            uid1, uid2 = self.plan((m1, False), (m2, hold))
        else:
            [uid2] = self.plan((m2, hold))
        before, status = fingerprint(self.engine), self.engine.status()
        task = self.start(self.engine.before_generation(target))
        # 1. an owed forced compression of the game stack comes first
        if self.model.game.flag and not forced:
            self.unplan()
            exc = task.exception()
            assert isinstance(exc, CompressionPending), exc
            assert exc.details["cause"] == "in_flight"
            return self.refused(exc, before, status)
        if forced:
            event("forced retry before a generation")
            outcome = self.compress_now(None, m1, uid1, None)
            if outcome != "published":
                self.unplan()
                exc = task.exception()
                assert isinstance(exc, CompressionPending), exc
                assert exc.code == "compression_pending" and exc.details["cause"] == outcome
                assert fingerprint(self.engine) == before
                return
            assert not self.model.game.flag
        # 2. a catalyst generation marks its scene running
        if target is not None and self.model.scenes[target].state == "created":
            if task.done() and isinstance(task.exception(), QuotaExceeded):
                self.unplan()
                event("refused: QuotaExceeded")
                return
            self.model.mark_running(target)
        # 3. the stack's own threshold check
        threshold = THRESHOLDS["game" if target is None else "catalyst"]
        if self.in_flight(target):
            expected = "in_flight"
        elif self.model.due(target, threshold):
            expected = self.compress_now(target, m2, uid2, task) or "held"
        else:
            expected = "not_due"
        self.unplan()
        if expected != "held":
            assert task.done(), "the generation did not finish"
            assert task.result().outcome == expected

    @rule(m1=MODE, m2=MODE, hold=HOLD)
    def generate_game(self, m1: str, m2: str, hold: bool) -> None:
        """The game's generations are the common case: give them their own rule."""
        self.generate(None, m1, m2, hold)

    @precondition(lambda self: bool(self.flights))
    @rule(modes=st.lists(MODE, min_size=3, max_size=3))
    def release(self, modes: list[str]) -> None:
        """Release every held call. The woken operations run one after the other in the
        order their calls were held (the fake answers at once, so none yields midway). A
        generation whose check settles while a forced compression is owed (an intervene or
        a rebuild landed meanwhile) must settle it before returning: its reply is the next
        of `modes`."""
        event(f"release {len(self.flights)} held")
        flights, self.flights = self.flights, []
        follow_ups = list(zip(modes, self.plan(*((m, False) for m in modes)), strict=True))
        self.fake.release()
        results = self.run(asyncio.gather(*(f.task for f in flights), return_exceptions=True))
        for i, (flight, result) in enumerate(zip(flights, results, strict=True)):
            outcome = self.settle(flight)
            if flight.op == "intervene":  # its forced compression was the held call
                assert result["compression"]["outcome"] == outcome
                continue
            if not self.model.game.flag:
                assert not isinstance(result, BaseException), result
                assert result.outcome == outcome
                continue
            event("a generation settles a forced compression owed meanwhile")
            if any(f.target is None for f in flights[i + 1 :]):  # the game's call is not back
                assert isinstance(result, CompressionPending), result
                assert result.details["cause"] == "in_flight"
                continue
            mode, uid = follow_ups.pop(0)
            forced = self.compress_now(None, mode, uid, None)
            if forced == "published":
                assert not isinstance(result, BaseException), result
                assert result.outcome == outcome and result.forced.outcome == "published"
            else:
                assert isinstance(result, CompressionPending), result
                assert result.details["cause"] == forced
        self.unplan()
        assert len(self.consumed) == len(self.engine.telemetry)

    @rule(sid=st.sampled_from(SCENE_IDS))
    def start_scene(self, sid: str) -> None:
        before, status = fingerprint(self.engine), self.engine.status()
        try:
            self.run(self.engine.start_scene(sid))
        except (InvalidInput, QuotaExceeded) as exc:
            if isinstance(exc, InvalidInput):
                assert sid in self.model.scenes or sid in self.model.archives
            return self.refused(exc, before, status)
        assert sid not in self.model.scenes and sid not in self.model.archives
        self.model.start_scene(sid)

    @rule(sid=st.sampled_from(SCENE_IDS), user=TEXT, assistant=TEXT)
    def scene_exchange(self, sid: str, user: str, assistant: str) -> None:
        user, assistant = f"{user}{SCENE_CANARY}", f"{SCENE_CANARY}{assistant}"
        before, status = fingerprint(self.engine), self.engine.status()
        try:
            seq = self.run(self.engine.record_scene_exchange(sid, user, assistant))
        except (InvalidInput, InvalidTransition, QuotaExceeded) as exc:
            if isinstance(exc, InvalidInput):
                assert sid not in self.model.scenes and sid not in self.model.archives
            elif isinstance(exc, InvalidTransition):
                assert sid in self.model.archives
            return self.refused(exc, before, status)
        assert self.model.stack(sid) is not None, f"an exchange recorded on {sid!r}"
        assert seq == self.model.scene_exchange(sid, user, assistant)

    @rule(sid=st.sampled_from(SCENE_IDS), closing=TEXT, meanwhile=TEXT, publish=st.booleans())
    def end_scene(self, sid: str, closing: str, meanwhile: str, publish: bool) -> None:
        before, status = fingerprint(self.engine), self.engine.status()
        op = (
            self.engine.publish_scene(sid, closing, meanwhile)
            if publish
            else self.engine.cancel_scene(sid)
        )
        try:
            record = self.run(op)
        except (InvalidInput, InvalidTransition, QuotaExceeded) as exc:
            if isinstance(exc, InvalidInput):
                assert sid not in self.model.scenes and sid not in self.model.archives
            elif isinstance(exc, InvalidTransition):
                state = self.model.archives[sid]["state"]
                assert state == ("cancelled" if publish else "published")
            return self.refused(exc, before, status)
        if sid in self.model.archives:  # a repeated terminal event: nothing written
            assert fingerprint(self.engine) == before
            assert self.model.archives[sid]["state"] == ("published" if publish else "cancelled")
            return
        scene = self.model.stack(sid)
        assert scene is not None, f"{sid!r} ended but was never started"
        if publish and scene.summary is not None:
            event("a scene with a summary published")
        if publish:
            rec = self.model.end_scene(sid, closing, meanwhile)
        else:
            rec = self.model.end_scene(sid, None, None)
        assert record["state"] == rec["state"]

    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        n = data.draw(st.integers(0, self.model.last_round()), label="reset to")
        before, status = fingerprint(self.engine), self.engine.status()
        try:
            self.run(self.engine.reset(n))
        except QuotaExceeded as exc:
            return self.refused(exc, before, status)
        self.model.reset(n)

    @precondition(lambda self: bool(self.model.rounds))
    @rule(data=st.data(), user=TEXT, assistant=TEXT)
    def edit(self, data: st.DataObject, user: str, assistant: str) -> None:
        n = data.draw(st.sampled_from(sorted(self.model.rounds)), label="edit round")
        before, status = fingerprint(self.engine), self.engine.status()
        try:
            self.run(self.engine.edit_round(n, user, assistant))
        except QuotaExceeded as exc:
            return self.refused(exc, before, status)
        self.model.edit_round(n, user, assistant)

    @rule(
        key=st.sampled_from(["d0", "d1", "jfForged", "jfGameStack.meta"]),
        value=TEXT,
        delete=st.booleans(),
        cheat=st.booleans(),
    )
    def write(self, key: str, value: str, delete: bool, cheat: bool) -> None:
        before, status = fingerprint(self.engine), self.engine.status()
        if delete:
            op = self.engine.write(deletes=[key], cheat=cheat)
        else:
            op = self.engine.write({key: value}, cheat=cheat)
        try:
            self.run(op)
        except (InvalidInput, QuotaExceeded) as exc:
            assert isinstance(exc, QuotaExceeded) or key.startswith("jf")
            return self.refused(exc, before, status)
        assert not key.startswith("jf")
        if delete:
            self.model.data.pop(key, None)
        else:
            self.model.data[key] = value

    @rule()
    def checkpoint(self) -> None:
        self.run(self.engine.checkpoint())
        assert self.engine.dump()["changeLog"] == []
        self.base = self.engine.dump()["store"]

    @precondition(lambda self: not self.flights)
    @rule()
    def duplicate(self) -> None:
        game_id = f"g{len(self.model.game_id)}"
        dup = self.run(self.engine.duplicate(MemoryStore(quota=QUOTA), game_id))
        source = self.engine.dump()["store"]
        assert dup.dump()["store"] == source
        assert dup.dump()["changeLog"] == []
        assert len(self.fake.requests) == self.requests_seen
        assert len(self.consumed) == len(self.engine.telemetry)
        self.engine, self.base, self.consumed = dup, source, set()
        self.model = self.model.clone(game_id)
        self.telemetry_checked = 0

    # -- invariants ------------------------------------------------------------------------------
    @invariant()
    def invariants(self) -> None:
        """Every invariant, on one dump of the store and change log per step."""
        dump = self.engine.dump()
        current = dump["store"]
        # Footprint: exact JCS recomputation, within the quota.
        recomputed = jcs_size(current) + jcs_size(dump["changeLog"])
        assert dump["footprint"] == recomputed
        assert dump["footprint"] <= QUOTA
        event(f"footprint >= {dump['footprint'] // 10_000 * 10_000}")
        self.check_change_log(current, dump["changeLog"])
        self.check_memory(current)
        self.check_no_exchange_lost(current)
        self.check_flag(current)
        self.check_canonical_length()
        self.check_canaries_and_telemetry(current, dump["changeLog"])

    def check_change_log(self, current: dict[str, Any], log: list[Any]) -> None:
        """The optimized log is the net diff against the last checkpoint, in JCS key order."""
        expected = []
        for key in sorted(set(current) | set(self.base), key=utf16):
            if key not in current:
                expected.append({"key": key, "op": "delete"})
            elif key not in self.base or dumps(current[key]) != dumps(self.base[key]):
                expected.append({"key": key, "op": "set", "value": current[key]})
        assert log == expected

    def check_memory(self, current: dict[str, Any]) -> None:
        """The whole store (every jf key, member by member, and the game data) is exactly
        the oracle's; every summary names the fake's call."""
        diffs = diff_store(self.model.store(), normalize(current))
        assert not diffs, "\n".join(d.describe() for d in diffs)
        for key, value in current.items():
            if key.startswith("jf") and key.endswith(".summary"):
                assert value["compressionCallId"].startswith("fake-")

    def check_no_exchange_lost(self, current: dict[str, Any]) -> None:
        """Summary-represented seqs and exact seqs partition every seq appended since the last
        rebuild (read from the store, not from the model)."""
        exact = {v["seq"] for k, v in current.items() if k.startswith("jfGameStack.chunk.")}
        summary = current.get("jfGameStack.summary")
        through = 0 if summary is None else summary["throughSeq"]
        appended = set(range(1, self.model.game.next_seq))  # seqs restart at 1 on a rebuild
        represented = {s for s in appended if s <= through}
        assert not exact & represented, "an exchange is both summarized and exact"
        assert exact | represented == appended, "an exchange was lost or invented"

    def check_flag(self, current: dict[str, Any]) -> None:
        """D14: forcedCompression iff an exact game chunk has origin intervene."""
        meta = current.get("jfGameStack.meta") or {}
        intervened = any(
            v["origin"] == "intervene"
            for k, v in current.items()
            if k.startswith("jfGameStack.chunk.")
        )
        assert bool(meta.get("forcedCompression")) == intervened

    def check_canonical_length(self) -> None:
        text = self.engine.canonical_text()
        assert text == self.model.game.text()
        assert self.engine.index.game.length == len(text)
        for sid in self.live():
            assert self.engine.canonical_text(sid) == self.model.scenes[sid].stack.text()

    def check_canaries_and_telemetry(self, current: dict[str, Any], log: list[Any]) -> None:
        game_memory = as_text(
            {k: v for k, v in current.items() if k.startswith(("jfGameStack.", "jfRounds."))}
        )
        assert DISCARD not in as_text([current, log])
        for canary in (SCENE_CANARY, SCENE_SUMMARY_CANARY):
            assert canary not in game_memory
        # Only what arrived since the last step (earlier ones were checked then).
        for request in self.fake.requests[self.requests_checked :]:
            body = as_text(request["body"])
            assert DISCARD not in body
            if request["body"]["kind"] == GAME_KIND:
                assert SCENE_CANARY not in body and SCENE_SUMMARY_CANARY not in body
        self.requests_checked = len(self.fake.requests)
        for ev in self.engine.telemetry[self.telemetry_checked :]:
            # Sizes, ids and outcomes only: no member may carry text.
            assert set(ev) <= TELEMETRY_MEMBERS, set(ev) - TELEMETRY_MEMBERS
            for name, value in ev.items():
                if isinstance(value, str) and name not in ("idempotencyKey", "callId"):
                    assert len(value) <= 64 and value.isascii(), (name, value)
                    for text in (DISCARD, SCENE_CANARY, SCENE_SUMMARY_CANARY, "~~~"):
                        assert text not in value
        self.telemetry_checked = len(self.engine.telemetry)


# Twice the profile's examples (the interleavings are the point); ~10 s with the CI profile.
EngineMachine.TestCase.settings = settings(
    max_examples=2 * settings.default.max_examples, stateful_step_count=50
)
TestEngineStateful = pytest.mark.req(
    "JF-COMP-001",
    "JF-COMP-002",
    "JF-COMP-003",
    "JF-COMP-005",
    "JF-COMP-009",
    "JF-COMP-011",
    "JF-COMP-012",
    "JF-CAT-002",
    "JF-CAT-006",
    "JF-CAT-008",
    "JF-CAT-009",
    "JF-INT-006",
    "JF-INT-007",
    "JF-INT-008",
    "JF-INT-009",
    "JF-HIST-003",
    "JF-HIST-004",
    "JF-HIST-008",
    "JF-HIST-010",
    "JF-HIST-011",
    "JF-QUOTA-001",
    "JF-QUOTA-005",
    "JF-QUOTA-006",
    "JF-QUOTA-007",
    "JF-QUOTA-008",
    "JF-ATOM-001",
    "JF-ERR-002",
    "JF-CONC-001",
    "JF-CONC-002",
    "JF-CONC-003",
    "JF-CONC-004",
    "JF-TEXT-004",
    "JF-TEXT-005",
)(EngineMachine.TestCase)
