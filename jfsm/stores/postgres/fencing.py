"""Ownership and fencing of a game in the PostgreSQL store: leases, and writes that land only
for the current owner.

# Leases and fencing (decisions R16, R60; machine `spec/machines/store_ownership.json`)

A game's owner is recorded in its row: `owner` (an id of the owning process), `token` (the
fencing token) and `lease_until`. Nothing holds a connection: ownership lives in the row, so
one pool of connections (through PgBouncer in transaction mode too) serves every game of a
process.

- `open` locks the row (`FOR UPDATE`) in a transaction that the server ends if its client
  stalls between two statements for a lease (`idle_in_transaction_session_timeout`, R123),
  and compares `lease_until` with the **server's** clock
  (`clock_timestamp()`): while the lease of another owner id is live a plain open is refused
  with `StoreLocked` naming the owner. The same owner id reclaims its game at once (a
  restarted worker with a stable id, decision R61), fencing its earlier incarnation.
  Otherwise, or with `takeover=True`, the caller becomes the owner with a token from the
  sequence `jfsm_token` (never reused, for any game id, even across removal) and a lease of
  `lease_seconds` from the server's now. Only the database server's clock is
  read; clients' clocks may be anywhere.
- Every write (commit, checkpoint, seed) is one statement whose first step is
  `UPDATE jfsm_game ... WHERE game_id = $g AND token = $t`, renewing the lease; the rest of
  the write joins on that step, so with a newer token nothing is written (`StoreFenced`).
  Row locking orders a write and a takeover. The same statement sets
  `synchronous_commit = on` for its own transaction (`set_config(..., true)`), whatever the
  server's or the role's default.
- An owner renews its lease on every write and on an idle timer (`RENEW`, one statement for
  every game of a process, each lease renewed only with its own token); `close` ends the
  lease at once. A crashed owner's games become free when their leases run out: failover
  takes at most `lease_seconds`.
- Before a read is served, `CONFIRM` checks the token the same way (renewing the lease): a
  superseded owner never serves its memory as current (R121).
- A handle that lost its connection with a write in flight settles it with `SETTLE` (R132):
  if the game still has the handle's token and the write count the handle knows, the write
  did not land, and the same statement gives the handle a new token, so that the lost write,
  should it still be on its way (a server that was frozen, or slow past the deadline), finds
  a newer token and writes nothing. The row lock orders it after a write still running.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

import jfsm.observability as observability
from jfsm.errors import InvalidInput, StoreLocked
from jfsm.stores.postgres.history import AHEAD_OF_FLOOR, POSITION, WalPosition

__all__ = [
    "CHECKPOINT",
    "COMMIT",
    "CONFIRM",
    "HERE",
    "LANDS",
    "RELEASE",
    "RENEW",
    "ROW",
    "SEED",
    "SETTLE",
    "SETTLE_LOCK_WAIT",
    "take_many",
    "take_ownership",
]

# Each write first sets synchronous_commit for its own (implicit) transaction: the commit of
# that transaction reads it, so an acknowledged write is on disk whatever the server default.
# `here` also reads the server's WAL position and the mark of lost history (`history`): the
# write lands only on a server not behind the pool's floor, on a row that still holds the
# handle's token *and* its count of landed writes (R181, R182). One row always comes back:
# (seq or NULL, timeline, wal, marked).
HERE = (
    "here AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true) AS on_, p.*"
    f" FROM {POSITION} AS p)"
)
LANDS = f"(SELECT on_ = 'on' AND {AHEAD_OF_FLOOR} FROM here)"

_OWNER = (
    "WITH "
    + HERE
    + """,
owner AS (
    UPDATE jfsm_game SET seq = seq + 1, {extra} footprint = %(footprint)s,
        lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
    WHERE game_id = %(game)s AND token = %(token)s AND seq = %(seq)s AND """
    + LANDS.replace("{", "{{").replace("}", "}}")
    + """
    RETURNING seq
)"""
)
_RESULT = """
SELECT o.seq, here.timeline, here.wal, here.marked FROM here LEFT JOIN owner o ON true
"""

COMMIT = (
    _OWNER.format(extra="")
    + """, put AS (
    INSERT INTO jfsm_value (game_id, key, value)
    SELECT %(game)s, s.k, s.v FROM owner, unnest(%(keys)b::bytea[], %(values)b::bytea[]) AS s(k, v)
    ON CONFLICT (game_id, key) DO UPDATE SET value = EXCLUDED.value
), gone AS (
    DELETE FROM jfsm_value d USING owner
    WHERE d.game_id = %(game)s AND d.key = ANY(%(deletes)b::bytea[]) AND d.base IS NULL
), cleared AS (
    UPDATE jfsm_value c SET value = NULL FROM owner
    WHERE c.game_id = %(game)s AND c.key = ANY(%(deletes)b::bytea[]) AND c.base IS NOT NULL
)"""
    + _RESULT
)

CHECKPOINT = (
    _OWNER.format(extra="generation = generation + 1,")
    + """, gone AS (
    DELETE FROM jfsm_value d USING owner
    WHERE d.game_id = %(game)s AND d.key = ANY(%(keys)b::bytea[]) AND d.value IS NULL
), based AS (
    UPDATE jfsm_value b SET base = b.value FROM owner
    WHERE b.game_id = %(game)s AND b.key = ANY(%(keys)b::bytea[]) AND b.value IS NOT NULL
)"""
    + _RESULT
)

SEED = (
    _OWNER.format(extra="generation = generation + 1,")
    + """, put AS (
    INSERT INTO jfsm_value (game_id, key, value, base)
    SELECT %(game)s, s.k, s.v, s.v
    FROM owner, unnest(%(keys)b::bytea[], %(values)b::bytea[]) AS s(k, v)
)"""
    + _RESULT
)

#: Renew the leases of (game, token) pairs still current; returns the pairs renewed (with the
#: server's position; a row of NULLs when none was). A pair whose token is no longer the
#: game's changes nothing: another owner's lease is never touched (JF-STORE-031). The rows are
#: locked in game id order, as a group commit locks them (R152): two statements that lock
#: several games never wait for each other in a cycle.
RENEW = f"""
WITH here AS MATERIALIZED (SELECT p.* FROM {POSITION} AS p),
locked AS MATERIALIZED (
    SELECT g.game_id, o.token
    FROM jfsm_game g JOIN unnest(%(games)s::text[], %(tokens)s::bigint[]) AS o(game_id, token)
        ON g.game_id = o.game_id AND g.token = o.token
    WHERE NOT (SELECT marked FROM here)
    ORDER BY g.game_id FOR UPDATE OF g
), renewed AS (
    UPDATE jfsm_game g SET lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
    FROM locked l
    WHERE g.game_id = l.game_id AND g.token = l.token
    RETURNING g.game_id, g.token
)
SELECT r.game_id, r.token, here.timeline, here.wal, here.marked
FROM here LEFT JOIN renewed r ON true
"""

#: Before a read is served (JF-STORE-030, R121): renew this owner's lease if its token and its
#: count of landed writes are still the game's; a NULL seq means they are not (a newer owner,
#: or a lost history: `history.judge_row` tells).
CONFIRM = f"""
WITH here AS MATERIALIZED (SELECT p.* FROM {POSITION} AS p),
renewed AS (
    UPDATE jfsm_game SET lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
    WHERE game_id = %(game)s AND token = %(token)s AND seq = %(seq)s
        AND NOT (SELECT marked FROM here)
    RETURNING seq
)
SELECT r.seq, here.timeline, here.wal, here.marked FROM here LEFT JOIN renewed r ON true
"""

#: End a lease at once (close): the next plain open succeeds without waiting.
RELEASE = """
UPDATE jfsm_game SET lease_until = NULL WHERE game_id = %(game)s AND token = %(token)s
"""

#: After a lost connection: a new token for the handle if its write did not land (returns
#: the token, NULL when the write landed or the game is another's, and the server's position).
#: It waits for the row lock at most `SETTLE_LOCK_WAIT`.
SETTLE = (
    "WITH here AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true) AS on_,"
    " set_config('lock_timeout', %(lock_wait)s, true) AS waits, p.*"
    f" FROM {POSITION} AS p)"
    + """,
settled AS (
    UPDATE jfsm_game SET token = nextval('jfsm_token'),
        lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
    WHERE game_id = %(game)s AND token = %(token)s AND seq = %(seq)s AND """
    + LANDS
    + """
    RETURNING token
)
SELECT s.token, here.timeline, here.wal, here.marked FROM here LEFT JOIN settled s ON true
"""
)

#: How long a settle waits for the game's row lock at most (`lock_timeout`, seconds; half the
#: connection's deadline when that is shorter): a lost write still running on the server
#: holds it; the settle then fails at once (nothing done) and the next call asks again,
#: rather than queueing behind it until the connection's deadline (R185).
SETTLE_LOCK_WAIT = 2.0

#: The game's row as it is now (after a write that did not land: `history.judge_row`).
ROW = "SELECT token, seq FROM jfsm_game WHERE game_id = %s"

# An open's transaction also ends itself (the server closes the session) if its client stops
# between two of its statements for longer than a lease: a frozen opener holds the game's
# row lock no longer than that (JF-STORE-033, R123). It reads the server's position first.
_SYNC = (
    "SELECT set_config('synchronous_commit', 'on', true),"
    " set_config('idle_in_transaction_session_timeout', %s, true),"
    f" p.timeline, p.wal, p.marked FROM {POSITION} AS p"
)


def _idle_limit(lease_seconds: float) -> tuple[str]:
    """The lease as a timeout setting (the server takes at most 2^31 - 1 ms, about 24 days)."""
    return (f"{min(2**31 - 1, max(1, round(lease_seconds * 1000)))}ms",)


Check = Callable[[WalPosition, bool], None]


async def _begin(conn: psycopg.AsyncConnection[Any], lease_seconds: float, check: Check) -> None:
    """The open's first statement: its settings, then `check(position, marked)` of the
    server it reached (which raises `StoreHistoryLost` before anything is written)."""
    cur = await conn.execute(_SYNC, _idle_limit(lease_seconds))
    row = await cur.fetchone()
    assert row is not None
    check(WalPosition(int(row[2]), int(row[3])), bool(row[4]))


async def take_ownership(
    conn: psycopg.AsyncConnection[Any],
    game_id: str,
    who: str,
    *,
    takeover: bool,
    create: bool | None,
    lease_seconds: float,
    check: Check = lambda position, marked: None,
) -> tuple[int, int, bool]:
    """Make `who` the owner of `game_id` inside the caller's transaction; returns (token,
    seq, whether this call created the game). `create`: True (the game must not exist
    yet), False (it must exist), None (either; created if missing). `check(position,
    marked)` judges the server's WAL position first (`history`).

    Raises `InvalidInput` (the game exists and `create` is True, or is missing and `create`
    is False), `StoreLocked` while another owner's lease is live (unless `takeover`),
    whatever `check` raises; psycopg errors propagate. The caller's transaction rolls back on
    any error.
    """
    await _begin(conn, lease_seconds, check)
    created = False
    if create is not False:
        cur = await conn.execute(
            "INSERT INTO jfsm_game (game_id) VALUES (%s) ON CONFLICT (game_id) DO NOTHING"
            " RETURNING 1",
            (game_id,),
        )
        created = await cur.fetchone() is not None
        if not created and create:
            raise InvalidInput(f"game {game_id!r} already exists in the database", field="game")
    cur = await conn.execute(
        "SELECT owner, lease_until > clock_timestamp() FROM jfsm_game"
        " WHERE game_id = %s FOR UPDATE",
        (game_id,),
    )
    row = await cur.fetchone()
    if row is None:
        raise InvalidInput(f"no game {game_id!r} in this database", field="game")
    owner, live = row
    observability.lease_previous(
        "none" if owner is None else "self" if owner == who else "live" if live else "expired"
    )
    if live and not takeover and owner != who:
        raise StoreLocked(
            f"game {game_id!r} is owned by {owner} (its lease is live); "
            "open with takeover to fence it, or wait for the lease to end",
            game=game_id,
            owner=owner,
        )
    cur = await conn.execute(
        "UPDATE jfsm_game SET token = nextval('jfsm_token'), owner = %s,"
        " owned_at = clock_timestamp(),"
        " lease_until = clock_timestamp() + make_interval(secs => %s)"
        " WHERE game_id = %s RETURNING token, seq",
        (who, lease_seconds, game_id),
    )
    got = await cur.fetchone()
    assert got is not None
    return int(got[0]), int(got[1]), created


async def take_many(
    conn: psycopg.AsyncConnection[Any],
    games: list[str],
    who: list[str],
    *,
    takeover: bool,
    lease_seconds: float,
    check: Check = lambda position, marked: None,
) -> tuple[dict[str, tuple[int, int, bool]], dict[str, str]]:
    """`take_ownership` of many games (created if missing) in the caller's transaction, in
    a few statements whatever their number: rows are locked in game id order (no deadlock
    between batches). `who[i]` is the owner id for `games[i]`. Returns ({game: (token, seq,
    created)} for the games taken, {game: owner} for those refused with a live lease)."""
    await _begin(conn, lease_seconds, check)
    cur = await conn.execute(
        "INSERT INTO jfsm_game (game_id) SELECT unnest(%s::text[])"
        " ON CONFLICT (game_id) DO NOTHING RETURNING game_id",
        (games,),
    )
    created = {row[0] for row in await cur.fetchall()}
    cur = await conn.execute(
        "SELECT game_id, owner, lease_until > clock_timestamp() FROM jfsm_game"
        " WHERE game_id = ANY(%s) ORDER BY game_id FOR UPDATE",
        (games,),
    )
    owner_of = dict(zip(games, who, strict=True))
    refused: dict[str, str] = {}
    for game, owner, live in await cur.fetchall():
        if live and not takeover and owner != owner_of[game]:
            refused[game] = owner
    free = [g for g in games if g not in refused]
    cur = await conn.execute(
        "UPDATE jfsm_game g SET token = nextval('jfsm_token'), owner = o.who,"
        " owned_at = clock_timestamp(),"
        " lease_until = clock_timestamp() + make_interval(secs => %s)"
        " FROM unnest(%s::text[], %s::text[]) AS o(game_id, who)"
        " WHERE g.game_id = o.game_id RETURNING g.game_id, g.token, g.seq",
        (lease_seconds, free, [owner_of[g] for g in free]),
    )
    taken = {row[0]: (int(row[1]), int(row[2]), row[0] in created) for row in await cur.fetchall()}
    return taken, refused
