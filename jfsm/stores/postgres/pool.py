"""One pool of PostgreSQL connections per process and database, shared by every game open
there, and the idle timer that renews their leases.

**The one concept: a process's access to one database** (its connections, checked before
they are lent and cut when the server stays silent, its leases kept alive, and its refusal of
a database found lacking acknowledged writes).

`shared_pool(conninfo)` returns the `PgPool` of the running event loop for that target,
opening it on first use: it first connects once directly, so that a wrong password, a
missing database or an unmigrated schema is reported at once as `StoreUnusable` (one line,
no password, not retryable) rather than as a pool timeout, then opens a
`psycopg_pool.AsyncConnectionPool` of at most `max_size` connections (autocommit, no
server-side prepared statements, so PgBouncer in transaction mode carries it). A multi-host
target (`host=a,b,c ... target_session_attrs=read-write`) reaches whichever node is the
primary now; a `connect_timeout` in the target bounds each node's try (default 10 s).

# A connection is checked before it is lent (decision R130)

A connection the server ended while it sat idle in the pool (a restart, a terminated
backend, `idle_session_timeout`, a pooler's or a managed service's idle cut, a failover) is
found and replaced before a statement is sent on it:

- every time: a non-blocking look at its socket, reading whatever waits there; the end of
  the stream (the server closed it) fails the check at once;
- then one empty round trip (`""`, as psycopg_pool's `check_connection`) when the
  connection has been idle for more than `VERIFY_IDLE_SECONDS` (1 s), or when the server sent
  anything while it was idle (a server that ends a session sends its error first and closes
  the socket a moment later). A connection reused within the second costs nothing more.
  The round trip gets 3 s; a server that stays silent that long (frozen, cut off) has every
  idle connection of the pool dropped at once (`drain`), not one check after the other.

A connection that fails the check is closed and the pool lends another (or connects anew);
a statement fails only when no connection to the primary can be had within the pool's
timeout (the database really out of reach), as `StoreUnavailable`. While no server of the
target accepts a connection (a failover under way), a new connection is tried again every
half second for a minute, then with psycopg_pool's doubling waits: the pool reaches a new
primary within half a second of its promotion.

# Nothing waits forever on a silent server

While a connection is lent, a deadline of `deadline_seconds` (the lease, at least 10 s)
runs: past it the connection's socket is shut down, so the statement in flight fails as a
lost connection (the store's `broken` state: it may or may not have landed) instead of
waiting on a server that is frozen or cut off (whose kernel may still acknowledge every
packet). It is never cancelled with a cancel request: a commit waiting for its synchronous
standby would then be reported as done while not yet replicated.

# A database that lost acknowledged writes (decision R181)

The pool keeps `history` (`history.HistoryWatch`): the WAL high-water mark of the writes it
saw acknowledged, compared with what every statement reads of its server. Once a statement
finds its server behind (or a store finds its game's row behind, or the database marked as
having lost history: checked on every new connection and in every statement), the pool
refuses every statement with `StoreHistoryLost`, and writes the database's mark on the
connection that found it (so that other workers stop too).

Every store of the pool is registered for renewal: every `lease_seconds / 3` one statement
renews the leases of all of them (`fencing.RENEW`); a game whose token is no longer
current is reported to its store, which is then fenced. A pool left open when its event
loop ends (`asyncio.run` cancelling every task) closes itself, so the loop can end even
while the server is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import select
import socket
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any, Protocol, Self

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

import jfsm.observability as observability
from jfsm.errors import JfsmError, StoreHistoryLost, StoreUnavailable
from jfsm.stores.postgres.conninfo import database_target, describe, is_permanent
from jfsm.stores.postgres.fencing import RENEW
from jfsm.stores.postgres.history import MARK, HistoryWatch, WalPosition, judge_row
from jfsm.stores.postgres.schema import connection_error, require_schema_async

__all__ = [
    "APPLICATION_NAME",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_POOL_SIZE",
    "RELEASE_WAIT",
    "VERIFY_IDLE_SECONDS",
    "PgPool",
    "close_pools",
    "note_recovery",
    "shared_pool",
]

DEFAULT_POOL_SIZE = 10
DEFAULT_LEASE_SECONDS = 30.0
_CONNECT_TIMEOUT = 10
#: a connection idle for longer is verified with a round trip before it is lent (R130)
VERIFY_IDLE_SECONDS = 1.0
_MIN_DEADLINE = 10.0  # the least a lent connection may wait on a silent server
_CHECK_SECONDS = 3.0  # the most the check's round trip may take
_RETRY_SECONDS = 0.5  # a new connection is tried again this often while none can be had ...
_RETRY_WINDOW = 60.0  # ... for this long; then psycopg_pool's own doubling waits
RELEASE_WAIT = 2.0  # how long a store's `close` waits for a connection to end its lease


APPLICATION_NAME = "jfsm-store"  # how the pool's connections show in pg_stat_activity


def _drain(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Read whatever waits on an idle connection's socket, without blocking; True if
    anything did. Raises `OperationalError` when the server ended the session (end of
    stream, or an error that broke the connection)."""
    pgconn = conn.pgconn
    got = False
    for _ in range(8):  # a notice, then an error, then the end of the stream at most
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
        if not readable:
            break
        got = True
        pgconn.consume_input()  # raises OperationalError at the end of the stream
        if pgconn.status != psycopg.pq.ConnStatus.OK:
            raise psycopg.OperationalError("the server ended the connection")
    return got


async def note_recovery(conn: psycopg.AsyncConnection[Any], exc: BaseException) -> None:
    """After the server refused a statement with 25006 (read-only) or 55000 (recovery in
    progress), ask it whether it is a standby (a node demoted or reached during a failover:
    the refusal passes) and note the answer on `exc` (`jfsm_in_recovery`, read by
    `conninfo.refusal_passes`); a standby's connection is closed, so that the pool connects
    to the primary. Never raises."""
    if getattr(exc, "sqlstate", None) not in ("25006", "55000"):
        return
    try:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            await conn.rollback()
        cur = await conn.execute("SELECT pg_is_in_recovery()")
        row = await cur.fetchone()
        in_recovery = bool(row and row[0])
    except psycopg.Error:
        in_recovery = True  # unknown: taken as passing
    with contextlib.suppress(AttributeError):
        exc.jfsm_in_recovery = in_recovery  # type: ignore[attr-defined]
    if in_recovery:
        with contextlib.suppress(psycopg.Error):
            await conn.close()


def _cut(conn: psycopg.AsyncConnection[Any]) -> None:
    """Shut the connection's socket down (both ways): a statement waiting on it fails at
    once as a lost connection. Never a cancel request (see the module docstring)."""
    with contextlib.suppress(Exception):
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


class _Deadline:
    """A timer that cuts a connection (`_cut`) unless cancelled first; `fired` says if it did."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], seconds: float) -> None:
        self.fired = False
        self._conn = conn
        self._handle = asyncio.get_running_loop().call_later(seconds, self._fire)

    def _fire(self) -> None:
        self.fired = True
        _cut(self._conn)

    def cancel(self) -> None:
        self._handle.cancel()


class _Reconnecting(psycopg.AsyncConnection[Any]):
    """The pool's connections. `connect` tries again every `_RETRY_SECONDS` while no server
    of the target accepts it (a failover under way: the old primary gone, the new one not yet
    promoted), for up to `_RETRY_WINDOW` seconds, so that the pool reaches a new primary
    within half a second of its promotion rather than after psycopg_pool's doubling waits
    (1, 2, 4, 8... s). A permanent error (credentials, a missing database) fails at once."""

    @classmethod
    async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        give_up = time.monotonic() + _RETRY_WINDOW
        while True:
            try:
                return await super().connect(conninfo, **kwargs)
            except psycopg.OperationalError as exc:
                if is_permanent(exc) or time.monotonic() >= give_up:
                    raise
            await asyncio.sleep(_RETRY_SECONDS)


def _connect_kwargs(conninfo: str) -> dict[str, Any]:
    """The connection settings the pool adds to `conninfo`; its own `connect_timeout`
    wins over the default (a multi-host target may want a short one per node)."""
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "prepare_threshold": None,
        "application_name": APPLICATION_NAME,
    }
    try:
        given = conninfo_to_dict(conninfo)
    except psycopg.Error:
        given = {}
    if "connect_timeout" not in given:
        kwargs["connect_timeout"] = _CONNECT_TIMEOUT
    return kwargs


class Leased(Protocol):
    """What the renewal timer needs of a store."""

    game_id: str
    token: int

    @property
    def seq(self) -> int: ...

    def lost_lease(self) -> None: ...


class PgPool:
    """A process's connections to one database and the leases of its open games."""

    def __init__(self, conninfo: str, *, max_size: int, lease_seconds: float) -> None:
        self.conninfo = conninfo
        self.lease_seconds = lease_seconds
        #: how long a lent connection may wait on a silent server before it is cut
        self.deadline_seconds = max(lease_seconds, _MIN_DEADLINE)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        #: what the database must hold, and whether it was found lacking (R181)
        self.history = HistoryWatch(describe(conninfo))
        self._kwargs = _connect_kwargs(conninfo)
        self.pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            open=False,
            check=self._check,
            configure=self._configure,
            connection_class=_Reconnecting,
            kwargs=self._kwargs,
            timeout=30,
            name="jfsm",
        )
        self._stores: weakref.WeakSet[Any] = weakref.WeakSet()
        self._timer: asyncio.Task[None] | None = None
        self._closing = False
        self._drains: set[asyncio.Task[None]] = set()  # held until done (not collected)
        # when each connection went back to the pool (or was made)
        self._idle_since: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self.loop: asyncio.AbstractEventLoop | None = None

    async def open(self) -> None:
        """Check the target (credentials, database, schema) with one direct connection, then
        open the pool. Raises `StoreUnusable` or `StoreUnavailable` (one line, no secret)."""
        try:
            conn = await psycopg.AsyncConnection.connect(self.conninfo, **self._kwargs)
        except psycopg.Error as exc:
            raise connection_error(exc, self.conninfo) from None
        deadline = _Deadline(conn, self.deadline_seconds)
        try:
            await require_schema_async(conn)
            await self._look_for_mark(conn)
        except psycopg.Error as exc:
            raise connection_error(exc, self.conninfo, "read the schema at") from None
        finally:
            deadline.cancel()
            await conn.close()
        await self.pool.open(wait=False)
        observability.watch_pool(self)  # its size and waits, read at collection time
        self.loop = asyncio.get_running_loop()
        self._timer = self.loop.create_task(self._renew_forever())

    @contextlib.asynccontextmanager
    async def connection(
        self, timeout: float | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A checked connection of the pool, cut if the server stays silent past
        `deadline_seconds` (see the module docstring). Raises `StoreUnavailable` when none
        can be had within `timeout` (default: the pool's, 30 s), `StoreHistoryLost` once the
        pool found the database lacking acknowledged writes (nothing is sent then); a
        `StoreHistoryLost` raised in the block first writes the database's mark on `conn`."""
        self.history.refuse()
        wait = self.pool.timeout if timeout is None else timeout
        try:
            async with self.pool.connection(timeout=wait) as conn:
                deadline = _Deadline(conn, self.deadline_seconds)
                try:
                    yield conn
                except StoreHistoryLost:
                    await self._write_mark(conn)
                    raise
                finally:
                    deadline.cancel()
                    self._idle_since[conn] = time.monotonic()
        except PoolTimeout as exc:
            raise StoreUnavailable(
                f"no connection to PostgreSQL at {describe(self.conninfo)} within "
                f"{wait:g} s (server down, or the pool of {self.pool.max_size} "
                "connections busy)",
                state="open",
            ) from exc

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._idle_since[conn] = time.monotonic()
        await self._look_for_mark(conn)

    # -- a database that lost acknowledged writes (R181) -------------------------------
    def check_position(
        self, position: WalPosition, floor: WalPosition, *, acked: bool, marked: bool = False
    ) -> None:
        """Judge what a statement sent with `floor` read of its server (`history`): raises
        `StoreHistoryLost` when the server is behind the floor or the database is marked;
        an `acked` statement (it committed a write) raises the mark."""
        error = self.history.check(position, floor, acked=acked, marked=marked)
        if error is not None:
            raise error

    def judge_row(self, store: Leased, token: int, seq: int, stored: tuple[int, int] | None) -> str:
        """`history.judge_row` of a write of `store` (sent with `token` and `seq`) that did
        not land; raises `StoreHistoryLost` (the pool's loss recorded) when the row is
        behind, else returns `"fenced"` or `"ahead"`."""
        verdict = judge_row(token, seq, stored)
        if verdict == "lost":
            assert stored is not None
            raise self.history.lose(
                f"game {store.game_id!r} holds token {stored[0]} and {stored[1]} landed writes, "
                f"where this process holds token {token} and saw {seq} acknowledged",
                game=store.game_id,
                token=token,
                seq=seq,
                stored_token=stored[0],
                stored_seq=stored[1],
            )
        return verdict

    async def _look_for_mark(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """A new connection reads the database's mark of lost history: the pool stops."""
        try:
            cur = await conn.execute("SELECT EXISTS (SELECT 1 FROM jfsm_history_lost)")
            row = await cur.fetchone()
        except psycopg.errors.UndefinedTable:  # an older schema: `open` refuses it
            return
        if row is not None and row[0]:
            self.history.check(WalPosition(0, 0), WalPosition(0, 0), acked=False, marked=True)

    async def _write_mark(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Write the database's mark of lost history (once a pool) on the connection that
        found the loss; a failure is logged, never raised (the pool refuses all the same)."""
        lost = self.history.lost
        if lost is None or self.history.marked_durably or conn.closed or conn.broken:
            return
        self.history.marked_durably = True
        try:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                await conn.rollback()
            await conn.execute(MARK, (self.owner, str(lost.details.get("reason", ""))[:2000]))
        except psycopg.Error as exc:
            self.history.marked_durably = False
            import logging

            logging.getLogger("jfsm.stores.postgres").warning(
                "jfsm: could not write the mark of lost history at %s: %s",
                describe(self.conninfo),
                " ".join(str(exc).split())[:200],
            )

    async def _check(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """The pool's check before lending `conn` (see the module docstring). Raises, with
        the connection closed, so that the pool replaces it."""
        deadline = None
        try:
            if conn.closed or conn.broken:
                raise psycopg.OperationalError("the connection is closed")
            unsolicited = _drain(conn)
            idle = time.monotonic() - self._idle_since.get(conn, 0.0)
            if unsolicited or idle > VERIFY_IDLE_SECONDS:
                deadline = _Deadline(conn, min(_CHECK_SECONDS, self.deadline_seconds))
                await conn.execute("")
        except BaseException:
            await conn.close()
            if deadline is not None and deadline.fired:
                # a silent server (frozen, cut off): its other idle connections are as
                # silent; drop them all now rather than waiting on each in turn
                task = asyncio.get_running_loop().create_task(self.pool.drain())
                self._drains.add(task)
                task.add_done_callback(self._drains.discard)
            raise
        finally:
            if deadline is not None:
                deadline.cancel()

    # -- leases --------------------------------------------------------------------------
    def register(self, store: Leased) -> None:
        """Renew `store`'s lease on the idle timer until `unregister`."""
        self._stores.add(store)

    def unregister(self, store: Leased) -> None:
        self._stores.discard(store)

    @observability.traced(
        "jfsm.lease.renew",
        attributes=lambda self, only=None: {"jfsm.store.backend": "postgresql"},
        result=lambda renewed: {"jfsm.lease.renewed": renewed},
    )
    async def renew(self, only: list[Leased] | None = None) -> int:
        """Renew every registered store's lease now, or those of `only` (one statement); the
        stores whose token is no longer current are told (`lost_lease`). Returns how many
        were renewed. Raises `StoreUnavailable` when the server cannot be reached, and
        `StoreHistoryLost` when it lacks acknowledged writes (its position, or a game whose
        row is behind its store's)."""
        stores = [s for s in (list(self._stores) if only is None else only) if s.token]
        if not stores:
            return 0
        tokens = [s.token for s in stores]
        seqs = [s.seq for s in stores]
        params = {
            "lease": self.lease_seconds,
            "games": [s.game_id for s in stores],
            "tokens": tokens,
        }
        floor = self.history.floor()
        try:
            async with self.connection() as conn:
                cur = await conn.execute(RENEW, params)
                rows = await cur.fetchall()
                here = rows[0]
                self.check_position(
                    WalPosition(int(here[2]), int(here[3])), floor, acked=False, marked=here[4]
                )
                renewed = {(row[0], int(row[1])) for row in rows if row[0] is not None}
                missed = [
                    (store, token, seq)
                    for store, token, seq in zip(stores, tokens, seqs, strict=True)
                    if (store.game_id, token) not in renewed
                ]
                if missed:  # a newer owner, or a lost history: the rows as they are now
                    cur = await conn.execute(
                        "SELECT game_id, token, seq FROM jfsm_game WHERE game_id = ANY(%s)",
                        ([store.game_id for store, _, _ in missed],),
                    )
                    now = {row[0]: (int(row[1]), int(row[2])) for row in await cur.fetchall()}
                    for store, token, seq in missed:
                        self.judge_row(store, token, seq, now.get(store.game_id))
        except psycopg.Error as exc:
            raise connection_error(exc, self.conninfo, "renew leases at") from None
        for store, token, _ in missed:
            # by (game, token): a superseded store of a renewed game too; but a store that
            # settled a lost write meanwhile has a newer token of its own (R132)
            if store.token == token:
                store.lost_lease()
        return len(renewed)

    async def _renew_forever(self) -> None:
        period = max(0.05, self.lease_seconds / 3)
        try:
            while True:
                await asyncio.sleep(period)
                with contextlib.suppress(JfsmError):  # unreachable now; or history lost
                    await self.renew()
        finally:
            if not self._closing:
                # cancelled from outside: the event loop is ending. psycopg_pool's workers
                # outlive a cancellation while they retry a connection (server down), so
                # the loop would never end unless the pool is closed here.
                self._closing = True
                await self.pool.close(timeout=1)

    async def close(self) -> None:
        """Stop renewing and close the pool's connections."""
        self._closing = True
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
