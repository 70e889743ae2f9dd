"""The PostgreSQL store: many games in one database, one owner per game, fenced writes.

# Tables (schema version 1, created by `migrate`)

- `jfsm_schema_version(version, applied_at)`: one row per applied migration step.
- `jfsm_game(game_id, token, owner, owned_at, seq, generation, footprint, created_at)`: one
  row per game. `token` is the fencing token, bumped by every `open`; `seq` counts the
  writes (commits, checkpoints, seeds) that landed; `footprint` is the store's incremental
  footprint as of its last write, kept so an operator (or a checker) can compare it with a
  recount.
- `jfsm_value(game_id, key, value, base)`: one row per key that is in the store or in the
  checkpoint base. `key` is the key's UTF-8 bytes, `value` the exact JCS bytes of the
  current value (NULL: absent from the store), `base` those of the checkpoint base (NULL:
  absent from the base). Values are `bytea`, never `jsonb` (which reorders and renormalizes),
  so the footprint is byte for byte a `FileStore`'s.

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

import hashlib
import os
import socket
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from jfsm.errors import (
    InvalidInput,
    StoreFenced,
    StoreLocked,
    StoreUnavailable,
)
from jfsm.image import QUOTA_BYTES, StoreImage, seeded_image
from jfsm.projection import Projection

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the PostgreSQL store needs psycopg 3: pip install 'jfsm[postgres]'") from exc

__all__ = [
    "SCHEMA_VERSION",
    "PostgresStore",
    "game_ids",
    "migrate",
    "read_image",
    "remove_game",
    "schema_version",
]

#: The schema version this module reads and writes.
SCHEMA_VERSION = 1

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE jfsm_game (
            game_id text PRIMARY KEY CHECK (game_id <> ''),
            token bigint NOT NULL DEFAULT 0,
            owner text,
            owned_at timestamptz,
            seq bigint NOT NULL DEFAULT 0,
            generation bigint NOT NULL DEFAULT 0,
            footprint bigint NOT NULL DEFAULT 4,
            created_at timestamptz NOT NULL DEFAULT now()
        )""",
        """CREATE TABLE jfsm_value (
            game_id text NOT NULL REFERENCES jfsm_game ON DELETE CASCADE,
            key bytea NOT NULL,
            value bytea,
            base bytea,
            PRIMARY KEY (game_id, key),
            CHECK (value IS NOT NULL OR base IS NOT NULL)
        )""",
        # lz4 compresses large values at a fraction of the default pglz's cost.
        """DO $$ BEGIN
            IF EXISTS (SELECT 1 FROM pg_settings
                       WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)) THEN
                ALTER TABLE jfsm_value ALTER COLUMN value SET COMPRESSION lz4,
                                       ALTER COLUMN base SET COMPRESSION lz4;
            END IF;
        END $$""",
    ),
}
_MIGRATION_LOCK = 0x6A66736D  # "jfsm": serializes concurrent `migrate` calls

_COMMIT = """
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

_CHECKPOINT = """
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

_SEED = """
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

_LOAD = "SELECT key, value, base FROM jfsm_value WHERE game_id = %s"


def _lock_key(game_id: str, token: int) -> int:
    """The advisory lock (a signed 64-bit key) held by the owner with `token`."""
    digest = hashlib.blake2b(f"{game_id}\x00{token}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _check_game_id(game_id: object) -> str:
    if not isinstance(game_id, str) or not game_id or "\x00" in game_id:
        raise InvalidInput("a PostgreSQL game id is a non-empty string without NUL", field="game")
    try:
        game_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"game id is not valid Unicode: {exc}", field="game") from exc
    return game_id


def _connect(conninfo: str, *, keepalive_seconds: int | None = None) -> psycopg.Connection[Any]:
    """An autocommit connection; `StoreUnavailable` when the server cannot be reached.

    With `keepalive_seconds`, the session asks the server for TCP keepalives, so that a
    vanished client host is noticed after about twice that time, which ends its session and
    releases its owner lock (connections over a Unix socket need none).
    """
    try:
        if keepalive_seconds:
            params = conninfo_to_dict(conninfo)
            interval = max(1, keepalive_seconds // 3)
            params["options"] = (
                f"{params.get('options') or ''} -c tcp_keepalives_idle={keepalive_seconds}"
                f" -c tcp_keepalives_interval={interval} -c tcp_keepalives_count=3"
            ).strip()
            conninfo = make_conninfo("", **params)
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreUnavailable(
            f"cannot connect to PostgreSQL: {exc}".strip(), state="closed"
        ) from exc


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The schema version installed in the database `conn` is connected to (0: none)."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        exists = conn.execute("SELECT to_regclass('jfsm_schema_version') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return 0
    try:
        row = conn.execute("SELECT coalesce(max(version), 0) FROM jfsm_schema_version").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return int(row[0]) if row else 0


def migrate(conninfo: str) -> int:
    """Create or upgrade the tables to `SCHEMA_VERSION` in one transaction; idempotent and
    safe to run from several processes at once. Returns the version now installed.

    Raises `StoreUnavailable` when the server cannot be reached or refuses the DDL (nothing
    changes then), and when the database already holds a newer schema than this code.
    """
    conn = _connect(conninfo)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS jfsm_schema_version ("
                " version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            current = schema_version(conn)
            if current > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"the database holds jfsm schema {current}, newer than this code's "
                    f"{SCHEMA_VERSION}; nothing was changed",
                    state="closed",
                    schema_version=current,
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute("INSERT INTO jfsm_schema_version (version) VALUES (%s)", (version,))
        return SCHEMA_VERSION
    except psycopg.Error as exc:
        raise StoreUnavailable(f"migration failed, nothing changed: {exc}", state="closed") from exc
    finally:
        conn.close()


def _require_schema(conn: psycopg.Connection[Any]) -> None:
    version = schema_version(conn)
    if version != SCHEMA_VERSION:
        raise StoreUnavailable(
            f"the database holds jfsm schema {version or 'none'}, this code needs "
            f"{SCHEMA_VERSION}: run `jfsm pg-migrate URL` (or jfsm.stores.postgres.migrate)",
            state="closed",
            schema_version=version,
        )


def _load_image(conn: psycopg.Connection[Any], game_id: str, quota: int) -> StoreImage:
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


def _owner_alive(conn: psycopg.Connection[Any], game_id: str, token: int) -> bool:
    """Whether the session of the owner holding `token` still lives (holds its lock)."""
    if token == 0:
        return False
    # Transaction-level: if we get it, it goes again with our transaction.
    row = conn.execute(
        "SELECT pg_try_advisory_xact_lock(%s)", (_lock_key(game_id, token),)
    ).fetchone()
    return not (row and row[0])


def read_image(conninfo: str, game_id: str, *, quota: int = QUOTA_BYTES) -> StoreImage:
    """A consistent snapshot of a game's image without taking ownership (for inspection).

    Raises `InvalidInput` if the game does not exist, `StoreUnavailable` as `open` does.
    """
    _check_game_id(game_id)
    conn = _connect(conninfo)
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            _require_schema(conn)
            found = conn.execute("SELECT 1 FROM jfsm_game WHERE game_id = %s", (game_id,))
            if found.fetchone() is None:
                raise InvalidInput(f"no game {game_id!r} in this database", field="game")
            return _load_image(conn, game_id, quota)
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot read game {game_id!r}: {exc}", state="closed") from exc
    finally:
        conn.close()


def game_ids(conninfo: str) -> list[str]:
    """Every game id in the database, sorted. Raises `StoreUnavailable` as `open` does."""
    conn = _connect(conninfo)
    try:
        _require_schema(conn)
        rows = conn.execute("SELECT game_id FROM jfsm_game ORDER BY game_id").fetchall()
        return [row[0] for row in rows]
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot list games: {exc}", state="closed") from exc
    finally:
        conn.close()


def remove_game(conninfo: str, game_id: str) -> bool:
    """Delete a game and its rows; False if there was none. Raises `StoreLocked` while its
    owner is alive (nothing deleted) and `StoreUnavailable` as `open` does."""
    _check_game_id(game_id)
    conn = _connect(conninfo)
    try:
        with conn.transaction():
            _require_schema(conn)
            row = conn.execute(
                "SELECT token FROM jfsm_game WHERE game_id = %s FOR UPDATE", (game_id,)
            ).fetchone()
            if row is None:
                return False
            if _owner_alive(conn, game_id, int(row[0])):
                raise StoreLocked(f"game {game_id!r} has a live owner", game=game_id)
            conn.execute("DELETE FROM jfsm_game WHERE game_id = %s", (game_id,))
            return True
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot remove game {game_id!r}: {exc}", state="closed") from exc
    finally:
        conn.close()


def _encode_keys(keys: Iterable[str]) -> list[bytes]:
    return [key.encode("utf-8") for key in keys]


class PostgresStore:
    """One game's durable store in PostgreSQL, owned by this object until `close`; see the
    module docstring for tables, ownership and errors."""

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
        _check_game_id(game_id)
        who = owner or f"{socket.gethostname()}:{os.getpid()}"
        conn = _connect(conninfo, keepalive_seconds=keepalive_seconds)
        try:
            _require_schema(conn)
            with conn.transaction():
                row = conn.execute(
                    "INSERT INTO jfsm_game (game_id) VALUES (%s) ON CONFLICT (game_id)"
                    " DO UPDATE SET game_id = EXCLUDED.game_id RETURNING token, owner",
                    (game_id,),
                ).fetchone()  # the game's row, created if missing, locked until commit
                assert row is not None
                token, holder = int(row[0]), row[1]
                if not takeover and _owner_alive(conn, game_id, token):
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
                    (token, who, game_id, _lock_key(game_id, token)),
                ).fetchone()
                assert seq_row is not None
                image = _load_image(conn, game_id, quota)
        except BaseException as exc:
            conn.close()  # ends the session: any lock taken above goes with it
            if isinstance(exc, psycopg.Error):
                raise StoreUnavailable(
                    f"cannot open game {game_id!r}: {exc}", state="closed"
                ) from exc
            raise
        return cls(conn, game_id, token, int(seq_row[0]), image)

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
        self._write(_COMMIT, params, "commit")
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
        self._write(_CHECKPOINT, params, "checkpoint")
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
        self._write(_SEED, params, "seed")
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
