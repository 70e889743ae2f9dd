"""One catalyst scene: its `catalyst_scene` machine and the compression of its stack.

`Scene` carries out the effects of the scene table (`on_<effect>`, decision R31): appending
an exchange to the scene's stack, the compression check before a scene generation, and the
terminal projection of a publication (one direct game exchange, the archive record, every
scene stack key deleted) or of a cancellation (the archive record, the keys deleted, game
memory unchanged). Repeating a terminal event returns the archived record.

Seams (decision R32): `outcome_exchange` (the game exchange a publication appends) and the
handlers, installed with `GameEngine.scene`.
"""

from __future__ import annotations

from typing import Any, Literal

from jfsm.game_memory import GameMemory
from jfsm.layout import ARCHIVES
from jfsm.machines import CompressionEvent, SceneEvent, SceneState, StateMachine, handlers
from jfsm.records import ArchiveRecord, SceneMeta
from jfsm.stack_compression import CompressionReport, InFlight, StackCompression

__all__ = ["Scene"]


class Scene:
    """A scene's machine; `stack` is its stack's compression (None for a scene archived
    before this engine opened the store)."""

    def __init__(
        self,
        scene_id: str,
        memory: GameMemory,
        game: StackCompression,
        stack: StackCompression | None,
        *,
        state: str = SceneState.CREATED,
    ) -> None:
        self.scene_id = scene_id
        self.memory = memory
        self.game = game
        self.stack = stack
        self.machine = StateMachine("catalyst_scene", effects=handlers(self), state=state)

    @property
    def state(self) -> str:
        """The machine's state."""
        return self.machine.current

    @property
    def ended(self) -> bool:
        """Whether the scene is published or cancelled."""
        return self.state in self.machine.table.terminal

    def live_stack(self) -> StackCompression:
        """The compression of the scene's stack (only a scene opened archived has none)."""
        assert self.stack is not None, "a running scene has a stack"
        return self.stack

    # -- events ----------------------------------------------------------------------------
    async def record(self, user: str, assistant: str) -> int:
        """Append an exchange (texts already validated) to the scene's stack; its seq."""
        seq: int = await self.machine.act_async(SceneEvent.RECORD, user, assistant)
        return seq

    async def generate(self) -> InFlight | CompressionReport:
        """A scene generation is about to start: the scene runs, its stack is checked."""
        started: InFlight | CompressionReport = await self.machine.act_async(SceneEvent.GENERATE)
        return started

    async def publish(self, closing_summary: str, meanwhile_event: str) -> dict[str, Any]:
        """Terminal publication (or the archive, when repeated)."""
        record: dict[str, Any] = await self.machine.act_async(
            SceneEvent.PUBLISH, closing_summary, meanwhile_event
        )
        return record

    async def cancel(self) -> dict[str, Any]:
        """Cancellation (or the archive, when repeated)."""
        record: dict[str, Any] = await self.machine.act_async(SceneEvent.CANCEL)
        return record

    # -- effects ---------------------------------------------------------------------------
    async def on_append_chunk(self, user: str, assistant: str) -> int:
        exchange = {
            "user": user,
            "assistant": assistant,
            "origin": "catalyst",
            "catalyst_id": self.scene_id,
        }
        return await self.live_stack().append(
            exchange, label="record_scene_exchange", meta_update={"state": "running"}
        )

    async def on_check_compression(self) -> InFlight | CompressionReport:
        stack = self.live_stack()
        meta = stack.stack.scene_meta() or SceneMeta()
        if meta.state != "running":
            running = meta.model_copy(update={"state": "running"})
            await self.memory.commit({stack.keys.meta: running}, label="scene_running")
        return stack.start(CompressionEvent.CHECK)

    async def on_publish_outcome(
        self, closing_summary: str, meanwhile_event: str
    ) -> dict[str, Any]:
        record = self.archive_record("published", closing_summary, meanwhile_event)
        return await self.end(record, self.outcome_exchange(closing_summary, meanwhile_event))

    async def on_archive_cancellation(self) -> dict[str, Any]:
        return await self.end(self.archive_record("cancelled", None, None), None)

    async def on_return_archive(self, *_repeated_args: str) -> dict[str, Any]:
        return self.memory.index.archives[self.scene_id].to_json()

    # -- the terminal projection -----------------------------------------------------------
    def outcome_exchange(self, closing_summary: str, meanwhile_event: str) -> tuple[str, str]:
        """(user, assistant) of the game exchange a publication appends."""
        return meanwhile_event, closing_summary

    def archive_record(
        self,
        state: Literal["published", "cancelled"],
        closing_summary: str | None,
        meanwhile_event: str | None,
    ) -> ArchiveRecord:
        """The archive record of the scene ending now (texts already validated)."""
        index = self.memory.index
        return ArchiveRecord.trusted(
            state=state,
            after_round=index.last_round,
            closing_summary=closing_summary,
            meanwhile_event=meanwhile_event,
            order=1 + max((r.order for r in index.archives.values()), default=0),
        )

    async def end(self, record: ArchiveRecord, exchange: tuple[str, str] | None) -> dict[str, Any]:
        """Commit the terminal projection: the archive `record`, every key of the scene's
        stack deleted and, with `exchange`, that game exchange appended (its seq is the
        record's `outcomeSeq` when the scene was published). Returns the record as JSON."""
        archives = dict(self.memory.index.archives)
        stack = self.live_stack()

        async def write(keys: list[str]) -> ArchiveRecord:
            if exchange is None:
                archives[self.scene_id] = record
                await self.memory.commit({ARCHIVES: archives}, keys, label="cancel_scene")
                return record
            seq = self.game.stack.stack_meta().next_seq
            final = record
            if record.state == "published":
                final = record.model_copy(update={"outcome_seq": seq})
            archives[self.scene_id] = final
            user, assistant = exchange
            await self.game.append(
                {
                    "user": user,
                    "assistant": assistant,
                    "origin": "catalyst",
                    "catalyst_id": self.scene_id,
                },
                label="publish_scene",
                extra={ARCHIVES: archives},
                deletes=keys,
            )
            return final

        final: ArchiveRecord = await stack.close(write)
        return final.to_json()
