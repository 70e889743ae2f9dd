"""Intervene and the forced compression it owes: the game's `intervene_retry` machine.

`ForcedCompression` owns the one `intervene_retry` machine of a game and carries out its
effects (`on_<effect>`, decision R31). It records an intervene on the game stack and starts
the forced compression, chooses the durable flag (`jfGameStack.meta.forcedCompression`) that
a publication or a rebuild writes, and, before any generation, settles the compression
still owed or refuses the generation with `CompressionPending`. It listens to the game
stack's `StackCompression`.

Seam (decision R32): `before_generation(scene_id)`, installed with
`GameEngine.forced_compression`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from jfsm.errors import CompressionPending
from jfsm.layout import round_key
from jfsm.machines import (
    CompressionEvent,
    CompressionState,
    ForcedEvent,
    ForcedState,
    StateMachine,
    handlers,
)
from jfsm.memory_index import StackState
from jfsm.records import Round
from jfsm.stack_compression import (
    CompressionListener,
    CompressionReport,
    InFlight,
    StackCompression,
)

__all__ = ["ForcedCompression"]

Started = InFlight | CompressionReport


class ForcedCompression(CompressionListener):
    """The game's forced-compression machine, listening to the game stack."""

    def __init__(self, game: StackCompression, *, owed: bool) -> None:
        self.game = game
        game.listener = self
        self._remain = False
        self._survives = False
        self.machine = StateMachine(
            "intervene_retry",
            {
                "stack_busy": lambda: self.game.state == CompressionState.IN_FLIGHT,
                "intervened_remain": lambda: self._remain,
                "intervened_survives": lambda: self._survives,
            },
            effects=handlers(self),
            state=ForcedState.OWED if owed else ForcedState.CLEAR,
        )

    @property
    def state(self) -> str:
        """The machine's state."""
        return self.machine.current

    # -- intervene -------------------------------------------------------------------------
    async def intervene(
        self, round_: Round, exchange: Mapping[str, Any]
    ) -> tuple[int, Started | None]:
        """Record an intervened round and its exchange (under the lock); returns the seq and
        the forced compression started, if it could start now."""
        result: tuple[int, Started | None] = await self.machine.act_async(
            ForcedEvent.INTERVENE, round_, exchange
        )
        return result

    async def _record(self, round_: Round, exchange: Mapping[str, Any]) -> int:
        return await self.game.append(
            exchange,
            label="intervene",
            meta_update={"forced_compression": True},
            extra={round_key(round_.n): round_},
        )

    async def on_record_and_force(
        self, round_: Round, exchange: Mapping[str, Any]
    ) -> tuple[int, Started]:
        seq = await self._record(round_, exchange)
        return seq, self.game.start(CompressionEvent.FORCE)

    async def on_record_intervene(
        self, round_: Round, exchange: Mapping[str, Any]
    ) -> tuple[int, None]:
        return await self._record(round_, exchange), None

    # -- before a generation ---------------------------------------------------------------
    async def before_generation(self, scene_id: str | None) -> CompressionReport | None:
        """Settle an owed forced compression before a generation (of the game, or of scene
        `scene_id`); `CompressionPending` if it stays owed.

        A forced compression that publishes while another intervene lands is followed by
        one more (the new intervened exchange is owed too); then the cause is `superseded`.
        """
        report: CompressionReport | None = None
        for _ in range(2):
            async with self.game.memory.lock:
                started: Started | None = self.machine.act(ForcedEvent.BEFORE_GENERATION)
            if started is None:
                return report
            report = await self.game.finish(started)
            if self.state == ForcedState.CLEAR:
                return report
            if report.outcome != "published":
                break
        assert report is not None
        cause = "superseded" if report.outcome == "published" else report.outcome
        raise CompressionPending(
            f"the owed forced compression did not settle ({cause}); "
            "the intervened exchange stays exact and the generation is refused",
            state=self.state,
            cause=cause,
        )

    def on_proceed(self) -> None:
        return None

    def on_retry_forced(self) -> Started:
        return self.game.start(CompressionEvent.FORCE)

    def on_refuse_pending(self) -> None:
        raise CompressionPending(
            "a forced compression of the game stack is in flight; retry the generation",
            state=self.state,
            cause="in_flight",
        )

    # -- the flag a projection writes ------------------------------------------------------
    @contextmanager
    def publishing(self, stack: StackState, through_seq: int) -> Iterator[dict[str, Any]]:
        """A game-stack publication: the flag it writes is whether an intervened exchange
        stays exact in the suffix; undone if the publication is not committed."""
        self._remain = stack.intervened_after(through_seq)
        with self.machine.acting(ForcedEvent.PUBLICATION) as flag:
            yield {"forced_compression": flag}

    @contextmanager
    def rebuilding(self, rounds: list[Round]) -> Iterator[bool]:
        """A rebuild from `rounds`: yields the flag its projection writes (set iff a
        surviving round was intervened); undone if the body raises."""
        self._survives = any(r.intervened for r in rounds)
        with self.machine.acting(ForcedEvent.REBUILD) as flag:
            yield flag

    def on_keep_flag(self) -> bool:
        return True

    def on_set_flag(self) -> bool:
        return True

    def on_clear_flag(self) -> bool:
        return False

    # -- listening to the game stack -------------------------------------------------------
    def not_started(self) -> None:
        self.machine.act(ForcedEvent.ATTEMPT_FAILED)

    def failed(self) -> None:
        self.machine.act(ForcedEvent.ATTEMPT_FAILED)
