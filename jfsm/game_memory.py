"""One game's store and the index of its agent memory, changed together.

`GameMemory` is what the engine's parts share: the `Store` (the only way anything is
written), the `MemoryIndex` over it, the critical section (an `asyncio.Lock`: every commit
happens while it is held, a compress.v2 call never) and the telemetry outlet.

A telemetry sink that returns an awaitable (one that writes a file or a row) is awaited in
the background, one event at a time in the order they were emitted, so its I/O never runs
on the event loop's callback that emitted it (decision R151); `telemetry_written` waits for
those handed over so far, and a failure is counted as a synchronous sink's is (R75).

A commit is given *records* (decision R34): each is encoded to its JCS bytes exactly once,
straight from its fields (`Record.jcs`), the projection goes through the store, and only
once the store has accepted it does the index learn the same records. Nothing is decoded
that was just encoded. The store's write is awaited (decision R65): other games, and reads of
this one, go on meanwhile; the index learns the records right after the store applied them,
with no await in between. Errors are the store's (`QuotaExceeded`, `StoreUnavailable`); on an
error nothing was written and the index is unchanged.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import logging
import sys
from collections import deque
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

import jfsm.observability as observability
from jfsm.errors import InvalidInput
from jfsm.jcs import key_order, string_bytes
from jfsm.layout import ARCHIVES, round_key
from jfsm.memory_index import MemoryIndex, Stored
from jfsm.projection import Projection
from jfsm.records import ArchiveRecord, Record, Round, parse_record
from jfsm.stores.base import Store
from jfsm.telemetry import TelemetrySink

__all__ = ["GameMemory"]

_log = logging.getLogger("jfsm.engine")


def _jcs(key: str, value: Record | Mapping[str, ArchiveRecord]) -> bytes:
    if isinstance(value, Record):
        return value.jcs()
    if key != ARCHIVES:
        raise InvalidInput(f"{key!r}: only the archives key holds a mapping", key=key)
    members = sorted(value.items(), key=lambda item: key_order(item[0]))
    return b"{" + b",".join(string_bytes(s) + b":" + r.jcs() for s, r in members) + b"}"


class GameMemory:
    """A store, its memory index, the critical section and the telemetry outlet."""

    def __init__(self, store: Store, telemetry: TelemetrySink | None = None) -> None:
        self.store = store
        self.index = MemoryIndex(store.image)
        self.lock = asyncio.Lock()
        self.telemetry: list[dict[str, Any]] = []
        self.telemetry_failures = 0  # events the sink could not take (`status`, R75)
        self._sink = telemetry
        self._outbox: deque[Awaitable[Any]] | None = None  # an async sink's writes, in order
        self._writer: asyncio.Task[None] | None = None

    async def commit(
        self,
        sets: Mapping[str, Record | Mapping[str, ArchiveRecord]],
        deletes: Iterable[str] = (),
        *,
        label: str,
    ) -> None:
        """Commit records (`ARCHIVES` maps scene ids to records) and deletions as one
        projection, then tell the index the same records."""
        encoded = {key: _jcs(key, value) for key, value in sets.items()}
        projection = Projection.encoded(encoded, deletes, label=label)
        with observability.store_commit(
            self.store, label, len(projection.sets), len(projection.deletes)
        ):
            await self.store.commit(projection)
        index = self.index
        for key in projection.deletes:
            index.learn(key, None)
        for key, value in sets.items():
            stored: Stored = value
            index.learn(key, stored)

    async def commit_projection(self, projection: Projection) -> None:
        """Commit a projection of plain JSON values (game data, a cheat)."""
        with observability.store_commit(
            self.store, projection.label, len(projection.sets), len(projection.deletes)
        ):
            await self.store.commit(projection)
        image = self.store.image
        for key in projection.touched():
            self.index.observe(key, image.raw(key))

    def round(self, n: int) -> Round:
        """Canonical round `n`, read back from the store (`InvalidInput` if malformed)."""
        return parse_record(Round, self.store.image.get(round_key(n)))

    def rounds(self) -> list[Round]:
        """Every canonical round, in order (read back from the store: O(rounds))."""
        return [self.round(n) for n in sorted(self.index.rounds)]

    def emit(self, event: dict[str, Any]) -> None:
        """Record a telemetry event; a failing sink is never the caller's error (what it
        reports is still published): it is counted in `telemetry_failures`, and the first
        failure is one line on stderr (R75). An awaitable the sink returns is awaited in the
        background, after the ones before it (see the module docstring)."""
        self.telemetry.append(event)
        if self._sink is None:
            return
        try:
            pending = self._sink(event)
        except Exception as exc:
            self._sink_failed(exc)
            return
        if inspect.isawaitable(pending):
            if self._outbox is None:
                self._outbox = deque()
            self._outbox.append(pending)
            if self._writer is None or self._writer.done():
                self._writer = asyncio.get_running_loop().create_task(self._write_out())

    async def telemetry_written(self) -> None:
        """Wait until every event handed to an async sink so far is written (or counted as
        failed). Never raises but `CancelledError`."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    async def _write_out(self) -> None:
        while self._outbox:
            pending = self._outbox.popleft()
            try:
                await pending
            except Exception as exc:
                self._sink_failed(exc)

    def _sink_failed(self, exc: Exception) -> None:
        self.telemetry_failures += 1
        if self.telemetry_failures == 1:
            code = getattr(exc, "errno", None)
            name = errno.errorcode.get(code, type(exc).__name__) if code else ""
            print(
                f"jfsm: a telemetry event was not written ({name or type(exc).__name__}:"
                f" {exc}); later failures are only counted (status telemetryFailures)",
                file=sys.stderr,
            )
        _log.debug("telemetry sink failed", exc_info=exc)
