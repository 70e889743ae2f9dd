"""One pool of PostgreSQL connections per process and database, shared by every game open
there, and the idle timer that renews their leases.

`shared_pool(conninfo)` returns the `PgPool` of the running event loop for that target,
opening it on first use: it first connects once directly, so that a wrong password, a
missing database or an unmigrated schema is reported at once as `StoreUnusable` (one line,
no password, not retryable) rather than as a pool timeout, then opens a
`psycopg_pool.AsyncConnectionPool` of at most `max_size` connections (autocommit, no
server-side prepared statements, so PgBouncer in transaction mode carries it). A connection
that broke (server restart, `pg_terminate_backend`) is dropped by the pool and replaced on
the next call: the pool checks each connection it hands out (a non-blocking look at its
socket, no round trip).

Every store of the pool is registered for renewal: every `lease_seconds / 3` one statement
renews the leases of all of them (`fencing.RENEW`); a game whose token is no longer
current is reported to its store, which is then fenced.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import select
import socket
import weakref
from collections.abc import AsyncIterator
from typing import Any, Protocol

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from jfsm.errors import StoreUnavailable
from jfsm.stores.postgres.conninfo import database_target, describe
from jfsm.stores.postgres.fencing import RENEW
from jfsm.stores.postgres.schema import connection_error, require_schema_async

__all__ = [
    "APPLICATION_NAME",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_POOL_SIZE",
    "PgPool",
    "close_pools",
    "shared_pool",
]

DEFAULT_POOL_SIZE = 10
DEFAULT_LEASE_SECONDS = 30.0
_CONNECT_TIMEOUT = 10


APPLICATION_NAME = "jfsm-store"  # how the pool's connections show in pg_stat_activity


async def _still_open(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pool's check before handing out a connection, without a round trip: an idle
    connection has nothing to read unless the server ended it (a restart, a terminated
    backend: an error message or end of file is waiting). Raises so the pool replaces it."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    if readable:  # a notice is harmless; an error or end of file means the session ended
        conn.pgconn.consume_input()  # raises OperationalError when the server is gone
        if conn.pgconn.status != psycopg.pq.ConnStatus.OK:
            raise psycopg.OperationalError("the server ended the connection")


class Leased(Protocol):
    """What the renewal timer needs of a store."""

    game_id: str
    token: int

    def lost_lease(self) -> None: ...


class PgPool:
    """A process's connections to one database and the leases of its open games."""

    def __init__(self, conninfo: str, *, max_size: int, lease_seconds: float) -> None:
        self.conninfo = conninfo
        self.lease_seconds = lease_seconds
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            open=False,
            check=_still_open,
            kwargs={
                "autocommit": True,
                "prepare_threshold": None,
                "connect_timeout": _CONNECT_TIMEOUT,
                "application_name": APPLICATION_NAME,
            },
            timeout=30,
            name="jfsm",
        )
        self._stores: weakref.WeakSet[Any] = weakref.WeakSet()
        self._timer: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    async def open(self) -> None:
        """Check the target (credentials, database, schema) with one direct connection, then
        open the pool. Raises `StoreUnusable` or `StoreUnavailable` (one line, no secret)."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
            )
        except psycopg.Error as exc:
            raise connection_error(exc, self.conninfo) from None
        try:
            await require_schema_async(conn)
        except psycopg.Error as exc:
            raise connection_error(exc, self.conninfo, "read the schema at") from None
        finally:
            await conn.close()
        await self.pool.open(wait=False)
        self.loop = asyncio.get_running_loop()
        self._timer = self.loop.create_task(self._renew_forever())

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection of the pool; `StoreUnavailable` when none can be had in time."""
        try:
            async with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreUnavailable(
                f"no connection to PostgreSQL at {describe(self.conninfo)} within "
                f"{self.pool.timeout:g} s (server down, or the pool of {self.pool.max_size} "
                "connections busy)",
                state="open",
            ) from exc

    # -- leases --------------------------------------------------------------------------
    def register(self, store: Leased) -> None:
        """Renew `store`'s lease on the idle timer until `unregister`."""
        self._stores.add(store)

    def unregister(self, store: Leased) -> None:
        self._stores.discard(store)

    async def renew(self, only: list[Leased] | None = None) -> int:
        """Renew every registered store's lease now, or those of `only` (one statement); the
        stores whose token is no longer current are told (`lost_lease`). Returns how many
        were renewed. Raises `StoreUnavailable` when the server cannot be reached."""
        stores = [s for s in (list(self._stores) if only is None else only) if s.token]
        if not stores:
            return 0
        params = {
            "lease": self.lease_seconds,
            "games": [s.game_id for s in stores],
            "tokens": [s.token for s in stores],
        }
        try:
            async with self.connection() as conn:
                cur = await conn.execute(RENEW, params)
                renewed = {(row[0], int(row[1])) for row in await cur.fetchall()}
        except psycopg.Error as exc:
            raise connection_error(exc, self.conninfo, "renew leases at") from None
        for store in stores:  # by (game, token): a superseded store of a renewed game too
            if (store.game_id, store.token) not in renewed:
                store.lost_lease()
        return len(renewed)

    async def _renew_forever(self) -> None:
        period = max(0.05, self.lease_seconds / 3)
        while True:
            await asyncio.sleep(period)
            with contextlib.suppress(StoreUnavailable):
                await self.renew()

    async def close(self) -> None:
        """Stop renewing and close the pool's connections."""
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._timer
            self._timer = None
        await self.pool.close()


_pools: dict[tuple[int, str, float], PgPool] = {}
_opening: dict[tuple[int, str, float], asyncio.Lock] = {}


def _forget_in_child() -> None:
    # a forked child must not use (nor close) its parent's connections: it opens its own
    _pools.clear()
    _opening.clear()


os.register_at_fork(after_in_child=_forget_in_child)


async def shared_pool(
    conninfo: str,
    *,
    max_size: int | None = None,
    lease_seconds: float | None = None,
) -> PgPool:
    """The running loop's pool for `conninfo` (opened on first use, see the module
    docstring). `max_size` defaults to `JFSM_PG_POOL_SIZE` or 10, `lease_seconds` to
    `JFSM_PG_LEASE_SECONDS` or 30. Raises `InvalidInput` for a string that is not a
    PostgreSQL target, `StoreUnusable` or `StoreUnavailable`."""
    if lease_seconds is None:
        lease_seconds = float(os.environ.get("JFSM_PG_LEASE_SECONDS", DEFAULT_LEASE_SECONDS))
    if database_target(conninfo) is None:
        from jfsm.errors import InvalidInput

        raise InvalidInput(f"{describe(conninfo)} is not a PostgreSQL target")
    loop = asyncio.get_running_loop()
    key = (id(loop), conninfo, float(lease_seconds))
    pool = _pools.get(key)
    if pool is not None and pool.loop is loop:
        return pool
    if pool is not None:  # a closed loop's pool whose id the running loop reuses
        del _pools[key]
        _opening.pop(key, None)
    lock = _opening.setdefault(key, asyncio.Lock())
    async with lock:
        pool = _pools.get(key)
        if pool is None:
            size = max_size or int(os.environ.get("JFSM_PG_POOL_SIZE", DEFAULT_POOL_SIZE))
            pool = PgPool(conninfo, max_size=size, lease_seconds=lease_seconds)
            await pool.open()
            _pools[key] = pool
    return pool


async def close_pools() -> None:
    """Close every pool of the running loop (tests, and a driver shutting down)."""
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _pools if k[0] == loop_id]:
        pool = _pools.pop(key)
        _opening.pop(key, None)
        await pool.close()
