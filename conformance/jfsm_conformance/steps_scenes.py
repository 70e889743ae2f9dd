"""Session steps of catalyst scenes: start, exchange, publish, cancel."""

from __future__ import annotations

from typing import Any

from jfsm_conformance.blame import Ctx
from jfsm_conformance.session_base import SessionBase

__all__ = ["SceneSteps"]


class SceneSteps(SessionBase):
    """Steps on catalyst scenes."""

    def start_scene(self, game: str, scene: str) -> None:
        self.record("start_scene", game=game, scene=scene)
        w = self.world
        w.script([])
        reply = w.call("start_scene", {"game": game, "scene": scene})
        self.check.ok(reply, "start_scene", ("JF-CAT-001",))
        w.games[game].start_scene(scene)  # its epoch starts at the game stack's (R12)
        self._quiet("start_scene")
        verifies = ("JF-STORE-005", "JF-CAT-001", "JF-CAT-012")
        self._verify(game, Ctx("start_scene", verifies=verifies))

    def scene_exchange(self, game: str, scene: str, user: str, assistant: str) -> None:
        self.record("scene_exchange", game=game, scene=scene, user=user, assistant=assistant)
        self.world.script([])
        args = {"game": game, "scene": scene, "user": user, "assistant": assistant}
        result = self.check.ok(
            self.world.call("scene_exchange", args), "scene_exchange", ("JF-CAT-001",)
        )
        seq = self.world.games[game].scene_exchange(scene, user, assistant)
        self.check.result(
            "scene_exchange", {"seq": result.get("seq")}, {"seq": seq}, ("JF-STORE-004",)
        )
        self._quiet("scene_exchange")
        verifies = ("JF-CAT-002", "JF-STORE-005", "JF-CAT-008")
        self._verify(game, Ctx("scene_exchange", verifies=verifies))

    def publish_scene(self, game: str, scene: str, closing: str, meanwhile: str) -> None:
        self.record("publish_scene", game=game, scene=scene, closing=closing, meanwhile=meanwhile)
        args = {"scene": scene, "closingSummary": closing, "meanwhileEvent": meanwhile}
        self._end_scene(game, scene, "publish_scene", args, (closing, meanwhile))

    def cancel_scene(self, game: str, scene: str) -> None:
        self.record("cancel_scene", game=game, scene=scene)
        self._end_scene(game, scene, "cancel_scene", {"scene": scene}, (None, None))

    def _end_scene(
        self,
        game: str,
        scene: str,
        op: str,
        args: dict[str, Any],
        texts: tuple[str | None, str | None],
    ) -> None:
        w = self.world
        w.script([])
        model = w.games[game]
        terminal = "published" if op == "publish_scene" else "cancelled"
        again = model.scenes[scene].state == terminal
        reply = w.call(op, {"game": game, **args})
        result = self.check.ok(reply, op, ("JF-CAT-001",))
        # a repeat is judged on the store first: an outcome appended twice is JF-CAT-006
        # before it is a wrong reply
        ctx = Ctx(op, repeat=again)
        if again:
            ctx.verifies = ("JF-CAT-006",)
            self._verify(game, ctx)
        want = model.archives[scene] if again else model.end_scene(scene, *texts)
        first = "JF-CAT-005" if op == "publish_scene" else "JF-CAT-007"
        self.check.result(op, result, want, ("JF-CAT-006",) if again else (first,))
        self._quiet(op)
        if not again:
            ctx.verifies = (
                ("JF-CAT-003", "JF-CAT-004", "JF-CAT-005", "JF-STORE-006")
                if op == "publish_scene"
                else ("JF-CAT-007", "JF-STORE-006")
            )
            self._verify(game, ctx)
