"""A store named by a location string: a directory (`FileStore`) or a PostgreSQL URL.

`open_store("postgresql://host/db", "42")` opens game `42` in that database
(`PostgresStore`, which needs the `jfsm[postgres]` extra and a migrated schema);
`open_store("/var/lib/jfsm/game-42", "42")` opens the file store in that directory (the
game id is then only a name). The driver and the command line use this, so a deployment
picks its backend with one setting.

Errors are those of the backend's `open`: `StoreLocked`, `StoreCorrupted` (files),
`StoreUnavailable` (database unreachable or not migrated), `InvalidInput`.
"""

from __future__ import annotations

import time

from jfsm.image import QUOTA_BYTES
from jfsm.stores.base import Store

__all__ = ["is_database_url", "open_store", "remove_store"]

_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location: str) -> bool:
    """Whether `location` names a PostgreSQL database rather than a directory."""
    return location.startswith(_SCHEMES)


def open_store(
    location: str,
    game_id: str,
    *,
    quota: int = QUOTA_BYTES,
    takeover: bool = False,
    wait_seconds: float = 2.0,
) -> Store:
    """Open game `game_id`'s store at `location` (see the module docstring). `takeover`
    applies to a database only (a directory's lock cannot be taken over).

    In a database, a game whose previous owner just died is free once the server has ended
    that owner's session (at once for a killed process, but not at the same instant): a
    `store_locked` refusal is retried for up to `wait_seconds` before it is raised.
    """
    if is_database_url(location):
        from jfsm.errors import StoreLocked
        from jfsm.stores.pg_shim import ThreadedPostgresStore
        from jfsm.stores.postgres import PostgresStore

        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                inner = PostgresStore.open(location, game_id, quota=quota, takeover=takeover)
                return ThreadedPostgresStore(inner)  # async writes (temporary shim, issue 21)
            except StoreLocked:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
    from jfsm.stores.file import FileStore

    return FileStore.open(location, quota=quota)


def remove_store(location: str, game_id: str) -> None:
    """Delete game `game_id` from a database location (no-op for a directory, whose owner
    removes it). Raises `StoreLocked` while the game has a live owner."""
    if is_database_url(location):
        from jfsm.stores.postgres import remove_game

        remove_game(location, game_id)
