"""Ownership and fencing of a game in the PostgreSQL store: who owns it, and writes that
land only for the current owner.

# Ownership and fencing (decision R16, machine `spec/machines/store_ownership.json`)

`open` makes the caller the game's owner in one transaction: it locks the game's row, checks
that the current owner is gone, bumps `token` and takes a session-level advisory lock named
by (game, new token) on its own connection. That lock is the owner's liveness: PostgreSQL
holds it exactly as long as the owner's database session lives, and releases it when the
session ends (close, a killed process, a dropped connection once the server notices it;
the store asks for TCP keepalives of `keepalive_seconds` so a vanished host is noticed).

- A second `open` while the lock of the current token is held is refused with `StoreLocked`.
- `open(..., takeover=True)` does not look at the lock: it bumps the token anyway. The old
  owner, alive or not, is fenced from then on.
- Every write is one SQL statement whose first step is
  `UPDATE jfsm_game ... WHERE game_id = $g AND token = $t`; the rest of the write joins on
  that step's result, so with a newer token nothing is written and the store raises
  `StoreFenced`. Row locking orders a write and a takeover: the write lands before the
  takeover, or sees the new token and writes nothing.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg

from jfsm.errors import StoreLocked

__all__ = ["CHECKPOINT", "COMMIT", "SEED", "lock_key", "owner_alive", "take_ownership"]

COMMIT = """
WITH owner AS (
    UPDATE jfsm_game SET seq = seq + 1, footprint = %(footprint)s
    WHERE game_id = %(game)s AND token = %(token)s
    RETURNING seq
), put AS (
    INSERT INTO jfsm_value (game_id, key, value)
    SELECT %(game)s, s.k, s.v FROM owner, unnest(%(keys)b::bytea[], %(values)b::bytea[]) AS s(k, v)
    ON CONFLICT (game_id, key) DO UPDATE SET value = EXCLUDED.value
), gone AS (
    DELETE FROM jfsm_value d USING owner
    WHERE d.game_id = %(game)s AND d.key = ANY(%(deletes)b::bytea[]) AND d.base IS NULL
), cleared AS (
    UPDATE jfsm_value c SET value = NULL FROM owner
    WHERE c.game_id = %(game)s AND c.key = ANY(%(deletes)b::bytea[]) AND c.base IS NOT NULL
)
SELECT seq FROM owner
"""

CHECKPOINT = """
WITH owner AS (
    UPDATE jfsm_game SET seq = seq + 1, generation = generation + 1, footprint = %(footprint)s
    WHERE game_id = %(game)s AND token = %(token)s
    RETURNING seq
), gone AS (
    DELETE FROM jfsm_value d USING owner
    WHERE d.game_id = %(game)s AND d.key = ANY(%(keys)b::bytea[]) AND d.value IS NULL
), based AS (
    UPDATE jfsm_value b SET base = b.value FROM owner
    WHERE b.game_id = %(game)s AND b.key = ANY(%(keys)b::bytea[]) AND b.value IS NOT NULL
)
SELECT seq FROM owner
"""

SEED = """
WITH owner AS (
    UPDATE jfsm_game SET seq = seq + 1, generation = generation + 1, footprint = %(footprint)s
    WHERE game_id = %(game)s AND token = %(token)s
    RETURNING seq
), put AS (
    INSERT INTO jfsm_value (game_id, key, value, base)
    SELECT %(game)s, s.k, s.v, s.v
    FROM owner, unnest(%(keys)b::bytea[], %(values)b::bytea[]) AS s(k, v)
)
SELECT seq FROM owner
"""


def lock_key(game_id: str, token: int) -> int:
    """The advisory lock (a signed 64-bit key) held by the owner with `token`."""
    digest = hashlib.blake2b(f"{game_id}\x00{token}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def owner_alive(conn: psycopg.Connection[Any], game_id: str, token: int) -> bool:
    """Whether the session of the owner holding `token` still lives (holds its lock)."""
    if token == 0:
        return False
    # Transaction-level: if we get it, it goes again with our transaction.
    row = conn.execute(
        "SELECT pg_try_advisory_xact_lock(%s)", (lock_key(game_id, token),)
    ).fetchone()
    return not (row and row[0])


def take_ownership(
    conn: psycopg.Connection[Any], game_id: str, who: str, *, takeover: bool
) -> tuple[int, int]:
    """Make `who` the owner of `game_id` (its row created if missing) inside the caller's
    transaction: bump the token and take the new token's session lock on `conn`. Returns
    (token, seq).

    Raises `StoreLocked` while the current owner's session lives, unless `takeover`;
    psycopg errors propagate. The caller's transaction rolls back either way.
    """
    row = conn.execute(
        "INSERT INTO jfsm_game (game_id) VALUES (%s) ON CONFLICT (game_id)"
        " DO UPDATE SET game_id = EXCLUDED.game_id RETURNING token, owner",
        (game_id,),
    ).fetchone()  # the game's row, created if missing, locked until commit
    assert row is not None
    token, holder = int(row[0]), row[1]
    if not takeover and owner_alive(conn, game_id, token):
        raise StoreLocked(
            f"game {game_id!r} is owned by {holder} (token {token}), whose session "
            "is alive; open with takeover=True to fence it",
            game=game_id,
            owner=holder,
            token=token,
        )
    token += 1
    seq_row = conn.execute(
        "UPDATE jfsm_game SET token = %s, owner = %s, owned_at = now()"
        " WHERE game_id = %s RETURNING seq, pg_try_advisory_lock(%s)",
        (token, who, game_id, lock_key(game_id, token)),
    ).fetchone()
    assert seq_row is not None
    return token, int(seq_row[0])
