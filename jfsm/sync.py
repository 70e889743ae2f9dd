"""A blocking facade over `GameEngine`, for callers without an event loop.

Every coroutine method of the engine is a blocking method of the same name and signature,
declared here with the engine's types (so a type checker rejects `record_round(1, None)` as
it does on the engine), run on the process's private event loop (`jfsm.private_loop`, a
daemon thread), the loop every store opened with `open_sync` lives on, so one blocking
world serves every backend (decision R162); the engine's reading methods are declared too.
Other attributes still pass through at run time, untyped. Errors are the engine's own,
raised in the caller's thread; telemetry sinks are called on the loop's thread. Called from
a running event loop, a blocking method would stall it: it raises `BlockingCallInLoop` (a
`RuntimeError`) naming the engine's coroutine to await instead, and nothing runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from jfsm.engine import GameEngine
from jfsm.errors import BlockingCallInLoop
from jfsm.private_loop import run as run_on_private_loop

if TYPE_CHECKING:
    from jfsm.memory_index import MemoryIndex
    from jfsm.records import Participant
    from jfsm.stack_compression import CompressionReport
    from jfsm.stores.base import Store
    from jfsm.telemetry import TelemetrySink

__all__ = ["SyncGameEngine"]

_T = TypeVar("_T")


class SyncGameEngine:
    """`GameEngine` with blocking methods; use as a context manager to close the store.

    `TypeError` if `engine` is not a `GameEngine` (a coroutine: await it first)."""

    def __init__(self, engine: GameEngine) -> None:
        if not isinstance(engine, GameEngine):
            what = "a coroutine" if asyncio.iscoroutine(engine) else type(engine).__name__
            raise TypeError(f"SyncGameEngine wraps a GameEngine, not {what}")
        self.engine = engine

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        if asyncio._get_running_loop() is not None:
            name = str(getattr(coroutine, "__qualname__", "call")).rsplit(".", 1)[-1]
            coroutine.close()
            raise BlockingCallInLoop(
                f"SyncGameEngine.{name} blocks, and was called from a running event loop; "
                f"nothing ran: in async code, `await engine.{name}(...)` on the GameEngine "
                "itself (SyncGameEngine is for code without an event loop)",
                state="unchanged",
            )
        return run_on_private_loop(coroutine)

    if not TYPE_CHECKING:  # the rest of the engine, untyped, for callers that reach it

        def __getattr__(self, name: str) -> Any:
            return getattr(self.engine, name)

    # -- reading (no event loop needed) ------------------------------------------------
    @property
    def game_id(self) -> str:
        return self.engine.game_id

    @property
    def index(self) -> MemoryIndex:
        return self.engine.index

    @property
    def telemetry(self) -> list[dict[str, Any]]:
        return self.engine.telemetry

    def set_participants(self, participants: Iterable[Participant | Mapping[str, Any]]) -> None:
        self.engine.set_participants(participants)

    def participants(self) -> Sequence[Participant]:
        return self.engine.participants()

    def canonical_text(self, scene_id: str | None = None) -> str:
        return self.engine.canonical_text(scene_id)

    def dump(self) -> dict[str, Any]:
        return self.engine.dump()

    def status(self) -> dict[str, Any]:
        return self.engine.status()

    # -- the engine's coroutines, blocking ---------------------------------------------
    def record_round(self, input: str, output: str) -> dict[str, int]:
        return self._run(self.engine.record_round(input, output))

    def before_generation(self, scene_id: str | None = None) -> CompressionReport:
        return self._run(self.engine.before_generation(scene_id))

    def intervene(self, input: str, output: str, revealed: int) -> dict[str, Any]:
        return self._run(self.engine.intervene(input, output, revealed))

    def start_scene(self, scene_id: str) -> None:
        return self._run(self.engine.start_scene(scene_id))

    def record_scene_exchange(self, scene_id: str, user: str, assistant: str) -> int:
        return self._run(self.engine.record_scene_exchange(scene_id, user, assistant))

    def publish_scene(
        self, scene_id: str, closing_summary: str, meanwhile_event: str
    ) -> dict[str, Any]:
        return self._run(self.engine.publish_scene(scene_id, closing_summary, meanwhile_event))

    def cancel_scene(self, scene_id: str) -> dict[str, Any]:
        return self._run(self.engine.cancel_scene(scene_id))

    def reset(self, to_round: int) -> dict[str, int]:
        return self._run(self.engine.reset(to_round))

    def edit_round(self, n: int, input: str, output: str) -> dict[str, int]:
        return self._run(self.engine.edit_round(n, input, output))

    def convert_simple_to_live(self, rounds: Sequence[Mapping[str, str]]) -> dict[str, int]:
        return self._run(self.engine.convert_simple_to_live(rounds))

    def write(
        self,
        sets: Mapping[str, Any] | None = None,
        deletes: Iterable[str] = (),
        *,
        cheat: bool = False,
    ) -> int:
        return self._run(self.engine.write(sets, deletes, cheat=cheat))

    def checkpoint(self) -> None:
        return self._run(self.engine.checkpoint())

    def telemetry_written(self) -> None:
        return self._run(self.engine.telemetry_written())

    def duplicate(
        self, target: Store, game_id: str, *, telemetry: TelemetrySink | None = None
    ) -> SyncGameEngine:
        """Duplicate into `target`; returns the new game's blocking engine."""
        return SyncGameEngine(
            self._run(self.engine.duplicate(target, game_id, telemetry=telemetry))
        )

    def close(self) -> None:
        """Close the engine and its store (awaited on the private loop)."""
        self._run(self.engine.close())

    def __enter__(self) -> SyncGameEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
