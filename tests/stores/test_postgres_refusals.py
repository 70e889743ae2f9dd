"""What the PostgreSQL store answers when the server refuses a write, or when a write cut off
in flight is still running on the server (issue 38, item 5).

- A refusal for good (a trigger of the database raising, a revoked privilege, a database set
  read-only) is `store_unavailable` *not* retryable, nothing written, the store still an
  owner; a refusal that passes (a lock timeout) is retryable (JF-STORE-064, R184).
- A write cut at its deadline while its backend holds the game's row lock, and that lands
  once the lock goes: the store says so (`details["landed"]`) instead of refusing every
  call as "in doubt", and its settle waits for the row at most `SETTLE_LOCK_WAIT`
  (JF-STORE-014, R185).

Each failed on the store before issue 38: the trigger's refusal was retryable, and the landed
write was reported as an unknown outcome on every later call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from pg_fixtures import game_id, run_closing_pools

from jfsm.errors import StoreUnavailable
from jfsm.projection import Projection
from jfsm.stores.postgres.conninfo import refusal_passes
from jfsm.stores.postgres.store import PostgresStore, migrate, read_image


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return run_closing_pools(scenario, 120)


class _Refusal(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


@pytest.mark.req("JF-STORE-064")
@pytest.mark.parametrize(
    ("sqlstate", "in_recovery", "passes"),
    [
        ("P0001", None, False),  # raise_exception: a trigger of the database
        ("23514", None, False),  # check_violation
        ("42501", None, False),  # insufficient_privilege
        ("42P01", None, False),  # undefined_table
        ("0A000", None, False),  # feature_not_supported
        ("XX001", None, False),  # data_corrupted
        ("57P04", None, False),  # database_dropped
        ("25006", False, False),  # read-only on a primary: default_transaction_read_only
        ("25006", True, True),  # read-only on a standby: a failover under way
        ("55000", True, True),  # "recovery is in progress"
        ("08006", None, True),  # connection_failure
        ("40001", None, True),  # serialization_failure
        ("40P01", None, True),  # deadlock_detected
        ("53300", None, True),  # too_many_connections
        ("55P03", None, True),  # lock_not_available
        ("57014", None, True),  # query_canceled (statement_timeout)
        ("57P01", None, True),  # admin_shutdown
        ("57P03", None, True),  # cannot_connect_now
        ("58030", None, True),  # io_error
    ],
)
def test_a_refusal_passes_only_for_the_classes_that_pass(
    sqlstate: str, in_recovery: bool | None, passes: bool
) -> None:
    assert refusal_passes(_Refusal(sqlstate), in_recovery=in_recovery) is passes


async def _refused_once(
    target: str, game: str, refuse: str, undo: str, *, group: bool
) -> tuple[StoreUnavailable, str, int]:
    store = await PostgresStore.open(target, game, lease_seconds=300, group_commit=group)
    await store.commit(Projection.of({"a": 1}))
    with psycopg.connect(target, autocommit=True) as admin:
        admin.execute(refuse)
    try:
        with pytest.raises(StoreUnavailable) as refused:
            await store.commit(Projection.of({"b": 2}))
    finally:
        with psycopg.connect(target, autocommit=True) as admin:
            admin.execute(undo)
    await asyncio.sleep(0)
    await store.commit(Projection.of({"c": 3}))  # still the owner: the next write lands
    state, seq = store.state, store.seq
    await store.close()
    return refused.value, state, seq


@pytest.mark.req("JF-STORE-064")
@pytest.mark.parametrize("group", [True, False], ids=["group", "alone"])
def test_a_trigger_that_refuses_writes_is_not_retryable(
    fresh_database: Callable[[], str], group: bool
) -> None:
    target = fresh_database()
    migrate(target)
    game = game_id()
    with psycopg.connect(target, autocommit=True) as admin:
        admin.execute(
            "CREATE FUNCTION no_b() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN RAISE EXCEPTION 'writes are frozen by the administrator'; END $$"
        )
    refuse = (
        "CREATE TRIGGER frozen BEFORE INSERT ON jfsm_value FOR EACH ROW"
        " WHEN (NEW.key = 'b'::bytea) EXECUTE FUNCTION no_b()"
    )
    error, state, seq = run(
        lambda: _refused_once(
            target, game, refuse, "DROP TRIGGER frozen ON jfsm_value", group=group
        )
    )
    reply = error.to_json()
    assert reply["code"] == "store_unavailable" and "retryable" not in reply, reply
    assert "frozen by the administrator" in reply["message"] and reply["state"] == "open"
    assert state == "owner" and seq == 2
    assert read_image(target, game).store_json() == {"a": 1, "c": 3}  # nothing of b


@pytest.mark.req("JF-STORE-064")
def test_a_database_set_read_only_is_not_retryable(fresh_database: Callable[[], str]) -> None:
    target = fresh_database()
    migrate(target)
    game = game_id()
    dbname = target.split("dbname=")[1]
    refuse = f'ALTER DATABASE "{dbname}" SET default_transaction_read_only = on'
    undo = f'ALTER DATABASE "{dbname}" RESET default_transaction_read_only'

    async def scenario() -> tuple[StoreUnavailable, str, int]:
        from jfsm.stores.postgres.pool import close_pools

        store = await PostgresStore.open(target, game, lease_seconds=300)
        await store.commit(Projection.of({"a": 1}))
        await close_pools()  # the setting reaches new sessions only
        with psycopg.connect(target, autocommit=True) as admin:
            admin.execute(refuse)
        try:
            again = await PostgresStore.open(target, game, lease_seconds=300, takeover=True)
        except StoreUnavailable as exc:
            return exc, "refused at open", 0
        finally:
            with psycopg.connect(target, autocommit=True) as admin:
                admin.execute("SET default_transaction_read_only = off")
                admin.execute(undo)
        await again.close()
        raise AssertionError("a read-only database took an open")

    error, _, _ = run(scenario)
    reply = error.to_json()
    assert reply["code"] == "store_unavailable" and "retryable" not in reply, reply
    assert "read-only" in reply["message"]


@pytest.mark.req("JF-STORE-064")
def test_a_lock_timeout_passes(pg_database: str) -> None:
    game = game_id()

    async def scenario() -> StoreUnavailable:
        store = await PostgresStore.open(pg_database, game, lease_seconds=300)
        await store.commit(Projection.of({"a": 1}))
        locker = await psycopg.AsyncConnection.connect(pg_database, autocommit=False)
        await locker.execute("SELECT 1 FROM jfsm_game WHERE game_id = %s FOR UPDATE", (game,))
        assert store._pool is not None
        async with store._pool.connection() as conn:  # the pool's connections wait 100 ms
            await conn.execute("ALTER ROLE CURRENT_USER SET lock_timeout = '100ms'")
        await store._pool.pool.drain()
        try:
            with pytest.raises(StoreUnavailable) as refused:
                await store.commit(Projection.of({"b": 2}))
        finally:
            await locker.rollback()
            await locker.close()
            async with store._pool.connection() as conn:
                await conn.execute("ALTER ROLE CURRENT_USER RESET lock_timeout")
            await store._pool.pool.drain()
        await store.commit(Projection.of({"b": 2}))
        await store.close()
        return refused.value

    error = run(scenario)
    assert error.retryable and error.state == "open", error.to_json()


# -- a write cut off while it holds the game's row ------------------------------------------
@pytest.mark.slow
@pytest.mark.req("JF-STORE-014", "JF-STORE-041")
def test_a_cut_write_that_lands_later_is_said_landed_not_in_doubt_for_ever(
    pg_database: str,
) -> None:
    """The write waits for the game's row (a locker holds it) past its deadline and is cut;
    the next call's settle waits at most `SETTLE_LOCK_WAIT` for the row and says the write is
    still running; once the locker lets go the write lands, and the next call says it
    landed (`details["landed"]`), where the store used to answer "may or may not have
    landed" to every call until the game was reopened."""
    game = game_id()

    async def scenario() -> tuple[list[dict[str, Any]], int]:
        store = await PostgresStore.open(pg_database, game, lease_seconds=300)
        assert store._pool is not None
        store._pool.deadline_seconds = 1.0
        await store.commit(Projection.of({"a": 1}))
        locker = await psycopg.AsyncConnection.connect(pg_database, autocommit=False)
        await locker.execute("SELECT 1 FROM jfsm_game WHERE game_id = %s FOR UPDATE", (game,))
        answers = []
        try:
            for value in ("late", "while held"):  # cut; then its settle finds the row held
                try:
                    await store.commit(Projection.of({value: 1}))
                except StoreUnavailable as exc:
                    answers.append(exc.to_json())
        finally:
            await locker.commit()  # the late write runs now, and lands
            await locker.close()
        for _ in range(50):  # the server runs the late write; then the settle sees it
            await asyncio.sleep(0.1)
            if read_image(pg_database, game).get("late") == 1:
                break
        try:
            await store.commit(Projection.of({"after": 1}))
        except StoreUnavailable as exc:
            answers.append(exc.to_json())
        await store.close()
        reopened = await PostgresStore.open(pg_database, game, lease_seconds=300)
        seq = reopened.seq
        await reopened.close()
        return answers, seq

    answers, seq = run(scenario)
    cut, held, landed = answers
    assert cut["state"] == "broken" and cut["details"]["seq"] == 2
    assert held["state"] == "broken" and "still running" in held["message"]
    assert landed["state"] == "broken" and landed["details"] == {"seq": 2, "landed": True}
    assert seq == 2  # the late write, once; nothing after it
