"""The reference driver and the command line over PostgreSQL.

The full conformance run over `jfsm driver --store postgresql://...` is a job of `.ci/run`
(it takes as long as the stdio run over files); here the driver's durable restart, game
duplication and the `pg-migrate` and `inspect` commands are checked against a real server.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pg_fixtures import game_id

from jfsm.cli import main
from jfsm.driver import ReferenceDriver
from jfsm.stores.pg_server import TemporaryServer
from jfsm.stores.postgres import PostgresStore, read_image
from jfsm_conformance.fake.compress import FakeCompress


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
            # a second driver on the same database cannot take a game its owner holds
            other = ReferenceDriver(tmp_path / "other", store_url=url)
            await _call(other, "hello", protocol=1, compressUrl=fake.url)
            reply = await other.handle({"id": 2, "op": "create_game", "args": {"game": game}})
            assert reply["error"]["code"] == "store_locked"
            other.close()
            driver.close()

    asyncio.run(scenario())
    image = read_image(pg_database, game)
    assert image.footprint() > 4
    with PostgresStore.open(pg_database, copy) as store:
        assert store.image.change_log() == []  # a duplicate starts checkpointed


def test_cli_migrates_and_inspects(postgres_server: TemporaryServer, capsys: Any) -> None:
    url = postgres_server.url(postgres_server.create_database("jfsm_cli").split("dbname=")[1])
    assert main(["pg-migrate", url]) == 0
    assert "schema version 1" in capsys.readouterr().out
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
    assert main(["driver", "--store", url]) == 2
    assert "--state" in capsys.readouterr().err


def test_pg_migrate_reports_an_unreachable_server(tmp_path: Path, capsys: Any) -> None:
    url = f"postgresql://jfsm@/none?host={tmp_path}&connect_timeout=2"
    assert main(["pg-migrate", url]) == 2
    assert "store_unavailable" in capsys.readouterr().err
