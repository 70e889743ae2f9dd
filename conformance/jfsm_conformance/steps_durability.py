"""Session steps of durability: a clean restart, and kills while an operation or a
publication is in flight, after which the reopened state must be the one before or the one
after, never a mix (JF-ATOM-004, JF-ATOM-008).

A kill takes one of two forms, chosen by the transport (`Session.kill_mode`):

- **stdio**: the runner kills the driver's process group with SIGKILL, a given delay after
  the operation (or the publication) started, and starts the command again;
- **crash** (an in-process driver declaring `capabilities.crashInjection`): the suite arms
  the driver's `crash` op with a durable write boundary (`at`: 0 is the next write, flush
  or rename the driver makes), lets the operation run into it, then restarts the driver,
  which abandons everything it held in memory and reopens from its state directory. The
  boundary is chosen, not a delay, so the outcomes "before" and "after" both occur; a
  driver that answered the operation before the crash must reopen to "after".

Each kill's outcome is counted (`exercise` kind `kill`: `publication: before`, ...).
"""

from __future__ import annotations

import copy
import time
from typing import Any

from jfsm_conformance import checks as C
from jfsm_conformance import exercise
from jfsm_conformance.blame import Ctx
from jfsm_conformance.canon import jcs
from jfsm_conformance.driver_client import HarnessError
from jfsm_conformance.oracle import GameModel, diff_store, normalize
from jfsm_conformance.session_base import SessionBase

__all__ = ["DurabilitySteps"]

KILLED_OP_TIMEOUT = 30.0  # how long a crashed in-process operation may take to answer


class DurabilitySteps(SessionBase):
    """Restart and kill steps."""

    @property
    def kill_mode(self) -> str | None:
        """How this driver is killed: "stdio" (SIGKILL), "crash" (the in-process `crash`
        op), or None (it cannot be: the kill scenarios are skipped)."""
        if not self.capabilities.get("durableRestart"):
            return None
        if self.driver_spec.startswith("stdio:"):
            return "stdio"
        if self.capabilities.get("crashInjection") and self.client.can_restart:
            return "crash"
        return None

    def restart(self) -> None:
        """Kill and restart the driver; every game must reopen exactly as it was."""
        self.record("restart")
        w = self.world
        if w.held is not None:
            raise HarnessError("restart while a compression is held is not supported by the suite")
        before = {g: jcs(self._dump(g)) for g in w.games}
        w.restart_driver()
        for game, model in w.games.items():
            if model.participants:
                reply = w.call(
                    "set_participants", {"game": game, "participants": model.participants}
                )
                self.check.ok(reply, "set_participants", ("JF-CALL-009",))
            after = jcs(self._dump(game))
            self.ledger.expect(
                C.DURABILITY,
                after == before[game],
                f"after restart, game {game} differs from its state before",
                ids=("JF-ATOM-004",),
            )
            if game not in w.broken:
                self._verify(game, Ctx("restart", verifies=("JF-ATOM-004",)))
        w.resync_telemetry()

    def kill_during_round(self, game: str, user: str, assistant: str, at: int = 0) -> None:
        """Kill the driver while it records a round (stdio: right after sending it; crash:
        at its `at`-th write boundary); it must reopen to before or after."""
        self.record("kill_during_round", game=game, user=user, assistant=assistant, at=at)
        w = self.world
        model = w.games[game]
        after = copy.deepcopy(model)
        after.record_round(user, assistant)
        args = {"game": game, "input": user, "output": assistant}
        acked = False
        if self.kill_mode == "crash":
            self._arm(at)
            acked = self._answered(w.start("record_round", args))
        else:
            w.start("record_round", args)
            time.sleep(0.01)
        w.restart_driver()
        ids = ("JF-ATOM-004", "JF-ATOM-001")
        if self._reopened(game, model, after, "round", ids, acked, at) == "after":
            w.games[game] = model = after
        self._resume(game, model, ("JF-ATOM-004",))

    def kill_during_publication(
        self, game: str, reply: dict[str, Any], delay_ms: float, at: int = 0
    ) -> None:
        """A compression of the game stack is answered `reply` (a success), and the driver
        is killed while it publishes (stdio: `delay_ms` after the answer left the fake;
        crash: at the publication's `at`-th write boundary): it must reopen to the state
        before the publication or after it, never a mix (a summary beside its represented
        chunks, or neither of them)."""
        self.record("kill_during_publication", game=game, reply=reply, delay_ms=delay_ms, at=at)
        w = self.world
        if w.held is not None or not self.can_hold(game, None):
            raise HarnessError("kill_during_publication needs an idle, due, unasked stack")
        model = w.games[game]
        w.script([{"reply": "hold", "then": reply}])
        w.participants_to_fake(game)
        key = w.service.key(game, None, model)
        flight = model.flight_for(None, key)
        future = w.start("generate", {"game": game})
        self._held_or_fail("generate", future, ("JF-COMP-001",))
        after = copy.deepcopy(model)
        after.publish_summary(flight, reply["summary"], reply["callId"])
        acked = False
        if self.kill_mode == "crash":
            self._arm(at)  # the engine waits on the fake: its next writes publish
            w.fake.release()
            acked = self._answered(future)
        else:
            w.fake.release()
            time.sleep(delay_ms / 1000)
        w.restart_driver()
        w.service.completed[key] = reply  # the fake replays it to the same key
        w.script([])
        w.cursor = len(w.fake.requests)
        ids = ("JF-ATOM-008", "JF-ATOM-004", "JF-ATOM-003", "JF-CAT-004")
        how = f"{delay_ms:g} ms into it" if self.kill_mode == "stdio" else None
        if self._reopened(game, model, after, "publication", ids, acked, at, how) == "after":
            w.games[game] = model = after
        self._resume(game, model, ("JF-ATOM-008", "JF-ATOM-004", "JF-ATOM-003"))

    # -- the parts of a kill -------------------------------------------------------------
    def _arm(self, at: int) -> None:
        reply = self.world.client.call("crash", {"at": at})
        if not reply.ok:
            raise HarnessError(f"the driver declares crashInjection but refused crash: {reply}")

    def _answered(self, future: Any) -> bool:
        """Wait for the reply of the operation the crash hit (its content is not judged: a
        killed operation has no reply); True if it succeeded, i.e. before the crash."""
        client = self.world.client
        if not client.done(future, KILLED_OP_TIMEOUT):
            raise HarnessError(
                f"{future.op} did not answer within {KILLED_OP_TIMEOUT:.0f} s of the crash"
            )
        return client.wait(future).ok

    def _reopened(
        self,
        game: str,
        before: GameModel,
        after: GameModel,
        what: str,
        ids: tuple[str, ...],
        acked: bool,
        at: int,
        how: str | None = None,
    ) -> str:
        """Judge the reopened store: "before" or "after" (counted), or a failure. `how`
        says when the kill came (default: right after the operation was sent, over stdio)."""
        store = normalize(self._dump(game)["store"])
        before_ok = not diff_store(before.store(), store)
        after_ok = not diff_store(after.store(), store)
        outcome = "before" if before_ok else "after" if after_ok else "neither"
        exercise.record("kill", f"{what}: {outcome}")
        if self.kill_mode == "crash":
            how = f"a crash injected at its write boundary {at}"
        self.ledger.expect(
            C.DURABILITY,
            before_ok or after_ok,
            f"after a kill during the {what} ({how or 'SIGKILL'}), the store is neither the "
            f"state before the {what} nor the state after it",
            ids=ids,
        )
        self.ledger.expect(
            C.DURABILITY,
            after_ok or not acked,
            f"the driver answered the {what}'s operation before the crash, yet it reopened "
            "to the state before it",
            ids=("JF-ATOM-004",),
        )
        return outcome

    def _resume(self, game: str, model: GameModel, verifies: tuple[str, ...]) -> None:
        w = self.world
        if model.participants:
            w.call("set_participants", {"game": game, "participants": model.participants})
        w.resync_telemetry()
        self._verify(game, Ctx("restart", verifies=verifies))
