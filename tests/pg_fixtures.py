"""A real PostgreSQL server for the tests, started from the machine's binaries.

`postgres_server` (session scope) runs `initdb` into a temporary directory and starts the
server on a Unix socket there (`jfsm.stores.pg_server.TemporaryServer`); it is stopped and
removed at the end of the session, failures included. Without the binaries the tests that
use it skip and say why, except under CI (`CI` set), where they fail: `.ci/run` installs
PostgreSQL, so a missing server there is a broken CI, not a reason to skip.

`pg_database` is one migrated database shared by the session's tests, each of which uses its
own game ids; `fresh_database()` makes a new, empty (unmigrated) one.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from jfsm.stores.pg_server import TemporaryServer, why_unavailable

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


@pytest.fixture(scope="session")
def pg_database(postgres_server: TemporaryServer) -> str:
    from jfsm.stores.postgres import migrate

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
