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

from jfsm.image import QUOTA_BYTES
from jfsm.stores.base import Store

__all__ = ["is_database_url", "open_store", "remove_store"]

_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location: str) -> bool:
    """Whether `location` names a PostgreSQL database rather than a directory."""
    return location.startswith(_SCHEMES)


def open_store(
    location: str, game_id: str, *, quota: int = QUOTA_BYTES, takeover: bool = False
) -> Store:
    """Open game `game_id`'s store at `location` (see the module docstring). `takeover`
    applies to a database only (a directory's lock cannot be taken over)."""
    if is_database_url(location):
        from jfsm.stores.postgres import PostgresStore

        return PostgresStore.open(location, game_id, quota=quota, takeover=takeover)
    from jfsm.stores.file import FileStore

    return FileStore.open(location, quota=quota)


def remove_store(location: str, game_id: str) -> None:
    """Delete game `game_id` from a database location (no-op for a directory, whose owner
    removes it). Raises `StoreLocked` while the game has a live owner."""
    if is_database_url(location):
        from jfsm.stores.postgres import remove_game

        remove_game(location, game_id)
