"""Session steps around a compression the fake holds in flight: start it (a generation or
an intervene), release it and check how it settles, and a generation refused meanwhile."""

from __future__ import annotations

from typing import Any

from jfsm_conformance import checks as C
from jfsm_conformance.blame import Ctx
from jfsm_conformance.driver_client import HarnessError
from jfsm_conformance.predictor import Compression, Flow
from jfsm_conformance.session_base import SessionBase
from jfsm_conformance.world import Held

__all__ = ["HeldSteps"]


class HeldSteps(SessionBase):
    """Steps with a compression held in flight by the fake."""

    def hold_generate(self, game: str, scene: str | None, reply: dict[str, Any]) -> None:
        """Start a generation whose compression the fake holds in flight."""
        self.record("hold_generate", game=game, scene=scene, reply=reply)
        if self.world.games[game].game.flag:
            raise HarnessError("hold_generate needs a game without an owed forced compression")
        if not self.can_hold(game, scene):
            raise HarnessError("this logical compression was completed before: it is replayed")
        args = {"game": game} if scene is None else {"game": game, "scene": scene}
        self._start_held(game, "generate", args, scene, reply, forced=False)

    def hold_intervene(
        self, game: str, user: str, output: str, revealed: int, reply: dict[str, Any]
    ) -> None:
        """An intervene whose forced compression the fake holds in flight."""
        self.record(
            "hold_intervene", game=game, user=user, output=output, revealed=revealed, reply=reply
        )
        args = {"game": game, "input": user, "output": output, "revealed": revealed}
        self._start_held(
            game, "intervene", args, None, reply, forced=True, intervene=(user, output[:revealed])
        )

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
        w = self.world
        if w.held is not None:
            raise HarnessError("only one held compression at a time")
        model = w.games[game]
        w.script([{"reply": "hold", "then": reply}])
        w.participants_to_fake(game)
        future = w.start(op, args)
        if intervene is not None:
            model.intervene(*intervene)
        if scene is not None:
            model.mark_running(scene)
        self._held_or_fail(op, future, ("JF-INT-004",) if forced else ("JF-COMP-001",))
        predictor = self._arrived(game)
        comp = Compression(game, model.flight_for(scene, w.service.key(game, scene, model), forced))
        done = predictor.run(comp)
        self.check.compression(comp, model.participants, game in w.inherited)
        if done:
            raise HarnessError(f"{op}: the held compression completed before its release")
        model.in_flight[scene] = comp.flight
        w.held = Held(game, op, future, comp, forced)
        verifies: tuple[str, ...] = ("JF-ATOM-001",)
        verifies += ("JF-INT-003",) if intervene else ()
        verifies += ("JF-CAT-011",) if scene is not None else ()  # running before the check
        self._verify(game, Ctx(f"{op} (held)", verifies=verifies))

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
        w = self.world
        held = w.held
        assert held is not None
        game, model = held.game, w.games[held.game]
        w.script(retries + then)
        w.participants_to_fake(game)
        w.fake.release()
        reply = w.wait(held.future)
        w.held = None
        model.in_flight.pop(held.flight.scene, None)
        predictor = self._arrived(game)
        comp = predictor.resume(held.comp)
        self.check.compression(comp, model.participants, game in w.inherited)
        settled, published = [comp], [comp.flight] if comp.outcome == "published" else []
        want = predictor.report(comp)
        # a publication's report is checked after the store comparison (as in generate)
        late: list[tuple[str, dict[str, Any]]] = []

        def report(op: str, got: dict[str, Any]) -> None:
            if want["outcome"] == "published":
                late.append((op, got))
            else:
                self.check.report(op, got, want)

        if held.op == "intervene":
            result = self.check.ok(reply, "intervene", ("JF-INT-003",))
            if result.get("compression") is not None:
                report("intervene", result["compression"])
            self._forced_flag(result, model)
        elif not model.game.flag:
            report("generate", self.check.ok(reply, "generate", ("JF-COMP-012",)))
        else:
            # an intervene landed while the check was in flight: the same generation must
            # settle the owed forced compression before it may start
            forced = predictor.compression(None, forced=True)
            self.check.compression(forced, model.participants, game in w.inherited)
            settled.append(forced)
            if forced.outcome == "published":
                published.append(forced.flight)
            if model.game.flag:
                self.check.pending(reply, str(forced.outcome))
            else:
                report("generate", self.check.ok(reply, "generate", ("JF-INT-007",)))
        self._finish(Flow(leftover=predictor.requests), "release")
        verifies: tuple[str, ...] = (
            ("JF-COMP-003", "JF-CONC-002") if comp.outcome == "published" else ("JF-COMP-009",)
        )
        if comp.outcome == "stale":
            alive = held.flight.scene is None or model.stack(held.flight.scene)
            verifies += ("JF-COMP-011",) if alive else ("JF-CAT-009",)
        failed = [] if comp.outcome == "published" else [str(comp.outcome)]
        self._verify(game, Ctx("release", published=published, failed=failed, verifies=verifies))
        for op, got in late:
            self.check.report(op, got, want)
        self._telemetry(game, settled, "release")

    def expect_pending_generation(self, game: str, scene: str | None = None) -> None:
        """A generation while the forced compression is in flight: compression_pending."""
        self.record("expect_pending_generation", game=game, scene=scene)
        self.world.script([])
        args = {"game": game} if scene is None else {"game": game, "scene": scene}
        reply = self.world.call("generate", args)
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok
            and reply.code == "compression_pending"
            and (reply["error"].get("details") or {}).get("cause") == "in_flight",
            lambda: (
                "generate while the forced compression is in flight answered "
                f"{reply.get('result') or reply.get('error')}; expected compression_pending "
                "(cause in_flight)"
            ),
            ids=("JF-INT-008", "JF-CONC-003"),
        )
        self._quiet("generate")
        verifies = ("JF-INT-008", "JF-CONC-003")
        self._verify(game, Ctx("generate", refused=True, verifies=verifies))
