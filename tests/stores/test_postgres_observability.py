"""The PostgreSQL store's OpenTelemetry spans and metrics (issue 40, decision R207).

A real server: an owner opens a game and commits, a second owner takes it over, the first's
next commit is fenced, the second renews, checkpoints and closes. The statements are
database client spans by the semantic conventions, never with their text or the connection
string's user or password; the leases are `jfsm.lease.*` spans; takeovers, fenced refusals,
group-commit sizes and the pool's connections are metrics.
"""

from __future__ import annotations

import asyncio

import pytest
from otel_helpers import recording, text_values
from pg_fixtures import game_id, run_closing_pools

from jfsm.errors import StoreFenced
from jfsm.projection import Projection

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL store needs jfsm[postgres]")

from jfsm.stores.postgres.fencing import COMMIT  # noqa: E402
from jfsm.stores.postgres.group import GROUP_COMMIT  # noqa: E402
from jfsm.stores.postgres.store import PostgresStore  # noqa: E402

pytestmark = pytest.mark.req("JF-CALL-022")


def test_statements_leases_and_fencing_are_traced_by_the_conventions(pg_database: str) -> None:
    game = game_id()
    pool_points = []

    async def scenario() -> None:
        first = await PostgresStore.open(pg_database, game, owner="w1")
        await first.commit(Projection.of({"a": 1}))
        # two games committing in the same pass of the loop share one statement
        other = await PostgresStore.open(pg_database, game + "-b", owner="w1")
        await asyncio.gather(
            first.commit(Projection.of({"b": 2})), other.commit(Projection.of({"c": 3}))
        )
        second = await PostgresStore.open(pg_database, game, owner="w2", takeover=True)
        with pytest.raises(StoreFenced):
            await first.commit(Projection.of({"lost": 1}))
        assert await second.renew()
        await second.checkpoint()
        pool_points.extend(p for p in recorded.points() if p.name.startswith("db.client"))
        for store in (first, second, other):
            await store.close()

    with recording() as recorded:
        run_closing_pools(scenario)
    spans = recorded.spans()
    names = [s.name for s in spans]
    assert {"jfsm.lease.acquire", "jfsm.lease.takeover", "jfsm.lease.renew"} <= set(names)
    assert {"jfsm.lease.fence", "commit jfsm_game", "checkpoint jfsm_game"} <= set(names)
    assert "BATCH commit jfsm_game" in names, names
    statements = [s for s in spans if s.name.endswith(" jfsm_game")]
    dbname = pg_database.split("dbname=")[1].split()[0]
    for statement in statements:
        attributes = dict(statement.attributes or {})
        assert statement.kind.name == "CLIENT"
        assert attributes["db.system.name"] == "postgresql"
        assert attributes["db.namespace"] == dbname
        assert attributes["db.collection.name"] == "jfsm_game"
        assert statement.name == f"{attributes['db.operation.name']} jfsm_game"
        assert "db.query.text" not in attributes and "server.address" in attributes
    batch = next(s for s in statements if s.name == "BATCH commit jfsm_game")
    assert batch.attributes["db.operation.batch.size"] == 2
    takeover = next(s for s in spans if s.name == "jfsm.lease.takeover")
    assert takeover.attributes["jfsm.lease.previous"] == "live"
    assert recorded.total("jfsm.lease.takeovers", **{"jfsm.store.backend": "postgresql"}) == 1
    assert recorded.total("jfsm.store.fenced", **{"jfsm.store.backend": "postgresql"}) == 1
    assert recorded.total("jfsm.store.group_commit.size") >= 3
    counts = [p for p in pool_points if p.name == "db.client.connection.count"]
    assert {p.labels["db.client.connection.state"] for p in counts} == {"idle", "used"}
    assert sum(p.value for p in counts) >= 1  # the pool's open connections, idle or lent
    assert any(p.name == "db.client.connection.max" and p.value >= 1 for p in pool_points)
    # never the statement's text, nor who connects
    found = " ".join(value for _, value in text_values(recorded))
    for piece in ("jfsm_value", "unnest(", "synchronous_commit", "user=", "password"):
        assert piece not in found, piece
    assert "jfsm_value" in COMMIT and "unnest(" in GROUP_COMMIT  # what was looked for exists
