"""A real PostgreSQL server for the tests, started from the machine's binaries.

`postgres_server` (session scope) runs `initdb` into a temporary directory and starts the
server on a Unix socket there (`jfsm.stores.postgres.server.TemporaryServer`); it is stopped and
removed at the end of the session, failures included. Without the binaries the tests that
use it skip and say why, except under CI (`CI` set), where they fail: `.ci/run` installs
PostgreSQL, so a missing server there is a broken CI, not a reason to skip.

`pg_database` is one migrated database shared by the session's tests, each of which uses its
own game ids; `fresh_database()` makes a new, empty (unmigrated) one.

`pg_bouncer` (session scope) is a real PgBouncer in transaction pooling mode on a free
loopback port in front of that server (`TemporaryBouncer`), and `bouncer_database` the
`pg_database` reached through it; `pg_target` is parametrized over both (`direct`,
`pgbouncer`), so a test taking it runs once each way.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from jfsm.stores.postgres.pool import close_pools
from jfsm.stores.postgres.server import (
    TemporaryBouncer,
    TemporaryServer,
    bouncer_unavailable,
    why_unavailable,
)

_names = itertools.count()


def require_postgres() -> None:
    """Skip (fail under CI) when no temporary server can be started here."""
    reason = why_unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests, but: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryServer]:
    require_postgres()
    server = TemporaryServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def require_bouncer() -> None:
    """Skip (fail under CI) when no temporary PgBouncer can be started here."""
    reason = bouncer_unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PgBouncer tests, but: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_bouncer(postgres_server: TemporaryServer) -> Iterator[TemporaryBouncer]:
    require_bouncer()
    bouncer = TemporaryBouncer(postgres_server)
    bouncer.start()
    try:
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture(scope="session")
def bouncer_database(pg_database: str, pg_bouncer: TemporaryBouncer) -> str:
    return pg_bouncer.conninfo(pg_database.split("dbname=")[1])


@pytest.fixture(params=["direct", "pgbouncer"])
def pg_target(request: pytest.FixtureRequest, pg_database: str) -> str:
    """`pg_database`, directly and through PgBouncer (transaction mode)."""
    if request.param == "direct":
        return pg_database
    return str(request.getfixturevalue("bouncer_database"))


@pytest.fixture(scope="session")
def pg_database(postgres_server: TemporaryServer) -> str:
    from jfsm.stores.postgres.store import migrate

    conninfo = postgres_server.create_database("jfsm_tests")
    migrate(conninfo)
    return conninfo


@pytest.fixture
def fresh_database(postgres_server: TemporaryServer) -> Callable[[], str]:
    def make() -> str:
        return postgres_server.create_database(f"jfsm_{next(_names)}")

    return make


def game_id() -> str:
    """A game id no other test uses."""
    return "g-" + uuid.uuid4().hex[:12]


def run_closing_pools(scenario: Callable[[], Awaitable[Any]], timeout: float | None = None) -> Any:
    """Run `scenario()` on a fresh event loop and close the process's PostgreSQL pools after
    it, whatever happened; with `timeout`, a scenario still waiting then fails instead of
    hanging the run."""

    async def wrapped() -> Any:
        try:
            return await asyncio.wait_for(scenario(), timeout)
        finally:
            await close_pools()

    return asyncio.run(wrapped())
