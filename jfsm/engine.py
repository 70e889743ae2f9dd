"""The reference engine: one game's agent memory over a store and a compressor.

`GameEngine` is async-first. Every mutation is one projection committed inside the engine's
critical section (an `asyncio.Lock`), so mutations are serialized; a compress.v2 call is
awaited *outside* it, so rounds and scene outcomes can be appended while a compression is in
flight (D19). The three machines of `spec/machines/` decide what is legal and what happens:
the engine fires their events and carries out the effects of the rows that fired.

Errors: bad arguments raise `InvalidInput`, an event a machine does not allow raises
`InvalidTransition`, a write over quota raises `QuotaExceeded`, an owed forced compression
that cannot be settled raises `CompressionPending`. In every case nothing was written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jfsm.compression import InFlight, judge, plan_publication
from jfsm.compressor import CompressionRequest, CompressionResult, Compressor
from jfsm.errors import (
    CompressionPending,
    InvalidInput,
    InvalidTransition,
    JfsmError,
    QuotaExceeded,
)
from jfsm.history import rebuild_game_stack
from jfsm.layout import ARCHIVES, GAME, is_reserved, round_key, scene_keys, validate_scene_id
from jfsm.limits import check_value_depth, validate_id
from jfsm.machines import StateMachine
from jfsm.memory_index import MemoryIndex, StackState
from jfsm.projection import Projection
from jfsm.records import (
    ArchiveRecord,
    Chunk,
    Participant,
    Round,
    SceneMeta,
    parse_record,
)
from jfsm.spec import constants
from jfsm.stores.base import Store
from jfsm.telemetry import TelemetrySink, attempt_events
from jfsm.text import require_text

__all__ = ["CompressionReport", "GameEngine"]

_log = logging.getLogger("jfsm.engine")


@dataclass(frozen=True, slots=True)
class _Started:
    """A request in flight and the machine of the stack incarnation it belongs to.

    A scene id can be reused after a reset rolls its scene back; the reply of the old
    incarnation must settle against the old (closed) machine, never the new scene's.
    """

    flight: InFlight
    machine: StateMachine


@dataclass(frozen=True, slots=True)
class CompressionReport:
    """What a compression check or a forced compression did.

    `outcome`: `not_due`, `in_flight` (one is already running: none started), `published`,
    or a failure outcome (`refused`, `transport`, `empty`, `not_smaller`, `quota`, `stale`).
    """

    outcome: str
    length_before: int
    length_after: int
    call_id: str | None = None
    through_seq: int | None = None
    forced: CompressionReport | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as the driver protocol's JSON (camelCase, as every record); `forced`
        is the owed forced compression run first, if any."""
        out: dict[str, Any] = {
            "outcome": self.outcome,
            "lengthBefore": self.length_before,
            "lengthAfter": self.length_after,
        }
        if self.call_id is not None:
            out["callId"] = self.call_id
        if self.through_seq is not None:
            out["throughSeq"] = self.through_seq
        if self.forced is not None:
            out["forced"] = self.forced.to_json()
        return out


def _int(value: object, field: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidInput(f"{field} must be an integer >= {minimum}, not {value!r}", field=field)
    return value


class GameEngine:
    """One game's agent memory. Creating an engine writes nothing (game creation, D15).

    `thresholds` overrides the spec's `{"game": 300000, "catalyst": 150000}` for embedding;
    conformance runs at the spec values.
    """

    def __init__(
        self,
        store: Store,
        compressor: Compressor,
        *,
        game_id: str,
        participants: Iterable[Participant | Mapping[str, Any]] = (),
        telemetry: TelemetrySink | None = None,
        thresholds: Mapping[str, int] | None = None,
    ) -> None:
        spec = constants()
        self.store = store
        self.compressor = compressor
        self.game_id = validate_id(game_id, "game id")
        self.thresholds = {"game": spec.game_threshold, "catalyst": spec.catalyst_threshold}
        self.thresholds.update(thresholds or {})
        self.kinds = {"game": spec.game_kind, "catalyst": spec.catalyst_kind}
        self.telemetry: list[dict[str, Any]] = []
        self._sink = telemetry
        self._participants: tuple[Participant, ...] = ()
        self.set_participants(participants)
        self._lock = asyncio.Lock()
        self._survivor_intervened = False
        # Per stack: the last logical compression that ended with a completed reply but did
        # not publish, and how many times; the next ask of it uses a new Idempotency-Key.
        self._retries: dict[str | None, tuple[tuple[int, int, str], int]] = {}
        self.index = MemoryIndex(store.image)
        self._stacks: dict[str | None, StateMachine] = {None: self._stack_machine(None)}
        self._scenes: dict[str, StateMachine] = {}
        for scene_id, stack in self.index.scenes.items():
            meta = stack.scene_meta()
            state = "created" if meta is None else meta.state
            self._scenes[scene_id] = StateMachine("catalyst_scene", state=state)
            self._stacks[scene_id] = self._stack_machine(scene_id)
        for scene_id, record in self.index.archives.items():
            self._scenes[scene_id] = StateMachine("catalyst_scene", state=record.state)
        flag = self.index.game.stack_meta().forced_compression
        self._intervene = StateMachine(
            "intervene_retry",
            {
                "stack_busy": lambda: self._stacks[None].current == "in_flight",
                "intervened_remain": self._intervened_remain,
                "intervened_survives": lambda: self._survivor_intervened,
            },
            state="owed" if flag else "clear",
        )

    # -- machines and commits ------------------------------------------------------------
    def _stack_machine(self, scene_id: str | None) -> StateMachine:
        threshold = self.thresholds["game" if scene_id is None else "catalyst"]

        def stack() -> StackState:
            found = self.index.stack(scene_id)
            return found if found is not None else StackState(scene_keys(scene_id or "x"))

        return StateMachine(
            "stack_compression",
            {
                "due": lambda: stack().length > threshold and bool(stack().chunks),
                "has_chunks": lambda: bool(stack().chunks),
            },
        )

    def _intervened_remain(self) -> bool:
        return any(c.origin == "intervene" for c in self.index.game.chunks.values())

    def _commit(self, projection: Projection) -> None:
        """Commit through the store (which raises the protocol's errors, never `OSError`)."""
        self.store.commit(projection)
        image = self.store.image
        for key in projection.touched():
            self.index.observe(key, image.raw(key))

    def _scene(self, scene_id: object) -> tuple[str, StateMachine]:
        sid = validate_scene_id(scene_id)
        machine = self._scenes.get(sid)
        if machine is None:
            raise InvalidInput(f"unknown scene {sid!r}", scene=sid)
        return sid, machine

    def _last_round(self) -> int:
        return self.index.last_round

    # -- participants --------------------------------------------------------------------
    def set_participants(self, participants: Iterable[Participant | Mapping[str, Any]]) -> None:
        """Replace the current participants (read by the executor before each attempt)."""
        self._participants = tuple(
            p if isinstance(p, Participant) else parse_record(Participant, p) for p in participants
        )

    def participants(self) -> Sequence[Participant]:
        """The current participants."""
        return self._participants

    # -- rounds and generations ----------------------------------------------------------
    async def record_round(self, input: str, output: str) -> dict[str, int]:
        """Record a canonical round and append its exact exchange to the game stack."""
        require_text(input, "input")
        require_text(output, "output")
        async with self._lock:
            n = self._last_round() + 1
            seq = self._append_game(
                {round_key(n): Round(n=n, input=input, output=output).to_json()},
                Chunk(seq=1, user=input, assistant=output, origin="round", round_id=n),
                label="record_round",
            )
        return {"round": n, "seq": seq}

    def _append_game(
        self,
        extra: dict[str, Any],
        chunk: Chunk,
        *,
        label: str,
        meta_update: Mapping[str, Any] | None = None,
        deletes: Iterable[str] = (),
    ) -> int:
        meta = self.index.game.stack_meta()
        seq = meta.next_seq
        placed = chunk.model_copy(update={"seq": seq})
        new_meta = meta.model_copy(update={"next_seq": seq + 1, **(meta_update or {})})
        sets = {**extra, GAME.chunk(seq): placed.to_json(), GAME.meta: new_meta.to_json()}
        with self._stacks[None].attempt("append"):
            self._commit(Projection.of(sets, deletes, label=label))
        return seq

    async def before_generation(self, scene_id: str | None = None) -> CompressionReport:
        """Run the checks owed before a game (or scene) generation.

        The scene, if any, is validated first. Then any owed forced compression of the game
        stack runs (raising `CompressionPending` if it cannot be settled), then the stack's
        own compression check, awaited. If an intervene lands while that check is awaited,
        its forced compression is settled too before this returns: no generation starts
        while the game stack holds an intervened exchange exactly.
        """
        sid: str | None = None
        if scene_id is not None:
            sid, machine = self._scene(scene_id)
            if not machine.allowed("generate"):
                raise InvalidTransition(
                    f"scene {sid!r} is {machine.current}: it cannot generate",
                    state=machine.current,
                    machine="catalyst_scene",
                    event="generate",
                )
        forced = await self._settle_forced()
        async with self._lock:
            if sid is not None:
                sid, machine = self._scene(sid)
                with machine.attempt("generate"):
                    self._mark_running(sid)
            started = self._start(sid, "check")
        report = await self._finish_started(sid, started)
        if self._intervene.current != "clear":
            forced = await self._settle_forced() or forced
        return report if forced is None else replace(report, forced=forced)

    async def _settle_forced(self) -> CompressionReport | None:
        """Settle an owed forced compression; `CompressionPending` if it stays owed.

        A forced compression that publishes while another intervene lands is followed by
        one more (the new intervened exchange is owed too); then the cause is `superseded`.
        """
        report: CompressionReport | None = None
        for _ in range(2):
            async with self._lock:
                row = self._intervene.fire("before_generation")
                if row.effect == "proceed":
                    return report
                if row.effect == "refuse_pending":
                    raise CompressionPending(
                        "a forced compression of the game stack is in flight; retry the generation",
                        state=self._intervene.current,
                        cause="in_flight",
                    )
                started = self._start(None, "force")
            report = await self._finish_started(None, started)
            if self._intervene.current == "clear":
                return report
            if report.outcome != "published":
                break
        assert report is not None
        cause = "superseded" if report.outcome == "published" else report.outcome
        raise CompressionPending(
            f"the owed forced compression did not settle ({cause}); "
            "the intervened exchange stays exact and the generation is refused",
            state=self._intervene.current,
            cause=cause,
        )

    # -- compression ---------------------------------------------------------------------
    def _start(self, scene_id: str | None, event: str) -> _Started | CompressionReport:
        """Fire `check` or `force` (under the lock); build the request if one is due."""
        stack = self.index.stack(scene_id)
        machine = self._stacks[scene_id]
        length = 0 if stack is None else stack.length
        row = machine.fire(event)
        if row.effect != "build_request":
            outcome = "in_flight" if machine.current == "in_flight" else "not_due"
            if event == "force" and scene_id is None and outcome == "not_due":
                self._intervene.fire("attempt_failed")
            return CompressionReport(outcome, length, length)
        assert stack is not None
        text = stack.text()
        if len(text) != stack.length:
            raise AssertionError(f"canonical length drifted: {stack.length} != {len(text)}")
        kind = self.kinds["game" if scene_id is None else "catalyst"]
        epoch = (stack.meta or {}).get("epoch", 0)
        material = (epoch, max(stack.chunks), text)
        last, count = self._retries.get(scene_id, (None, 0))
        request = CompressionRequest(
            kind=kind,
            game_id=self.game_id,
            catalyst_id=scene_id,
            text=text,
            chars=len(text),
            through_seq=max(stack.chunks),
            epoch=epoch,
            retry=count if last == material else 0,
        )
        flight = InFlight(
            request=request,
            represented=frozenset(stack.chunks),
            summary_text=None if stack.summary is None else stack.summary.text,
            forced=event == "force",
        )
        return _Started(flight, machine)

    async def _finish_started(
        self, scene_id: str | None, started: _Started | CompressionReport
    ) -> CompressionReport:
        if isinstance(started, CompressionReport):
            return started
        try:
            result = await self.compressor.compress(started.flight.request, self.participants)
        except asyncio.CancelledError:
            # The caller gave up: settle as a transport failure so the machines leave
            # `in_flight` (nothing was written), then let the cancellation through.
            cancelled = CompressionResult(outcome="transport", attempts=(), error_code="cancelled")
            self._settle(scene_id, started, cancelled)
            raise
        except Exception as exc:  # a compressor must not raise; treat it as transport
            result = CompressionResult(
                outcome="transport", attempts=(), error_code=type(exc).__name__
            )
        async with self._lock:
            return self._settle(scene_id, started, result)

    def _settle(
        self, scene_id: str | None, started: _Started, result: CompressionResult
    ) -> CompressionReport:
        flight, machine = started.flight, started.machine
        stack = self.index.stack(scene_id)
        before = flight.request.chars
        if machine.current == "closed":
            machine.fire("reply_stale")
            outcome = "stale"
        else:
            outcome = judge(flight, result, stack)
            if outcome == "valid":
                assert stack is not None
                try:
                    outcome = self._publish(scene_id, flight, result, stack, machine)
                except JfsmError:
                    # The store refused the publication (I/O failure): nothing was written;
                    # the machines return to their resting states before the error goes on.
                    if scene_id is None:
                        self._intervene.fire("attempt_failed")
                    for event in attempt_events(flight.request, result, "aborted"):
                        self._emit(event)
                    raise
            else:
                machine.fire("reply_stale" if outcome == "stale" else "reply_failed")
        if scene_id is None:
            self._intervene.fire("publication" if outcome == "published" else "attempt_failed")
        if result.outcome in ("ok", "refused") and outcome != "published":
            request = flight.request
            material = (request.epoch, request.through_seq, request.text)
            self._retries[scene_id] = (material, request.retry + 1)
        for event in attempt_events(flight.request, result, outcome):
            self._emit(event)
        after = stack.length if stack is not None else 0
        return CompressionReport(
            outcome,
            before,
            after,
            call_id=result.call_id if outcome == "published" else None,
            through_seq=flight.request.through_seq,
        )

    def _publish(
        self,
        scene_id: str | None,
        flight: InFlight,
        result: CompressionResult,
        stack: StackState,
        machine: StateMachine,
    ) -> str:
        machine.fire("reply_valid")
        meta_update: dict[str, Any] = {}
        if scene_id is None:
            suffix = [c for s, c in stack.chunks.items() if s > flight.request.through_seq]
            meta_update["forcedCompression"] = any(c.origin == "intervene" for c in suffix)
        sets, deletes = plan_publication(flight, result, stack, meta_update)
        try:
            self._commit(Projection.of(sets, deletes, label="publish_summary"))
        except QuotaExceeded:
            machine.fire("commit_refused")
            return "quota"
        except BaseException:
            machine.fire("commit_refused")
            raise
        machine.fire("commit")
        return "published"

    def _emit(self, event: dict[str, Any]) -> None:
        """Record a telemetry event; a failing sink is logged, never the caller's error."""
        self.telemetry.append(event)
        if self._sink is not None:
            try:
                self._sink(event)
            except Exception as exc:
                _log.warning("telemetry sink failed: %s", type(exc).__name__)

    # -- intervene -----------------------------------------------------------------------
    async def intervene(self, input: str, output: str, revealed: int) -> dict[str, Any]:
        """Publish only the first `revealed` code points of `output`, then force compression.

        The discarded continuation is never stored, sent or logged. Returns the round, the
        chunk's seq and the forced compression's report (None when it had to wait for a
        compression already in flight).
        """
        require_text(input, "input")
        require_text(output, "output")
        _int(revealed, "revealed")
        if revealed > len(output):
            raise InvalidInput(
                f"revealed ({revealed}) exceeds the output's {len(output)} code points",
                field="revealed",
            )
        prefix = output[:revealed]
        async with self._lock:
            n = self._last_round() + 1
            with self._intervene.attempt("intervene") as row:
                seq = self._append_game(
                    {
                        round_key(n): Round(
                            n=n, input=input, output=prefix, intervened=True
                        ).to_json()
                    },
                    Chunk(seq=1, user=input, assistant=prefix, origin="intervene", round_id=n),
                    label="intervene",
                    meta_update={"forced_compression": True},
                )
            started = self._start(None, "force") if row.effect == "record_and_force" else None
        report = None if started is None else await self._finish_started(None, started)
        return {
            "round": n,
            "seq": seq,
            "compression": None if report is None else report.to_json(),
            "forcedCompression": self._intervene.current != "clear",
        }

    # -- catalyst scenes -----------------------------------------------------------------
    async def start_scene(self, scene_id: str) -> None:
        """Create a scene with its own isolated stack. A used id raises `InvalidInput`."""
        sid = validate_scene_id(scene_id)
        async with self._lock:
            if sid in self._scenes:
                raise InvalidInput(f"scene {sid!r} already exists", scene=sid)
            # The scene's epoch starts at the game's, so a scene id reused after a reset
            # never repeats an earlier incarnation's Idempotency-Key.
            meta = SceneMeta(epoch=self.index.game.stack_meta().epoch)
            self._commit(Projection.of({scene_keys(sid).meta: meta.to_json()}, label="start_scene"))
            self._scenes[sid] = StateMachine("catalyst_scene")
            self._stacks[sid] = self._stack_machine(sid)

    def _mark_running(self, sid: str) -> None:
        stack = self.index.scenes[sid]
        meta = stack.scene_meta() or SceneMeta()
        if meta.state != "running":
            new = meta.model_copy(update={"state": "running"})
            self._commit(Projection.of({stack.keys.meta: new.to_json()}, label="scene_running"))

    async def record_scene_exchange(self, scene_id: str, user: str, assistant: str) -> int:
        """Append an exchange to a scene's stack; returns its seq."""
        require_text(user, "user")
        require_text(assistant, "assistant")
        async with self._lock:
            sid, machine = self._scene(scene_id)
            with machine.attempt("record"):
                stack = self.index.scenes[sid]
                meta = stack.scene_meta() or SceneMeta()
                seq = meta.next_seq
                chunk = Chunk(
                    seq=seq, user=user, assistant=assistant, origin="catalyst", catalyst_id=sid
                )
                new_meta = meta.model_copy(update={"next_seq": seq + 1, "state": "running"})
                sets = {stack.keys.chunk(seq): chunk.to_json(), stack.keys.meta: new_meta.to_json()}
                with self._stacks[sid].attempt("append"):
                    self._commit(Projection.of(sets, label="record_scene_exchange"))
        return seq

    async def publish_scene(
        self, scene_id: str, closing_summary: str, meanwhile_event: str
    ) -> dict[str, Any]:
        """Terminal publication: one projection appends the outcome to the game stack,
        archives the scene and deletes its stack. Republishing returns the archive."""
        require_text(closing_summary, "closing summary")
        require_text(meanwhile_event, "meanwhile event")
        async with self._lock:
            sid, machine = self._scene(scene_id)
            with machine.attempt("publish") as row:
                if row.effect == "return_archive":
                    return self.index.archives[sid].to_json()
                return self._end_scene(sid, closing_summary, meanwhile_event)

    async def cancel_scene(self, scene_id: str) -> dict[str, Any]:
        """Archive the cancellation and delete the scene's stack; game memory unchanged."""
        async with self._lock:
            sid, machine = self._scene(scene_id)
            with machine.attempt("cancel") as row:
                if row.effect == "return_archive":
                    return self.index.archives[sid].to_json()
                return self._end_scene(sid, None, None)

    def _end_scene(
        self, sid: str, closing_summary: str | None, meanwhile_event: str | None
    ) -> dict[str, Any]:
        stack = self.index.scenes.get(sid) or StackState(scene_keys(sid))
        order = 1 + max((r.order for r in self.index.archives.values()), default=0)
        record = ArchiveRecord(
            state="cancelled" if closing_summary is None else "published",
            after_round=self._last_round(),
            closing_summary=closing_summary,
            meanwhile_event=meanwhile_event,
            order=order,
        )
        archives = self.index.archives_json()
        with self._stacks[sid].attempt("close"):
            if closing_summary is None:
                archives[sid] = record.to_json()
                self._commit(
                    Projection.of({ARCHIVES: archives}, stack.all_keys(), label="cancel_scene")
                )
            else:
                seq = self.index.game.stack_meta().next_seq
                record = record.model_copy(update={"outcome_seq": seq})
                archives[sid] = record.to_json()
                self._append_game(
                    {ARCHIVES: archives},
                    Chunk(
                        seq=seq,
                        user=meanwhile_event or "",
                        assistant=closing_summary,
                        origin="catalyst",
                        catalyst_id=sid,
                    ),
                    label="publish_scene",
                    deletes=stack.all_keys(),
                )
        return record.to_json()

    # -- history -------------------------------------------------------------------------
    def _rebuild(
        self,
        rounds: Sequence[Round],
        archives: Mapping[str, ArchiveRecord],
        *,
        extra_sets: Mapping[str, Any],
        extra_deletes: Iterable[str],
        label: str,
        seeded: bool = False,
    ) -> None:
        sets, deletes = rebuild_game_stack(
            rounds,
            archives,
            self.index.game,
            archives_present=bool(self.index.archives),
            seeded=seeded,
        )
        sets.update(extra_sets)
        deletes.update(extra_deletes)
        deletes.difference_update(sets)
        self._survivor_intervened = any(r.intervened for r in rounds)
        with self._intervene.attempt("rebuild"), self._stacks[None].attempt("rebuild"):
            self._commit(Projection.of(sets, deletes, label=label))
        for sid in [s for s, m in self._scenes.items() if m.table.terminal.issuperset([m.current])]:
            if sid not in self.index.archives:
                del self._scenes[sid]
                self._stacks.pop(sid, None)

    async def reset(self, to_round: int) -> dict[str, int]:
        """Roll the game back to after round `to_round` and rebuild its memory exactly."""
        _int(to_round, "round")
        async with self._lock:
            if to_round > self._last_round():
                raise InvalidInput(
                    f"cannot reset to round {to_round}: the game has {self._last_round()}",
                    field="round",
                )
            survivors = [r for n, r in sorted(self.index.rounds.items()) if n <= to_round]
            archives = {s: r for s, r in self.index.archives.items() if r.after_round <= to_round}
            gone = [round_key(n) for n in self.index.rounds if n > to_round]
            self._rebuild(survivors, archives, extra_sets={}, extra_deletes=gone, label="reset")
        return {"rounds": len(survivors), "chunks": len(self.index.game.chunks)}

    async def edit_round(self, n: int, input: str, output: str) -> dict[str, int]:
        """Replace canonical round `n` (retrospective edit) and rebuild memory exactly."""
        _int(n, "round", minimum=1)
        require_text(input, "input")
        require_text(output, "output")
        async with self._lock:
            if n not in self.index.rounds:
                raise InvalidInput(f"round {n} does not exist", field="round")
            edited = Round(n=n, input=input, output=output)
            rounds = [edited if r.n == n else r for _, r in sorted(self.index.rounds.items())]
            self._rebuild(
                rounds,
                dict(self.index.archives),
                extra_sets={round_key(n): edited.to_json()},
                extra_deletes=(),
                label="edit_round",
            )
        return {"rounds": len(rounds), "chunks": len(self.index.game.chunks)}

    async def convert_simple_to_live(self, rounds: Sequence[Mapping[str, str]]) -> dict[str, int]:
        """Import the canonical rounds of a simple game and seed direct exchanges.

        The game must hold no rounds and no memory yet (`InvalidInput` otherwise).
        """
        if not isinstance(rounds, Sequence) or isinstance(rounds, (str, bytes)):
            raise InvalidInput("rounds must be a list of {input, output}", field="rounds")
        imported = []
        for i, item in enumerate(rounds, start=1):
            if not isinstance(item, Mapping) or set(item) != {"input", "output"}:
                raise InvalidInput(f"round {i} must be exactly {{input, output}}", field="rounds")
            imported.append(
                Round(
                    n=i,
                    input=require_text(item["input"], f"rounds[{i}].input"),
                    output=require_text(item["output"], f"rounds[{i}].output"),
                )
            )
        async with self._lock:
            game = self.index.game
            if (
                self.index.rounds
                or game.meta is not None
                or game.chunks
                or game.summary is not None
                or self.index.scenes
                or self.index.archives
            ):
                raise InvalidInput(
                    "only a game without rounds, memory or scenes can be converted",
                    field="rounds",
                )
            self._rebuild(
                imported,
                {},
                extra_sets={round_key(r.n): r.to_json() for r in imported},
                extra_deletes=(),
                label="convert_simple_to_live",
                seeded=True,
            )
        return {"rounds": len(imported), "chunks": len(self.index.game.chunks)}

    async def duplicate(
        self, target: Store, game_id: str, *, telemetry: TelemetrySink | None = None
    ) -> GameEngine:
        """Copy this game's store as it is (forced flag included) into an empty `target`,
        whose change log starts empty; returns the new game's engine, which reports its
        own compressions to `telemetry` (never to this game's sink)."""
        validate_id(game_id, "game id")
        async with self._lock:
            target.seed(self.store.image.values_bytes())
        return GameEngine(
            target,
            self.compressor,
            game_id=game_id,
            participants=self._participants,
            telemetry=telemetry,
            thresholds=self.thresholds,
        )

    # -- ordinary writes, cheats, checkpoint ---------------------------------------------
    async def write(
        self,
        sets: Mapping[str, Any] | None = None,
        deletes: Iterable[str] = (),
        *,
        cheat: bool = False,
    ) -> int:
        """An ordinary game-data write (or a cheat): one projection over non-`jf` keys,
        preflighted against the quota. Returns the footprint after it."""
        if sets is not None and not isinstance(sets, Mapping):
            raise InvalidInput("sets must be an object", field="sets")
        if not isinstance(deletes, (list, tuple, set, frozenset)):
            raise InvalidInput("deletes must be a list of keys", field="deletes")
        check_value_depth(sets)
        projection = Projection.of(sets, list(deletes), label="cheat" if cheat else "write")
        reserved = sorted(k for k in projection.touched() if is_reserved(k))
        if reserved:
            raise InvalidInput(f"keys reserved for agent memory: {reserved}", keys=reserved)
        async with self._lock:
            self._commit(projection)
            return self.store.image.footprint()

    async def checkpoint(self) -> None:
        """Make the current store the change log's base."""
        async with self._lock:
            self.store.checkpoint()

    # -- reading -------------------------------------------------------------------------
    def canonical_text(self, scene_id: str | None = None) -> str:
        """The canonical text of the game stack or of a running scene's stack."""
        stack = self.index.stack(None if scene_id is None else validate_scene_id(scene_id))
        if stack is None:
            raise InvalidInput(f"scene {scene_id!r} has no stack", scene=scene_id)
        return stack.text()

    def dump(self) -> dict[str, Any]:
        """The store and its optimized change log, exactly, plus the footprint."""
        image = self.store.image
        return {
            "store": image.store_json(),
            "changeLog": image.change_log(),
            "footprint": image.footprint(),
        }

    def status(self) -> dict[str, Any]:
        """Machine states, canonical lengths and footprint at a glance."""
        scenes = {
            sid: {
                "state": machine.current,
                "compression": self._stacks[sid].current if sid in self._stacks else None,
                "length": (self.index.scenes[sid].length if sid in self.index.scenes else 0),
            }
            for sid, machine in sorted(self._scenes.items())
        }
        return {
            "game": {
                "compression": self._stacks[None].current,
                "intervene": self._intervene.current,
                "length": self.index.game.length,
                "threshold": self.thresholds["game"],
                "chunks": len(self.index.game.chunks),
                "summary": self.index.game.summary is not None,
            },
            "scenes": scenes,
            "rounds": len(self.index.rounds),
            "footprint": self.store.image.footprint(),
            "quota": self.store.image.quota,
        }

    def close(self) -> None:
        """Close the store."""
        self.store.close()
