"""The PostgreSQL store's schema: its tables, their migrations, and connecting to them.

# Tables (schema version 3, created or upgraded by `migrate`)

- `jfsm_schema_version(version, applied_at)`: one row per applied migration step.
- `jfsm_game(game_id, token, owner, owned_at, lease_until, seq, generation, footprint,
  created_at, participants)`: one row per game. `token` is the fencing token, taken by every
  `open` from the one sequence `jfsm_token` (so a token never repeats for any game id, even
  after the game was removed and created again); `owner` and `lease_until` are the owner's
  lease (R60), read against the server's clock only; `seq` counts the
  writes (commits, checkpoints, seeds) that landed; `footprint` is the store's incremental
  footprint as of its last write, kept so an operator (or a checker) can compare it with a
  recount.
- `jfsm_value(game_id, key, value, base)`: one row per key that is in the store or in the
  checkpoint base. `key` is the key's UTF-8 bytes, `value` the exact JCS bytes of the
  current value (NULL: absent from the store), `base` those of the checkpoint base (NULL:
  absent from the base). Values are `bytea`, never `jsonb` (which reorders and renormalizes),
  so the footprint is byte for byte a `FileStore`'s.
- `jfsm_telemetry(game_id, n, event)`: the driver's telemetry side file, one row per event
  (version 2; `jfsm_game.participants` is the participants side file), so drivers on
  several hosts serve the same games without a local folder.
- `jfsm_history_lost(n, detected_at, detected_by, reason)` (version 3): a row written by a
  worker that found the database lacking writes it saw acknowledged (`history`, R182); while
  one exists every write of every worker is refused (`store_history_lost`). An operator
  deletes them (`jfsm pg-migrate URL --clear-history-lost`).

Version 1 and 2 databases are upgraded in place: the sequence starts past every token in use.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from jfsm.errors import StoreUnavailable, StoreUnusable
from jfsm.stores.postgres.conninfo import (
    check_host_names,
    describe,
    is_permanent,
    refusal_passes,
    scrub,
)

__all__ = [
    "SCHEMA_VERSION",
    "connect",
    "connection_error",
    "migrate",
    "require_schema",
    "require_schema_async",
    "schema_version",
]

#: The schema version this module reads and writes.
SCHEMA_VERSION = 3

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
    2: (
        "CREATE SEQUENCE jfsm_token AS bigint",
        "SELECT setval('jfsm_token', coalesce((SELECT max(token) FROM jfsm_game), 0) + 1, false)",
        "ALTER TABLE jfsm_game ADD COLUMN lease_until timestamptz, ADD COLUMN participants bytea",
        """CREATE TABLE jfsm_telemetry (
            game_id text NOT NULL REFERENCES jfsm_game ON DELETE CASCADE,
            n bigserial,
            event bytea NOT NULL,
            PRIMARY KEY (game_id, n)
        )""",
    ),
    3: (
        """CREATE TABLE jfsm_history_lost (
            n bigserial PRIMARY KEY,
            detected_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            detected_by text NOT NULL,
            reason text NOT NULL
        )""",
    ),
}
_MIGRATION_LOCK = 0x6A66736D  # "jfsm": serializes concurrent `migrate` calls


def connect(conninfo: str, *, keepalive_seconds: int | None = None) -> psycopg.Connection[Any]:
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
        raise connection_error(exc, conninfo) from None
    except UnicodeError:  # a host name the idna codec refuses (`a..b`): one line (R160)
        check_host_names(str(conninfo_to_dict(conninfo).get("host") or ""), conninfo)
        raise


def connection_error(
    exc: BaseException, conninfo: str, doing: str = "connect to"
) -> StoreUnavailable:
    """The store error for a failed connection or a refused statement: `StoreUnusable` (not
    retryable) for a permanent cause or a refusal that does not pass (`conninfo.
    refusal_passes`, R184: a trigger, a constraint, a read-only database...), else
    `StoreUnavailable`; the message names the target without its password and keeps the
    first line of the server's reason."""
    reason = " ".join(scrub(str(exc), conninfo).split()) or type(exc).__name__
    recovery = getattr(exc, "jfsm_in_recovery", None)
    passes = refusal_passes(exc, in_recovery=recovery)
    cls = StoreUnusable if is_permanent(exc) or not passes else StoreUnavailable
    return cls(f"cannot {doing} PostgreSQL at {describe(conninfo)}: {reason}", state="closed")


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
    conn = connect(conninfo)
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
                raise StoreUnusable(
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
        raise connection_error(exc, conninfo, "migrate") from None
    finally:
        conn.close()


def require_schema(conn: psycopg.Connection[Any]) -> None:
    """Raises `StoreUnusable` (state `closed`, not retryable) unless the database holds
    `SCHEMA_VERSION`."""
    _check_version(schema_version(conn))


async def require_schema_async(conn: psycopg.AsyncConnection[Any]) -> None:
    """`require_schema` over an async (autocommit) connection."""
    try:
        cur = await conn.execute("SELECT coalesce(max(version), 0) FROM jfsm_schema_version")
        row = await cur.fetchone()
        version = int(row[0]) if row else 0
    except psycopg.errors.UndefinedTable:
        version = 0
    _check_version(version)


def _check_version(version: int) -> None:
    if version != SCHEMA_VERSION:
        raise StoreUnusable(
            f"the database holds jfsm schema {version or 'none'}, this code needs "
            f"{SCHEMA_VERSION}: run `jfsm pg-migrate URL` (or jfsm.stores.postgres.migrate)",
            state="closed",
            schema_version=version,
        )
