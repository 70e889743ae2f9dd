"""The PostgreSQL store: many games in one database, one leased owner per game, fenced
writes, every game of a process on one shared pool of connections (native async).

The tables and their migrations are `schema`'s, leases and fenced writes
`fencing`'s, the pool and the lease timer `pool`'s, the grouping of concurrent commits into
one statement `group`'s (decision R152), reading and removing games without owning them
`games`'s (modules of this package).

# Errors

- `open`: `StoreLocked` (another owner's lease is live), `InvalidInput` (a game id
  PostgreSQL cannot hold; with `create=True` a game that exists already; with
  `create=False` a game that does not), `StoreUnusable` (not retryable: wrong credentials,
  missing database, schema missing or of another version: run `migrate`),
  `StoreUnavailable` (the server cannot be reached now).
- `commit`, `checkpoint`, `seed`: `QuotaExceeded` and `InvalidInput` before anything is
  sent; `StoreFenced` (nothing written; close the store); `StoreUnavailable` with state
  `open` when the statement failed and the connection is fine (nothing written), or state
  `broken` when the connection was lost: the write may or may not have landed. `details`
  then holds `seq`, the number the write would have had: a reopened store's `seq` equal or
  more says it landed (when no other owner came in between). The next call on a broken store
  settles it on a fresh connection of the pool: if the write did not land, the store takes a
  new token (the lost write, should it still reach the server, then writes nothing) and the
  call proceeds; if it landed (or the game was taken over) the store stays broken (or
  becomes fenced): close and reopen it. A connection lent longer than the pool's deadline
  (a silent server) is cut and counts as lost (`pool`).

Every call: `StoreHistoryLost` (not retryable, nothing written) once the pool found the
database lacking writes it saw acknowledged, or the database marked so by another worker
(`history`, decisions R181 and R182); every later call of the pool's stores then raises it
too, until the process restarts. A write the server refuses for good (a trigger, a
privilege, a read-only database) is `StoreUnusable` (state `open`), one that passes (a
deadlock, a timeout, a standby reached in a failover) `StoreUnavailable` (R184). A broken
store whose lost write landed says so in `details["landed"]` (R185).

No message carries the connection string's password.

**The one concept:** one game's owner handle on PostgreSQL: its image, its token and the
state a lost write leaves (broken, settled, fenced); the statements are `fencing`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, NoReturn

import psycopg

import jfsm.observability as observability
from jfsm.errors import BlockingCallInLoop, JfsmError, StoreFenced, StoreUnavailable
from jfsm.image import QUOTA_BYTES, StoreImage, seeded_image
from jfsm.limits import validate_owner
from jfsm.private_loop import run as run_on_private_loop
from jfsm.projection import Projection
from jfsm.stores.postgres.fencing import (
    CHECKPOINT,
    CONFIRM,
    RELEASE,
    ROW,
    SEED,
    SETTLE,
    SETTLE_LOCK_WAIT,
    take_many,
    take_ownership,
)
from jfsm.stores.postgres.games import (
    check_game_id,
    game_ids,
    load_image,
    load_images,
    read_image,
    remove_game,
)
from jfsm.stores.postgres.group import Lost, group_commit_default, grouped
from jfsm.stores.postgres.history import WalPosition
from jfsm.stores.postgres.pool import (
    RELEASE_WAIT,
    PgPool,
    close_pools,
    note_recovery,
    shared_pool,
)
from jfsm.stores.postgres.schema import SCHEMA_VERSION, connection_error, migrate, schema_version

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


_opens = itertools.count(1)


def _encode_keys(keys: Iterable[str]) -> list[bytes]:
    return [key.encode("utf-8") for key in keys]


@contextlib.asynccontextmanager
async def _noting_recovery(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    """A refusal of the server in the block is noted with whether it is a standby
    (`pool.note_recovery`), for `schema.connection_error` to tell whether it passes."""
    try:
        yield
    except psycopg.Error as exc:
        if not (conn.broken or conn.closed):
            await note_recovery(conn, exc)
        raise


def _position(row: Any) -> WalPosition:
    """The server's position in a statement's answer (columns 1 and 2, `history`)."""
    return WalPosition(int(row[1]), int(row[2]))


def _position_check(pool: PgPool) -> tuple[Any, list[Any]]:
    """For an open: the check its first statement runs (`fencing.take_ownership`), and the
    list that receives [position, floor] for the mark once the open committed."""
    floor = pool.history.floor()
    seen: list[Any] = []

    def check(position: WalPosition, marked: bool) -> None:
        pool.check_position(position, floor, acked=False, marked=marked)
        seen[:] = [position, floor]

    return check, seen


class PostgresStore:
    """One game's durable store in PostgreSQL, owned (leased) by this object until `close`;
    see the module docstrings for errors (here), tables (`schema`) and leases
    (`fencing`)."""

    durable = True

    def __init__(
        self,
        pool: PgPool,
        game_id: str,
        token: int,
        seq: int,
        image: StoreImage,
        created: bool,
        group_commit: bool | None = None,
    ) -> None:
        # Use `PostgresStore.open`; this only assembles what it loaded.
        self._pool: PgPool | None = pool
        #: commits join the pool's batches (R152); False: each is a batch of its own
        self.group_commit = group_commit_default() if group_commit is None else group_commit
        self.game_id = game_id
        self.token = token
        self._seq = seq
        self._image = image
        self.created = created  # this open created the game's row
        base = image.base_bytes()
        # the keys written since the checkpoint: a dict's keys, which the garbage collector
        # does not walk, as it would a set's (R150)
        self._dirty: dict[str, None] = {
            key: None for key in set(image.keys()).union(base) if image.raw(key) != base.get(key)
        }
        self._broken: int | None = None  # the seq of a write whose outcome is unknown
        self._settling = False  # a settle of this handle was sent and its answer lost
        self._fenced = False
        self._writes = 0  # writes this handle landed: each proved its ownership (R121)
        pool.register(self)

    @classmethod
    @observability.traced(
        observability.lease_name,
        attributes=lambda cls, conninfo, game_id, **_: {
            "jfsm.store.backend": "postgresql",
            "jfsm.game.id": game_id,
        },
    )
    async def open(
        cls,
        conninfo: str,
        game_id: str,
        *,
        quota: int = QUOTA_BYTES,
        takeover: bool = False,
        create: bool | None = None,
        lease_seconds: float | None = None,
        pool_size: int | None = None,
        owner: str | None = None,
        group_commit: bool | None = None,
    ) -> PostgresStore:
        """Own game `game_id` in the database at `conninfo` (URL or keyword string) and load
        its rows once, in one transaction on the process's shared pool.

        `create`: True refuses a game that exists already (`InvalidInput`), False one that
        does not, None creates it if missing. `lease_seconds` (default
        `JFSM_PG_LEASE_SECONDS` or 30) picks the process's pool (one per lease length);
        `pool_size` sizes it when this open creates it. `owner` is the lease's owner id
        (default: unique to this open; `InvalidInput` unless it matches
        `jfsm.limits.OWNER_PATTERN`); a given owner id reclaims its own live lease at once
        (a restarted worker, R61). `group_commit` (default `JFSM_PG_GROUP_COMMIT`, on):
        this game's commits share statements with the pool's other games' (R152, module
        `group`). Other errors: see the module docstring; nothing changes on error.
        """
        check_game_id(game_id)
        if owner is not None:
            validate_owner(owner)
        pool = await shared_pool(conninfo, max_size=pool_size, lease_seconds=lease_seconds)
        who = owner or f"{pool.owner}:{next(_opens)}"  # unique: never reclaims another's
        check, seen = _position_check(pool)
        try:
            async with pool.connection() as conn, _noting_recovery(conn):
                async with conn.transaction():
                    token, seq, created = await take_ownership(
                        conn,
                        game_id,
                        who,
                        takeover=takeover,
                        create=create,
                        lease_seconds=pool.lease_seconds,
                        check=check,
                    )
                    image = await load_image(conn, game_id, quota)
                pool.check_position(seen[0], seen[1], acked=True)  # committed: the new mark
        except psycopg.Error as exc:
            raise connection_error(exc, conninfo, f"open game {game_id!r} at") from None
        return cls(pool, game_id, token, seq, image, created, group_commit)

    @classmethod
    @observability.traced(
        observability.lease_name,
        attributes=lambda cls, conninfo, game_ids, **_: {
            "jfsm.store.backend": "postgresql",
            "jfsm.lease.games": len(game_ids),
        },
    )
    async def open_many(
        cls,
        conninfo: str,
        game_ids: list[str],
        *,
        quota: int = QUOTA_BYTES,
        takeover: bool = False,
        lease_seconds: float | None = None,
        pool_size: int | None = None,
        owner: str | None = None,
        group_commit: bool | None = None,
    ) -> tuple[dict[str, PostgresStore], dict[str, str]]:
        """Own many games at once (a worker starting up): `open` of each (created if
        missing), in one transaction of a few statements whatever their number. Returns
        the stores opened and, for the games refused because another owner's lease is live,
        that owner. Errors: as `open`, for the whole batch (nothing opened then)."""
        for game_id in game_ids:
            check_game_id(game_id)
        pool = await shared_pool(conninfo, max_size=pool_size, lease_seconds=lease_seconds)
        games = sorted(set(game_ids))
        who = [owner or f"{pool.owner}:{next(_opens)}" for _ in games]
        check, seen = _position_check(pool)
        try:
            async with pool.connection() as conn, _noting_recovery(conn):
                async with conn.transaction():
                    taken, refused = await take_many(
                        conn,
                        games,
                        who,
                        takeover=takeover,
                        lease_seconds=pool.lease_seconds,
                        check=check,
                    )
                    images = await load_images(conn, list(taken), quota)
                pool.check_position(seen[0], seen[1], acked=True)
        except psycopg.Error as exc:
            raise connection_error(exc, conninfo, "open games at") from None
        stores = {
            game: cls(pool, game, token, seq, images[game], created, group_commit)
            for game, (token, seq, created) in taken.items()
        }
        return stores, refused

    @classmethod
    def open_sync(
        cls,
        conninfo: str,
        game_id: str,
        *,
        quota: int = QUOTA_BYTES,
        takeover: bool = False,
        create: bool | None = None,
        lease_seconds: float | None = None,
        pool_size: int | None = None,
        owner: str | None = None,
        group_commit: bool | None = None,
    ) -> PostgresStore:
        """`open` for blocking code (decision R162): the store is opened on the process's
        private event loop (`jfsm.private_loop`), the loop `SyncGameEngine` runs on, so pass
        it to a `SyncGameEngine`; in async code, `await PostgresStore.open(...)`. Arguments
        and errors as `open`; `BlockingCallInLoop` when called from a running event loop."""
        if asyncio._get_running_loop() is not None:
            raise BlockingCallInLoop(
                "PostgresStore.open_sync blocks, and was called from a running event loop; "
                "nothing was opened: in async code, `await PostgresStore.open(...)`",
                state="closed",
            )
        return run_on_private_loop(
            cls.open(
                conninfo,
                game_id,
                quota=quota,
                takeover=takeover,
                create=create,
                lease_seconds=lease_seconds,
                pool_size=pool_size,
                owner=owner,
                group_commit=group_commit,
            )
        )

    # -- the Store protocol --------------------------------------------------------------
    @property
    def image(self) -> StoreImage:
        return self._image

    @property
    def writes(self) -> int:
        """How many writes this handle landed (each checked its token at the store)."""
        return self._writes

    @property
    def seq(self) -> int:
        """How many writes (commits, checkpoints, seeds) of this game have landed, as of
        this store's last successful write or its open."""
        return self._seq

    async def confirm(self) -> None:
        """Before serving a read (decision R121): one statement checks that this handle's
        token is still the game's, renewing the lease. Raises `StoreFenced` (state `fenced`)
        once another owner took the game, `StoreUnavailable` on a closed store, when the
        server cannot be reached (nothing changed) or, on a broken store, as a write would
        (a write whose outcome is unknown is resolved first)."""
        await self._require_writable()
        pool = self._pool
        assert pool is not None
        token, seq = self.token, self._seq
        params = {"game": self.game_id, "token": token, "seq": seq, "lease": pool.lease_seconds}
        floor = pool.history.floor()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(CONFIRM, params)
                row = await cur.fetchone()
                assert row is not None
                pool.check_position(_position(row), floor, acked=False, marked=row[3])
                if row[0] is None:
                    await self._not_landed(conn, token, seq)
        except psycopg.Error as exc:
            error = connection_error(exc, pool.conninfo, f"check the owner of {self.game_id!r} at")
            raise type(error)(error.message, state="open") from None

    async def commit(self, projection: Projection) -> None:
        """Write `projection` fenced by this owner's token (renewing the lease), in one
        statement shared with the concurrent commits of the pool's other games (R152), then
        apply it. Raises `QuotaExceeded` (nothing sent), `StoreFenced`, or
        `StoreUnavailable` (see the module docstring for what each leaves); another game's
        refusal in the same statement is never this one's."""
        await self._require_writable()
        footprint = self._image.check(projection)
        if projection.is_empty():
            return
        pool = self._pool
        assert pool is not None
        expected = self._seq + 1
        token, known = self.token, self._seq
        try:
            seq = await grouped(pool).commit(
                self.game_id,
                token,
                footprint,
                _encode_keys(projection.sets),
                list(projection.sets.values()),
                _encode_keys(projection.deletes),
                seq=known,
                alone=not self.group_commit,
            )
        except Lost:
            self._broken = expected
            raise self._lost("commit", expected) from None
        except psycopg.Error as exc:
            raise self._refused(exc, "commit", expected) from None
        if seq is None:  # a newer owner, or the game's row behind this store's count
            try:
                async with pool.connection() as conn:
                    await self._not_landed(conn, token, known)
            except psycopg.Error as exc:
                raise self._refused(exc, "commit", expected) from None
        self._seq = seq
        self._writes += 1
        self._image.apply_unchecked(projection)
        self._dirty.update(dict.fromkeys(projection.touched()))

    async def checkpoint(self) -> None:
        """Make the current store the change log's base, in one fenced statement.
        Raises `StoreFenced` or `StoreUnavailable` (see the module docstring)."""
        await self._require_writable()
        image = StoreImage(self._image.values_bytes(), quota=self._image.quota)
        params = {"footprint": image.footprint(), "keys": _encode_keys(self._dirty)}
        await self._write(CHECKPOINT, params, "checkpoint")
        self._image = image
        self._dirty = {}

    async def seed(self, values: Mapping[str, bytes]) -> None:
        """Fill this *empty* store with `values` as its checkpointed base (empty change log).
        Raises `InvalidInput` if the store is not empty, `QuotaExceeded` (nothing sent in
        either case), `StoreFenced` or `StoreUnavailable`."""
        await self._require_writable()
        image = seeded_image(self._image, values)
        seeded = image.values_bytes()
        params = {
            "footprint": image.footprint(),
            "keys": _encode_keys(seeded),
            "values": list(seeded.values()),
        }
        await self._write(SEED, params, "seed")
        self._image = image

    async def close(self) -> None:
        """End this owner's lease at once (the next plain open need not wait) and leave the
        pool. Idempotent; never raises: if no connection can be had within `RELEASE_WAIT`
        seconds (the server out of reach), the lease simply runs out."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        pool.unregister(self)
        if self._fenced:
            return
        try:  # a server out of reach is not waited for long: the lease runs out by itself
            async with pool.connection(timeout=RELEASE_WAIT) as conn:
                await conn.execute(RELEASE, {"game": self.game_id, "token": self.token})
        except (psycopg.Error, JfsmError):  # unreachable, or a lost history: nothing sent
            pass

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """`async with await PostgresStore.open(...) as store:` closes it (its lease ended)
        on leaving the block."""
        await self.close()

    async def remove(self) -> None:
        """Delete this game (it must still be this store's: token current) and close.
        Raises `StoreFenced` (nothing deleted) or `StoreUnavailable`."""
        pool = self._pool
        if pool is None:
            raise StoreUnavailable(f"store of game {self.game_id!r} is closed", state="closed")
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "DELETE FROM jfsm_game WHERE game_id = %s AND token = %s RETURNING 1",
                    (self.game_id, self.token),
                )
                gone = await cur.fetchone() is not None
        except psycopg.Error as exc:
            raise connection_error(exc, pool.conninfo, "remove a game at") from None
        if not gone:
            self._fenced = True
            raise self.fenced_error()
        self._fenced = True  # nothing more to release
        await self.close()

    async def renew(self) -> bool:
        """Renew this owner's lease now, as the idle timer does (only while its token is
        still the game's, JF-STORE-031); returns whether it was. Raises `StoreUnavailable`
        on a closed store or when the server cannot be reached."""
        pool = self._pool
        if pool is None:
            raise StoreUnavailable(f"store of game {self.game_id!r} is closed", state="closed")
        return not self._fenced and await pool.renew([self]) == 1

    def lost_lease(self) -> None:
        """The renewal timer found a newer token: every write is refused from now on."""
        self._fenced = True

    @property
    def state(self) -> str:
        """This handle's state in the machine `store_ownership`: `owner`, `fenced`, `broken`
        or `closed`; or `history_lost` once its pool found the database lacking acknowledged
        writes (every call refused, `StoreHistoryLost`)."""
        if self._pool is None:
            return "closed"
        if self._pool.history.lost is not None:
            return "history_lost"
        if self._fenced:
            return "fenced"
        return "broken" if self._broken is not None else "owner"

    def __repr__(self) -> str:
        return f"PostgresStore({self.game_id!r}, token={self.token}, seq={self._seq}, {self.state})"

    # -- internals -----------------------------------------------------------------------
    async def _require_writable(self) -> None:
        if self._pool is None:
            raise StoreUnavailable(f"store of game {self.game_id!r} is closed", state="closed")
        self._pool.history.refuse()
        if self._fenced:
            raise self.fenced_error()
        if self._broken is not None:
            await self._resolve()

    @observability.traced(
        "jfsm.store.settle",
        attributes=lambda self: {"jfsm.store.backend": "postgresql", "jfsm.game.id": self.game_id},
    )
    async def _resolve(self) -> None:
        """After a lost connection: settle for good, on a fresh pooled connection, whether
        the write numbered `_broken` landed (`fencing.SETTLE`). Not landed: the handle takes
        a new token in that statement, so the lost write can never land later, and is an
        owner again. Landed: it stays broken, and says so (`details["landed"]`). A lost
        write still running on the server holds the game's row: the settle waits for it at
        most `SETTLE_LOCK_WAIT`, then the call fails (broken) and the next asks again.
        Another owner's token: fenced; but when a
        settle of this handle was itself cut off, a changed token may be its own, so it
        stays broken (close and reopen: the same owner id reclaims the game)."""
        pool, expected = self._pool, self._broken
        assert pool is not None and expected is not None
        params = {
            "game": self.game_id,
            "token": self.token,
            "seq": self._seq,
            "lease": pool.lease_seconds,
            "lock_wait": f"{round(min(SETTLE_LOCK_WAIT, pool.deadline_seconds / 2) * 1000)}ms",
        }
        settled = row = None
        for attempt in range(4):
            floor = pool.history.floor()
            params.update(pool.history.params(floor))
            try:
                async with pool.connection() as conn:
                    if not self._settling:  # no settle of ours in doubt: settle now
                        self._settling = True
                        cur = await conn.execute(SETTLE, params)
                        answer = await cur.fetchone()
                        assert answer is not None
                        self._settling = False
                        landed = answer[0] is not None
                        pool.check_position(
                            _position(answer), floor, acked=landed, marked=answer[3]
                        )
                        settled = answer if landed else None
                    if settled is None:
                        cur = await conn.execute(ROW, (self.game_id,))
                        row = await cur.fetchone()
                        stored = None if row is None else (int(row[0]), int(row[1]))
                        if pool.judge_row(self, self.token, self._seq, stored) == "lost":
                            raise AssertionError("judge_row raises on a lost history")
            except psycopg.errors.LockNotAvailable as exc:  # nothing done: the lost write
                self._settling = False  # still holds the row on the server; ask again later
                raise StoreUnavailable(
                    f"store of game {self.game_id!r}: the write numbered {expected} is still "
                    "running on the server (it holds the game's row); the next call asks again",
                    state="broken",
                    seq=expected,
                ) from exc
            except (psycopg.Error, StoreUnavailable) as exc:
                if attempt < 3 and isinstance(exc, psycopg.Error):  # not after a pool's wait
                    continue
                raise StoreUnavailable(
                    f"store of game {self.game_id!r}: the server is still unreachable; "
                    f"the write numbered {expected} may or may not have landed",
                    state="broken",
                    seq=expected,
                ) from exc
            mine = row is not None and int(row[0]) == self.token
            unsettled = row is not None and mine and int(row[1]) == self._seq
            if settled is None and self._settling and unsettled:
                self._settling = False  # our earlier settle did not land: settle again
                continue
            break
        if settled is not None:
            self.token = int(settled[0])  # the lost write, if it ever runs, is fenced
            self._broken = None  # it did not land: the image is the database's
            return
        if not mine and not self._settling:
            self._fenced = True
            raise self.fenced_error()
        if mine and row is not None and int(row[1]) == self._seq + 1:
            # the token is still this handle's (no settle of it landed: each takes a new
            # token) and one more write landed: the lost one, for only this handle writes
            # with its token and its writes go one at a time
            raise StoreUnavailable(
                f"store of game {self.game_id!r}: the write numbered {expected} landed after "
                "its connection was lost; close and reopen the store to serve the game as "
                "it is (the reference driver does so for the call)",
                state="broken",
                seq=expected,
                landed=True,
            )
        raise StoreUnavailable(
            f"store of game {self.game_id!r}: the write numbered {expected} landed after its "
            "connection was lost, or the outcome of settling it is unknown; close and "
            "reopen the store",
            state="broken",
            seq=expected,
        )

    async def _not_landed(
        self, conn: psycopg.AsyncConnection[Any], token: int, seq: int
    ) -> NoReturn:
        """A write (or a confirm) sent with `token` and `seq` did not land: read the game's
        row now and raise what it means: `StoreHistoryLost` (the row is behind: the pool's
        loss is recorded), `StoreFenced` (a newer owner), or `StoreUnavailable` (state
        `broken`: a write of this handle landed that it does not know of; reopen)."""
        pool = self._pool
        assert pool is not None
        cur = await conn.execute(ROW, (self.game_id,))
        row = await cur.fetchone()
        stored = None if row is None else (int(row[0]), int(row[1]))
        if pool.judge_row(self, token, seq, stored) == "ahead":
            self._broken = seq + 1
            raise StoreUnavailable(
                f"store of game {self.game_id!r}: the game holds more landed writes than this "
                "handle knows of; close and reopen the store",
                state="broken",
                seq=seq + 1,
            )
        self._fenced = True
        raise self.fenced_error()

    def fenced_error(self) -> StoreFenced:
        observability.fenced("postgresql", self.game_id, self.token)  # one refusal each
        return StoreFenced(
            f"game {self.game_id!r} was taken over by a newer owner than token {self.token}; "
            "nothing was written. Close this store",
            state="fenced",
            game=self.game_id,
            token=self.token,
        )

    @observability.traced(
        lambda self, sql, params, what: observability.db_name(what),
        kind="client",
        attributes=lambda self, sql, params, what: observability.db_attributes(
            self._pool.conninfo if self._pool is not None else "", what
        ),
    )
    async def _write(self, sql: str, params: dict[str, Any], what: str) -> None:
        """Run one fenced write statement (autocommit: the statement is the transaction)."""
        pool = self._pool
        assert pool is not None
        token, known = self.token, self._seq
        floor = pool.history.floor()
        params.update(game=self.game_id, token=token, seq=known, lease=pool.lease_seconds)
        params.update(pool.history.params(floor))
        expected = self._seq + 1
        lost = False
        try:
            async with pool.connection() as conn:
                try:
                    cur = await conn.execute(sql, params)
                    row = await cur.fetchone()
                except psycopg.Error as exc:
                    lost = conn.broken or conn.closed
                    if not lost:
                        await note_recovery(conn, exc)
                    raise
                assert row is not None
                landed = row[0] is not None
                pool.check_position(_position(row), floor, acked=landed, marked=row[3])
                if not landed:  # a newer owner, or the game's row behind this store's count
                    await self._not_landed(conn, token, known)
        except psycopg.Error as exc:
            if lost:
                self._broken = expected
                raise self._lost(what, expected) from None
            raise self._refused(exc, what, expected) from None
        self._seq = int(row[0])
        self._writes += 1

    def _lost(self, what: str, expected: int) -> StoreUnavailable:
        return StoreUnavailable(
            f"{what} of game {self.game_id!r}: the connection was lost, so it may or "
            f"may not have landed: the next call asks the database (compare a "
            f"reopened store's seq with {expected})",
            state="broken",
            seq=expected,
        )

    def _refused(self, exc: psycopg.Error, what: str, expected: int) -> StoreUnavailable:
        """The server refused the write (nothing written): `StoreUnavailable`, retryable
        only for a refusal that passes (`schema.connection_error`, decision R184)."""
        assert self._pool is not None
        error = connection_error(exc, self._pool.conninfo, f"{what} game {self.game_id!r} at")
        return type(error)(f"{error.message}; nothing was written", state="open", seq=expected)
