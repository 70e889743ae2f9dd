"""A database that lost writes the store saw acknowledged (issue 38, part A): the store notices,
answers `store_history_lost`, writes nothing, and stops every worker (JF-STORE-060 to
JF-STORE-063, decisions R181 to R183).

The loss is made on one real server: its data directory is copied while it is stopped, more
rounds are acknowledged, and the copy is put back (a restore from a backup, or a promoted
node without the last writes: the same to the store). A game's row is also rolled back
under an open store by hand (what check (b) sees of a lost history). The failover tests
make the loss the issue found, with a Patroni that has the bug
(`tests/stores/test_postgres_failover.py`).

Each test failed on the store before issue 38: it wrote the lost round numbers again.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from otel_helpers import recording
from pg_fixtures import game_id, require_postgres, run_closing_pools

from jfsm.errors import ERROR_CODES, StoreFenced, StoreHistoryLost
from jfsm.projection import Projection
from jfsm.stores.postgres.history import (
    WalPosition,
    clear_history_lost,
    history_lost_marks,
    judge_row,
    losses,
)
from jfsm.stores.postgres.server import TemporaryServer
from jfsm.stores.postgres.store import PostgresStore, migrate, read_image


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return run_closing_pools(scenario, 120)


def _copy(source: Path, target: Path) -> None:
    """`cp -a`: a copy with its owners and modes (the server's user owns the data)."""
    subprocess.run(["cp", "-a", str(source), str(target)], check=True, timeout=120)


def _replace(data: Path, copy: Path) -> None:
    subprocess.run(["rm", "-rf", str(data)], check=True, timeout=120)
    _copy(copy, data)


def _stored(target: str, game: str) -> tuple[int, int]:
    with psycopg.connect(target, autocommit=True) as conn:
        row = conn.execute(
            "SELECT token, seq FROM jfsm_game WHERE game_id = %s", (game,)
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


# -- the pure judgements ------------------------------------------------------------------------
@pytest.mark.req("JF-STORE-060")
@pytest.mark.parametrize(
    ("position", "floor", "behind"),
    [
        (WalPosition(1, 100), WalPosition(1, 100), False),  # the same place
        (WalPosition(2, 150), WalPosition(1, 100), False),  # a promotion: both move on
        (WalPosition(1, 99), WalPosition(1, 100), True),  # a restore: the position is back
        (WalPosition(1, 500), WalPosition(2, 100), True),  # an old timeline taken back
        (WalPosition(3, 90), WalPosition(2, 100), True),  # a newer timeline that forked early
    ],
)
def test_a_position_is_behind_when_either_number_went_back(
    position: WalPosition, floor: WalPosition, behind: bool
) -> None:
    assert position.behind(floor) is behind


@pytest.mark.req("JF-STORE-061")
@pytest.mark.parametrize(
    ("stored", "verdict"),
    [
        ((7, 5), "fenced"),  # one of ours, not landed: never "lost"
        ((8, 0), "fenced"),  # a newer owner
        (None, "fenced"),  # removed
        ((6, 9), "lost"),  # an older token than ours: tokens never go down
        ((7, 4), "lost"),  # our token, fewer writes than we saw acknowledged
        ((7, 6), "ahead"),  # our token, a write of ours we do not know of
    ],
)
def test_a_row_is_lost_history_when_its_token_or_count_went_back(
    stored: tuple[int, int] | None, verdict: str
) -> None:
    assert judge_row(7, 5, stored) == verdict


def test_the_new_code_is_a_stable_code_and_not_retryable() -> None:
    error = StoreHistoryLost("lost", state="history_lost")
    assert "store_history_lost" in ERROR_CODES
    assert error.to_json()["code"] == "store_history_lost"
    assert "retryable" not in error.to_json()


# -- a server restored to before acknowledged writes ------------------------------------------
@pytest.mark.slow
@pytest.mark.req("JF-STORE-060", "JF-STORE-062", "JF-STORE-063")
def test_a_restored_database_is_noticed_written_over_by_nobody_and_cleared_by_an_operator(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    require_postgres()
    quiet, busy = game_id(), game_id()
    with TemporaryServer() as server:
        target = server.create_database("restored")
        migrate(target)
        stores: dict[str, PostgresStore] = {}

        async def before() -> None:
            for game in (quiet, busy):
                stores[game] = await PostgresStore.open(target, game, lease_seconds=300)
                await stores[game].commit(Projection.of({"round": 1}))

        async def after_copy() -> None:
            for n in range(2, 40):  # acknowledged after the copy: the copy lacks them
                await stores[busy].commit(Projection.of({"round": n, f"text{n}": "x" * 200}))

        async def after_restore() -> dict[str, Any]:
            seen: dict[str, Any] = {}
            detections = losses.count
            # the quiet game's row is as its store knows it: only the position tells
            with pytest.raises(StoreHistoryLost) as first:
                await stores[quiet].commit(Projection.of({"round": 2}))
            seen["first"] = first.value
            seen["counted"] = losses.count - detections
            with pytest.raises(StoreHistoryLost):  # the pool refuses every game now
                await stores[busy].commit(Projection.of({"round": 2}))
            with pytest.raises(StoreHistoryLost):
                await stores[busy].confirm()
            seen["states"] = {stores[g].state for g in stores}
            # another pool (another lease length: a process of its own, to the store)
            # finds the database's mark, before it writes anything
            with pytest.raises(StoreHistoryLost) as other:
                await PostgresStore.open(target, busy, lease_seconds=299, takeover=True)
            seen["other"] = other.value
            seen["counted_after"] = losses.count - detections
            for store in stores.values():
                await store.close()
            return seen

        run_in = asyncio.new_event_loop()  # one loop: the pool and its stores live on it
        try:
            run_in.run_until_complete(before())
            copy = tmp_path / "copy"
            with server.stopped() as data:
                _copy(data, copy)
            run_in.run_until_complete(after_copy())
            stored_before = _stored(target, busy)
            with server.stopped() as data:
                _replace(data, copy)
            with (
                caplog.at_level(logging.ERROR, logger="jfsm.stores.postgres"),
                recording() as recorded,
            ):
                seen = run_in.run_until_complete(after_restore())
                lost_metric = [p for p in recorded.points() if p.name == "jfsm.store.history_lost"]
        finally:
            run_in.run_until_complete(_close_all())
            run_in.close()

        assert stored_before[1] == 39
        assert _stored(target, busy)[1] == 1  # the copy's count: nothing written over it
        assert read_image(target, quiet).get("round") == 1
        first = seen["first"]
        assert first.code == "store_history_lost" and first.state == "history_lost"
        assert first.details["wal"] < first.details["acknowledged_wal"]
        assert seen["counted"] == 1 and seen["counted_after"] == 2  # a stop a pool
        # the operator's metric counts each detection (OpenTelemetry, R206)
        assert [p.value for p in lost_metric] == [2]
        assert seen["states"] == {"history_lost"}
        assert "mark of lost history" in seen["other"].message
        marks = history_lost_marks(target)
        assert len(marks) == 1 and "behind" in marks[0]["reason"]
        logged = [r for r in caplog.records if "lacks writes" in r.getMessage()]
        assert len(logged) == 1 and '"round"' not in logged[0].getMessage()

        # the operator accepts the loss: the mark cleared, a new worker serves again
        assert clear_history_lost(target) == 1
        assert history_lost_marks(target) == []

        async def served() -> int:
            store = await PostgresStore.open(target, busy, lease_seconds=298, takeover=True)
            await store.commit(Projection.of({"round": 2}))
            seq = store.seq
            await store.close()
            return seq

        assert run(served) == 2


async def _close_all() -> None:
    from jfsm.stores.postgres.pool import close_pools

    await close_pools()


# -- a game's row behind its store ----------------------------------------------------------
async def _open(target: str, game: str, lease: float) -> PostgresStore:
    store = await PostgresStore.open(target, game, lease_seconds=lease)
    for n in range(3):
        await store.commit(Projection.of({"round": n}))
    return store


def _roll_back(target: str, game: str, *, seq: int = 0, token: int = 0) -> None:
    """Move the game's row back (`seq` fewer writes, an older `token`), as a lost history
    leaves it, or forward (a negative number) for the control."""
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(
            "UPDATE jfsm_game SET seq = seq - %s, token = token - %s WHERE game_id = %s",
            (seq, token, game),
        )


@pytest.mark.slow
@pytest.mark.req("JF-STORE-061", "JF-STORE-062")
@pytest.mark.parametrize(
    ("back", "op"),
    [
        ({"seq": 1}, "commit"),
        ({"seq": 1}, "checkpoint"),
        ({"seq": 2}, "confirm"),
        ({"token": 1}, "commit"),
        ({"token": 1, "seq": 3}, "renew"),
    ],
)
def test_a_game_whose_row_went_back_is_lost_history_and_nothing_lands(
    fresh_database: Callable[[], str], back: dict[str, int], op: str
) -> None:
    target = fresh_database()
    migrate(target)
    game, neighbour = game_id(), game_id()

    async def scenario() -> tuple[BaseException | None, tuple[int, int], str]:
        store = await _open(target, game, 300)
        other = await _open(target, neighbour, 300)
        assert store._pool is not None
        _roll_back(target, game, **back)
        stored = _stored(target, game)
        error: BaseException | None = None
        try:
            if op == "commit":
                await store.commit(Projection.of({"round": 99}))
            elif op == "checkpoint":
                await store.checkpoint()
            elif op == "confirm":
                await store.confirm()
            else:
                await store._pool.renew()
        except Exception as exc:  # the test looks at what was raised
            error = exc
        with pytest.raises(StoreHistoryLost):  # the neighbour on the same pool too
            await other.commit(Projection.of({"round": 100}))
        state = store.state
        await store.close()
        await other.close()
        return error, stored, state

    error, stored, state = run(scenario)
    assert isinstance(error, StoreHistoryLost) or (op == "renew" and error is None), error
    assert state == "history_lost"
    assert _stored(target, game) == stored  # nothing landed on the row that went back
    assert read_image(target, game).get("round") == 2
    assert read_image(target, neighbour).get("round") == 2
    assert len(history_lost_marks(target)) == 1


@pytest.mark.req("JF-STORE-061")
def test_a_newer_token_is_a_newer_owner_not_a_lost_history(
    fresh_database: Callable[[], str],
) -> None:
    target = fresh_database()
    migrate(target)
    game = game_id()

    async def scenario() -> str:
        store = await _open(target, game, 300)
        taker = await PostgresStore.open(target, game, takeover=True, lease_seconds=300)
        await taker.commit(Projection.of({"round": 7}))
        with pytest.raises(StoreFenced):
            await store.commit(Projection.of({"round": 8}))
        await taker.commit(Projection.of({"round": 9}))  # the pool is fine
        state = store.state
        await store.close()
        await taker.close()
        return state

    assert run(scenario) == "fenced"
    assert history_lost_marks(target) == []


@pytest.mark.req("JF-STORE-063")
def test_an_operator_sees_the_mark_and_clears_it_from_the_command_line(
    fresh_database: Callable[[], str], capsys: pytest.CaptureFixture[str]
) -> None:
    from jfsm.cli import main

    target = fresh_database()
    migrate(target)
    game = game_id()

    async def make() -> None:
        store = await PostgresStore.open(target, game)
        await store.commit(Projection.of({"round": 1}))
        await store.close()

    run(make)
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jfsm_history_lost (detected_by, reason) VALUES ('w1', 'a test mark')"
        )

    async def refused() -> str:
        with pytest.raises(StoreHistoryLost) as info:
            await PostgresStore.open(target, game, lease_seconds=297)
        return info.value.code

    assert run(refused) == "store_history_lost"
    assert main(["inspect", target, "--game", game]) == 0
    assert "HISTORY LOST" in capsys.readouterr().out
    assert main(["pg-migrate", target, "--clear-history-lost"]) == 0
    assert "cleared 1 mark(s)" in capsys.readouterr().out
    assert history_lost_marks(target) == []
