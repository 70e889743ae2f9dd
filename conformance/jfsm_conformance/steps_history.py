"""Session steps of history: reset, edit, convert (each a rebuild), duplicate, and the
comparison of two rebuilt game stacks."""

from __future__ import annotations

import copy
from typing import Any

from jfsm_conformance import checks as C
from jfsm_conformance.blame import Ctx
from jfsm_conformance.canon import jcs
from jfsm_conformance.session_base import SessionBase

__all__ = ["HistorySteps"]


class HistorySteps(SessionBase):
    """Steps that rebuild or copy a game's history."""

    def _rebuilt(
        self, game: str, op: str, args: dict[str, Any], apply: Any, ids: tuple[str, ...]
    ) -> None:
        w = self.world
        w.script([])
        reply = w.call(op, args)
        self._quiet(op)  # a history op that compresses breaks JF-HIST-007 first
        result = self.check.ok(reply, op, ids)
        model = w.games[game]
        apply(model)
        want = {"rounds": len(model.rounds), "chunks": len(model.game.chunks)}
        self.check.result(op, {k: result.get(k) for k in want}, want, ("JF-HIST-004",))
        running = any(sc.state in ("created", "running") for sc in model.scenes.values())
        verifies = (*ids, "JF-HIST-004", "JF-HIST-005", "JF-HIST-007")
        verifies += ("JF-HIST-011",) if running else ()
        self._verify(game, Ctx(op, verifies=verifies))
        self.check.rebuilt_stack(op, w.dumps[game]["store"], model)

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
        w = self.world
        w.script([])
        reply = w.call("duplicate", {"game": game, "into": into})
        self.check.ok(reply, "duplicate", ("JF-HIST-008",))
        self._quiet("duplicate")
        source = w.dump(game)["store"]
        w.add_game(into, w.games[game].clone(into), copy.deepcopy(source))
        w.inherited.add(into)  # the copy compresses for the source's participants
        self._verify(into, Ctx("duplicate", verifies=("JF-HIST-008",)))
        copied = w.dumps[into]
        self.ledger.expect(
            C.STORE_MODEL,
            jcs(copied["store"]) == jcs(source),
            "the duplicate's store differs from the source's (every jf key and the game data "
            "are copied as they are)",
            ids=("JF-HIST-008",),
        )
        self.ledger.expect(
            C.CHANGE_LOG,
            copied["changeLog"] == [],
            "the duplicate's change log is not empty",
            ids=("JF-HIST-008",),
        )

    def compare_game_stacks(self, a: str, b: str) -> None:
        """Two games rebuilt from the same rounds, archives and epoch: identical game stacks."""
        self.record("compare_game_stacks", a=a, b=b)
        sa = {k: v for k, v in self._dump(a)["store"].items() if k.startswith("jfGameStack.")}
        sb = {k: v for k, v in self._dump(b)["store"].items() if k.startswith("jfGameStack.")}
        self.ledger.expect(
            C.DETERMINISM,
            jcs(sa) == jcs(sb),
            f"games {a} and {b} were rebuilt from the same inputs but their game stacks "
            "differ in JCS",
            ids=("JF-HIST-006",),
        )
