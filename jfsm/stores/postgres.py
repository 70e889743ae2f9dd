"""The PostgreSQL store: many games in one database, one owner per game, fenced writes.

The tables and their migrations are `jfsm.stores.pg_schema`'s, ownership and fenced writes
`jfsm.stores.pg_fencing`'s, reading and removing games without owning them
`jfsm.stores.pg_games`'s; the functions of both are importable from here too.

# Errors

- `open`: `StoreLocked` (owner alive), `StoreUnavailable` (the server cannot be reached, or
  the schema is missing or newer than this code: run `migrate`), `InvalidInput` (a game id
  PostgreSQL cannot hold).
- `commit`, `checkpoint`, `seed`: `QuotaExceeded` and `InvalidInput` before anything is
  sent; `StoreFenced` (nothing written; close the store); `StoreUnavailable` with state
  `open` when the statement failed and the connection is fine (nothing written), or state
  `broken` when the connection was lost: the write may or may not have landed. `details`
  then holds `seq`, the number the write would have had: reopen and compare with the new
  store's `seq` (equal or more: it landed; this holds when the reopened store's `token` is
  the old one plus one, that is when no other owner came in between). A broken store
  refuses further writes; close and reopen it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from jfsm.errors import StoreFenced, StoreUnavailable
from jfsm.image import QUOTA_BYTES, StoreImage, seeded_image
from jfsm.projection import Projection

try:
    import psycopg
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the PostgreSQL store needs psycopg 3: pip install 'jfsm[postgres]'") from exc

from jfsm.stores.pg_fencing import CHECKPOINT, COMMIT, SEED, take_ownership
from jfsm.stores.pg_games import check_game_id, game_ids, load_image, read_image, remove_game
from jfsm.stores.pg_schema import SCHEMA_VERSION, connect, migrate, require_schema, schema_version

__all__ = [
    "SCHEMA_VERSION",
    "PostgresStore",
    "game_ids",
    "migrate",
    "read_image",
    "remove_game",
    "schema_version",
]


def _encode_keys(keys: Iterable[str]) -> list[bytes]:
    return [key.encode("utf-8") for key in keys]


class PostgresStore:
    """One game's durable store in PostgreSQL, owned by this object until `close`; see the
    module docstrings for errors (here), tables (`pg_schema`) and ownership (`pg_fencing`)."""

    durable = True

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        game_id: str,
        token: int,
        seq: int,
        image: StoreImage,
    ) -> None:
        # Use `PostgresStore.open`; this only assembles what it loaded.
        self._conn: psycopg.Connection[Any] | None = conn
        self._game = game_id
        self._token = token
        self._seq = seq
        self._image = image
        base = image.base_bytes()
        self._dirty: set[str] = {
            key for key in set(image.keys()).union(base) if image.raw(key) != base.get(key)
        }
        self._broken = False
        self._fenced = False

    @classmethod
    def open(
        cls,
        conninfo: str,
        game_id: str,
        *,
        quota: int = QUOTA_BYTES,
        takeover: bool = False,
        owner: str | None = None,
        keepalive_seconds: int = 10,
    ) -> PostgresStore:
        """Own game `game_id` (created if missing) in the database at `conninfo` (a libpq
        URL or key=value string) and load its rows once.

        Raises `StoreLocked` while another owner's session lives (unless `takeover`, which
        fences that owner instead), `StoreUnavailable` if the server cannot be reached or
        the schema is not `SCHEMA_VERSION`, `InvalidInput` for a game id PostgreSQL cannot
        hold. Nothing changes on error.
        """
        check_game_id(game_id)
        who = owner or f"{socket.gethostname()}:{os.getpid()}"
        conn = connect(conninfo, keepalive_seconds=keepalive_seconds)
        try:
            require_schema(conn)
            with conn.transaction():
                token, seq = take_ownership(conn, game_id, who, takeover=takeover)
                image = load_image(conn, game_id, quota)
        except BaseException as exc:
            conn.close()  # ends the session: any lock taken above goes with it
            if isinstance(exc, psycopg.Error):
                raise StoreUnavailable(
                    f"cannot open game {game_id!r}: {exc}", state="closed"
                ) from exc
            raise
        return cls(conn, game_id, token, seq, image)

    # -- the Store protocol --------------------------------------------------------------
    @property
    def image(self) -> StoreImage:
        return self._image

    @property
    def game_id(self) -> str:
        """The game this store holds."""
        return self._game

    @property
    def token(self) -> int:
        """This owner's fencing token."""
        return self._token

    @property
    def seq(self) -> int:
        """How many writes (commits, checkpoints, seeds) of this game have landed, as of
        this store's last successful write or its open."""
        return self._seq

    def commit(self, projection: Projection) -> None:
        """Write `projection` in one transaction fenced by this owner's token, then apply it.

        Raises `QuotaExceeded` (nothing sent), `StoreFenced`, or `StoreUnavailable` (see the
        module docstring for what each leaves).
        """
        self._require_writable()
        footprint = self._image.check(projection)
        if projection.is_empty():
            return
        params = {
            "game": self._game,
            "token": self._token,
            "footprint": footprint,
            "keys": _encode_keys(projection.sets),
            "values": list(projection.sets.values()),
            "deletes": _encode_keys(projection.deletes),
        }
        self._write(COMMIT, params, "commit")
        self._image.apply_unchecked(projection)
        self._dirty.update(projection.touched())

    def checkpoint(self) -> None:
        """Make the current store the change log's base, in one fenced transaction.

        Raises `StoreFenced` or `StoreUnavailable` (see the module docstring).
        """
        self._require_writable()
        image = StoreImage(self._image.values_bytes(), quota=self._image.quota)
        params = {
            "game": self._game,
            "token": self._token,
            "footprint": image.footprint(),
            "keys": _encode_keys(self._dirty),
        }
        self._write(CHECKPOINT, params, "checkpoint")
        self._image = image
        self._dirty = set()

    def seed(self, values: Mapping[str, bytes]) -> None:
        """Fill this *empty* store with `values` as its checkpointed base (empty change log).

        Raises `InvalidInput` if the store is not empty, `QuotaExceeded` (nothing sent in
        either case), `StoreFenced` or `StoreUnavailable`.
        """
        self._require_writable()
        image = seeded_image(self._image, values)
        seeded = image.values_bytes()
        params = {
            "game": self._game,
            "token": self._token,
            "footprint": image.footprint(),
            "keys": _encode_keys(seeded),
            "values": list(seeded.values()),
        }
        self._write(SEED, params, "seed")
        self._image = image

    def close(self) -> None:
        """End this owner's session (which releases its liveness lock). Idempotent; the
        token stays, so a later `open` takes over without `takeover=True`."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def state(self) -> str:
        """This handle's state in the machine `store_ownership`: `owner`, `fenced` (a newer
        owner took over, as learnt by a refused write), `broken` or `closed`."""
        if self._conn is None:
            return "closed"
        if self._fenced:
            return "fenced"
        return "broken" if self._broken else "owner"

    def __repr__(self) -> str:
        return f"PostgresStore({self._game!r}, token={self._token}, seq={self._seq}, {self.state})"

    # -- internals -----------------------------------------------------------------------
    def _require_writable(self) -> None:
        if self._conn is None:
            raise StoreUnavailable(f"store of game {self._game!r} is closed", state="closed")
        if self._fenced:
            raise self._fenced_error()
        if self._broken:
            raise StoreUnavailable(
                f"store of game {self._game!r} lost its connection; close and reopen it",
                state="broken",
            )

    def _fenced_error(self) -> StoreFenced:
        return StoreFenced(
            f"game {self._game!r} was taken over by a newer owner than token {self._token}; "
            "nothing was written. Close this store",
            state="fenced",
            game=self._game,
            token=self._token,
        )

    def _write(self, sql: str, params: dict[str, Any], what: str) -> None:
        """Run one fenced write statement (autocommit: the statement is the transaction)."""
        conn = self._conn
        assert conn is not None
        expected = self._seq + 1
        try:
            row = conn.execute(sql, params, prepare=True).fetchone()
        except psycopg.Error as exc:
            lost = conn.broken or conn.closed
            if lost:
                self._broken = True
            message = (
                f"{what} of game {self._game!r}: the connection was lost, so it may or may not "
                f"have landed: reopen and compare the store's seq with {expected}"
                if lost
                else f"{what} of game {self._game!r} failed, nothing was written: {exc}"
            )
            raise StoreUnavailable(
                message, state="broken" if lost else "open", seq=expected
            ) from exc
        if row is None:
            self._fenced = True
            raise self._fenced_error()
        self._seq = int(row[0])
