"""The reference driver and the command line over PostgreSQL.

The full conformance run over `jfsm driver --store postgresql://...` is a job of `.ci/run`
(directly and through PgBouncer, no `--state`); here the driver's durable restart, game
duplication, two drivers on one database (issue 21: nothing of another driver's game is
adopted or deleted) and the `pg-migrate`, `inspect` and `driver` commands are checked
against a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pg_fixtures import game_id, require_postgres

from jfsm.cli import main
from jfsm.driver import ReferenceDriver
from jfsm.stores.postgres.blocking import BlockingPostgresStore as PostgresStore
from jfsm.stores.postgres.server import TemporaryServer
from jfsm.stores.postgres.store import SCHEMA_VERSION, migrate, read_image
from jfsm_conformance.fake.compress import FakeCompress

CLI = [sys.executable, "-c", "import sys; from jfsm.cli import main; sys.exit(main())"]


async def _call(driver: ReferenceDriver, op: str, **args: Any) -> Any:
    reply = await driver.handle({"id": 1, "op": op, "args": args})
    assert reply["ok"], reply
    return reply["result"]


@pytest.mark.req("JF-ATOM-004")
def test_driver_keeps_games_in_postgres_across_restarts(
    pg_database: str, postgres_server: TemporaryServer, tmp_path: Path
) -> None:
    game, copy = game_id(), game_id()
    url = postgres_server.url("jfsm_tests")  # the database of pg_database, as a URL

    async def scenario() -> None:
        with FakeCompress() as fake:
            driver = ReferenceDriver(tmp_path, store_url=url)
            hello = await _call(driver, "hello", protocol=1, compressUrl=fake.url)
            assert hello["capabilities"]["durableRestart"] is True
            await _call(driver, "create_game", game=game)
            await _call(
                driver, "set_participants", game=game, participants=[{"id": "p1", "human": True}]
            )
            await _call(driver, "record_round", game=game, input="hello", output="world")
            await _call(driver, "duplicate", game=game, into=copy)
            before = await _call(driver, "dump", game=game)
            await _call(driver, "restart")
            assert await _call(driver, "dump", game=game) == before
            assert (await _call(driver, "dump", game=copy))["store"] == before["store"]
            # a second driver on the same database neither adopts nor takes a game its owner holds
            other = ReferenceDriver(store_url=url)
            await _call(other, "hello", protocol=1, compressUrl=fake.url)
            reply = await other.handle({"id": 2, "op": "create_game", "args": {"game": game}})
            assert reply["error"]["code"] == "invalid_input"
            assert "already exists" in reply["error"]["message"]
            reply = await other.handle({"id": 3, "op": "dump", "args": {"game": game}})
            assert reply["error"]["code"] == "store_locked"
            await other.close()
            await driver.close()

    asyncio.run(scenario())
    image = read_image(pg_database, game)
    assert image.footprint() > 4
    with PostgresStore.open(pg_database, copy) as store:
        assert store.image.change_log() == []  # a duplicate starts checkpointed


def test_cli_migrates_and_inspects(postgres_server: TemporaryServer, capsys: Any) -> None:
    url = postgres_server.url(postgres_server.create_database("jfsm_cli").split("dbname=")[1])
    assert main(["pg-migrate", url]) == 0
    assert f"schema version {SCHEMA_VERSION}" in capsys.readouterr().out
    assert main(["pg-migrate", url]) == 0  # idempotent
    capsys.readouterr()
    with PostgresStore.open(url, "g1") as store:
        from jfsm.projection import Projection

        store.commit(Projection.of({"game.x": 1}))
        # inspect reads a snapshot without taking the game over from its live owner
        assert main(["inspect", url, "--game", "g1", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["keys"] == 1 and report["footprint"] == store.image.footprint()
    assert main(["inspect", url, "--game", "nope"]) == 2
    assert "invalid_input" in capsys.readouterr().err
    assert main(["inspect", url]) == 2


def test_pg_migrate_reports_an_unreachable_server(tmp_path: Path, capsys: Any) -> None:
    url = f"postgresql://jfsm@/none?host={tmp_path}&connect_timeout=2"
    assert main(["pg-migrate", url]) == 2
    assert "store_unavailable" in capsys.readouterr().err


async def _try(driver: ReferenceDriver, op: str, **args: Any) -> dict[str, Any]:
    return await driver.handle({"id": 9, "op": op, "args": args})


@pytest.mark.req("JF-ATOM-004", "JF-STORE-010")
def test_two_drivers_never_adopt_nor_delete_each_others_games(pg_database: str) -> None:
    """The campaign's lost writes: B duplicates into an id only A's database game has (and
    creates over it); A's acknowledged rounds stay, B's failure deletes nothing of A's."""
    mine, src = game_id(), game_id()

    async def scenario() -> None:
        with FakeCompress() as fake:
            a, b = ReferenceDriver(store_url=pg_database), ReferenceDriver(store_url=pg_database)
            for driver in (a, b):
                await _call(driver, "hello", protocol=1, compressUrl=fake.url)
            await _call(a, "create_game", game=mine)
            await _call(a, "record_round", game=mine, input="one", output="1")
            await _call(a, "record_round", game=mine, input="two", output="2")
            before = await _call(a, "dump", game=mine)
            await _call(b, "create_game", game=src)
            for attempt in (
                await _try(b, "duplicate", game=src, into=mine),
                await _try(b, "create_game", game=mine),
            ):
                assert attempt["error"]["code"] == "invalid_input", attempt
            assert await _call(a, "dump", game=mine) == before
            await a.close()  # A's lease ends: B may now serve A's game, rounds and all
            assert (await _call(b, "dump", game=mine))["store"] == before["store"]
            await b.close()

    asyncio.run(scenario())
    assert read_image(pg_database, mine).store_json() != {}


def test_a_driver_without_state_serves_anothers_games_with_their_side_files(
    pg_database: str,
) -> None:
    game = game_id()
    participants = [{"id": "p1", "human": True}, {"id": "npc", "human": False}]

    async def scenario() -> None:
        with FakeCompress() as fake:
            first = ReferenceDriver(store_url=pg_database)
            hello = await _call(
                first, "hello", protocol=1, compressUrl=fake.url, thresholds={"game": 300}
            )
            assert hello["capabilities"]["durableRestart"] is True
            await _call(first, "create_game", game=game)
            await _call(first, "set_participants", game=game, participants=participants)
            for n in range(6):
                await _call(first, "record_round", game=game, input=f"in {n}", output="o" * 80)
                await _call(first, "generate", game=game)
            events = await _call(first, "telemetry", game=game)
            assert events, "the small threshold makes the game compress"
            dump = await _call(first, "dump", game=game)
            await _call(first, "shutdown")
            second = ReferenceDriver(store_url=pg_database)
            await _call(second, "hello", protocol=1, compressUrl=fake.url)
            assert await _call(second, "dump", game=game) == dump
            assert await _call(second, "telemetry", game=game) == events
            await _call(second, "record_round", game=game, input="more", output="x")
            await _call(second, "restart")
            assert len((await _call(second, "dump", game=game))["store"]) >= len(dump["store"])
            await second.close()

    asyncio.run(scenario())


def test_the_driver_refuses_an_unusable_store_before_hello(
    fresh_database: Any, capsys: Any
) -> None:
    unmigrated = fresh_database()
    for store, code in (
        (unmigrated, "store_unavailable"),
        ("mysql://user:pw@host/db", "invalid_input"),
        ("hots=/tmp dbname=x", "invalid_input"),
        ("/some/directory", "invalid_input"),
    ):
        assert main(["driver", "--store", store]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"jfsm driver: {code}: ") and err.count("\n") == 1, err
        assert "pw@" not in err


@pytest.mark.slow
@pytest.mark.req("JF-STORE-041")
def test_a_driver_whose_database_is_down_exits_at_the_end_of_its_input() -> None:
    """Issue 30, item 6: stopped at the end of its input while its database was down, a
    `--store` driver used to wait for the database forever (its pool's workers outlived the
    loop's end). It ends its leases as far as it can and exits."""
    require_postgres()
    with TemporaryServer() as server, FakeCompress() as fake:
        target = server.create_database("down")
        migrate(target)
        driver = subprocess.Popen(
            [*CLI, "driver", "--owner", "d1", "--store", target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            assert driver.stdin is not None and driver.stdout is not None
            for n, (op, args) in enumerate(
                [
                    ("hello", {"protocol": 1, "compressUrl": fake.url}),
                    ("create_game", {"game": "g1"}),
                    ("record_round", {"game": "g1", "input": "a", "output": "b"}),
                ]
            ):
                driver.stdin.write((json.dumps({"id": n, "op": op, "args": args}) + "\n").encode())
                driver.stdin.flush()
                assert json.loads(driver.stdout.readline())["ok"], op
            server.stop()  # the database goes away with the game open
            driver.stdin.close()  # the end of the driver's input
            status = driver.wait(timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert status == 0


# -- issue 38, item 5: what a failover or a late write leaves the driver answering -----------------
@pytest.mark.req("JF-STORE-044")
def test_open_game_answers_store_unavailable_when_the_connection_breaks_after_the_open(
    pg_database: str, postgres_server: TemporaryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During a failover, the open of `open_game` landed and the next statement (its
    participants) met a broken connection: the driver answered `internal_error` (a bare
    psycopg error); it is `store_unavailable`, retryable, and the game is not left owned."""
    import psycopg

    from jfsm.driver import pg as driver_pg

    game = game_id()
    url = postgres_server.url("jfsm_tests")
    load = driver_pg.load_participants

    async def broken(conn: Any, game_id: str) -> Any:
        if game_id == game:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return await load(conn, game_id)

    async def scenario() -> tuple[dict[str, Any], Any]:
        with FakeCompress() as fake:
            driver = ReferenceDriver(store_url=url)
            await _call(driver, "hello", protocol=1, compressUrl=fake.url)
            await _call(driver, "create_game", game=game)
            await _call(driver, "release_game", game=game)
            monkeypatch.setattr(driver_pg, "load_participants", broken)
            reply = await driver.handle({"id": 7, "op": "open_game", "args": {"game": game}})
            monkeypatch.setattr(driver_pg, "load_participants", load)
            again = await _call(driver, "open_game", game=game)  # nothing was left owned
            await driver.close()
            return reply, again

    reply, again = asyncio.run(scenario())
    assert reply["ok"] is False and reply["error"]["code"] == "store_unavailable", reply
    assert reply["error"].get("retryable") is True, reply
    assert "token" in again


@pytest.mark.slow
@pytest.mark.req("JF-STORE-014", "JF-STORE-044")
def test_a_round_cut_off_in_flight_that_lands_later_is_served_by_the_next_call(
    pg_database: str, postgres_server: TemporaryServer
) -> None:
    """A round cut at its deadline while its backend waited for the game's row, and landed
    once the row was free: the driver refused every later op of the game (the store in doubt
    for ever) until the client sent `open_game`. The next op now serves the game as the
    database holds it: the late round is round 2, the next one round 3."""
    import psycopg

    game = game_id()
    url = postgres_server.url("jfsm_tests")

    async def scenario() -> tuple[list[Any], Any]:
        with FakeCompress() as fake:
            driver = ReferenceDriver(store_url=url)
            await _call(driver, "hello", protocol=1, compressUrl=fake.url)
            await _call(driver, "create_game", game=game)
            await _call(driver, "record_round", game=game, input="first", output="o")
            assert driver.db is not None
            pool = await driver.db._pool()
            pool.deadline_seconds = 1.0  # the test's patience, not the default's
            locker = await psycopg.AsyncConnection.connect(pg_database, autocommit=False)
            await locker.execute("SELECT 1 FROM jfsm_game WHERE game_id = %s FOR UPDATE", (game,))
            args = {"game": game, "input": "late", "output": "o"}
            cut = await driver.handle({"id": 2, "op": "record_round", "args": args})
            await locker.commit()  # the late round runs now, and lands
            await locker.close()
            for _ in range(50):
                if read_image(pg_database, game).get("jfRounds.2") is not None:
                    break
                await asyncio.sleep(0.1)
            answers = [cut]
            for n, text in enumerate(["next", "after"], 3):
                args = {"game": game, "input": text, "output": "o"}
                answers.append(await driver.handle({"id": n, "op": "record_round", "args": args}))
            dump = await _call(driver, "dump", game=game)
            await driver.close()
            return answers, dump

    answers, dump = asyncio.run(scenario())
    cut, following, after = answers
    assert cut["error"]["code"] == "store_unavailable", cut
    assert following["ok"] and following["result"]["round"] == 3, following
    assert after["ok"] and after["result"]["round"] == 4, after
    rounds = [dump["store"][f"jfRounds.{n}"]["input"] for n in range(1, 5)]
    assert rounds == ["first", "late", "next", "after"]
