# ruff: noqa: E501  (long diagnostic f-strings read better unbroken)
"""A conformance session: one driver, the fake compress.v2, the oracle, and the checks.

Every public operation of `Session` is one *step*: it is recorded (name and arguments, as
JSON) so that a failing sequence can be written as a trace and replayed, it drives the
implementation through the protocol, predicts the result with the oracle, and then verifies
everything observable: the reply, the dumped store against the model, the change log against
the suite's own checkpoint base, the footprint against the suite's own JCS count, the
forced-compression flag, canaries, every compress.v2 request the fake received, and the
telemetry. A check that fails raises `ConformanceFailure` naming requirement IDs.

Compressions are scripted: before an operation that may compress, the session scripts the
fake with reply descriptors (`conformance.replies`) and mirrors that FIFO, so it knows which
reply each attempt received. Idempotent replays of completed replies are mirrored too.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from typing import Any

from conformance import checks as C
from conformance.canon import (
    QUOTA,
    change_log,
    footprint,
    jcs,
)
from conformance.driver_client import HarnessError, Reply
from conformance.expectation import Expectation
from conformance.harness import SPEC_THRESHOLDS, Held
from conformance.observation import Ctx
from conformance.oracle import GameModel, diff_store, normalize
from conformance.replies import (
    TRANSPORT,
    settled,
    to_outcome,
)

__all__ = ["SPEC_THRESHOLDS", "Held", "Session"]


class Session(Expectation):
    """Every public method is one recorded step (see the module docs)."""

    # =====================================================================================
    # steps
    # =====================================================================================
    def new_game(self, game: str) -> None:
        self.record("new_game", game=game)
        self._script([])
        self._ok(self._call("create_game", {"game": game}), "create_game", ("JF-HIST-009",))
        self.games[game] = GameModel(game)
        self.bases[game] = {}
        self.telemetry_seen[game] = 0
        self._expect_no_request("create_game")
        self.verify(game, Ctx("create_game", verifies=("JF-HIST-009",)))

    def set_participants(self, game: str, participants: list[dict[str, Any]]) -> None:
        self.record("set_participants", game=game, participants=participants)
        self._ok(
            self._call("set_participants", {"game": game, "participants": participants}),
            "set_participants",
            ("JF-CALL-009",),
        )
        self.games[game].participants = copy.deepcopy(participants)
        self._participants_to_fake(game)

    def record_round(self, game: str, user: str, assistant: str) -> None:
        self.record("record_round", game=game, user=user, assistant=assistant)
        self._script([])
        reply = self._call("record_round", {"game": game, "input": user, "output": assistant})
        result = self._ok(reply, "record_round", ("JF-STORE-007",))
        want = self.games[game].record_round(user, assistant)
        self.ledger.expect(
            C.REPLY,
            result == want,
            f"record_round returned {result}, expected {want}",
            ids=("JF-STORE-004",),
        )
        self._expect_no_request("record_round")
        ids: tuple[str, ...] = (
            "JF-STORE-003",
            "JF-STORE-004",
            "JF-STORE-007",
            "JF-TEXT-002",
            "JF-ATOM-001",
            "JF-STORE-001",
        )
        if self.held is not None and self.held.game == game:
            ids += ("JF-CONC-002",)
        self.verify(game, Ctx("record_round", verifies=ids))

    def generate(
        self, game: str, scene: str | None = None, replies: list[dict[str, Any]] | None = None
    ) -> None:
        """A generation on the game (or a scene): forced compression owed first, then the check."""
        replies = replies or []
        self.record("generate", game=game, scene=scene, replies=replies)
        model = self.games[game]
        self._script(replies)
        self._participants_to_fake(game)
        args: dict[str, Any] = {"game": game} if scene is None else {"game": game, "scene": scene}
        before = copy.deepcopy(model)
        reply = self._call("generate", args)
        flow = self._flow(game, scene, forced_first=model.game.flag, check=True, op="generate")
        if "held" in flow:
            raise HarnessError("generate was held without hold_generate")
        if scene is not None and model.scenes.get(scene) and model.scenes[scene].state == "created":
            pass
        if "pending" in flow:
            self._expect_pending(reply, flow["pending"])
            self._finish(game, flow, "generate")
            self.verify(
                game,
                Ctx(
                    "generate",
                    published=[f for f, o in flow.get("results", []) if o == "published"],
                    failed=[o for _, o in flow.get("results", []) if o != "published"],
                    verifies=("JF-INT-006", "JF-INT-008", "JF-COMP-009"),
                ),
            )
            self._check_telemetry_due(game, "generate")
            return
        result = self._ok(reply, "generate", ("JF-COMP-012", "JF-INT-007"))
        if scene is not None and scene in model.scenes:
            model.mark_running(scene)
        if flow["report"]["outcome"] != "published":
            self._check_report("generate", result, flow["report"])
        held = self.held
        if (
            held is not None
            and held.game == game
            and held.flight.scene != scene
            and flow["report"]["outcome"] == "published"
        ):
            self.ledger.credit(C.CONCURRENCY, ("JF-CONC-004",))
        self._finish(game, flow, "generate")
        published = [f for f, o in flow["results"] if o == "published"]
        failed = [o for _, o in flow["results"] if o != "published"]
        verifies: tuple[str, ...] = ("JF-COMP-012",)
        if published:
            verifies += ("JF-COMP-004", "JF-COMP-005", "JF-INT-005", "JF-STORE-002")
        if failed:
            verifies += ("JF-COMP-009",)
        del before
        self.verify(game, Ctx("generate", published=published, failed=failed, verifies=verifies))
        if flow["report"]["outcome"] == "published":
            # after the store comparison, so that a wrong publication (chunks kept or lost,
            # summary altered) is blamed on the store rule it breaks, not on lengthAfter
            self._check_report("generate", result, flow["report"])
            stack = model.stack(scene)
            assert stack is not None and stack.summary is not None
            stored = stack.summary["compressionCallId"]
            self.ledger.expect(
                C.CALL_ID,
                result.get("callId") == stored,
                f"generate reported callId {result.get('callId')!r}, the fake's was {stored!r}",
                ids=("JF-COMP-004",),
            )
        # telemetry last, so that a wrong publication is blamed on the store or report rule it
        # breaks rather than on the telemetry event's outcome
        self._check_telemetry_due(game, "generate")

    def _expect_pending(self, reply: Reply, cause: str) -> None:
        """The generation must be refused with a retryable compression_pending naming `cause`."""
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok and reply.code == "compression_pending",
            lambda: (
                f"a forced compression was owed and ended {cause}, yet generate answered "
                f"{reply.get('result') or reply.get('error')} instead of compression_pending"
            ),
            ids=("JF-INT-007", "JF-INT-008"),
        )
        details = reply["error"].get("details") or {}
        self.ledger.expect(
            C.ERROR_CODE,
            reply["error"].get("retryable") is True and details.get("cause") == cause,
            f"compression_pending must be retryable and name the cause {cause!r}: {reply['error']}",
            ids=("JF-INT-008",),
        )

    def hold_generate(self, game: str, scene: str | None, reply: dict[str, Any]) -> None:
        """Start a generation whose compression the fake holds in flight."""
        self.record("hold_generate", game=game, scene=scene, reply=reply)
        if self.games[game].game.flag:
            raise HarnessError("hold_generate needs a game without an owed forced compression")
        if not self.can_hold(game, scene):
            raise HarnessError(
                "this logical compression was completed before: the service replays it"
            )
        self._start_held(
            game,
            "generate",
            {"game": game} if scene is None else {"game": game, "scene": scene},
            scene,
            reply,
            forced=False,
        )

    def hold_intervene(
        self, game: str, user: str, output: str, revealed: int, reply: dict[str, Any]
    ) -> None:
        """An intervene whose forced compression the fake holds in flight."""
        self.record(
            "hold_intervene", game=game, user=user, output=output, revealed=revealed, reply=reply
        )
        model = self.games[game]
        self._start_held(
            game,
            "intervene",
            {"game": game, "input": user, "output": output, "revealed": revealed},
            None,
            reply,
            forced=True,
            intervene=(user, output[:revealed]),
        )
        del model

    def _start_held(
        self,
        game: str,
        op: str,
        args: dict[str, Any],
        scene: str | None,
        reply: dict[str, Any],
        *,
        forced: bool,
        intervene: tuple[str, str] | None = None,
    ) -> None:
        if self.held is not None:
            raise HarnessError("only one held compression at a time")
        model = self.games[game]
        self._script([{"reply": "hold", "then": reply}])
        self._participants_to_fake(game)
        future = self.client.start(op, args)
        if intervene is not None:
            model.intervene(*intervene)
        if scene is not None:
            model.mark_running(scene)
            self.ledger.credit(C.REPLY, ("JF-INT-002",))
        deadline = time.monotonic() + 30
        while not self.fake.wait_held(0.05):
            self._violations()
            if self.client.done(future, 0):
                got = self.client.wait(future)
                self._violations()
                self.ledger.expect(
                    C.COMPRESSION_TRIGGER,
                    False,
                    f"{op} was expected to send a compression request and wait; it answered {got}",
                    ids=("JF-INT-004",) if forced else ("JF-COMP-001",),
                )
            if time.monotonic() > deadline:
                raise HarnessError(f"{op}: no compression request reached the fake within 30 s")
        requests: deque[dict[str, Any]] = deque(self._new_requests())
        self._check_request_texts(list(requests))
        self._violations()
        flight = self._begin_flight(game, scene, forced)
        attempts: list[dict[str, Any]] = []
        done = self._run_attempts(game, flight, requests, attempts)
        assert not done
        model.in_flight[scene] = flight
        self.held = Held(game, op, future, flight, reply, attempts, len(flight.text), forced)
        self.verify(
            game,
            Ctx(
                f"{op} (held)",
                verifies=("JF-ATOM-001", "JF-INT-003") if intervene else ("JF-ATOM-001",),
            ),
        )

    def release(
        self, retries: list[dict[str, Any]] | None = None, then: list[dict[str, Any]] | None = None
    ) -> None:
        """Let the held reply go and check the settle. `retries` answer further attempts of the
        held compression (after a transport failure); `then` answers the forced compression a
        held *generation* owes when an intervene landed meanwhile (JF-INT-007: it must publish
        before the generation may start)."""
        retries = retries or []
        then = then or []
        self.record("release", retries=retries, then=then)
        held = self.held
        assert held is not None
        game, model = held.game, self.games[held.game]
        self.fake.reset_script()
        self.mirror.clear()
        for d in retries + then:
            self.fake.script(to_outcome(d))
            self.mirror.append(d)
        self._participants_to_fake(game)
        self.fake.release()
        reply = self.client.wait(held.future)
        self.held = None
        model.in_flight.pop(held.flight.scene, None)
        requests: deque[dict[str, Any]] = deque(self._new_requests())
        self._check_request_texts(list(requests))
        self._violations()
        attempts = held.attempts
        if settled(held.reply)["reply"] in TRANSPORT:
            self._run_attempts(game, held.flight, requests, attempts)
        outcome = self._settle(game, held.flight, attempts)
        # reports of a publication are checked after the store comparison (as in generate),
        # so that a wrong publication is blamed on the store rule it breaks
        late: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

        def report(op: str, got: dict[str, Any], want: dict[str, Any]) -> None:
            if want["outcome"] == "published":
                late.append((op, got, want))
            else:
                self._check_report(op, got, want)

        after = model.stack(held.flight.scene)
        want = {
            "outcome": outcome,
            "lengthBefore": len(held.flight.text),
            "lengthAfter": 0 if after is None else after.length(),
            "throughSeq": held.flight.through,
        }
        if held.op == "intervene":
            result = self._ok(reply, "intervene", ("JF-INT-003",))
            if result.get("compression") is not None:
                report("intervene", result["compression"], want)
            self.ledger.expect(
                C.REPLY,
                result.get("forcedCompression") is model.game.flag,
                f"intervene reported forcedCompression {result.get('forcedCompression')}, "
                f"the model says {model.game.flag}",
                ids=("JF-INT-006",),
            )
        elif not model.game.flag:
            result = self._ok(reply, "generate", ("JF-COMP-012",))
            report("generate", result, want)
        published_flights = [held.flight] if outcome == "published" else []
        if held.op == "generate" and model.game.flag:
            # an intervene landed while the check was in flight: the same generation must
            # settle the owed forced compression before it may start
            forced = self._begin_flight(game, None, forced=True)
            forced_attempts: list[dict[str, Any]] = []
            self._run_attempts(game, forced, requests, forced_attempts)
            forced_outcome = self._settle(game, forced, forced_attempts)
            if forced_outcome == "published":
                published_flights.append(forced)
            if model.game.flag:
                self._expect_pending(reply, forced_outcome)
            else:
                result = self._ok(reply, "generate", ("JF-INT-007",))
                report("generate", result, want)
        self._finish(game, {"requests": requests}, "release")
        verifies: tuple[str, ...] = (
            ("JF-COMP-003", "JF-CONC-002") if outcome == "published" else ("JF-COMP-009",)
        )
        if outcome == "stale":
            verifies += (
                ("JF-COMP-011",)
                if held.flight.scene is None or model.stack(held.flight.scene)
                else ("JF-CAT-009",)
            )
        self.verify(
            game,
            Ctx(
                "release",
                published=published_flights,
                failed=[] if outcome == "published" else [outcome],
                verifies=verifies,
            ),
        )
        for op, got, want in late:
            self._check_report(op, got, want)
        self._check_telemetry_due(game, "release")

    def intervene(
        self,
        game: str,
        user: str,
        output: str,
        revealed: int,
        replies: list[dict[str, Any]] | None = None,
    ) -> None:
        replies = replies or []
        self.record(
            "intervene", game=game, user=user, output=output, revealed=revealed, replies=replies
        )
        model = self.games[game]
        self._script(replies)
        self._participants_to_fake(game)
        reply = self._call(
            "intervene", {"game": game, "input": user, "output": output, "revealed": revealed}
        )
        result = self._ok(reply, "intervene", ("JF-INT-001", "JF-INT-003"))
        late: tuple[Any, dict[str, Any]] | None = None
        busy = None in model.in_flight
        want = model.intervene(user, output[:revealed])
        self.ledger.expect(
            C.REPLY,
            result.get("round") == want["round"] and result.get("seq") == want["seq"],
            f"intervene returned round/seq {result.get('round')}/{result.get('seq')}, expected {want}",
            ids=("JF-INT-003", "JF-STORE-004"),
        )
        if busy:
            flow: dict[str, Any] = {"results": [], "requests": deque(self._new_requests())}
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                result.get("compression") is None,
                "intervene started a second compression of the game stack while one was in flight",
                ids=("JF-CONC-003",),
            )
        else:
            flow = self._flow(game, None, forced_first=True, check=False, op="intervene")
            flight, outcome = flow["results"][0]
            comp = result.get("compression")
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                isinstance(comp, dict),
                "intervene reported no forced compression although none was in flight",
                ids=("JF-INT-004",),
            )
            after = model.game
            report = {
                "outcome": outcome,
                "lengthBefore": len(flight.text),
                "lengthAfter": after.length(),
                "throughSeq": flight.through,
            }
            if outcome == "published":
                # checked after the store comparison (as in generate), so that a wrong
                # publication is blamed on the store rule it breaks
                late = (comp, report)
            else:
                self._check_report("intervene", comp, report)
        self.ledger.expect(
            C.REPLY,
            result.get("forcedCompression") is model.game.flag,
            f"intervene reported forcedCompression {result.get('forcedCompression')}, "
            f"the model says {model.game.flag}",
            ids=("JF-INT-006",),
        )
        self._finish(game, flow, "intervene")
        published = [f for f, o in flow.get("results", []) if o == "published"]
        self.verify(
            game,
            Ctx(
                "intervene",
                published=published,
                failed=[o for _, o in flow.get("results", []) if o != "published"],
                verifies=("JF-INT-002", "JF-INT-003", "JF-INT-004", "JF-INT-010")
                + (("JF-INT-005",) if published else ("JF-INT-006",)),
            ),
        )
        if late is not None:
            self._check_report("intervene", *late)
        self._check_telemetry_due(game, "intervene")

    # -- scenes --------------------------------------------------------------------------
    def start_scene(self, game: str, scene: str) -> None:
        self.record("start_scene", game=game, scene=scene)
        self._script([])
        self._ok(
            self._call("start_scene", {"game": game, "scene": scene}),
            "start_scene",
            ("JF-CAT-001",),
        )
        self.games[game].start_scene(scene)
        self._expect_no_request("start_scene")
        # the spec leaves a new scene's starting epoch to the implementation (the reference
        # starts at the game's, so a reused id never repeats an Idempotency-Key): adopt it
        meta = self.dump(game)["store"].get(f"jfCatalystStack.{scene}.meta")
        epoch = meta.get("epoch") if isinstance(meta, dict) else None
        self.ledger.expect(
            C.STORE_MODEL,
            isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0,
            f"start_scene wrote meta {meta!r}: it needs an integer epoch >= 0",
            ids=("JF-STORE-005",),
        )
        self.games[game].scenes[scene].stack.epoch = epoch if isinstance(epoch, int) else 0
        self.verify(game, Ctx("start_scene", verifies=("JF-STORE-005", "JF-CAT-001")))

    def scene_exchange(self, game: str, scene: str, user: str, assistant: str) -> None:
        self.record("scene_exchange", game=game, scene=scene, user=user, assistant=assistant)
        self._script([])
        reply = self._call(
            "scene_exchange", {"game": game, "scene": scene, "user": user, "assistant": assistant}
        )
        result = self._ok(reply, "scene_exchange", ("JF-CAT-001",))
        seq = self.games[game].scene_exchange(scene, user, assistant)
        self.ledger.expect(
            C.REPLY,
            result.get("seq") == seq,
            f"scene_exchange returned {result}, expected seq {seq}",
            ids=("JF-STORE-004",),
        )
        self._expect_no_request("scene_exchange")
        self.verify(
            game, Ctx("scene_exchange", verifies=("JF-CAT-002", "JF-STORE-005", "JF-CAT-008"))
        )

    def publish_scene(self, game: str, scene: str, closing: str, meanwhile: str) -> None:
        self.record("publish_scene", game=game, scene=scene, closing=closing, meanwhile=meanwhile)
        self._script([])
        model = self.games[game]
        again = model.scenes[scene].state == "published"
        reply = self._call(
            "publish_scene",
            {"game": game, "scene": scene, "closingSummary": closing, "meanwhileEvent": meanwhile},
        )
        result = self._ok(reply, "publish_scene", ("JF-CAT-001",))
        want = model.archives[scene] if again else model.end_scene(scene, closing, meanwhile)
        got = result
        self.ledger.expect(
            C.REPLY,
            got == want,
            f"publish_scene returned {result}, expected {want}",
            ids=("JF-CAT-006",) if again else ("JF-CAT-005",),
        )
        self._expect_no_request("publish_scene")
        self.verify(
            game,
            Ctx(
                "publish_scene",
                verifies=("JF-CAT-006",)
                if again
                else ("JF-CAT-003", "JF-CAT-004", "JF-CAT-005", "JF-STORE-006"),
            ),
        )

    def cancel_scene(self, game: str, scene: str) -> None:
        self.record("cancel_scene", game=game, scene=scene)
        self._script([])
        model = self.games[game]
        again = model.scenes[scene].state == "cancelled"
        result = self._ok(
            self._call("cancel_scene", {"game": game, "scene": scene}),
            "cancel_scene",
            ("JF-CAT-001",),
        )
        want = model.archives[scene] if again else model.end_scene(scene, None, None)
        got = result
        self.ledger.expect(
            C.REPLY,
            got == want,
            f"cancel_scene returned {result}, expected {want}",
            ids=("JF-CAT-006",) if again else ("JF-CAT-007",),
        )
        self._expect_no_request("cancel_scene")
        self.verify(
            game,
            Ctx(
                "cancel_scene",
                verifies=("JF-CAT-006",) if again else ("JF-CAT-007", "JF-STORE-006"),
            ),
        )

    # -- history -------------------------------------------------------------------------
    def _rebuilt(
        self, game: str, op: str, args: dict[str, Any], apply: Any, ids: tuple[str, ...]
    ) -> None:
        self._script([])
        reply = self._call(op, args)
        result = self._ok(reply, op, ids)
        model = self.games[game]
        apply(model)
        want = {"rounds": len(model.rounds), "chunks": len(model.game.chunks)}
        self.ledger.expect(
            C.REPLY,
            {k: result.get(k) for k in want} == want,
            f"{op} returned {result}, expected {want}",
            ids=("JF-HIST-004",),
        )
        self._expect_no_request(op)
        running = any(sc.state in ("created", "running") for sc in model.scenes.values())
        self.verify(
            game,
            Ctx(
                op,
                verifies=ids
                + ("JF-HIST-004", "JF-HIST-005", "JF-HIST-007")
                + (("JF-HIST-011",) if running else ()),
            ),
        )
        self._check_determinism(game, op)

    def _check_determinism(self, game: str, op: str) -> None:
        store = self.dumps[game]["store"]
        game_keys = {k: v for k, v in store.items() if k.startswith("jfGameStack.")}
        expected = {
            k: v for k, v in self.games[game].store().items() if k.startswith("jfGameStack.")
        }
        self.ledger.expect(
            C.DETERMINISM,
            jcs(game_keys) == jcs(expected),
            f"{op}: the rebuilt game stack is not the deterministic rebuild",
            ids=("JF-HIST-006",),
        )

    def reset(self, game: str, to_round: int) -> None:
        self.record("reset", game=game, to_round=to_round)
        self._rebuilt(
            game,
            "reset",
            {"game": game, "round": to_round},
            lambda m: m.reset(to_round),
            ("JF-HIST-001", "JF-HIST-003", "JF-HIST-010"),
        )

    def edit_round(self, game: str, n: int, user: str, assistant: str) -> None:
        self.record("edit_round", game=game, n=n, user=user, assistant=assistant)
        self._rebuilt(
            game,
            "edit_round",
            {"game": game, "round": n, "input": user, "output": assistant},
            lambda m: m.edit_round(n, user, assistant),
            ("JF-HIST-001", "JF-HIST-003"),
        )

    def convert(self, game: str, rounds: list[dict[str, str]]) -> None:
        self.record("convert", game=game, rounds=rounds)
        self._rebuilt(
            game,
            "convert",
            {"game": game, "rounds": rounds},
            lambda m: m.convert(rounds),
            ("JF-HIST-002", "JF-HIST-003"),
        )

    def duplicate(self, game: str, into: str) -> None:
        self.record("duplicate", game=game, into=into)
        self._script([])
        self._ok(
            self._call("duplicate", {"game": game, "into": into}), "duplicate", ("JF-HIST-008",)
        )
        self._expect_no_request("duplicate")
        source = self.dump(game)["store"]
        self.games[into] = self.games[game].clone(into)
        self.bases[into] = copy.deepcopy(source)
        self.telemetry_seen[into] = 0
        self.verify(into, Ctx("duplicate", verifies=("JF-HIST-008",)))
        copied = {k: v for k, v in self.dumps[into]["store"].items() if k.startswith("jf")}
        original = {k: v for k, v in source.items() if k.startswith("jf")}
        self.ledger.expect(
            C.STORE_MODEL,
            jcs(copied) == jcs(original),
            "the duplicate's jf keys differ from the source's",
            ids=("JF-HIST-008",),
        )
        self.ledger.expect(
            C.CHANGE_LOG,
            self.dumps[into]["changeLog"] == [],
            "the duplicate's change log is not empty",
            ids=("JF-HIST-008",),
        )

    # -- data, checkpoint ----------------------------------------------------------------
    def write(
        self, game: str, sets: dict[str, Any], deletes: list[str] | None = None, cheat: bool = False
    ) -> None:
        deletes = deletes or []
        self.record("write", game=game, sets=sets, deletes=deletes, cheat=cheat)
        op = "cheat" if cheat else "write"
        self._script([])
        model = self.games[game]
        actual = dict(self.dumps[game]["store"]) if game in self.dumps else {}
        for k in deletes:
            actual.pop(k, None)
        actual.update(sets)
        would_be = footprint(actual, change_log(self.bases[game], actual))
        before = self.dumps.get(game, {}).get("footprint")
        reply = self._call(op, {"game": game, "sets": sets, "deletes": deletes})
        if would_be > QUOTA:
            self._expect_refusal(
                game, op, reply, "quota_exceeded", ("JF-QUOTA-003", "JF-QUOTA-002")
            )
            details = (reply.get("error") or {}).get("details") or {}
            self.ledger.expect(
                C.QUOTA_NUMBERS,
                details.get("current") == before
                and details.get("would_be", details.get("wouldBe")) == would_be
                and details.get("quota") == QUOTA,
                f"quota_exceeded details {details}, expected current {before}, would_be {would_be}, quota {QUOTA}",
            )
            return
        result = self._ok(reply, op, ("JF-STORE-009", "JF-QUOTA-001"))
        for k in deletes:
            model.data.pop(k, None)
        model.data.update(copy.deepcopy(sets))
        self.ledger.expect(
            C.FOOTPRINT,
            result.get("footprint") == would_be,
            f"{op} returned footprint {result.get('footprint')}, the suite counts {would_be}",
        )
        self._expect_no_request(op)
        self.verify(game, Ctx(op, verifies=("JF-STORE-009", "JF-QUOTA-001", "JF-QUOTA-002")))

    def checkpoint(self, game: str) -> None:
        self.record("checkpoint", game=game)
        self._ok(self._call("checkpoint", {"game": game}), "checkpoint", ("JF-QUOTA-008",))
        store = self.dump(game)["store"]
        self.bases[game] = copy.deepcopy(store)
        self.verify(game, Ctx("checkpoint", verifies=("JF-QUOTA-008",)))
        self.ledger.expect(
            C.CHANGE_LOG,
            self.dumps[game]["changeLog"] == [],
            "the change log is not empty right after a checkpoint",
            ids=("JF-QUOTA-008",),
        )

    # -- refusals ------------------------------------------------------------------------
    def _expect_refusal(
        self, game: str, op: str, reply: Reply, code: str, ids: tuple[str, ...]
    ) -> None:
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok and reply.code == code,
            lambda: (
                f"{op} should be refused with {code}; got {reply.get('result') if reply.ok else reply['error']}"
            ),
            ids=ids,
        )
        stable = self.capabilities and reply.code in self.client.protocol.error_codes
        self.ledger.expect(
            C.ERROR_CODE,
            bool(stable),
            f"error code {reply.code!r} is not a stable code",
            ids=("JF-ERR-001",),
        )
        self.ledger.expect(
            C.ERROR_CODE,
            bool(reply["error"].get("message")),
            "the error has no message",
            ids=("JF-ERR-001",),
        )
        if code == "quota_exceeded" and not reply.ok:
            details = reply["error"].get("details") or {}
            would_be = details.get("would_be", details.get("wouldBe"))
            before = self.dumps.get(game, {}).get("footprint")
            self.ledger.expect(
                C.QUOTA_NUMBERS,
                details.get("current") == before
                and details.get("quota") == QUOTA
                and isinstance(would_be, int)
                and would_be > QUOTA,
                f"quota_exceeded details {details}: expected current {before}, a would_be above "
                f"the quota, and quota {QUOTA}",
            )
        self._expect_no_request(op)
        self.verify(game, Ctx(op, refused=True, verifies=("JF-ERR-002", "JF-ATOM-001", *ids)))

    def invalid(self, game: str, op: str, args: dict[str, Any], code: str, ids: list[str]) -> None:
        """Send an operation that must be refused with `code`, writing nothing."""
        self.record("invalid", game=game, op=op, args=args, code=code, ids=ids)
        self._script([])
        reply = self._call(op, {"game": game, **args})
        self._expect_refusal(game, op, reply, code, tuple(ids))

    def expect_pending_generation(self, game: str, scene: str | None = None) -> None:
        """A generation while the forced compression is in flight: compression_pending (in_flight)."""
        self.record("expect_pending_generation", game=game, scene=scene)
        self._script([])
        reply = self._call(
            "generate", {"game": game} if scene is None else {"game": game, "scene": scene}
        )
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok
            and reply.code == "compression_pending"
            and (reply["error"].get("details") or {}).get("cause") == "in_flight",
            lambda: (
                f"generate while the forced compression is in flight answered "
                f"{reply.get('result') or reply.get('error')}; expected compression_pending (cause in_flight)"
            ),
            ids=("JF-INT-008", "JF-CONC-003"),
        )
        self._expect_no_request("generate")
        self.verify(game, Ctx("generate", refused=True, verifies=("JF-INT-008", "JF-CONC-003")))

    def compare_game_stacks(self, a: str, b: str) -> None:
        """Two games rebuilt from the same rounds, archives and epoch: identical game stacks."""
        self.record("compare_game_stacks", a=a, b=b)
        sa = {k: v for k, v in self.dump(a)["store"].items() if k.startswith("jfGameStack.")}
        sb = {k: v for k, v in self.dump(b)["store"].items() if k.startswith("jfGameStack.")}
        self.ledger.expect(
            C.DETERMINISM,
            jcs(sa) == jcs(sb),
            f"games {a} and {b} were rebuilt from the same inputs but their game "
            "stacks differ in JCS",
            ids=("JF-HIST-006",),
        )

    # -- durability ----------------------------------------------------------------------
    def restart(self) -> None:
        """Kill and restart the driver; every game must reopen exactly as it was."""
        self.record("restart")
        if self.held is not None:
            raise HarnessError("restart while a compression is held is not supported by the suite")
        before = {g: jcs(self.dump(g)) for g in self.games}
        self.client.restart()
        self.retries.clear()  # the implementation's retry counts restart with it
        if self.driver_spec.startswith("stdio:"):
            self._hello()
        for game in self.games:
            if self.games[game].participants:
                self._ok(
                    self._call(
                        "set_participants",
                        {"game": game, "participants": self.games[game].participants},
                    ),
                    "set_participants",
                    ("JF-CALL-009",),
                )
            after = jcs(self.dump(game))
            self.ledger.expect(
                C.DURABILITY,
                after == before[game],
                f"after restart, game {game} differs from its state before",
                ids=("JF-ATOM-004",),
            )
            if game not in self.broken:
                self.verify(game, Ctx("restart", verifies=("JF-ATOM-004",)))
        self.telemetry_seen = {
            g: len(self._call("telemetry", {"game": g}).result or []) for g in self.games
        }

    def kill_during_round(self, game: str, user: str, assistant: str) -> None:
        """stdio only: kill the driver right after sending a round; reopen to before or after."""
        self.record("kill_during_round", game=game, user=user, assistant=assistant)
        model = self.games[game]
        after_model = copy.deepcopy(model)
        after_model.record_round(user, assistant)
        self.client.start("record_round", {"game": game, "input": user, "output": assistant})
        time.sleep(0.01)
        self.client.restart()
        self.retries.clear()
        self._hello()
        store = normalize(self.dump(game)["store"])
        before_ok = not diff_store(model.store(), store)
        after_ok = not diff_store(after_model.store(), store)
        self.ledger.expect(
            C.DURABILITY,
            before_ok or after_ok,
            "after a kill during record_round, the store is neither the state before nor after",
            ids=("JF-ATOM-004",),
        )
        if after_ok and not before_ok:
            self.games[game] = after_model
        if model.participants:
            self._call("set_participants", {"game": game, "participants": model.participants})
        self.telemetry_seen = {
            g: len(self._call("telemetry", {"game": g}).result or []) for g in self.games
        }
        self.verify(game, Ctx("restart", verifies=("JF-ATOM-004",)))

    def concurrent_rounds(self, game: str, pairs: list[list[str]]) -> None:
        """Several record_round requests outstanding at once: some serial order must explain them."""
        self.record("concurrent_rounds", game=game, pairs=pairs)
        self._script([])
        futures = [
            self.client.start("record_round", {"game": game, "input": u, "output": a})
            for u, a in pairs
        ]
        results = [self.client.wait(f) for f in futures]
        model = self.games[game]
        order = []
        for (u, a), r in zip(pairs, results, strict=True):
            self.ledger.expect(
                C.REPLY,
                r.ok,
                f"a concurrent record_round failed: {r.get('error')}",
                ids=("JF-CONC-001",),
            )
            order.append((r.result["round"], u, a, r.result["seq"]))
        for n, u, a, seq in sorted(order):
            want = model.record_round(u, a)
            self.ledger.expect(
                C.REPLY,
                want == {"round": n, "seq": seq},
                f"concurrent rounds are not explained by a serial order: got {n}/{seq}, "
                f"the serial order gives {want}",
                ids=("JF-CONC-001",),
            )
        self._expect_no_request("record_round")
        self.verify(game, Ctx("concurrent record_round", verifies=("JF-CONC-001",)))
