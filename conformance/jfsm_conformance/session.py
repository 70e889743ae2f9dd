"""A conformance session: the steps, each one sequence of act, predict, verify.

Every public method of `Session` is one *step*. It is recorded (name and arguments, as JSON)
so that a failing sequence can be written as a trace and replayed; then it

1. acts on the world (`jfsm_conformance.world`): scripts the fake compress.v2 with reply
   descriptors, sends the operation to the driver, dumps the game;
2. predicts (`jfsm_conformance.predictor`, pure): the oracle's model applies the operation, and a
   step that may compress gets its expected flow of compressions from the scripted replies;
3. verifies (`jfsm_conformance.verify`): the reply, the requests the fake received, the dumped
   store against the model, the change log, the footprint, canaries, the compression report
   and the telemetry, in that order (the blame order).

A check that fails raises `ConformanceFailure` naming requirement IDs; a driver that stops
answering raises `HarnessError`. The session itself holds nothing but the world, the
verifier and the recorded steps.
"""

from __future__ import annotations

import copy
from typing import Any

from jfsm_conformance import checks as C
from jfsm_conformance.blame import Ctx
from jfsm_conformance.canon import QUOTA, change_log, footprint
from jfsm_conformance.driver_client import Reply
from jfsm_conformance.oracle import GameModel
from jfsm_conformance.predictor import Flow
from jfsm_conformance.session_base import SessionBase
from jfsm_conformance.steps_durability import DurabilitySteps
from jfsm_conformance.steps_held import HeldSteps
from jfsm_conformance.steps_history import HistorySteps
from jfsm_conformance.steps_scenes import SceneSteps
from jfsm_conformance.world import SPEC_THRESHOLDS, Held

__all__ = ["SPEC_THRESHOLDS", "Held", "Session", "SessionBase"]


class Session(HeldSteps, SceneSteps, HistorySteps, DurabilitySteps):
    """Every public method is one recorded step (see the module docs). The steps are grouped
    by concept: games, rounds, generations, intervenes, game data and refusals here; held
    compressions, scenes, history and durability in the `steps_*` mixins."""

    # =====================================================================================
    # steps: games, rounds, generations
    # =====================================================================================
    def new_game(self, game: str) -> None:
        self.record("new_game", game=game)
        self.world.script([])
        self.check.ok(
            self.world.call("create_game", {"game": game}), "create_game", ("JF-HIST-009",)
        )
        self.world.add_game(game, GameModel(game), {})
        self._quiet("create_game")
        self._verify(game, Ctx("create_game", verifies=("JF-HIST-009",)))

    def set_participants(self, game: str, participants: list[dict[str, Any]]) -> None:
        self.record("set_participants", game=game, participants=participants)
        reply = self.world.call("set_participants", {"game": game, "participants": participants})
        self.check.ok(reply, "set_participants", ("JF-CALL-009",))
        self.world.games[game].participants = copy.deepcopy(participants)
        self.world.inherited.discard(game)
        self.world.participants_to_fake(game)

    def record_round(self, game: str, user: str, assistant: str) -> None:
        self.record("record_round", game=game, user=user, assistant=assistant)
        self.world.script([])
        reply = self.world.call("record_round", {"game": game, "input": user, "output": assistant})
        result = self.check.ok(reply, "record_round", ("JF-STORE-007",))
        want = self.world.games[game].record_round(user, assistant)
        self.check.result("record_round", result, want, ("JF-STORE-004",))
        self._quiet("record_round")
        ids: tuple[str, ...] = ("JF-STORE-003", "JF-STORE-004", "JF-STORE-007", "JF-TEXT-002")
        ids += ("JF-ATOM-001", "JF-STORE-001")
        if self.world.held is not None and self.world.held.game == game:
            ids += ("JF-CONC-002",)
        self._verify(game, Ctx("record_round", verifies=ids))

    def generate(
        self, game: str, scene: str | None = None, replies: list[dict[str, Any]] | None = None
    ) -> None:
        """A generation on the game (or a scene): forced compression owed first, then the check."""
        replies = replies or []
        self.record("generate", game=game, scene=scene, replies=replies)
        w = self.world
        model = w.games[game]
        w.script(replies)
        w.participants_to_fake(game)
        args: dict[str, Any] = {"game": game} if scene is None else {"game": game, "scene": scene}
        reply = w.call("generate", args)
        flow = self._flow(game, scene, forced_first=model.game.flag, check=True, op="generate")
        ctx = Ctx("generate", published=flow.published, failed=flow.failed)
        if flow.pending is not None:
            self.check.pending(reply, flow.pending)
            self._finish(flow, "generate")
            ctx.verifies = ("JF-INT-006", "JF-INT-008", "JF-COMP-009")
            ctx.verifies += ("JF-CAT-011",) if scene is not None else ()  # state unchanged
            self._verify(game, ctx)
            self._telemetry(game, flow.settled, "generate")
            return
        assert flow.report is not None
        result = self.check.ok(reply, "generate", ("JF-COMP-012", "JF-INT-007"))
        if scene is not None and scene in model.scenes:
            model.mark_running(scene)
        published = flow.report["outcome"] == "published"
        if not published:
            self.check.report("generate", result, flow.report)
        held = w.held
        if held is not None and held.game == game and held.flight.scene != scene and published:
            self.ledger.credit(C.CONCURRENCY, ("JF-CONC-004",))
        self._finish(flow, "generate")
        ctx.verifies = ("JF-COMP-012",) + (("JF-CAT-011",) if scene is not None else ())
        if flow.published:
            ctx.verifies += ("JF-COMP-004", "JF-COMP-005", "JF-INT-005", "JF-STORE-002")
        if flow.failed:
            ctx.verifies += ("JF-COMP-009",)
        self._verify(game, ctx)
        if published:
            # after the store comparison, so that a wrong publication (chunks kept or lost,
            # summary altered) is blamed on the store rule it breaks, not on lengthAfter
            self.check.report("generate", result, flow.report)
            self._published_call_id(result, game, scene)
        # telemetry last, so that a wrong publication is blamed on the store or report rule
        # it breaks rather than on the telemetry event's outcome
        self._telemetry(game, flow.settled, "generate")

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
        w = self.world
        model = w.games[game]
        w.script(replies)
        w.participants_to_fake(game)
        args = {"game": game, "input": user, "output": output, "revealed": revealed}
        reply = w.call("intervene", args)
        result = self.check.ok(reply, "intervene", ("JF-INT-001", "JF-INT-003"))
        busy = None in model.in_flight
        want = model.intervene(user, output[:revealed])
        self.check.result(
            "intervene",
            {"round": result.get("round"), "seq": result.get("seq")},
            want,
            ("JF-INT-003", "JF-STORE-004"),
        )
        # the stored exchange first: a wrong prefix is blamed on JF-INT-002/010, not on the
        # compression request that carries it
        dump = w.dump(game, remember=False)
        self.check.intervened(dump["store"], want["round"], want["seq"], output[:revealed])
        late: tuple[dict[str, Any], dict[str, Any]] | None = None
        if busy:
            flow = Flow(leftover=w.new_requests())
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                result.get("compression") is None,
                "intervene started a second compression of the game stack while one was in flight",
                ids=("JF-CONC-003",),
            )
        else:
            flow = self._flow(game, None, forced_first=True, check=False, op="intervene")
            comp = result.get("compression")
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                isinstance(comp, dict),
                "intervene reported no forced compression although none was in flight",
                ids=("JF-INT-004",),
            )
            assert flow.report is not None
            if flow.report["outcome"] == "published":
                late = (comp, flow.report)  # checked after the store comparison
            else:
                self.check.report("intervene", comp, flow.report)
        self._forced_flag(result, model)
        self._finish(flow, "intervene")
        verifies: tuple[str, ...] = ("JF-INT-002", "JF-INT-003", "JF-INT-004", "JF-INT-010")
        verifies += ("JF-INT-005",) if flow.published else ("JF-INT-006",)
        ctx = Ctx("intervene", published=flow.published, failed=flow.failed, verifies=verifies)
        self._verify(game, ctx, dump)
        if late is not None:
            self.check.report("intervene", *late)
        self._telemetry(game, flow.settled, "intervene")

    # =====================================================================================
    # steps: game data, checkpoint, refusals
    # =====================================================================================
    def write(
        self, game: str, sets: dict[str, Any], deletes: list[str] | None = None, cheat: bool = False
    ) -> None:
        deletes = deletes or []
        self.record("write", game=game, sets=sets, deletes=deletes, cheat=cheat)
        w = self.world
        op = "cheat" if cheat else "write"
        w.script([])
        model = w.games[game]
        actual = dict(w.dumps[game]["store"]) if game in w.dumps else {}
        for k in deletes:
            actual.pop(k, None)
        actual.update(sets)
        would_be = footprint(actual, change_log(w.bases[game], actual))
        before = w.dumps.get(game, {}).get("footprint")
        reply = w.call(op, {"game": game, "sets": sets, "deletes": deletes})
        if would_be > QUOTA:
            self._refused(game, op, reply, "quota_exceeded", ("JF-QUOTA-003", "JF-QUOTA-002"))
            self.check.quota_details(reply, before, would_be)
            return
        result = self.check.ok(reply, op, ("JF-STORE-009", "JF-QUOTA-001"))
        for k in deletes:
            model.data.pop(k, None)
        model.data.update(copy.deepcopy(sets))
        self.ledger.expect(
            C.FOOTPRINT,
            result.get("footprint") == would_be,
            f"{op} returned footprint {result.get('footprint')}, the suite counts {would_be}",
        )
        self._quiet(op)
        self._verify(game, Ctx(op, verifies=("JF-STORE-009", "JF-QUOTA-001", "JF-QUOTA-002")))

    def checkpoint(self, game: str) -> None:
        self.record("checkpoint", game=game)
        w = self.world
        self.check.ok(w.call("checkpoint", {"game": game}), "checkpoint", ("JF-QUOTA-008",))
        dump = w.dump(game)
        w.bases[game] = copy.deepcopy(dump["store"])
        self._verify(game, Ctx("checkpoint", verifies=("JF-QUOTA-008",)), dump)
        self.ledger.expect(
            C.CHANGE_LOG,
            dump["changeLog"] == [],
            "the change log is not empty right after a checkpoint",
            ids=("JF-QUOTA-008",),
        )

    def _refused(self, game: str, op: str, reply: Reply, code: str, ids: tuple[str, ...]) -> None:
        before = self.world.dumps.get(game, {}).get("footprint")
        self.check.refusal(op, reply, code, ids)
        if code == "quota_exceeded":
            self.check.quota_details(reply, before, None)
        self._quiet(op)
        self._verify(game, Ctx(op, refused=True, verifies=("JF-ERR-002", "JF-ATOM-001", *ids)))

    def invalid(self, game: str, op: str, args: dict[str, Any], code: str, ids: list[str]) -> None:
        """Send an operation that must be refused with `code`, writing nothing."""
        self.record("invalid", game=game, op=op, args=args, code=code, ids=ids)
        self.world.script([])
        reply = self.world.call(op, {"game": game, **args})
        self._refused(game, op, reply, code, tuple(ids))

    # =====================================================================================
    # steps: concurrency
    # =====================================================================================
    def concurrent_rounds(self, game: str, pairs: list[list[str]]) -> None:
        """Several record_round requests outstanding at once: a serial order must explain them."""
        self.record("concurrent_rounds", game=game, pairs=pairs)
        w = self.world
        w.script([])
        futures = [
            w.start("record_round", {"game": game, "input": u, "output": a}) for u, a in pairs
        ]
        results = [w.wait(f) for f in futures]
        model = w.games[game]
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
                f"concurrent rounds are not explained by a serial order: got {n}/{seq}, the "
                f"serial order gives {want}",
                ids=("JF-CONC-001",),
            )
        self._quiet("record_round")
        self._verify(game, Ctx("concurrent record_round", verifies=("JF-CONC-001",)))
