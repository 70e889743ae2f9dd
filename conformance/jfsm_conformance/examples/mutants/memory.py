"""Mutants of intervene, catalyst scenes, history, concurrency and the quota."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jfsm.compressor import CompressionRequest, CompressionResult
from jfsm.driver import ReferenceDriver
from jfsm.engine import GameEngine
from jfsm.forced import ForcedCompression
from jfsm.history import RebuildPlan, rebuild_game_stack
from jfsm.image import StoreImage
from jfsm.layout import ARCHIVES, GAME
from jfsm.memory_index import StackState
from jfsm.projection import Projection
from jfsm.records import ArchiveRecord, Chunk, Round
from jfsm.scene import Scene
from jfsm.stack_compression import CompressionReport, StackCompression
from jfsm.stores.base import Store
from jfsm.telemetry import TelemetrySink
from jfsm_conformance.examples.mutants.seams import (
    _engine_driver,
    _StoreWrapper,
    _with_stack,
    _with_store,
    mutant,
)

# -- INT ----------------------------------------------------------------------------------------


__all__ = [
    "cancel_adds_chunk",
    "duplicate_copies_change_log",
    "forced_only_above_threshold",
    "lock_across_await",
    "no_retry_before_scene",
    "outcome_swapped",
    "publication_skips_quota",
    "quota_on_pre_state",
    "rebuild_outcome_first",
    "republish_appends",
]


class _ForcedOnlyWhenDue(StackCompression):
    def has_chunks(self) -> bool:
        return self.due()  # the forced compression only runs above the threshold


@mutant("the forced compression of an intervene runs only above the threshold")
def forced_only_above_threshold() -> ReferenceDriver:
    return _with_stack(_ForcedOnlyWhenDue)


class _GameOnlyRetry(ForcedCompression):
    async def before_generation(self, scene_id: str | None) -> CompressionReport | None:
        if scene_id is not None:
            return None
        return await super().before_generation(scene_id)


@mutant("no retry of the owed forced compression before a catalyst generation")
def no_retry_before_scene() -> ReferenceDriver:
    return _engine_driver(type("Engine", (GameEngine,), {"forced_compression": _GameOnlyRetry}))


# -- CAT ----------------------------------------------------------------------------------------


def _with_scene(scene_cls: type[Scene]) -> ReferenceDriver:
    return _engine_driver(type("Engine", (GameEngine,), {"scene": scene_cls}))


class _SwappedOutcome(Scene):
    def outcome_exchange(self, closing_summary: str, meanwhile_event: str) -> tuple[str, str]:
        user, assistant = super().outcome_exchange(closing_summary, meanwhile_event)
        return assistant, user


@mutant("the outcome exchange has user and assistant swapped")
def outcome_swapped() -> ReferenceDriver:
    return _with_scene(_SwappedOutcome)


class _CancelAppends(Scene):
    async def on_archive_cancellation(self) -> dict[str, Any]:
        return await self.end(self.archive_record("cancelled", None, None), ("", ""))


@mutant("cancelling a scene adds an (empty) exchange to the game stack")
def cancel_adds_chunk() -> ReferenceDriver:
    return _with_scene(_CancelAppends)


class _RepublishAppends(Scene):
    async def on_return_archive(self, *repeated_args: str) -> dict[str, Any]:
        record = await super().on_return_archive(*repeated_args)
        if repeated_args and record.get("state") == "published":
            closing_summary, meanwhile_event = repeated_args
            user, assistant = self.outcome_exchange(closing_summary, meanwhile_event)
            exchange = {
                "user": user,
                "assistant": assistant,
                "origin": "catalyst",
                "catalyst_id": self.scene_id,
            }
            await self.game.append(exchange, label="republish")
        return record


@mutant("republishing a published scene appends its outcome a second time")
def republish_appends() -> ReferenceDriver:
    return _with_scene(_RepublishAppends)


# -- HIST ---------------------------------------------------------------------------------------


def _outcomes_first(
    rounds: Sequence[Round],
    archives: Mapping[str, ArchiveRecord],
    current: StackState,
    **options: Any,
) -> RebuildPlan:
    """The reference plan, then each scene outcome moved before the round it followed."""
    sets, deletes = rebuild_game_stack(rounds, archives, current, **options)
    seqs = sorted(int(k.rsplit(".", 1)[1]) for k in sets if k.startswith(GAME.chunk_prefix))
    chunks = {s: sets[GAME.chunk(s)] for s in seqs}
    archived = sets.get(ARCHIVES)
    moved: dict[str, ArchiveRecord] = dict(archived) if isinstance(archived, Mapping) else {}
    for s in seqs:
        here, before = chunks[s], chunks.get(s - 1)
        assert isinstance(here, Chunk)
        if here.origin == "catalyst" and isinstance(before, Chunk) and before.origin != "catalyst":
            chunks[s] = before.model_copy(update={"seq": s})
            chunks[s - 1] = here.model_copy(update={"seq": s - 1})
            sid = here.catalyst_id
            if sid is not None and sid in moved:
                moved[sid] = moved[sid].model_copy(update={"outcome_seq": s - 1})
    for s in seqs:
        sets[GAME.chunk(s)] = chunks[s]
    if moved:
        sets[ARCHIVES] = moved
    return sets, deletes


@mutant("a rebuild places each scene outcome before its round instead of after")
def rebuild_outcome_first() -> ReferenceDriver:
    engine = type("Engine", (GameEngine,), {"plan_rebuild": staticmethod(_outcomes_first)})
    return _engine_driver(engine)


class _SeededFromBase(_StoreWrapper):
    """A duplicate's store seeded with the source's checkpoint, then the source's changes
    committed on top: the copy's change log is the source's."""

    def __init__(self, inner: Store, source: StoreImage) -> None:
        super().__init__(inner)
        self.source = source

    async def seed(self, values: Mapping[str, bytes]) -> None:
        base = self.source.base_bytes()
        await self.inner.seed(base)
        sets = {k: json.loads(v) for k, v in values.items() if base.get(k) != v}
        deletes = [k for k in base if k not in values]
        await self.inner.commit(Projection.of(sets, deletes, label="copy"))


class _DuplicateChangeLog(GameEngine):
    async def duplicate(
        self, target: Store, game_id: str, *, telemetry: TelemetrySink | None = None
    ) -> GameEngine:
        copy = _SeededFromBase(target, self.store.image)
        return await super().duplicate(copy, game_id, telemetry=telemetry)


@mutant("duplicate copies the change log (the copy's base is the source's checkpoint)")
def duplicate_copies_change_log() -> ReferenceDriver:
    return _engine_driver(_DuplicateChangeLog)


# -- CONC ---------------------------------------------------------------------------------------


class _LockHeld(StackCompression):
    async def call(self, request: CompressionRequest) -> CompressionResult:
        async with self.memory.lock:  # the critical section held across the await
            return await super().call(request)


@mutant("appends are blocked while a compression is in flight (lock held across the await)")
def lock_across_await() -> ReferenceDriver:
    return _with_stack(_LockHeld)


# -- QUOTA ----------------------------------------------------------------------------------------


class _PublicationUnchecked(_StoreWrapper):
    async def commit(self, projection: Projection) -> None:
        if projection.label == "publish_summary":
            self.inner.image.apply_unchecked(projection)
        else:
            await self.inner.commit(projection)


@mutant("publications skip the quota preflight")
def publication_skips_quota() -> ReferenceDriver:
    return _with_store(_PublicationUnchecked)


class _PreStateQuota(_StoreWrapper):
    async def commit(self, projection: Projection) -> None:
        image = self.inner.image
        if image.footprint() > image.quota:
            image.check(projection)  # raises with the numbers
        image.apply_unchecked(projection)


@mutant("the quota is checked on the pre-state instead of the post-state")
def quota_on_pre_state() -> ReferenceDriver:
    return _with_store(_PreStateQuota)
