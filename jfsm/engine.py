"""The reference engine: one game's agent memory over a store and a compressor.

`GameEngine` is a facade. It validates arguments, takes the critical section (an
`asyncio.Lock`: every mutation is one projection committed while it is held, and a
compress.v2 call is awaited *outside* it, so rounds and scene outcomes can be appended while
a compression is in flight, D19) and hands each operation to the part that owns it:

- `GameMemory` (`game_memory.py`): the store, the memory index, the lock, telemetry;
- `StackCompression` (`stack_compression.py`): one stack's compression machine, its request
  in flight and its retry count (the game stack's, and one per running scene);
- `ForcedCompression` (`forced.py`): the game's intervene / forced-compression machine;
- `Scene` (`scene.py`): one catalyst scene's machine;
- `rebuild_game_stack` (`history.py`): the pure plan of a reset, edit or conversion.

Each part carries out the effects of its machine table in `spec/machines/` through its
`on_<effect>` handlers; the engine never looks at a row's effect (decision R31). The parts
and the rebuild planner are class attributes of `GameEngine`, the seams through which an
embedding (or a mutant of the conformance suite) replaces one policy (decision R32).

**The one concept:** one game's agent memory as a library call: each public method checks
its arguments and hands the operation to the part that owns it.

Errors: bad arguments raise `InvalidInput`, an event a machine does not allow raises
`InvalidTransition`, a write over quota raises `QuotaExceeded`, an owed forced compression
that cannot be settled raises `CompressionPending`. In every case nothing was written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Self

import jfsm.observability as observability
from jfsm.compressor import (
    CompressionRequest,
    CompressionResult,
    Compressor,
    check_thresholds,
)
from jfsm.errors import InvalidInput, InvalidTransition
from jfsm.forced import ForcedCompression
from jfsm.game_memory import GameMemory
from jfsm.history import rebuild_game_stack
from jfsm.layout import is_reserved, round_key, scene_keys, validate_scene_id
from jfsm.limits import check_value_depth, validate_id
from jfsm.machines import CompressionEvent, ForcedState, SceneEvent, SceneState
from jfsm.memory_index import MemoryIndex
from jfsm.projection import Projection
from jfsm.records import ArchiveRecord, Participant, Round, SceneMeta, parse_record
from jfsm.scene import Scene
from jfsm.spec import constants
from jfsm.stack_compression import CompressionReport, StackCompression
from jfsm.stores.base import Store, require_store
from jfsm.telemetry import TelemetrySink
from jfsm.text import require_text

__all__ = ["CompressionReport", "GameEngine"]


def _game(engine: GameEngine, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"jfsm.game.id": engine.game_id}


def _generation(engine: GameEngine, scene_id: str | None = None) -> dict[str, Any]:
    attributes = _game(engine)
    if isinstance(scene_id, str):
        attributes["jfsm.scene.id"] = scene_id
    return attributes


def _round(reply: Mapping[str, Any]) -> dict[str, Any]:
    return {"jfsm.round.number": reply["round"], "jfsm.chunk.seq": reply["seq"]}


def _report(report: CompressionReport) -> dict[str, Any]:
    attributes: dict[str, Any] = {"jfsm.compression.outcome": report.outcome}
    if report.forced is not None:
        attributes["jfsm.compression.forced.outcome"] = report.forced.outcome
    return attributes


def _int(value: object, field: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidInput(f"{field} must be an integer >= {minimum}, not {value!r}", field=field)
    return value


class GameEngine:
    """One game's agent memory. Creating an engine writes nothing (game creation, D15).

    `thresholds` overrides the spec's `{"game": 300000, "catalyst": 150000}` for embedding;
    conformance runs at the spec values. A `store` that is a coroutine (a forgotten `await`
    on `FileStore.open`) is refused with `TypeError` saying to await it.

    Seams (class attributes; a subclass replaces one): `stack_compression` (the class of
    each stack's compression), `forced_compression`, `scene`, and `plan_rebuild` (the pure
    planner of a rebuild, `rebuild_game_stack`'s signature).
    """

    stack_compression: type[StackCompression] = StackCompression
    forced_compression: type[ForcedCompression] = ForcedCompression
    scene: type[Scene] = Scene
    plan_rebuild = staticmethod(rebuild_game_stack)

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
        require_store(store)
        check_thresholds(thresholds)
        spec = constants()
        self.store = store
        self.compressor = compressor
        self.game_id = validate_id(game_id, "game id")
        self.thresholds = {"game": spec.game_threshold, "catalyst": spec.catalyst_threshold}
        self.thresholds.update(thresholds or {})
        self.kinds = {"game": spec.game_kind, "catalyst": spec.catalyst_kind}
        self._participants: tuple[Participant, ...] = ()
        self.set_participants(participants)
        self.memory = GameMemory(store, telemetry)
        self._game = self._stack(None)
        owed = self.index.game.stack_meta().forced_compression
        self._forced = self.forced_compression(self._game, owed=owed)
        self._scenes: dict[str, Scene] = {}
        for scene_id, stack in self.index.scenes.items():
            meta = stack.scene_meta()
            state = SceneState.CREATED if meta is None else meta.state
            self._scenes[scene_id] = self._new_scene(scene_id, state)
        for scene_id, record in self.index.archives.items():
            known = self._scenes.get(scene_id)
            unit = None if known is None else known.stack
            self._scenes[scene_id] = self.scene(
                scene_id, self.memory, self._game, unit, state=record.state
            )

    # -- parts ---------------------------------------------------------------------------
    @property
    def index(self) -> MemoryIndex:
        """The memory index (stacks, round numbers, archives) of the store."""
        return self.memory.index

    @property
    def telemetry(self) -> list[dict[str, Any]]:
        """Every telemetry event this engine emitted, in order."""
        return self.memory.telemetry

    def _stack(self, scene_id: str | None) -> StackCompression:
        which = "game" if scene_id is None else "catalyst"
        return self.stack_compression(
            self.memory,
            scene_id,
            game_id=self.game_id,
            kind=self.kinds[which],
            threshold=self.thresholds[which],
            ask=self._ask,
        )

    def _new_scene(self, scene_id: str, state: str = SceneState.CREATED) -> Scene:
        stack = self._stack(scene_id)
        return self.scene(scene_id, self.memory, self._game, stack, state=state)

    async def _ask(self, request: CompressionRequest) -> CompressionResult:
        return await self.compressor.compress(request, self.participants)

    def _scene(self, scene_id: object) -> Scene:
        sid = validate_scene_id(scene_id)
        scene = self._scenes.get(sid)
        if scene is None:
            raise InvalidInput(f"unknown scene {sid!r}", scene=sid)
        return scene

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
    @observability.traced("jfsm.record_round", attributes=_game, result=_round)
    async def record_round(self, input: str, output: str) -> dict[str, int]:
        """Record a canonical round and append its exact exchange to the game stack."""
        require_text(input, "input")
        require_text(output, "output")
        async with self.memory.lock:
            n = self.index.last_round + 1
            seq = await self._game.append(
                {"user": input, "assistant": output, "origin": "round", "round_id": n},
                label="record_round",
                extra={round_key(n): Round.trusted(n=n, input=input, output=output)},
            )
        return {"round": n, "seq": seq}

    @observability.traced("jfsm.before_generation", attributes=_generation, result=_report)
    async def before_generation(self, scene_id: str | None = None) -> CompressionReport:
        """Run the checks owed before a game (or scene) generation.

        The scene, if any, is validated first. Then any owed forced compression of the game
        stack runs (raising `CompressionPending` if it cannot be settled), then the stack's
        own compression check, awaited. If an intervene lands while that check is awaited,
        its forced compression is settled too before this returns: no generation starts
        while the game stack holds an intervened exchange exactly.
        """
        scene: Scene | None = None
        if scene_id is not None:
            scene = self._scene(scene_id)
            if not scene.machine.allowed(SceneEvent.GENERATE):
                raise InvalidTransition(
                    f"scene {scene.scene_id!r} is {scene.state}: it cannot generate",
                    state=scene.state,
                    machine="catalyst_scene",
                    event=SceneEvent.GENERATE.value,
                )
        sid = None if scene is None else scene.scene_id
        forced = await self._forced.before_generation(sid)
        async with self.memory.lock:
            if scene is None:
                unit, started = self._game, self._game.start(CompressionEvent.CHECK)
            else:
                scene = self._scene(scene.scene_id)
                started = await scene.generate()
                unit = scene.live_stack()
        report = await unit.finish(started)
        if self._forced.state != ForcedState.CLEAR:
            forced = await self._forced.before_generation(sid) or forced
        return report if forced is None else replace(report, forced=forced)

    # -- intervene -----------------------------------------------------------------------
    @observability.traced("jfsm.intervene", attributes=_game, result=_round)
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
        async with self.memory.lock:
            n = self.index.last_round + 1
            seq, started = await self._forced.intervene(
                Round.trusted(n=n, input=input, output=prefix, intervened=True),
                {"user": input, "assistant": prefix, "origin": "intervene", "round_id": n},
            )
        report = None if started is None else await self._game.finish(started)
        return {
            "round": n,
            "seq": seq,
            "compression": None if report is None else report.to_json(),
            "forcedCompression": self._forced.state != ForcedState.CLEAR,
        }

    # -- catalyst scenes -----------------------------------------------------------------
    async def start_scene(self, scene_id: str) -> None:
        """Create a scene with its own isolated stack. A used id raises `InvalidInput`."""
        sid = validate_scene_id(scene_id)
        async with self.memory.lock:
            if sid in self._scenes:
                raise InvalidInput(f"scene {sid!r} already exists", scene=sid)
            # The scene's epoch starts at the game's, so a scene id reused after a reset
            # never repeats an earlier incarnation's Idempotency-Key.
            meta = SceneMeta(epoch=self.index.game.stack_meta().epoch)
            await self.memory.commit({scene_keys(sid).meta: meta}, label="start_scene")
            self._scenes[sid] = self._new_scene(sid)

    async def record_scene_exchange(self, scene_id: str, user: str, assistant: str) -> int:
        """Append an exchange to a scene's stack; returns its seq."""
        require_text(user, "user")
        require_text(assistant, "assistant")
        async with self.memory.lock:
            return await self._scene(scene_id).record(user, assistant)

    async def publish_scene(
        self, scene_id: str, closing_summary: str, meanwhile_event: str
    ) -> dict[str, Any]:
        """Terminal publication: one projection appends the outcome to the game stack,
        archives the scene and deletes its stack. Republishing returns the archive."""
        require_text(closing_summary, "closing summary")
        require_text(meanwhile_event, "meanwhile event")
        async with self.memory.lock:
            return await self._scene(scene_id).publish(closing_summary, meanwhile_event)

    async def cancel_scene(self, scene_id: str) -> dict[str, Any]:
        """Archive the cancellation and delete the scene's stack; game memory unchanged."""
        async with self.memory.lock:
            return await self._scene(scene_id).cancel()

    # -- history -------------------------------------------------------------------------
    async def _rebuild(
        self,
        rounds: Sequence[Round],
        archives: Mapping[str, ArchiveRecord],
        *,
        extra_sets: Mapping[str, Round],
        extra_deletes: Iterable[str],
        label: str,
        seeded: bool = False,
    ) -> None:
        with self._forced.rebuilding(list(rounds)) as flag:
            sets, deletes = self.plan_rebuild(
                rounds,
                archives,
                self.index.game,
                archives_present=bool(self.index.archives),
                seeded=seeded,
                forced=flag,
            )
            sets.update(extra_sets)
            deletes.update(extra_deletes)
            deletes.difference_update(sets)
            await self._game.rebuild(sets, deletes, label)
        for sid in [s for s, scene in self._scenes.items() if scene.ended]:
            if sid not in self.index.archives:
                del self._scenes[sid]

    async def reset(self, to_round: int) -> dict[str, int]:
        """Roll the game back to after round `to_round` and rebuild its memory exactly."""
        _int(to_round, "round")
        async with self.memory.lock:
            last = self.index.last_round
            if to_round > last:
                raise InvalidInput(
                    f"cannot reset to round {to_round}: the game has {last}", field="round"
                )
            survivors = [self.memory.round(n) for n in sorted(self.index.rounds) if n <= to_round]
            archives = {s: r for s, r in self.index.archives.items() if r.after_round <= to_round}
            gone = [round_key(n) for n in self.index.rounds if n > to_round]
            await self._rebuild(
                survivors, archives, extra_sets={}, extra_deletes=gone, label="reset"
            )
        return {"rounds": len(survivors), "chunks": len(self.index.game.chunks)}

    async def edit_round(self, n: int, input: str, output: str) -> dict[str, int]:
        """Replace canonical round `n` (retrospective edit) and rebuild memory exactly."""
        _int(n, "round", minimum=1)
        require_text(input, "input")
        require_text(output, "output")
        async with self.memory.lock:
            if n not in self.index.rounds:
                raise InvalidInput(f"round {n} does not exist", field="round")
            edited = Round.trusted(n=n, input=input, output=output)
            rounds = [edited if r.n == n else r for r in self.memory.rounds()]
            await self._rebuild(
                rounds,
                dict(self.index.archives),
                extra_sets={round_key(n): edited},
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
                Round.trusted(
                    n=i,
                    input=require_text(item["input"], f"rounds[{i}].input"),
                    output=require_text(item["output"], f"rounds[{i}].output"),
                )
            )
        async with self.memory.lock:
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
            await self._rebuild(
                imported,
                {},
                extra_sets={round_key(r.n): r for r in imported},
                extra_deletes=(),
                label="convert_simple_to_live",
                seeded=True,
            )
        return {"rounds": len(imported), "chunks": len(self.index.game.chunks)}

    async def duplicate(
        self, target: Store, game_id: str, *, telemetry: TelemetrySink | None = None
    ) -> GameEngine:
        """Copy this game's store as it is (forced flag included) into an empty `target`,
        whose change log starts empty; returns the new game's engine (of this engine's
        class), which reports its own compressions to `telemetry` (never to this game's
        sink)."""
        validate_id(game_id, "game id")
        require_store(target, "target")
        async with self.memory.lock:
            await target.seed(self.store.image.values_bytes())
        return type(self)(
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
        async with self.memory.lock:
            await self.memory.commit_projection(projection)
            return self.store.image.footprint()

    async def checkpoint(self) -> None:
        """Make the current store the change log's base."""
        async with self.memory.lock:
            await self.store.checkpoint()

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
                "state": scene.state,
                "compression": None if scene.stack is None else scene.stack.state,
                "length": (self.index.scenes[sid].length if sid in self.index.scenes else 0),
            }
            for sid, scene in sorted(self._scenes.items())
        }
        return {
            "game": {
                "compression": self._game.state,
                "intervene": self._forced.state,
                "length": self.index.game.length,
                "threshold": self.thresholds["game"],
                "chunks": len(self.index.game.chunks),
                "summary": self.index.game.summary is not None,
            },
            "scenes": scenes,
            "rounds": len(self.index.rounds),
            "footprint": self.store.image.footprint(),
            "quota": self.store.image.quota,
            "telemetryFailures": self.memory.telemetry_failures,
        }

    def at_rest(self, keep_retries: bool = True) -> bool:
        """Whether closing this engine loses nothing: no stack has a compression in flight
        nor, with `keep_retries`, a retry count (kept in memory only, JF-CALL-004)."""
        stacks = [self._game] + [s.stack for s in self._scenes.values() if s.stack is not None]
        return all(
            stack.state != "in_flight" and not (keep_retries and stack._retry is not None)
            for stack in stacks
        )

    async def telemetry_written(self) -> None:
        """Wait until the telemetry sink has taken every event emitted so far (a sink that
        returns an awaitable is awaited in the background, in order: decision R151). A
        failed write is counted in `status()["telemetryFailures"]`, never raised."""
        await self.memory.telemetry_written()

    async def close(self) -> None:
        """Wait for the telemetry handed to the sink, then close the store (awaited: a
        durable store releases its files or connection)."""
        await self.memory.telemetry_written()
        await self.store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """`async with GameEngine(...) as engine:` closes the engine, and so its store, on
        leaving the block, whether it raised or not."""
        await self.close()
