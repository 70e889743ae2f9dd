"""The PostgreSQL store: many games in one database, one leased owner a game, fenced writes,
every game of a process on one shared pool of connections (native async).

**What it promises.** A write (`commit`, `checkpoint`, `seed`) is one transaction that
lands only while its fencing token is the game's current one: after another owner took the
game over, nothing of it lands and it raises `StoreFenced` (JF-STORE-010..014). An
acknowledged write is committed by the server (with the server's own durability settings:
`synchronous_commit`, replicas). Values are stored as their exact JCS bytes, so a game's
footprint is byte for byte a `FileStore`'s (JF-QUOTA-001..003). A lease is read against the
database server's clock only, never a client's. A connection lost mid-write leaves the
store *broken* until a fresh connection tells whether the write landed. The commits of
different games that a process makes at the same time share one statement (group commit,
R152), each member still fenced by its own token and acknowledged only after the shared
commit; a member that is fenced or refused fails alone (JF-STORE-050..053). It checks,
never trusts: a database that lacks writes it saw acknowledged (an unsafe failover, a
restore) is refused with `StoreHistoryLost`, and no worker writes there until an operator
clears the mark (JF-STORE-060..063).

**The format.** Four tables and one sequence, created and upgraded by `migrate`: one row a
game (`jfsm_game`: owner, lease, fencing token, write count, footprint, participants), one
row a key (`jfsm_value`: the key's current and checkpoint-base JCS bytes), one row a
telemetry event (`jfsm_telemetry`), one row a mark of a lost history
(`jfsm_history_lost`); tokens come from the sequence `jfsm_token`, so a token
never repeats for any game id. `schema` has the tables in full.

**The modules.** `store` (`PostgresStore`: one game, its errors), `fencing` (leases and
fenced writes as SQL), `games` (a game's rows without owning it: load, list, inspect,
remove), `pool` (one pool a process and database, and the lease timer), `history` (what
the database must hold, and the refusal once it does not), `group` (group
commit: the batches of a pool's concurrent commits), `schema` (tables,
migrations, connecting), `conninfo` (connection strings as users write them; errors that
never show a secret), `blocking` (the store for synchronous code), `server` (a throwaway
server from the machine's binaries, for tests, benchmarks and trying it out).

The public names need the `jfsm[postgres]` extra (psycopg 3) and are imported on first use,
so `jfsm.stores.postgres.server` and `.conninfo` work without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jfsm.stores.postgres.store import (
        SCHEMA_VERSION,
        PostgresStore,
        close_pools,
        game_ids,
        migrate,
        read_image,
        remove_game,
        schema_version,
    )

__all__ = [
    "SCHEMA_VERSION",
    "PostgresStore",
    "close_pools",
    "game_ids",
    "migrate",
    "read_image",
    "remove_game",
    "schema_version",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from `jfsm.stores.postgres.store` on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from jfsm.stores.postgres import store

    value = getattr(store, name)
    globals()[name] = value
    return value
