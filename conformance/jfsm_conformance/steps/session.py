"""A conformance session: one class, `Session`, whose public methods are the suite's steps.

**The one concept: a step.** A step is the unit the suite records, replays and blames. Every
step is a method of `Session` named in `STEPS`, the step vocabulary, declared once below: the
scenarios (`jfsm_conformance.scenarios`) and the Hypothesis machines
(`jfsm_conformance.machines.memory`) choose steps, the runner writes a failing sequence of steps as
a trace (`{"step": name, "args": {...}}`, JSON), and `replay` accepts a trace only if every
step it names is in `STEPS`. This module is long because the vocabulary is one concept: a
reader finds every step here, in one class, grouped by section (games and generations, held
compressions, scenes, history, game data, concurrency, durability), followed by the parts
the steps share. There is no base class and no mixin: the session *holds* its parts.

Each step is one sequence of act, predict, verify:

1. it is recorded (`record`: name and arguments, deep-copied);
2. it acts on the world (`jfsm_conformance.steps.world.World`): scripts the fake compress.v2 with
   reply descriptors, sends the operation to the driver, dumps the game;
3. it predicts (`jfsm_conformance.model.predictor`, pure): the oracle's model applies the
   operation, and a step that may compress gets its expected `Flow` of compressions from the
   scripted replies and the requests that arrived;
4. it verifies (`jfsm_conformance.verify.Verifier`, `self.check`, one part per kind of
   observation): the reply (`check.replies`), the requests the fake received
   (`check.requests`), the dumped store against the model, the change log, the footprint and
   canaries (`check.store`), the compression report (`check.replies`) and the telemetry
   (`check.telemetry`), in that order, which is the blame order: a fault is reported first
   under the requirement it violates.

A check that fails raises `ConformanceFailure` naming requirement IDs; a driver that stops
answering raises `HarnessError`. The session holds the world (`self.world`: driver client,
fake, expected models), the verifier (`self.check`), the run's ledger and the steps of the
sequence being run (`self.steps`); callers read the world's state from `session.world`
directly.

A *sequence* (a scenario, a machine example, a smoke chain) starts with `begin_sequence()`,
which forgets the previous sequence's games, requests and protocol messages, so that what
the suite holds is bounded by one sequence, not by the run.

Kills (the durability steps) take one of two forms, chosen by the transport (`kill_mode`):

- **stdio**: the runner kills the driver's process group with SIGKILL, a given delay after
  the operation (or the publication) started, and starts the command again;
- **crash** (an in-process driver declaring `capabilities.crashInjection`): the suite arms
  the driver's `crash` op with a durable write boundary (`at`: 0 is the next write, flush
  or rename the driver makes), lets the operation run into it, then restarts the driver,
  which abandons everything it held in memory and reopens from its state directory. The
  boundary is chosen, not a delay, so the outcomes "before" and "after" both occur; a
  driver that answered the operation before the crash must reopen to "after".

After a kill the reopened state must be the one before or the one after, never a mix
(JF-ATOM-004, JF-ATOM-008); each kill's outcome is counted (`exercise` kind `kill`:
`publication: before`, ...).
"""

from __future__ import annotations

import copy
import time
from typing import Any

from jfsm_conformance.client.driver import DEFAULT_TIMEOUT, HELLO_TIMEOUT, HarnessError
from jfsm_conformance.client.protocol import Reply
from jfsm_conformance.model.canon import QUOTA, change_log, footprint, jcs
from jfsm_conformance.model.encoded import BaseCache
from jfsm_conformance.model.oracle import GameModel, diff_store, normalize
from jfsm_conformance.model.predictor import Compression, Flow, Predictor, publication_fits
from jfsm_conformance.probes import http as hostile_http
from jfsm_conformance.probes import protocol as hostile
from jfsm_conformance.probes import state as hostile_state
from jfsm_conformance.probes import waits
from jfsm_conformance.record import exercise
from jfsm_conformance.steps.world import Held, World
from jfsm_conformance.verify import checks as C
from jfsm_conformance.verify.blame import Ctx
from jfsm_conformance.verify.checks import ConformanceFailure, Ledger
from jfsm_conformance.verify.verifier import Verifier

__all__ = ["KILLED_OP_TIMEOUT", "STEPS", "Session"]

# The step vocabulary: every public method of `Session` that is a step, and every name a
# trace may hold. `record` refuses a name outside it; `replay` refuses a trace naming one.
STEPS: frozenset[str] = frozenset(
    {
        # games, rounds, generations, intervenes
        "new_game",
        "set_participants",
        "record_round",
        "generate",
        "intervene",
        # a compression held in flight by the fake
        "hold_generate",
        "hold_intervene",
        "release",
        "expect_pending_generation",
        # catalyst scenes
        "start_scene",
        "scene_exchange",
        "publish_scene",
        "cancel_scene",
        # history
        "reset",
        "edit_round",
        "convert",
        "duplicate",
        "compare_game_stacks",
        # game data, checkpoint, refusals
        "write",
        "checkpoint",
        "invalid",
        # hostile input and bounded waits on compress.v2
        "hostile",
        "bounded_wait",
        # concurrency
        "concurrent_rounds",
        # durability
        "restart",
        "kill_during_round",
        "kill_during_publication",
    }
)

KILLED_OP_TIMEOUT = 30.0  # how long a crashed in-process operation may take to answer
# the checks of a bounded-wait case that judge how its hostile attempt was handled (a retry,
# the outcome, the telemetry of the attempt, the requests that followed it, the deadline): a
# failure of one names the case's requirement first. What the engine sent (the request
# contract, canaries) and the store's own rules keep their IDs alone (R148).
WAIT_CHECKS = frozenset(
    check.name for check in (C.RETRIES, C.OUTCOME, C.TELEMETRY, C.CALL_ID, C.COMPRESSION_TRIGGER)
)


class Session:
    """The suite's steps over one driver: every method named in `STEPS` is one recorded step
    (see the module docs); the other public methods manage the session itself."""

    # =====================================================================================
    # the session: its world, its checks, the sequence being recorded
    # =====================================================================================

    def __init__(
        self,
        driver: str,
        ledger: Ledger | None = None,
        *,
        thresholds: dict[str, int] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        hello_timeout: float = HELLO_TIMEOUT,
    ) -> None:
        """Start the fake and the driver (`HarnessError` if the driver cannot be started or
        does not complete hello within `hello_timeout` seconds; `timeout`: for every other
        reply). `thresholds=None` runs at the spec thresholds."""
        self.ledger = ledger or Ledger()
        self.world = World(
            driver, thresholds=thresholds, timeout=timeout, hello_timeout=hello_timeout
        )
        self.check = Verifier(self.ledger, self.world.client.protocol.error_codes)
        self.world.on_blocked = self.check.replies.blocked
        self._steps: list[dict[str, Any]] = []
        self.trace_start = 0  # where the sequence's protocol messages start (for its trace)

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The steps of the sequence being run (for its trace). Read-only: a new sequence
        begins with `begin_sequence()`."""
        return self._steps

    def begin_sequence(self) -> None:
        """A new sequence of steps begins (a scenario, a machine example, a smoke chain):
        forget the previous sequences' steps, games, requests and protocol messages
        (`World.begin_sequence`), so that the suite's memory is bounded by one sequence, not
        by the run."""
        self._steps = []
        self.world.begin_sequence()
        self.check.store.bases = BaseCache()
        self.trace_start = 0

    def record(self, step: str, **args: Any) -> None:
        """Record one step of the sequence (its arguments deep-copied); a name outside
        `STEPS` is a bug of the suite (`ValueError`)."""
        if step not in STEPS:
            raise ValueError(f"{step!r} is not a step of the suite (STEPS)")
        exercise.record("step", step)
        self._steps.append({"step": step, "args": copy.deepcopy(args)})

    def close(self) -> None:
        """Release anything held, shut the driver down, stop the fake."""
        self.world.close()

    def recover(self) -> None:
        """After a failed step: the games of the failed sequence are marked broken, anything
        held is released, the script dropped, unread requests skipped."""
        self.world.recover(st["args"]["game"] for st in self._steps if "game" in st["args"])

    def can_hold(self, game: str, scene: str | None) -> bool:
        """Whether a compression of this stack would reach the fake's script now: not if the
        service already completed this logical compression (it would replay its reply)."""
        model = self.world.games[game]
        stack = model.stack(scene)
        if stack is None or not stack.chunks:
            return False
        return self.world.service.key(game, scene, model) not in self.world.service.completed

    @property
    def kill_mode(self) -> str | None:
        """How this driver is killed: "stdio" (SIGKILL), "crash" (the in-process `crash`
        op), or None (it cannot be: the kill scenarios are skipped)."""
        if not self.world.capabilities.get("durableRestart"):
            return None
        if self.world.driver_spec.startswith("stdio:"):
            return "stdio"
        if self.world.capabilities.get("crashInjection") and self.world.client.can_restart:
            return "crash"
        return None

    # =====================================================================================
    # steps: games, rounds, generations, intervenes
    # =====================================================================================

    def new_game(self, game: str) -> None:
        self.record("new_game", game=game)
        self.world.script([])
        self.check.replies.ok(
            self.world.call("create_game", {"game": game}), "create_game", ("JF-HIST-009",)
        )
        self.world.add_game(game, GameModel(game), {})
        self._quiet("create_game")
        self._verify(game, Ctx("create_game", verifies=("JF-HIST-009",)))

    def set_participants(self, game: str, participants: list[dict[str, Any]]) -> None:
        self.record("set_participants", game=game, participants=participants)
        reply = self.world.call("set_participants", {"game": game, "participants": participants})
        self.check.replies.ok(reply, "set_participants", ("JF-CALL-009",))
        self.world.games[game].participants = copy.deepcopy(participants)
        self.world.inherited.discard(game)
        self.world.participants_to_fake(game)

    def record_round(self, game: str, user: str, assistant: str) -> None:
        self.record("record_round", game=game, user=user, assistant=assistant)
        self.world.script([])
        reply = self.world.call("record_round", {"game": game, "input": user, "output": assistant})
        result = self.check.replies.ok(reply, "record_round", ("JF-STORE-007",))
        want = self.world.games[game].record_round(user, assistant)
        self.check.replies.result("record_round", result, want, ("JF-STORE-004",))
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
            self.check.replies.pending(reply, flow.pending)
            self._finish(flow, "generate")
            ctx.verifies = ("JF-INT-006", "JF-INT-008", "JF-COMP-009")
            ctx.verifies += ("JF-CAT-011",) if scene is not None else ()  # state unchanged
            self._verify(game, ctx)
            self._telemetry(game, flow.settled, "generate")
            return
        assert flow.report is not None
        result = self.check.replies.ok(reply, "generate", ("JF-COMP-012", "JF-INT-007"))
        if scene is not None and scene in model.scenes:
            model.mark_running(scene)
        published = flow.report["outcome"] == "published"
        if not published:
            self.check.replies.report("generate", result, flow.report)
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
            self.check.replies.report("generate", result, flow.report)
            self._published_call_id(result, game, scene)
        self.check.replies.forced(result, flow.forced)
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
        result = self.check.replies.ok(reply, "intervene", ("JF-INT-001", "JF-INT-003"))
        busy = None in model.in_flight
        want = model.intervene(user, output[:revealed])
        self.check.replies.result(
            "intervene",
            {"round": result.get("round"), "seq": result.get("seq")},
            want,
            ("JF-INT-003", "JF-STORE-004"),
        )
        # the stored exchange first: a wrong prefix is blamed on JF-INT-002/010, not on the
        # compression request that carries it
        dump = w.dump(game, remember=False)
        self.check.store.intervened(dump["store"], want["round"], want["seq"], output[:revealed])
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
                self.check.replies.report("intervene", comp, flow.report)
        self._forced_flag(result, model)
        self._finish(flow, "intervene")
        verifies: tuple[str, ...] = ("JF-INT-002", "JF-INT-003", "JF-INT-004", "JF-INT-010")
        verifies += ("JF-INT-005",) if flow.published else ("JF-INT-006",)
        ctx = Ctx("intervene", published=flow.published, failed=flow.failed, verifies=verifies)
        self._verify(game, ctx, dump)
        if late is not None:
            self.check.replies.report("intervene", *late)
        self._telemetry(game, flow.settled, "intervene")

    # =====================================================================================
    # steps: a compression held in flight by the fake
    # =====================================================================================

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
        self.check.requests.compression(comp, model.participants, game in w.inherited)
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
        self.check.requests.compression(comp, model.participants, game in w.inherited)
        settled, published = [comp], [comp.flight] if comp.outcome == "published" else []
        want = predictor.report(comp)
        # a publication's report is checked after the store comparison (as in generate)
        late: list[tuple[str, dict[str, Any]]] = []

        def report(op: str, got: dict[str, Any]) -> None:
            if want["outcome"] == "published":
                late.append((op, got))
            else:
                self.check.replies.report(op, got, want)

        if held.op == "intervene":
            result = self.check.replies.ok(reply, "intervene", ("JF-INT-003",))
            if result.get("compression") is not None:
                report("intervene", result["compression"])
            self._forced_flag(result, model)
        elif not model.game.flag:
            result = self.check.replies.ok(reply, "generate", ("JF-COMP-012",))
            report("generate", result)
            self.check.replies.forced(result, None)
        else:
            # an intervene landed while the check was in flight: the same generation must
            # settle the owed forced compression before it may start
            forced = predictor.compression(None, forced=True)
            self.check.requests.compression(forced, model.participants, game in w.inherited)
            settled.append(forced)
            if forced.outcome == "published":
                published.append(forced.flight)
            if model.game.flag:
                self.check.replies.pending(reply, str(forced.outcome))
            else:
                want_forced = predictor.report(forced)
                result = self.check.replies.ok(reply, "generate", ("JF-INT-007",))
                report("generate", result)
                self.check.replies.forced(result, want_forced)
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
            self.check.replies.report(op, got, want)
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

    # =====================================================================================
    # steps: catalyst scenes
    # =====================================================================================

    def start_scene(self, game: str, scene: str) -> None:
        self.record("start_scene", game=game, scene=scene)
        w = self.world
        w.script([])
        reply = w.call("start_scene", {"game": game, "scene": scene})
        self.check.replies.ok(reply, "start_scene", ("JF-CAT-001",))
        w.games[game].start_scene(scene)  # its epoch starts at the game stack's (R12)
        self._quiet("start_scene")
        verifies = ("JF-STORE-005", "JF-CAT-001", "JF-CAT-012")
        self._verify(game, Ctx("start_scene", verifies=verifies))

    def scene_exchange(self, game: str, scene: str, user: str, assistant: str) -> None:
        self.record("scene_exchange", game=game, scene=scene, user=user, assistant=assistant)
        self.world.script([])
        args = {"game": game, "scene": scene, "user": user, "assistant": assistant}
        result = self.check.replies.ok(
            self.world.call("scene_exchange", args), "scene_exchange", ("JF-CAT-001",)
        )
        seq = self.world.games[game].scene_exchange(scene, user, assistant)
        self.check.replies.result(
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
        result = self.check.replies.ok(reply, op, ("JF-CAT-001",))
        # a repeat is judged on the store first: an outcome appended twice is JF-CAT-006
        # before it is a wrong reply
        ctx = Ctx(op, repeat=again)
        if again:
            ctx.verifies = ("JF-CAT-006",)
            self._verify(game, ctx)
        want = model.archives[scene] if again else model.end_scene(scene, *texts)
        first = "JF-CAT-005" if op == "publish_scene" else "JF-CAT-007"
        self.check.replies.result(op, result, want, ("JF-CAT-006",) if again else (first,))
        self._quiet(op)
        if not again:
            ctx.verifies = (
                ("JF-CAT-003", "JF-CAT-004", "JF-CAT-005", "JF-STORE-006")
                if op == "publish_scene"
                else ("JF-CAT-007", "JF-STORE-006")
            )
            self._verify(game, ctx)

    # =====================================================================================
    # steps: history (reset, edit, convert, duplicate)
    # =====================================================================================

    def _rebuilt(
        self, game: str, op: str, args: dict[str, Any], apply: Any, ids: tuple[str, ...]
    ) -> None:
        w = self.world
        w.script([])
        reply = w.call(op, args)
        self._quiet(op)  # a history op that compresses breaks JF-HIST-007 first
        result = self.check.replies.ok(reply, op, ids)
        model = w.games[game]
        apply(model)
        want = {"rounds": len(model.rounds), "chunks": len(model.game.chunks)}
        self.check.replies.result(op, {k: result.get(k) for k in want}, want, ("JF-HIST-004",))
        running = any(sc.state in ("created", "running") for sc in model.scenes.values())
        verifies = (*ids, "JF-HIST-004", "JF-HIST-005", "JF-HIST-007")
        verifies += ("JF-HIST-011",) if running else ()
        self._verify(game, Ctx(op, verifies=verifies))
        self.check.store.rebuilt_stack(op, w.dumps[game]["store"], model)

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
        self.check.replies.ok(reply, "duplicate", ("JF-HIST-008",))
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
        sa = {k: v for k, v in self.world.dump(a)["store"].items() if k.startswith("jfGameStack.")}
        sb = {k: v for k, v in self.world.dump(b)["store"].items() if k.startswith("jfGameStack.")}
        self.ledger.expect(
            C.DETERMINISM,
            jcs(sa) == jcs(sb),
            f"games {a} and {b} were rebuilt from the same inputs but their game stacks "
            "differ in JCS",
            ids=("JF-HIST-006",),
        )

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
            self.check.replies.quota_details(reply, before, would_be)
            return
        result = self.check.replies.ok(reply, op, ("JF-STORE-009", "JF-QUOTA-001"))
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
        self.check.replies.ok(w.call("checkpoint", {"game": game}), "checkpoint", ("JF-QUOTA-008",))
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
        self.check.replies.refusal(op, reply, code, ids)
        if code == "quota_exceeded":
            self.check.replies.quota_details(reply, before, None)
        self._quiet(op)
        self._verify(game, Ctx(op, refused=True, verifies=("JF-ERR-002", "JF-ATOM-001", *ids)))

    def invalid(self, game: str, op: str, args: dict[str, Any], code: str, ids: list[str]) -> None:
        """Send an operation that must be refused with `code`, writing nothing."""
        self.record("invalid", game=game, op=op, args=args, code=code, ids=ids)
        self.world.script([])
        reply = self.world.call(op, {"game": game, **args})
        self._refused(game, op, reply, code, tuple(ids))

    def hostile(self, game: str, scene: str, probe: dict[str, Any]) -> bool:
        """Send one hostile probe (`jfsm_conformance.probes.protocol`): one reply with the spec's
        code, the game's dump unchanged, the driver still answering. False when the transport
        cannot carry it (not covered)."""
        self.record("hostile", game=game, scene=scene, probe=probe)
        self.world.script([])
        if probe.get("needs") and not self.world.capabilities.get(probe["needs"]):
            return False  # the op it probes is an optional capability the driver lacks
        if probe["kind"] == "http":  # raw HTTP requests, not protocol messages
            return hostile_http.run_http_probe(self.world, self.ledger, game, probe)
        if probe["kind"] == "state":  # the driver's command on directories of the suite's
            return hostile_state.run_state_probe(self.world, self.ledger, probe)
        return hostile.run_probe(self.world, self.ledger, game, scene, probe)

    def bounded_wait(self, game: str, case: dict[str, Any], then: dict[str, Any]) -> None:
        """A generation whose first attempt meets a hostile compress.v2 (`jfsm_conformance.
        waits`), under the short attempt deadline asked in hello: a transport failure within
        the deadline, then `then` published, nothing lost."""
        self.record("bounded_wait", game=game, case=case, then=then)
        limit = waits.TEST_DEADLINE * case["waits"] + waits.SLACK
        waits.hello(self.world, self.ledger, waits.TEST_DEADLINE)
        steps = len(self._steps)
        began = time.monotonic()
        try:
            self.generate(game, replies=[case["reply"], then])
        except ConformanceFailure as exc:
            ids = exc.ids
            if exc.check in WAIT_CHECKS:  # how the hostile attempt was handled: the case's
                ids = (case["id"], *[i for i in exc.ids if i != case["id"]])
            raise ConformanceFailure(
                exc.check, ids, f"{case['what']}: {exc.message}", exc.evidence
            ) from exc
        finally:
            del self._steps[steps:]  # the case is one recorded step, not two
            took = time.monotonic() - began
            waits.hello(self.world, self.ledger, None)
        self.ledger.expect(
            C.BOUNDED_WAITS,
            took <= limit,
            f"{case['what']}: the generation answered after {took:.1f} s, past the attempt "
            f"deadline of {waits.TEST_DEADLINE} s asked in hello (plus {waits.SLACK} s)",
            ids=(case["id"],),
        )

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

    # =====================================================================================
    # steps: durability (restart, kills)
    # =====================================================================================

    def restart(self) -> None:
        """Kill and restart the driver; every game must reopen exactly as it was."""
        self.record("restart")
        w = self.world
        if w.held is not None:
            raise HarnessError("restart while a compression is held is not supported by the suite")
        before = {g: jcs(self.world.dump(g)) for g in w.games}
        self._restart()
        for game, model in w.games.items():
            if model.participants:
                reply = w.call(
                    "set_participants", {"game": game, "participants": model.participants}
                )
                self._served(game, "set_participants", reply)
            after = jcs(self._reopened_dump(game))
            self.ledger.expect(
                C.DURABILITY,
                after == before[game],
                f"after restart, game {game} differs from its state before",
                ids=("JF-ATOM-004",),
            )
            if game not in w.broken:
                self._verify(game, Ctx("restart", verifies=("JF-ATOM-004",)))
        if w.games:  # every game served at once after the restart
            self.ledger.credit(C.RESTART_SERVES)
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
        self._restart()
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
        self._restart()
        w.service.completed[key] = reply  # the fake replays it to the same key
        w.script([])
        w.cursor = len(w.fake.requests)
        ids = ("JF-ATOM-008", "JF-ATOM-004", "JF-ATOM-003", "JF-CAT-004")
        how = f"{delay_ms:g} ms into it" if self.kill_mode == "stdio" else None
        if self._reopened(game, model, after, "publication", ids, acked, at, how) == "after":
            w.games[game] = model = after
        self._resume(game, model, ("JF-ATOM-008", "JF-ATOM-004", "JF-ATOM-003"))

    # =====================================================================================
    # the parts of a step
    # =====================================================================================

    def _verify(self, game: str, ctx: Ctx, dump: dict[str, Any] | None = None) -> None:
        """Compare everything observable about `game` with the model."""
        w = self.world
        if dump is None:
            dump = w.dump(game)
        else:
            w.dumps[game] = dump
        self.check.store.dump(w.games[game], dump, w.bases[game], ctx)

    def _held_or_fail(self, op: str, future: Any, ids: tuple[str, ...]) -> None:
        """Wait for the fake to hold `op`'s compression request. A request the fake rejected
        (a violation) and an operation that answered without one are requirement failures."""
        w = self.world
        got = w.await_hold(future, lambda: self.check.requests.violations(w.fake.violations))
        if got is not None:
            self.check.requests.violations(w.fake.violations)
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                False,
                f"{op} was expected to send a compression request and wait; it answered {got}",
                ids=ids,
            )
        w.pending = None

    def _quiet(self, op: str) -> None:
        """No compress.v2 request arrived during `op`."""
        self.check.requests.none(op, self.world.new_requests())

    def _predictor(self, game: str, requests: Any) -> Predictor:
        w = self.world
        model = w.games[game]

        def fits(flight: Any, reply: dict[str, Any]) -> bool:
            return publication_fits(model, flight, reply, w.dumps.get(game), w.bases[game])

        return Predictor(game, model, w.service, w.mirror, requests, fits)

    def _arrived(self, game: str) -> Predictor:
        """The requests that arrived, checked for canaries and violations, in a predictor."""
        requests = self.world.new_requests()
        self.check.requests.texts(requests)
        self.check.requests.violations(self.world.fake.violations, game in self.world.inherited)
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
        self.check.requests.flow(flow, model.participants, game in w.inherited)
        if flow.held is not None:
            raise HarnessError(f"{op} was held without a hold step")
        return flow

    def _finish(self, flow: Flow, op: str) -> None:
        """Leftover requests of a step, then drop the script."""
        answered = dict(self.world.service.answered)
        self.world.service.answered.clear()
        self.check.requests.leftover(op, list(flow.leftover), answered)
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
            self.check.telemetry.events(events, fresh, comp)
        self.check.telemetry.none_left(op, events[seen:])

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
        store = normalize(self._reopened_dump(game)["store"])
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
            args = {"game": game, "participants": model.participants}
            self._served(game, "set_participants", w.call("set_participants", args))
        self.ledger.credit(C.RESTART_SERVES)
        w.resync_telemetry()
        self._verify(game, Ctx("restart", verifies=verifies))

    # -- the parts of a restart ----------------------------------------------------------
    def _restart(self) -> None:
        """Restart the driver; a `restart` op it was sent (HTTP, in process without
        `restart()`, R141) must succeed: a refusal fails JF-ATOM-004 (its `unsupported_op`
        leaves what needs it not covered)."""
        reply = self.world.restart_driver()
        if reply is not None:
            self.ledger.expect(
                C.DURABILITY,
                reply.ok,
                lambda: f"the restart op was refused: {reply.get('error')}",
                ids=("JF-ATOM-004",),
            )

    def _served(self, game: str, op: str, reply: Reply) -> Any:
        """An op on `game` after a restart succeeded. Refused as still owned by the earlier
        process (store_locked, store_fenced): JF-ERR-018; refused otherwise: the game did not
        reopen (JF-ATOM-004). Returns the result."""
        if not reply.ok and reply.code in ("store_locked", "store_fenced"):
            self.ledger.expect(
                C.RESTART_SERVES,
                False,
                f"after the driver was restarted, {op} of game {game} was refused with "
                f"{reply.code}: {reply['error'].get('message', '')!s:.300} -- a driver that "
                "declares durableRestart serves its games at once after a restart; if its "
                "store leases games to owners, it must keep its owner id across restarts "
                "(put {worker} in the driver command, R82) to reclaim them",
                ids=("JF-ERR-018",),
            )
        self.ledger.expect(
            C.DURABILITY,
            reply.ok,
            lambda: (
                f"after the driver was restarted, {op} of game {game} was refused: "
                f"{reply.get('error')}"
            ),
            ids=("JF-ATOM-004",),
        )
        return reply.result

    def _reopened_dump(self, game: str) -> dict[str, Any]:
        """The dump of `game` after a restart (`_served` judges a refusal)."""
        reply = self.world.call("dump", {"game": game})
        result = self._served(game, "dump", reply)
        self.world.dumps[game] = result
        return dict(result)
