"""The PostgreSQL store against a real server: schema, ownership, fencing, lost connections.

The equivalence with the memory and file stores is proven by the stateful test of
`test_store_equivalence.py`; crashes and kills are in `test_postgres_crash.py`.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from pg_fixtures import game_id, require_bouncer

from jfsm.errors import InvalidInput, QuotaExceeded, StoreFenced, StoreLocked, StoreUnavailable
from jfsm.machines import StateMachine
from jfsm.projection import Projection
from jfsm.stores.postgres.blocking import BlockingPostgresStore as PostgresStore
from jfsm.stores.postgres.store import SCHEMA_VERSION, migrate, read_image, remove_game


def _rows(conninfo: str, game: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(
            "SELECT key, value, base FROM jfsm_value WHERE game_id = %s ORDER BY key", (game,)
        ).fetchall()
        head = conn.execute(
            "SELECT token, seq, generation, footprint FROM jfsm_game WHERE game_id = %s", (game,)
        ).fetchall()
    return head + rows


# -- schema -----------------------------------------------------------------------------------
@pytest.mark.req("JF-STORE-016")
def test_schema_is_explicit_versioned_and_idempotent(fresh_database: Callable[[], str]) -> None:
    conninfo = fresh_database()
    with pytest.raises(StoreUnavailable) as info:
        PostgresStore.open(conninfo, "g")
    assert info.value.details["schema_version"] == 0
    assert "pg-migrate" in info.value.message
    assert migrate(conninfo) == SCHEMA_VERSION
    assert migrate(conninfo) == SCHEMA_VERSION  # idempotent
    with psycopg.connect(conninfo) as conn:
        versions = conn.execute("SELECT version FROM jfsm_schema_version").fetchall()
        assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
        conn.execute("INSERT INTO jfsm_schema_version (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreUnavailable) as info:
        PostgresStore.open(conninfo, "g")
    assert info.value.details["schema_version"] == SCHEMA_VERSION + 1
    with pytest.raises(StoreUnavailable):
        migrate(conninfo)  # never downgrades


@pytest.mark.req("JF-STORE-016")
def test_concurrent_migrations_apply_once(fresh_database: Callable[[], str]) -> None:
    conninfo = fresh_database()
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(migrate(conninfo))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [SCHEMA_VERSION] * 4
    with psycopg.connect(conninfo) as conn:
        count = conn.execute("SELECT count(*) FROM jfsm_schema_version").fetchone()
        assert count == (SCHEMA_VERSION,)


# -- bytes --------------------------------------------------------------------------------------
@pytest.mark.req("JF-STORE-015")
def test_values_are_stored_as_their_exact_jcs_bytes(pg_database: str) -> None:
    game = game_id()
    value = {"b": 1.0, "a": "é\u0000𝄞", "n": 1e21}
    with PostgresStore.open(pg_database, game) as store:
        store.commit(Projection.of({"k\u0000é": value}))
        expected = store.image.raw("k\u0000é")
    with psycopg.connect(pg_database) as conn:
        row = conn.execute(
            "SELECT key, value FROM jfsm_value WHERE game_id = %s", (game,)
        ).fetchone()
    assert row is not None
    assert bytes(row[0]) == "k\u0000é".encode()
    assert bytes(row[1]) == expected == b'{"a":"\xc3\xa9\\u0000\xf0\x9d\x84\x9e","b":1,"n":1e+21}'


def test_quota_and_seed_refusals_send_nothing(pg_database: str) -> None:
    game = game_id()
    with PostgresStore.open(pg_database, game, quota=64) as store:
        before = _rows(pg_database, game)
        with pytest.raises(QuotaExceeded):
            store.commit(Projection.of({"a": "x" * 100}))
        store.commit(Projection.of({"a": 1}))
        with pytest.raises(InvalidInput):
            store.seed({"b": b"2"})
        assert _rows(pg_database, game)[1:] == [(b"a", b"1", None)]
        assert before[0][1] == 0  # seq before the one commit


# -- ownership ----------------------------------------------------------------------------------
@pytest.mark.req("JF-STORE-010", "JF-STORE-011")
def test_second_open_is_locked_while_the_owner_lives(pg_database: str) -> None:
    game = game_id()
    first = PostgresStore.open(pg_database, game, owner="worker-a")
    before = _rows(pg_database, game)
    with pytest.raises(StoreLocked) as info:
        PostgresStore.open(pg_database, game, owner="worker-b")
    assert info.value.code == "store_locked"
    assert info.value.details["owner"] == "worker-a"
    assert _rows(pg_database, game) == before  # the refused open changed nothing
    first.commit(Projection.of({"a": 1}))  # and the owner is undisturbed
    first.close()
    second = PostgresStore.open(pg_database, game, owner="worker-b")
    assert second.token > first.token
    assert second.image.get("a") == 1
    second.close()


@pytest.mark.req("JF-STORE-012", "JF-STORE-013")
def test_fenced_owner_keeps_writing_and_nothing_lands(pg_database: str) -> None:
    game = game_id()
    old = PostgresStore.open(pg_database, game, owner="old")
    old.commit(Projection.of({"a": 1, "b": 2}))
    new = PostgresStore.open(pg_database, game, takeover=True, owner="new")
    assert new.token > old.token
    new.commit(Projection.of({"c": 3}))
    landed = _rows(pg_database, game)
    attempts: list[Callable[[], None]] = [
        lambda: old.commit(Projection.of({"a": 9})),
        lambda: old.commit(Projection.of({}, ["b"])),
        old.checkpoint,
        lambda: old.commit(Projection.of({"z": "late"})),
    ]
    for attempt in attempts * 5:
        with pytest.raises(StoreFenced) as info:
            attempt()
        assert info.value.code == "store_fenced"
        assert isinstance(info.value, StoreLocked)
        assert old.state == "fenced"
        assert _rows(pg_database, game) == landed
    assert old.image.get("a") == 1  # the fenced handle's image did not move either
    assert new.image.get("c") == 3 and new.image.get("a") == 1
    new.commit(Projection.of({"a": 10}))
    old.close()
    new.close()
    fresh = PostgresStore.open(pg_database, game)
    assert fresh.image.store_json() == {"a": 10, "b": 2, "c": 3}
    fresh.close()


@pytest.mark.req("JF-STORE-012", "JF-STORE-013")
def test_takeover_racing_commits_never_loses_or_lands_late(pg_database: str) -> None:
    """An owner commits as fast as it can while another worker takes over: every commit
    acknowledged before the takeover is in the new owner's image, none after it lands."""
    for _ in range(5):
        game = game_id()
        old = PostgresStore.open(pg_database, game)
        acked: list[int] = []
        refused: list[int] = []
        started = threading.Event()

        def run(
            old: PostgresStore = old,
            acked: list[int] = acked,
            refused: list[int] = refused,
            started: threading.Event = started,
        ) -> None:
            for n in range(10_000):
                try:
                    old.commit(Projection.of({"n": n, f"k{n % 7}": n}))
                except StoreFenced:
                    refused.append(n)
                    return
                acked.append(n)
                started.set()

        thread = threading.Thread(target=run)
        thread.start()
        assert started.wait(10)
        new = PostgresStore.open(pg_database, game, takeover=True)
        thread.join()
        assert refused and acked
        assert new.image.get("n") == acked[-1]
        assert read_image(pg_database, game).store_json() == new.image.store_json()
        old.close()
        new.close()


def test_remove_game_respects_a_live_owner(pg_database: str) -> None:
    game = game_id()
    store = PostgresStore.open(pg_database, game)
    store.commit(Projection.of({"a": 1}))
    with pytest.raises(StoreLocked):
        remove_game(pg_database, game)
    store.close()
    assert remove_game(pg_database, game) is True
    assert remove_game(pg_database, game) is False
    with pytest.raises(InvalidInput):
        read_image(pg_database, game)


# Killed owners, lost connections and restarts: test_postgres_safety.py (leases, pool).


@pytest.mark.req("JF-STORE-010", "JF-STORE-011", "JF-STORE-012", "JF-STORE-013")
def test_handles_follow_the_ownership_machine(pg_database: str) -> None:
    """Random walks of open, takeover, write and close over three handles of one game: each
    handle's state is the one the table `store_ownership` gives for what happened."""
    import random

    rng = random.Random(13)
    for _walk in range(6):
        game = game_id()
        handles: list[tuple[PostgresStore | None, StateMachine]] = []
        current: dict[str, Any] = {"token": 0, "alive": False}
        for _ in range(3):
            handles.append((None, StateMachine("store_ownership", _guards(current, None))))
        for _step in range(25):
            index = rng.randrange(3)
            store, machine = handles[index]
            event = rng.choice(["open", "takeover", "write", "close"])
            if machine.current == "unowned" and event in ("open", "takeover"):
                alive = any(
                    h[0] is not None and h[0].state == "owner" and h[0].token == current["token"]
                    for h in handles
                )
                current["alive"] = alive
                try:
                    store = PostgresStore.open(pg_database, game, takeover=event == "takeover")
                    current["token"] = store.token
                except StoreLocked:
                    assert event == "open" and alive
                machine = StateMachine(
                    "store_ownership", _guards(current, store), state=machine.current
                )
                machine.fire(event)
                handles[index] = (store, machine)
            elif event == "write" and store is not None:
                with contextlib.suppress(StoreFenced, StoreUnavailable):
                    store.commit(Projection.of({"step": _step}))
                machine.fire(event)
            elif event == "close" and store is not None:
                store.close()
                machine.fire(event)
            else:
                continue
            actual = "unowned" if store is None else store.state
            assert actual == machine.current, (event, actual, machine.current)
        for store, _machine in handles:
            if store is not None:
                store.close()


def _guards(current: dict[str, Any], store: PostgresStore | None) -> dict[str, Callable[[], bool]]:
    return {
        "owner_alive": lambda: bool(current["alive"]),
        "token_current": lambda: store is not None and store.token == current["token"],
        "connection_lost": lambda: False,
        "write_landed": lambda: False,  # never broken here: test_postgres_safety.py
    }


def test_a_stopped_bouncer_leaves_no_process(postgres_server: Any) -> None:
    """`TemporaryBouncer.stop` kills the bouncer itself, not only the `runuser` in front of
    it when run as root (which left bouncers running after every test session)."""
    from jfsm.stores.postgres.server import TemporaryBouncer

    require_bouncer()
    bouncer = TemporaryBouncer(postgres_server).start()
    assert bouncer.directory is not None
    ini = str(bouncer.directory / "pgbouncer.ini")
    running = subprocess.run(["pgrep", "-f", ini], capture_output=True, text=True).stdout.split()
    assert running, "the bouncer should be running before stop"
    bouncer.stop()
    left = subprocess.run(["pgrep", "-f", ini], capture_output=True, text=True).stdout.split()
    assert left == []
