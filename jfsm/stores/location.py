"""A store named by a location string: a directory (`FileStore`) or a PostgreSQL target.

`await open_store("postgresql://host/db", "42")` opens game `42` in that database
(`PostgresStore`, which needs the `jfsm[postgres]` extra and a migrated schema);
`await open_store("/var/lib/jfsm/game-42", "42")` opens the file store in that directory
(the game id is then only a name). The driver and the command line use this, so a
deployment picks its backend with one setting.

A database target is a `postgresql://` or `postgres://` URL or a libpq keyword string
(`host=... dbname=...`), missing parameters taken from the `PG*` environment variables
(`jfsm.stores.postgres.conninfo`). A string that is neither a target nor a directory path is
refused with `InvalidInput` (one line, no password): no location is ever turned into a
folder named after a connection string.

Errors are those of the backend's `open`: `StoreLocked`, `StoreCorrupted` (files),
`StoreUnusable` / `StoreUnavailable` (database unreachable, refused, or not migrated),
`InvalidInput`.
"""

from __future__ import annotations

import asyncio
import time

from jfsm.image import QUOTA_BYTES
from jfsm.stores.base import Store
from jfsm.stores.postgres.conninfo import database_target

__all__ = ["is_database_url", "open_store", "store_target"]


def store_target(location: str) -> str | None:
    """The database target `location` names, or None for a directory path; `InvalidInput`
    for a string that is neither (see the module docstring)."""
    return database_target(location)


def is_database_url(location: str) -> bool:
    """Whether `location` names a PostgreSQL database rather than a directory (raises
    `InvalidInput` for a string that is neither)."""
    return store_target(location) is not None


async def open_store(
    location: str,
    game_id: str,
    *,
    quota: int = QUOTA_BYTES,
    takeover: bool = False,
    create: bool | None = None,
    wait_seconds: float = 0.0,
) -> Store:
    """Open game `game_id`'s store at `location` (see the module docstring). `takeover` and
    `create` apply to a database only. A `store_locked` refusal from a database is retried
    for up to `wait_seconds` before it is raised."""
    target = store_target(location)
    if target is not None:
        from jfsm.errors import StoreLocked
        from jfsm.stores.postgres.store import PostgresStore

        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                store = await PostgresStore.open(
                    target, game_id, quota=quota, takeover=takeover, create=create
                )
                return store
            except StoreLocked:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.05)
    from jfsm.stores.file.store import FileStore

    return await FileStore.open(location, quota=quota)
