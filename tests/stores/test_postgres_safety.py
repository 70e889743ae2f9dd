"""Nothing acknowledged is lost, no game has two owners (issue 21, item 0 and 1), against a
real server: leases, tokens from one sequence, durable commits whatever the server's
setting, broken connections replaced from the pool, errors that are permanent or secret-free.

Each test here failed on the store before issue 21 (session advisory lock, one connection per
game, per-game token counter, the server's `synchronous_commit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_fixtures import game_id, require_postgres, run_closing_pools

from jfsm.errors import (
    InvalidInput,
    StoreFenced,
    StoreLocked,
    StoreUnavailable,
    StoreUnusable,
)
from jfsm.projection import Projection
from jfsm.stores.postgres.conninfo import database_target
from jfsm.stores.postgres.server import TemporaryServer
from jfsm.stores.postgres.store import PostgresStore, migrate, read_image

ROOT = Path(__file__).resolve().parents[2]


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return run_closing_pools(scenario)


# -- creation, tokens, fencing across removal --------------------------------------------------
@pytest.mark.req("JF-STORE-010")
def test_creating_an_existing_game_is_refused_and_changes_nothing(pg_target: str) -> None:
    game = game_id()

    async def scenario() -> None:
        first = await PostgresStore.open(pg_target, game, create=True)
        assert first.created
        await first.commit(Projection.of({"a": 1}))
        await first.close()
        with pytest.raises(InvalidInput) as info:
            await PostgresStore.open(pg_target, game, create=True)
        assert "already exists" in info.value.message
        with pytest.raises(InvalidInput):
            await PostgresStore.open(pg_target, game_id(), create=False)
        again = await PostgresStore.open(pg_target, game, create=False)
        assert not again.created and again.image.get("a") == 1 and again.seq == 1
        await again.close()

    run(scenario)


@pytest.mark.req("JF-STORE-010", "JF-STORE-013")
def test_tokens_never_repeat_across_removal_and_a_fenced_owner_lands_nothing(
    pg_target: str,
) -> None:
    game = game_id()

    async def scenario() -> None:
        a = await PostgresStore.open(pg_target, game, owner="A")
        await a.commit(Projection.of({"a": 1}))
        b = await PostgresStore.open(pg_target, game, takeover=True, owner="B")
        assert b.token > a.token
        await b.remove()  # B deletes the game it owns
        c = await PostgresStore.open(pg_target, game, create=True, owner="C")
        assert c.token > b.token > a.token  # one sequence: never the same token again
        await c.commit(Projection.of({"c": 3}))
        with pytest.raises(StoreFenced):
            await a.commit(Projection.of({"late": "A"}))
        assert read_image(_direct(pg_target), game).store_json() == {"c": 3}
        await c.close()
        await a.close()

    run(scenario)


def _direct(target: str) -> str:
    return target  # read_image uses its own short connection; PgBouncer carries it too


# -- leases ---------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.req("JF-STORE-011", "JF-STORE-012")
def test_a_live_lease_refuses_a_second_open_and_renews_itself_while_idle(pg_target: str) -> None:
    game = game_id()

    async def scenario() -> None:
        owner = await PostgresStore.open(pg_target, game, lease_seconds=0.6, owner="w1")
        await asyncio.sleep(2.0)  # three lease lengths idle: the timer renewed it
        with pytest.raises(StoreLocked) as info:
            await PostgresStore.open(pg_target, game, lease_seconds=0.6, owner="w2")
        assert info.value.details["owner"] == "w1"
        await owner.commit(Projection.of({"still": "mine"}))
        await owner.close()  # ends the lease at once
        nxt = await PostgresStore.open(pg_target, game, lease_seconds=0.6)
        assert nxt.token > owner.token and nxt.image.get("still") == "mine"
        await nxt.close()

    run(scenario)


@pytest.mark.req("JF-STORE-011", "JF-STORE-012")
def test_the_same_owner_id_reclaims_its_game_at_once_and_fences_its_earlier_self(
    pg_target: str,
) -> None:
    """A restarted worker with a stable owner id (R61) need not wait for its own lease."""
    game = game_id()

    async def scenario() -> None:
        earlier = await PostgresStore.open(pg_target, game, owner="worker-7")
        await earlier.commit(Projection.of({"a": 1}))
        with pytest.raises(StoreLocked):
            await PostgresStore.open(pg_target, game, owner="worker-8")
        with pytest.raises(StoreLocked):
            await PostgresStore.open(pg_target, game)  # no owner id: unique, refused
        again = await PostgresStore.open(pg_target, game, owner="worker-7")
        assert again.token > earlier.token and again.image.get("a") == 1
        with pytest.raises(StoreFenced):
            await earlier.commit(Projection.of({"a": 2}))
        await again.close()
        await earlier.close()

    run(scenario)


def _own_and_hang(conninfo: str, game: str, ready: Any) -> None:
    async def hold() -> None:
        store = await PostgresStore.open(conninfo, game, lease_seconds=1.0)
        await store.commit(Projection.of({"owner": os.getpid()}))
        ready.set()
        await asyncio.sleep(120)

    asyncio.run(hold())


@pytest.mark.req("JF-STORE-011", "JF-STORE-012", "JF-STORE-013")
def test_a_killed_owners_lease_runs_out_and_the_next_owner_gets_a_new_token(
    pg_database: str,
) -> None:
    game = game_id()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    worker = ctx.Process(target=_own_and_hang, args=(pg_database, game, ready))
    worker.start()
    try:
        assert ready.wait(60)
    finally:
        os.kill(worker.pid or 0, signal.SIGKILL)
        worker.join()

    async def scenario() -> None:
        with pytest.raises(StoreLocked):  # the dead owner's lease is still live
            await PostgresStore.open(pg_database, game, lease_seconds=1.0)
        await asyncio.sleep(1.2)  # the lease runs out on the server's clock
        store = await PostgresStore.open(pg_database, game, lease_seconds=1.0)
        assert store.image.get("owner") == worker.pid
        await store.close()

    run(scenario)


@pytest.mark.req("JF-STORE-033")
def test_an_opener_frozen_in_its_transaction_holds_the_game_no_longer_than_a_lease(
    pg_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open stops (a frozen client) after locking the game's row and before its commit:
    the server ends that transaction once it has been idle for a lease, so a takeover waits
    on it no longer than that, not until the client resumes (it never does here)."""
    from jfsm.stores.postgres import store as store_module

    game = game_id()
    frozen = asyncio.Event()
    load_image = store_module.load_image

    async def stall(conn: Any, game_id: str, quota: int) -> Any:
        if game_id == game and not frozen.is_set():
            frozen.set()
            await asyncio.sleep(3600)  # holding the row lock, its transaction open
        return await load_image(conn, game_id, quota)

    async def scenario() -> None:
        first = await PostgresStore.open(pg_target, game, lease_seconds=1.0)
        await first.close()
        monkeypatch.setattr(store_module, "load_image", stall)
        stuck = asyncio.create_task(
            PostgresStore.open(pg_target, game, owner="frozen", lease_seconds=1.0)
        )
        await frozen.wait()
        taker = await asyncio.wait_for(  # a bound on the wait, not a timing assertion
            PostgresStore.open(pg_target, game, owner="taker", takeover=True, lease_seconds=1.0),
            60,
        )
        assert taker.token > first.token
        stuck.cancel()
        with contextlib.suppress(BaseException):
            await stuck
        await taker.commit(Projection.of({"after": 1}))
        await taker.close()

    run(scenario)


# -- durability -----------------------------------------------------------------------------------
@pytest.mark.req("JF-STORE-014")
def test_commits_are_durable_on_a_server_running_synchronous_commit_off() -> None:
    """With `synchronous_commit=off` and a 10 s WAL writer, an immediate restart loses every
    asynchronous commit; the store's commits (and opens) all survive it."""
    require_postgres()
    settings = {"synchronous_commit": "off", "wal_writer_delay": "10000"}
    with TemporaryServer(settings=settings) as server:
        conninfo = server.create_database("durable")
        migrate(conninfo)
        games = [game_id() for _ in range(3)]

        async def write() -> None:
            for game in games:
                store = await PostgresStore.open(conninfo, game, lease_seconds=0.5)
                for n in range(20):
                    await store.commit(Projection.of({"n": n, f"k{n}": n}))
                await store.checkpoint()
                await store.commit(Projection.of({"last": True}))

        run(write)
        server.restart("immediate")
        for game in games:
            image = read_image(conninfo, game)
            assert image.get("n") == 19 and image.get("last") is True
            assert image.change_log() != []  # the commit after the checkpoint is there too


# -- lost connections -----------------------------------------------------------------------------
def _terminate_when_waiting(conninfo: str, done: threading.Event) -> None:
    """Terminate the backend that waits on a row lock (the commit blocked by the test)."""
    with psycopg.connect(conninfo, autocommit=True) as admin:
        while not done.is_set():
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            ).fetchone()
            if row:
                admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
                return
            done.wait(0.01)


@pytest.mark.req("JF-STORE-014")
def test_a_connection_lost_mid_commit_is_replaced_on_the_next_call(pg_database: str) -> None:
    game = game_id()

    async def scenario() -> None:
        store = await PostgresStore.open(pg_database, game)
        await store.commit(Projection.of({"a": 1}))
        with psycopg.connect(pg_database) as blocker:  # holds the game's row lock
            blocker.execute("SELECT 1 FROM jfsm_game WHERE game_id = %s FOR UPDATE", (game,))
            done = threading.Event()
            killer = threading.Thread(target=_terminate_when_waiting, args=(pg_database, done))
            killer.start()
            try:
                with pytest.raises(StoreUnavailable) as info:
                    await store.commit(Projection.of({"a": 2}))
            finally:
                done.set()
                killer.join()
            blocker.rollback()
        assert info.value.state == "broken" and info.value.details["seq"] == 2
        assert store.state == "broken"
        # the next call asks the database on a fresh pooled connection: it did not land
        await store.commit(Projection.of({"a": 3}))
        assert store.state == "owner" and store.seq == 2
        assert read_image(pg_database, game).store_json() == {"a": 3}
        await store.close()

    run(scenario)


@pytest.mark.req("JF-STORE-014")
def test_a_server_restart_does_not_break_open_games() -> None:
    require_postgres()
    with TemporaryServer() as server:
        conninfo = server.create_database("restarts")
        migrate(conninfo)

        async def scenario() -> None:
            stores = [await PostgresStore.open(conninfo, game_id()) for _ in range(5)]
            for store in stores:
                await store.commit(Projection.of({"before": 1}))
            await asyncio.to_thread(server.restart, "immediate")
            for store in stores:
                try:
                    await store.commit(Projection.of({"after": 1}))
                except StoreUnavailable as exc:  # at most one failure, then a fresh connection
                    assert exc.state in ("open", "broken")
                    await store.commit(Projection.of({"after": 1}))
                assert store.state == "owner"
            for store in stores:
                assert read_image(conninfo, store.game_id).store_json() == {"before": 1, "after": 1}
                await store.close()

        run(scenario)


# -- errors ---------------------------------------------------------------------------------------
def test_permanent_errors_are_not_retryable_and_never_show_the_password(
    postgres_server: TemporaryServer, fresh_database: Callable[[], str]
) -> None:
    secret = "s3cr%zzet"  # a bad percent-escape, which libpq used to echo
    host = postgres_server.directory
    unmigrated = fresh_database()

    async def scenario() -> list[Any]:
        errors: list[Any] = []
        for target in (
            f"host={host} port=5432 user=jfsm password=hunter2pw dbname=no_such_db",
            f"host={host} port=5432 user=nobody_here password=hunter2pw dbname=postgres",
            unmigrated + " password=hunter2pw",
        ):
            with pytest.raises(StoreUnusable) as info:
                await PostgresStore.open(target, game_id())
            errors.append(info.value)
        with pytest.raises(InvalidInput) as bad:
            await PostgresStore.open(f"postgresql://jfsm:{secret}@localhost/db", game_id())
        errors.append(bad.value)
        return errors

    errors = run(scenario)
    for error in errors:
        reply = error.to_json()
        assert "retryable" not in reply, reply
        text = repr(reply)
        assert "hunter2pw" not in text and secret not in text and "s3cr" not in text, text
        assert "\n" not in reply["message"]


def test_connection_strings_as_users_write_them(
    pg_database: str, postgres_server: TemporaryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    dbname = pg_database.split("dbname=")[1]
    socket_dir = str(postgres_server.directory)
    url = postgres_server.url(dbname)
    targets = [
        pg_database,  # keyword form
        url,
        url.replace("postgresql://", "postgres://", 1),
        "postgresql://",  # everything from PG* variables
    ]
    monkeypatch.setenv("PGHOST", socket_dir)
    monkeypatch.setenv("PGPORT", "5432")
    monkeypatch.setenv("PGUSER", "jfsm")
    monkeypatch.setenv("PGDATABASE", dbname)
    game = game_id()

    async def scenario() -> None:
        for n, target in enumerate(targets):
            assert database_target(target) == target
            store = await PostgresStore.open(target, game)
            assert store.image.get("n") == (n - 1 if n else None)
            await store.commit(Projection.of({"n": n}))
            await store.close()

    run(scenario)
    for wrong in ("mysql://u@h/db", "hots=/tmp dbname=x", "host='unterminated", "a=b c"):
        with pytest.raises(InvalidInput) as info:
            database_target(wrong)
        assert "\n" not in info.value.message
    for path in ("/var/lib/jfsm", "relative/dir", "./host", "C:/x"):
        assert database_target(path) is None


def test_the_repository_tracks_no_connection_string_as_a_path() -> None:
    """A libpq keyword string once became a folder (`host=/tmp/... dbname=...`, commit
    1a3de8d): no tracked path may look like one."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing tracked to check")
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode("utf-8", "replace")
        .split("\0")
    )
    suspicious = [
        path
        for path in tracked
        if any(
            part.startswith(("host=", "dbname=", "postgresql:", "postgres:")) or "dbname=" in part
            for part in path.split("/")
        )
    ]
    assert suspicious == []
