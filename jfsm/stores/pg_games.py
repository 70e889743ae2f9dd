"""A game's rows in the PostgreSQL store without taking ownership: loading its image, checking
its id, listing the games, reading one for inspection, removing one whose owner is gone."""

from __future__ import annotations

from typing import Any

import psycopg

from jfsm.errors import InvalidInput, StoreLocked, StoreUnavailable
from jfsm.image import QUOTA_BYTES, StoreImage
from jfsm.stores.pg_fencing import owner_alive
from jfsm.stores.pg_schema import connect, require_schema

__all__ = ["check_game_id", "game_ids", "load_image", "read_image", "remove_game"]

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


def load_image(conn: psycopg.Connection[Any], game_id: str, quota: int) -> StoreImage:
    """The game's image as its rows hold it now (psycopg errors propagate)."""
    values: dict[str, bytes] = {}
    base: dict[str, bytes] = {}
    with conn.cursor(binary=True) as cur:
        cur.execute(_LOAD, (game_id,))
        for key, value, based in cur:
            name = bytes(key).decode("utf-8")
            if value is not None:
                values[name] = bytes(value)
            if based is not None:
                base[name] = bytes(based)
    return StoreImage(values, base, quota=quota)


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
            return load_image(conn, game_id, quota)
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot read game {game_id!r}: {exc}", state="closed") from exc
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
        raise StoreUnavailable(f"cannot list games: {exc}", state="closed") from exc
    finally:
        conn.close()


def remove_game(conninfo: str, game_id: str) -> bool:
    """Delete a game and its rows; False if there was none. Raises `StoreLocked` while its
    owner is alive (nothing deleted) and `StoreUnavailable` as `open` does."""
    check_game_id(game_id)
    conn = connect(conninfo)
    try:
        with conn.transaction():
            require_schema(conn)
            row = conn.execute(
                "SELECT token FROM jfsm_game WHERE game_id = %s FOR UPDATE", (game_id,)
            ).fetchone()
            if row is None:
                return False
            if owner_alive(conn, game_id, int(row[0])):
                raise StoreLocked(f"game {game_id!r} has a live owner", game=game_id)
            conn.execute("DELETE FROM jfsm_game WHERE game_id = %s", (game_id,))
            return True
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot remove game {game_id!r}: {exc}", state="closed") from exc
    finally:
        conn.close()
