"""The reference driver's games in PostgreSQL (`jfsm driver --store URL`, no `--state`).

Everything of a game lives in the database: its store (`PostgresStore`), its participants
(`jfsm_game.participants`) and its telemetry (`jfsm_telemetry`), so two driver processes on
two hosts serve the same games; ownership is the store's lease (an op on a game another
driver owns is refused with `store_locked`).

- `open(game, create=True)` refuses a game that exists in the database (`InvalidInput`,
  "already exists"), never adopting another driver's game; `create=False` refuses a missing
  one.
- `discard(store)` is the failure path of a creation: it deletes the game only while the
  store's token is still current, that is only what this very call created.
- Telemetry events are appended in the background as they come; `read_telemetry` first
  waits for the game's pending appends.

The stores handed to engines are native async `PostgresStore`s on the driver's own event
loop, all of them on the process's one pool of connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg

from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput
from jfsm.limits import validate_owner
from jfsm.records import Participant, parse_record
from jfsm.stores.postgres.conninfo import database_target, describe
from jfsm.stores.postgres.games import append_telemetry, load_participants, read_telemetry
from jfsm.stores.postgres.games import save_participants as save_participants_sql
from jfsm.stores.postgres.pool import DEFAULT_LEASE_SECONDS, shared_pool
from jfsm.stores.postgres.schema import connect, connection_error, require_schema
from jfsm.stores.postgres.store import PostgresStore

__all__ = ["DatabaseGames", "check_target"]


def check_target(location: str) -> str:
    """The PostgreSQL target `location` names, checked before the driver serves: reachable,
    credentials accepted, schema migrated. Raises `InvalidInput` (not a target),
    `StoreUnusable` or `StoreUnavailable` (one line each, no password)."""
    target = database_target(location)
    if target is None:
        raise InvalidInput(
            f"--store takes a PostgreSQL target (postgresql://..., host=... dbname=...), "
            f"not the directory path {describe(location)}: use --state DIR for file stores"
        )
    conn = connect(target)
    try:
        require_schema(conn)
    finally:
        conn.close()
    return target


class DatabaseGames:
    """The games of a driver in the database at `target` (see the module docstring)."""

    def __init__(self, target: str, owner: str | None = None) -> None:
        self.target = target
        #: the owner id of this driver's leases: `JFSM_OWNER` (`jfsm driver --owner`), stable
        #: across restarts so a restarted driver reclaims its games at once (R61); else unique
        self.owner = owner or os.environ.get("JFSM_OWNER") or None
        if self.owner is not None:
            validate_owner(self.owner)
        self.own_seconds = self.lease_seconds = float(
            os.environ.get("JFSM_PG_LEASE_SECONDS", DEFAULT_LEASE_SECONDS)
        )
        self._pending: dict[str, list[asyncio.Task[None]]] = {}

    def use_lease(self, seconds: float | None) -> None:
        """Take leases of `seconds` from now on (hello's `leaseSeconds`, R122); None: the
        process's own length (`JFSM_PG_LEASE_SECONDS`, default 30). Each length has its
        pool of the process (`shared_pool`); games opened before keep their length."""
        self.lease_seconds = self.own_seconds if seconds is None else seconds

    async def _pool(self) -> Any:
        return await shared_pool(self.target, lease_seconds=self.lease_seconds)

    async def open(
        self, game_id: str, *, create: bool | None, takeover: bool = False
    ) -> tuple[PostgresStore, list[Participant]]:
        """Own `game_id`'s store and read its participants. Errors: the store's `open`."""
        store = await PostgresStore.open(
            self.target,
            game_id,
            create=create,
            takeover=takeover,
            owner=self.owner,
            lease_seconds=self.lease_seconds,
        )
        try:
            pool = await self._pool()
            doing = f"read the participants of {game_id!r} at"
            async with self._mapped(doing), pool.connection() as conn:
                items = await load_participants(conn, game_id)
            return store, [parse_record(Participant, p) for p in items]
        except BaseException:
            await store.close()
            raise

    @contextlib.asynccontextmanager
    async def _mapped(self, doing: str) -> AsyncIterator[None]:
        """The server's errors of a side file's statement as the store's: `StoreUnavailable`
        (retryable when it passes, a failover's lost connection among them) or
        `StoreUnusable`, never a bare psycopg error (which the driver would answer as
        `internal_error`)."""
        try:
            yield
        except psycopg.Error as exc:
            raise connection_error(exc, self.target, doing) from None

    async def create(
        self,
        into: str,
        source: GameEngine | None,
        busy: set[str],
        games: dict[str, Any],
        engine: Callable[[str, Any, list[Participant]], Any],
    ) -> dict[str, Any]:
        """Create game `into`, empty or as a copy of `source` (store and participants),
        listed in `busy` meanwhile, and add `engine(into, store, participants)` to `games`.
        An existing game `into` is refused (`InvalidInput`), never touched nor adopted; on
        any later failure only the game this call created is deleted (`discard`)."""
        busy.add(into)
        try:
            store, participants = await self.open(into, create=True)
            if source is not None:
                try:
                    copy = await source.duplicate(store, into)
                    participants = list(copy.participants())
                    await self.save_participants(store, participants)
                except BaseException:
                    await self.discard(store)
                    raise
            games[into] = engine(into, store, participants)
            return {}
        finally:
            busy.discard(into)

    async def save_participants(
        self, store: PostgresStore, participants: list[Participant]
    ) -> None:
        """Replace the game's participants, fenced by the store's token (`StoreFenced`)."""
        data = [p.to_json() for p in participants]
        pool = await self._pool()
        doing = f"save the participants of {store.game_id!r} at"
        async with self._mapped(doing), pool.connection() as conn:
            saved = await save_participants_sql(conn, store.game_id, store.token, data)
        if not saved:
            store.lost_lease()
            raise store.fenced_error()

    async def discard(self, store: PostgresStore) -> None:
        """Delete the game this call created (only while its token is current), closing it;
        never raises (a game taken over meanwhile is someone else's and stays)."""
        with contextlib.suppress(Exception):
            await store.remove()
        with contextlib.suppress(Exception):
            await store.close()

    async def close(self, store: PostgresStore) -> None:
        await store.close()

    def telemetry_sink(self, game_id: str) -> Callable[[dict[str, Any]], None]:
        """A sink appending the game's events in the background (in order per game)."""

        def sink(event: dict[str, Any]) -> None:
            pending = self._pending.setdefault(game_id, [])
            pending[:] = [f for f in pending if not f.done()]
            before = list(pending)

            async def append() -> None:
                for earlier in before:  # keep the order of the game's events
                    with contextlib.suppress(Exception):
                        await earlier
                pool = await self._pool()
                async with pool.connection() as conn:
                    await append_telemetry(conn, game_id, json.loads(json.dumps(event)))

            pending.append(asyncio.get_running_loop().create_task(append()))

        return sink

    async def read_telemetry(self, game_id: str) -> list[Any] | None:
        """The game's saved events (after its pending appends); None if it has none."""
        for task in self._pending.pop(game_id, []):
            with contextlib.suppress(Exception):
                await task
        pool = await self._pool()
        async with self._mapped(f"read the telemetry of {game_id!r} at"), pool.connection() as conn:
            return await read_telemetry(conn, game_id)
