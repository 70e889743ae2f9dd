"""A game's rows in the PostgreSQL store without taking ownership: loading its image, checking
its id, listing the games, reading one for inspection, removing one whose lease is over, and
the driver's side files (participants, telemetry) kept beside the game.

The synchronous functions (`read_image`, `game_ids`, `remove_game`) open one short
connection each (command line, inspection); the async ones run on the process's pool.
Errors: `StoreUnusable` / `StoreUnavailable` as `PostgresStore.open`, `InvalidInput` for a
game that does not exist or an id PostgreSQL cannot hold.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from jfsm.errors import InvalidInput, StoreLocked
from jfsm.image import QUOTA_BYTES, StoreImage
from jfsm.stores.postgres.schema import connect, connection_error, require_schema

__all__ = [
    "append_telemetry",
    "check_game_id",
    "game_ids",
    "load_image",
    "load_images",
    "load_participants",
    "read_image",
    "read_telemetry",
    "remove_game",
    "save_participants",
]

_LOAD = "SELECT key, value, base FROM jfsm_value WHERE game_id = %s"


def check_game_id(game_id: object) -> str:
    """`game_id`, if PostgreSQL can hold it; else `InvalidInput`."""
    if not isinstance(game_id, str) or not game_id or "\x00" in game_id:
        raise InvalidInput("a PostgreSQL game id is a non-empty string without NUL", field="game")
    try:
        game_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"game id is not valid Unicode: {exc}", field="game") from exc
    return game_id


def _image(rows: list[tuple[Any, Any, Any]], quota: int) -> StoreImage:
    values: dict[str, bytes] = {}
    base: dict[str, bytes] = {}
    for key, value, based in rows:
        name = bytes(key).decode("utf-8")
        if value is not None:
            values[name] = bytes(value)
        if based is not None:
            base[name] = bytes(based)
    return StoreImage(values, base, quota=quota)


async def load_image(conn: psycopg.AsyncConnection[Any], game_id: str, quota: int) -> StoreImage:
    """The game's image as its rows hold it now (psycopg errors propagate)."""
    async with conn.cursor(binary=True) as cur:
        await cur.execute(_LOAD, (game_id,))
        return _image(await cur.fetchall(), quota)


async def load_images(
    conn: psycopg.AsyncConnection[Any], game_ids: list[str], quota: int
) -> dict[str, StoreImage]:
    """The images of many games in one statement (psycopg errors propagate)."""
    rows: dict[str, list[tuple[Any, Any, Any]]] = {game: [] for game in game_ids}
    async with conn.cursor(binary=True) as cur:
        await cur.execute(
            "SELECT game_id, key, value, base FROM jfsm_value WHERE game_id = ANY(%s)",
            (game_ids,),
        )
        for game, key, value, based in await cur.fetchall():
            rows[game].append((key, value, based))
    return {game: _image(found, quota) for game, found in rows.items()}


def read_image(conninfo: str, game_id: str, *, quota: int = QUOTA_BYTES) -> StoreImage:
    """A consistent snapshot of a game's image without taking ownership (for inspection).

    Raises `InvalidInput` if the game does not exist, `StoreUnavailable` as `open` does.
    """
    check_game_id(game_id)
    conn = connect(conninfo)
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            require_schema(conn)
            found = conn.execute("SELECT 1 FROM jfsm_game WHERE game_id = %s", (game_id,))
            if found.fetchone() is None:
                raise InvalidInput(f"no game {game_id!r} in this database", field="game")
            with conn.cursor(binary=True) as cur:
                cur.execute(_LOAD, (game_id,))
                return _image(cur.fetchall(), quota)
    except psycopg.Error as exc:
        raise connection_error(exc, conninfo, f"read game {game_id!r} at") from None
    finally:
        conn.close()


def game_ids(conninfo: str) -> list[str]:
    """Every game id in the database, sorted. Raises `StoreUnavailable` as `open` does."""
    conn = connect(conninfo)
    try:
        require_schema(conn)
        rows = conn.execute("SELECT game_id FROM jfsm_game ORDER BY game_id").fetchall()
        return [row[0] for row in rows]
    except psycopg.Error as exc:
        raise connection_error(exc, conninfo, "list games at") from None
    finally:
        conn.close()


def remove_game(conninfo: str, game_id: str) -> bool:
    """Delete a game and its rows; False if there was none. Raises `StoreLocked` while its
    owner's lease is live (nothing deleted) and `StoreUnavailable` as `open` does."""
    check_game_id(game_id)
    conn = connect(conninfo)
    try:
        with conn.transaction():
            require_schema(conn)
            row = conn.execute(
                "SELECT owner, lease_until > clock_timestamp() FROM jfsm_game"
                " WHERE game_id = %s FOR UPDATE",
                (game_id,),
            ).fetchone()
            if row is None:
                return False
            if row[1]:
                raise StoreLocked(
                    f"game {game_id!r} has a live owner ({row[0]})", game=game_id, owner=row[0]
                )
            conn.execute("SET LOCAL synchronous_commit = on")
            conn.execute("DELETE FROM jfsm_game WHERE game_id = %s", (game_id,))
            return True
    except psycopg.Error as exc:
        raise connection_error(exc, conninfo, f"remove game {game_id!r} at") from None
    finally:
        conn.close()


# -- the driver's side files, kept in the database (jfsm driver --store URL, no --state) --------
async def save_participants(
    conn: psycopg.AsyncConnection[Any], game_id: str, token: int, participants: list[Any]
) -> bool:
    """Replace the game's participants (JSON) if `token` is still the game's; False if not."""
    data = json.dumps(participants, ensure_ascii=False).encode("utf-8")
    cur = await conn.execute(
        "WITH durable AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true) v)"
        " UPDATE jfsm_game SET participants = %s WHERE game_id = %s AND token = %s"
        " AND (SELECT v FROM durable) = 'on' RETURNING 1",
        (data, game_id, token),
    )
    return await cur.fetchone() is not None


async def load_participants(conn: psycopg.AsyncConnection[Any], game_id: str) -> list[Any]:
    """The game's saved participants (JSON values; none if never saved or no game)."""
    cur = await conn.execute("SELECT participants FROM jfsm_game WHERE game_id = %s", (game_id,))
    row = await cur.fetchone()
    if row is None or row[0] is None:
        return []
    items = json.loads(bytes(row[0]).decode("utf-8"))
    return items if isinstance(items, list) else []


async def append_telemetry(
    conn: psycopg.AsyncConnection[Any], game_id: str, event: dict[str, Any]
) -> None:
    """Append one telemetry event of the game."""
    data = json.dumps(event, ensure_ascii=True).encode("ascii")
    await conn.execute(
        "INSERT INTO jfsm_telemetry (game_id, event) SELECT %s, %s"
        " WHERE EXISTS (SELECT 1 FROM jfsm_game WHERE game_id = %s)",
        (game_id, data, game_id),
    )


async def read_telemetry(conn: psycopg.AsyncConnection[Any], game_id: str) -> list[Any] | None:
    """Every telemetry event of the game, oldest first; None if it has none."""
    cur = await conn.execute(
        "SELECT event FROM jfsm_telemetry WHERE game_id = %s ORDER BY n", (game_id,)
    )
    rows = await cur.fetchall()
    if not rows:
        return None
    return [json.loads(bytes(row[0]).decode("ascii")) for row in rows]
