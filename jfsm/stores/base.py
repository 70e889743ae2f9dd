"""The store protocol: one game's workflowStore and its optimized change log.

A store exposes its `StoreImage` for reading and changes only through `commit` (one
projection, all or nothing, preflighted against the quota) and `checkpoint`. `commit`
returns only once the projection is as durable as the backend promises; on any error
(`QuotaExceeded`, `StoreUnavailable`) nothing of the projection is visible, in memory or on
disk.

The protocol is async (issue 21, decision R65): the engine awaits every write, and a
backend does its blocking I/O off the event loop (a thread, or an async driver), so one
game's durable commit never stalls the other games a process serves. The image changes only
on the event loop, once the write has landed: a reader on the loop sees a projection whole
or not at all. A store runs one write at a time; once started, a write runs to its end even
if the awaiting task is cancelled (the cancellation is then delivered at the caller's next
await), so the image never disagrees with what was written.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Protocol

from jfsm.image import StoreImage
from jfsm.projection import Projection

__all__ = ["OwnedStore", "Store", "require_store"]


class Store(Protocol):
    """One game's store."""

    @property
    def image(self) -> StoreImage:
        """The current state, read-only by convention: change it only through `commit`."""
        ...

    @property
    def durable(self) -> bool:
        """Whether committed projections survive a process crash."""
        ...

    async def commit(self, projection: Projection) -> None:
        """Apply one projection atomically. Raises `QuotaExceeded`, or `StoreUnavailable` when
        the store cannot write (an I/O failure, a closed or broken store); either way nothing
        of the projection is visible. A store never lets `OSError` through."""
        ...

    async def seed(self, values: Mapping[str, bytes]) -> None:
        """Fill an *empty* store with `values` (key -> JCS bytes) as its checkpointed base,
        so its change log is empty (game duplication). Raises `InvalidInput` if the store is
        not empty and `QuotaExceeded` if the footprint would exceed the quota."""
        ...

    async def checkpoint(self) -> None:
        """Make the current store the change log's base (the log becomes empty)."""
        ...

    async def close(self) -> None:
        """Release the store (its lock, for a durable store). Idempotent."""
        ...


class OwnedStore(Store, Protocol):
    """A store of one game of a store several processes share (a database, a shared state
    directory): this handle's ownership (machine `spec/machines/store_ownership.json`)."""

    @property
    def token(self) -> int | None:
        """This handle's fencing token."""
        ...

    @property
    def writes(self) -> int:
        """How many writes this handle landed (each checked its token at the store)."""
        ...

    async def confirm(self) -> None:
        """Check at the store, now, that this handle still owns the game (renewing its
        lease). Raises `StoreFenced` once another owner took it, `StoreUnavailable` when
        it cannot tell (decision R121)."""
        ...


def require_store(store: object, what: str = "store") -> None:
    """Raise `TypeError` if `store` is an awaitable rather than a store: a forgotten `await`
    on `FileStore.open(...)` or `PostgresStore.open(...)` (decision R162). A coroutine is
    closed first, so Python adds no "never awaited" warning to the error."""
    if inspect.isawaitable(store):
        kind = "a coroutine" if inspect.iscoroutine(store) else "an awaitable"
        if inspect.iscoroutine(store):
            store.close()
        raise TypeError(
            f"the {what} is {kind}, not a store: await it "
            "(`store = await FileStore.open(...)`, `await PostgresStore.open(...)`), or in "
            "code without an event loop open it with `FileStore.open_sync(...)` or "
            "`PostgresStore.open_sync(...)`"
        )
