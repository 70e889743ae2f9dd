"""Group commit: the concurrent commits of different games of one pool share one statement,
so one round trip, one transaction and one WAL flush serve many games (decision R152).

# The rule

A commit joins the pool's forming batch. A batch leaves when the event loop has run the
callbacks that were ready with its first member (so everything that commits in the same
pass of the loop rides along; there is no timer unless `JFSM_PG_GROUP_WAIT_MS` asks for
one), provided fewer than `max_batches` batches of the pool are in flight (default: one a
connection of the pool); otherwise it leaves as soon as one of them is done. A batch holds
at most `max_members` members (`JFSM_PG_GROUP_MAX`, default 64) and never two commits of
one game; a game's commit waits while one of its game is in flight, so a game's commits
land one after another, in order. A commit thus waits for company at most one pass of the
loop (plus the configured wait), and for a free slot at most until a batch in flight ends.

A batch is one statement (`GROUP_COMMIT`) in its own transaction, with
`synchronous_commit = on` like every write of the store. Each member is fenced by its own
token (`fencing`): the game rows are locked in game id order (so batches, renewals and
takeovers of several processes never deadlock each other), a member whose token is no
longer its game's matches no row, and nothing of it lands (its values and deletions join on
the rows that matched). The statement returns the new `seq` of each member that landed: a
member is acknowledged only then, after the transaction committed. A member missing from
the result was fenced. If the statement fails and the connection is fine (a member the
server refuses, a deadlock it broke), nothing of the batch landed: each member is run again
alone, so only the refused one fails. If the connection is lost, every member's outcome is
unknown (`Lost`): each store resolves its own on its next call (see `store`).

`JFSM_PG_GROUP_COMMIT=0` (or `PostgresStore.open(..., group_commit=False)`) makes every
commit a batch of its own, sent at once: the same statement, one member.

# Errors

`commit` returns the member's new `seq`, or None when it did not land (fenced, or its row
behind the store's count: the store asks which, `history`). It raises `Lost`
(the connection broke while its batch was in flight: it may or may not have landed), a
`psycopg.Error` (the server refused its write: nothing of it landed) or `StoreUnavailable`
(no connection of the pool in time: nothing sent). Once a member joined a batch its outcome
is waited for even if the awaiting task is cancelled; the cancellation then reaches the
caller at its next await, so a store's image never misses a write that landed.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections import deque
from dataclasses import dataclass, field

import psycopg

import jfsm.observability as observability
from jfsm.stores.offload import Unstoppable, await_to_end
from jfsm.stores.postgres.fencing import HERE, LANDS
from jfsm.stores.postgres.history import WalPosition
from jfsm.stores.postgres.pool import PgPool, note_recovery

__all__ = ["GROUP_COMMIT", "GroupCommit", "Lost", "Member", "group_commit_default", "grouped"]

#: The fenced write of many games' commits (`fencing.COMMIT`, for a batch): arrays of the
#: members (game, token, count of landed writes, footprint), of their values (game, key,
#: value) and of their deletions (game, key). Returns (game_id, seq) of each member that
#: landed with the server's position (`history`); one row of NULLs and the position when
#: none did. Nothing lands on a server behind the pool's floor.
GROUP_COMMIT = (
    "WITH "
    + HERE
    + """,
member AS MATERIALIZED (
    SELECT * FROM unnest(%(games)s::text[], %(tokens)s::bigint[], %(seqs)s::bigint[],
                         %(footprints)s::bigint[])
        AS m(game_id, token, seq, footprint)
), locked AS MATERIALIZED (
    SELECT g.game_id FROM jfsm_game g JOIN member m ON g.game_id = m.game_id
    WHERE """
    + LANDS
    + """ AND g.token = m.token AND g.seq = coalesce(m.seq, g.seq)
    ORDER BY g.game_id FOR UPDATE OF g
), owner AS (
    UPDATE jfsm_game g SET seq = g.seq + 1, footprint = m.footprint,
        lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
    FROM member m, locked l
    WHERE g.game_id = m.game_id AND l.game_id = m.game_id AND g.token = m.token
        AND g.seq = coalesce(m.seq, g.seq)
    RETURNING g.game_id, g.seq
), put AS (
    INSERT INTO jfsm_value (game_id, key, value)
    SELECT s.game_id, s.k, s.v
    FROM unnest(%(value_games)s::text[], %(keys)b::bytea[], %(values)b::bytea[])
        AS s(game_id, k, v)
    JOIN owner o ON o.game_id = s.game_id
    ON CONFLICT (game_id, key) DO UPDATE SET value = EXCLUDED.value
), dropped AS MATERIALIZED (
    SELECT * FROM unnest(%(delete_games)s::text[], %(deletes)b::bytea[]) AS x(game_id, k)
), gone AS (
    DELETE FROM jfsm_value d USING owner o, dropped x
    WHERE o.game_id = x.game_id AND d.game_id = x.game_id AND d.key = x.k AND d.base IS NULL
), cleared AS (
    UPDATE jfsm_value c SET value = NULL FROM owner o, dropped x
    WHERE o.game_id = x.game_id AND c.game_id = x.game_id AND c.key = x.k
        AND c.base IS NOT NULL
)
SELECT o.game_id, o.seq, here.timeline, here.wal, here.marked FROM here LEFT JOIN owner o ON true
"""
)

DEFAULT_MAX_MEMBERS = 64


class Lost(Exception):
    """The connection broke while the member's batch was in flight: its write may or may
    not have landed."""


def group_commit_default() -> bool:
    """Whether commits are grouped when a store does not say: `JFSM_PG_GROUP_COMMIT`
    (`0`, `false`, `off` or `no` turn it off), on by default."""
    value = os.environ.get("JFSM_PG_GROUP_COMMIT", "1").strip().lower()
    return value not in ("0", "false", "off", "no")


@dataclass(eq=False)
class Member:
    """One game's commit waiting for (or riding in) a batch."""

    game: str
    token: int
    footprint: int
    keys: list[bytes]
    values: list[bytes]
    deletes: list[bytes]
    future: asyncio.Future[int | None] = field(repr=False)
    seq: int | None = None  # the game's landed writes the store knows (`history`, check b)


class GroupCommit:
    """The forming batch and the batches in flight of one pool (see the module docstring).

    `max_members` bounds a batch, `max_batches` the batches in flight at once, `wait` the
    seconds a batch waits for company beyond the loop's current pass (0: none), `alone`
    sends every commit as a batch of its own at once. `batches` counts the statements sent
    (a refused batch's members sent again alone included), `members` their members and
    `largest` the largest (for tests and benchmarks)."""

    def __init__(
        self,
        pool: PgPool,
        *,
        max_members: int = DEFAULT_MAX_MEMBERS,
        max_batches: int | None = None,
        wait: float = 0.0,
    ) -> None:
        if max_batches is None:
            max_batches = pool.pool.max_size  # a batch a connection
        if max_members < 1 or max_batches < 1 or wait < 0:
            raise ValueError("a batch needs room for a member, a slot and a wait >= 0")
        self.pool = pool
        self.max_members = max_members
        self.max_batches = max_batches
        self.wait = wait
        self.batches = 0
        self.members = 0
        self.largest = 0
        self._queue: deque[Member] = deque()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._sending: set[str] = set()  # the games of the batches in flight
        self._scheduled = False

    async def commit(
        self,
        game: str,
        token: int,
        footprint: int,
        keys: list[bytes],
        values: list[bytes],
        deletes: list[bytes],
        *,
        seq: int | None = None,
        alone: bool = False,
    ) -> int | None:
        """Commit one game's projection (its encoded keys, values and deleted keys) fenced
        by `token` and the game's count of landed writes `seq` (None: by the token alone);
        returns its new seq, or None
        when it did not land (a newer owner, or a row behind `seq`: the store asks which).
        Raises as the module docstring says, and `StoreHistoryLost` for every member of a
        statement whose server is behind the pool's floor."""
        loop = asyncio.get_running_loop()
        member = Member(game, token, footprint, keys, values, deletes, Unstoppable(loop=loop), seq)
        if alone:
            self._launch([member])
        else:
            self._queue.append(member)
            self._schedule(loop)
        return await await_to_end(member.future)

    # -- forming and sending batches -----------------------------------------------------
    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._scheduled:
            return
        self._scheduled = True
        if self.wait > 0:
            loop.call_later(self.wait, self._dispatch)
        else:
            loop.call_soon(self._dispatch)  # after the callbacks ready now: their commits

    def _dispatch(self) -> None:
        self._scheduled = False
        while self._queue and len(self._in_flight) < self.max_batches:
            batch: list[Member] = []
            kept: deque[Member] = deque()
            for member in self._queue:
                # one commit a game a batch, and none while its game has one in flight:
                # a game's commits land one after another, in order
                if len(batch) < self.max_members and member.game not in self._sending:
                    self._sending.add(member.game)
                    batch.append(member)
                else:
                    kept.append(member)
            self._queue = kept
            if not batch:
                return  # what waits is for games in flight: `_done` dispatches it
            self._launch(batch, marked=True)

    def _launch(self, batch: list[Member], *, marked: bool = False) -> None:
        games = {member.game for member in batch}
        if not marked:
            self._sending.update(games)
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._in_flight.add(task)
        task.add_done_callback(lambda done: self._done(done, games))

    def _done(self, task: asyncio.Task[None], games: set[str]) -> None:
        self._in_flight.discard(task)
        self._sending.difference_update(games)
        if self._queue and not self._scheduled:
            self._dispatch()  # the members that waited for a slot or their game, at once

    async def _send(self, batch: list[Member]) -> None:
        try:
            try:
                landed = await self._run(batch)
            except _Refused:  # nothing landed: each member again, alone
                for member in batch:
                    try:
                        one = await self._run([member])
                    except _Refused as refused:
                        _settle(member, refused.error)
                    else:
                        _settle(member, one.get(member.game))
                return
            for member in batch:
                _settle(member, landed.get(member.game))
        except BaseException as exc:  # Lost, StoreUnavailable, cancelled: every member
            for member in batch:
                _settle(member, exc if isinstance(exc, Exception) else Lost())
            if not isinstance(exc, Exception):
                raise

    @observability.traced(
        lambda self, batch: observability.db_name("commit", len(batch)),
        kind="client",
        attributes=lambda self, batch: observability.db_attributes(
            self.pool.conninfo, "commit", len(batch)
        ),
        on_success=lambda self, batch: observability.commit_batch(len(batch)),
    )
    async def _run(self, batch: list[Member]) -> dict[str, int]:
        """The batch's statement: {game: new seq} of the members that landed. Raises
        `_Refused` (the connection is fine: nothing landed), `Lost` or `StoreUnavailable`."""
        self.batches += 1
        self.members += len(batch)
        self.largest = max(self.largest, len(batch))
        params = {
            "lease": self.pool.lease_seconds,
            "games": [m.game for m in batch],
            "tokens": [m.token for m in batch],
            "seqs": [m.seq for m in batch],
            "footprints": [m.footprint for m in batch],
            "value_games": [m.game for m in batch for _ in m.keys],
            "keys": [k for m in batch for k in m.keys],
            "values": [v for m in batch for v in m.values],
            "delete_games": [m.game for m in batch for _ in m.deletes],
            "deletes": [k for m in batch for k in m.deletes],
        }
        floor = self.pool.history.floor()
        params.update(self.pool.history.params(floor))
        async with self.pool.connection() as conn:
            try:
                cur = await conn.execute(GROUP_COMMIT, params)
                rows = await cur.fetchall()
            except psycopg.Error as exc:
                if conn.broken or conn.closed:
                    raise Lost() from exc
                await note_recovery(conn, exc)
                raise _Refused(exc) from exc
            landed = {str(row[0]): int(row[1]) for row in rows if row[0] is not None}
            here = rows[0]
            position = WalPosition(int(here[2]), int(here[3]))
            self.pool.check_position(position, floor, acked=bool(landed), marked=here[4])
        return landed


class _Refused(Exception):
    def __init__(self, error: psycopg.Error) -> None:
        super().__init__(str(error))
        self.error = error


def _settle(member: Member, outcome: int | BaseException | None) -> None:
    if member.future.done():
        return
    if isinstance(outcome, BaseException):
        member.future.set_exception(outcome)
    else:
        member.future.set_result(outcome)


_groups: weakref.WeakKeyDictionary[PgPool, GroupCommit] = weakref.WeakKeyDictionary()


def grouped(pool: PgPool) -> GroupCommit:
    """The pool's `GroupCommit`, made on first use with `JFSM_PG_GROUP_MAX` members a batch
    at most (default 64), `JFSM_PG_GROUP_BATCHES` batches in flight (default: the pool's
    connections) and `JFSM_PG_GROUP_WAIT_MS` of waiting for company (default 0).
    `ValueError` for a setting that is not a number in range."""
    group = _groups.get(pool)
    if group is None:
        batches = os.environ.get("JFSM_PG_GROUP_BATCHES")
        group = _groups[pool] = GroupCommit(
            pool,
            max_members=int(os.environ.get("JFSM_PG_GROUP_MAX", DEFAULT_MAX_MEMBERS)),
            max_batches=int(batches) if batches else None,
            wait=float(os.environ.get("JFSM_PG_GROUP_WAIT_MS", 0)) / 1000,
        )
    return group
