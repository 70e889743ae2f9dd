"""TEMPORARY (issue 21): today's blocking `PostgresStore` behind the async `Store` protocol.

`ThreadedPostgresStore` runs each blocking call of a `PostgresStore` (its psycopg round
trips) off the event loop with `jfsm.stores.offload.run_blocking`, one at a time, so the
engine can await it while the native async store on a shared `psycopg_pool` is written
(branch `pg`, which replaces this module). Unlike `FileStore`, the wrapped store applies a
projection to its image in the worker thread, after its statement returned. Errors are the
wrapped store's (`QuotaExceeded`, `StoreFenced`, `StoreUnavailable`, `InvalidInput`); every
other attribute (`token`, `seq`, `state`, `game_id`) is read from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.stores.offload import run_blocking
from jfsm.stores.postgres import PostgresStore

__all__ = ["ThreadedPostgresStore"]


class ThreadedPostgresStore:
    """An open `PostgresStore` (`inner`) with awaitable writes (see the module docstring)."""

    durable = True

    def __init__(self, inner: PostgresStore) -> None:
        self.inner = inner
        self._serial = asyncio.Lock()

    @property
    def image(self) -> StoreImage:
        return self.inner.image

    async def commit(self, projection: Projection) -> None:
        async with self._serial:
            await run_blocking(self.inner.commit, projection)

    async def seed(self, values: Mapping[str, bytes]) -> None:
        async with self._serial:
            await run_blocking(self.inner.seed, values)

    async def checkpoint(self) -> None:
        async with self._serial:
            await run_blocking(self.inner.checkpoint)

    async def close(self) -> None:
        async with self._serial:
            await run_blocking(self.inner.close)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"ThreadedPostgresStore({self.inner!r})"
