"""Group commit (issue 32, decision R152): concurrent commits of different games of one
worker share one statement, and each still stands or falls on its own.

Judged against a real server, structurally: the pool's `GroupCommit` counts the statements
it sent and their members; another connection holds a game's row lock to keep a batch in
flight while the test looks at what is acknowledged and what the database shows; a trigger
refuses one key to play a member the server refuses; `pg_terminate_backend` cuts a batch's
connection. No timing is asserted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from pg_fixtures import game_id, run_closing_pools

from jfsm.errors import QuotaExceeded, StoreFenced, StoreUnavailable
from jfsm.projection import Projection
from jfsm.stores.postgres.group import GroupCommit, grouped
from jfsm.stores.postgres.store import PostgresStore, migrate, read_image


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return run_closing_pools(scenario)


async def _open(target: str, n: int, **kwargs: Any) -> list[PostgresStore]:
    games = [game_id() for _ in range(n)]
    opened, refused = await PostgresStore.open_many(target, games, **kwargs)
    assert not refused
    return [opened[g] for g in games]


def _group(store: PostgresStore) -> GroupCommit:
    assert store._pool is not None
    return grouped(store._pool)


def _in_db(target: str, store: PostgresStore) -> dict[str, bytes]:
    return read_image(target, store.game_id).values_bytes()


@pytest.mark.req("JF-STORE-050")
def test_concurrent_commits_of_different_games_share_one_statement(pg_target: str) -> None:
    async def scenario() -> None:
        stores = await _open(pg_target, 6)
        group = _group(stores[0])
        batches, members = group.batches, group.members
        seqs = [s.seq for s in stores]
        await asyncio.gather(
            *(s.commit(Projection.of({"k": n, f"only.{n}": "x"})) for n, s in enumerate(stores))
        )
        assert (group.batches - batches, group.members - members) == (1, 6)
        for n, store in enumerate(stores):
            assert store.seq == seqs[n] + 1
            assert store.image.get("k") == n
            assert await asyncio.to_thread(_in_db, pg_target, store) == store.image.values_bytes()
        # one after another: a statement each, whatever the setting
        for store in stores[:2]:
            await store.commit(Projection.of({"k": -1}, ["only.0", "only.1"]))
        assert group.batches - batches == 3
        for store in stores:
            await store.close()

    run(scenario)


@pytest.mark.req("JF-STORE-050")
@pytest.mark.parametrize("slots", [1, 4])
def test_a_batch_holds_at_most_its_bound_and_one_commit_of_a_game(
    pg_database: str, slots: int
) -> None:
    """`max_members` splits ten commits into batches of four; three commits of one game sent
    at once go into three batches, one after another (never two in flight at once, whatever
    the slots), in order, and all land."""

    async def scenario() -> None:
        stores = await _open(pg_database, 10)
        assert stores[0]._pool is not None
        group = GroupCommit(stores[0]._pool, max_members=4, max_batches=slots)
        store = stores[0]
        sizes: list[int] = []
        events: list[tuple[str, int]] = []
        sent = group._send

        async def spy(batch: list[Any]) -> None:
            sizes.append(len(batch))
            events.append(("start", len(sizes)))
            await sent(batch)
            events.append(("end", len(sizes)))

        group._send = spy  # type: ignore[method-assign]
        results = await asyncio.gather(
            *(group.commit(s.game_id, s.token, 10, [b"k"], [b"1"], []) for s in stores)
        )
        assert sizes == [4, 4, 2]
        assert all(r == s.seq + 1 for r, s in zip(results, stores, strict=True))
        sizes.clear()
        events.clear()
        game, token = store.game_id, store.token
        results = await asyncio.gather(
            *(group.commit(game, token, 10, [b"k"], [v], []) for v in (b"2", b"3", b"4"))
        )
        assert sizes == [1, 1, 1] and results == [store.seq + 2, store.seq + 3, store.seq + 4]
        assert events == [
            ("start", 1),
            ("end", 1),
            ("start", 2),
            ("end", 2),
            ("start", 3),
            ("end", 3),
        ]
        image = await asyncio.to_thread(read_image, pg_database, store.game_id)
        assert image.raw("k") == b"4"
        for s in stores:
            s.lost_lease()  # their seq is behind the database now: never write again
            await s.close()

    run(scenario)


@pytest.mark.req("JF-STORE-051", "JF-STORE-013")
def test_a_fenced_member_fails_alone_and_nothing_of_it_lands(pg_target: str) -> None:
    async def scenario() -> None:
        a, b, c = await _open(pg_target, 3)
        await b.commit(Projection.of({"v": "before"}))
        newer = await PostgresStore.open(pg_target, b.game_id, takeover=True)
        group = _group(a)
        batches = group.batches
        results = await asyncio.gather(
            a.commit(Projection.of({"v": "a"})),
            b.commit(Projection.of({"v": "late", "w": 1}, [])),
            c.commit(Projection.of({"v": "c"})),
            return_exceptions=True,
        )
        assert group.batches - batches == 1  # all three in one statement
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], StoreFenced) and b.state == "fenced"
        assert a.image.get("v") == "a" and c.image.get("v") == "c"
        assert b.image.get("v") == "before"  # the fenced handle's image did not move
        in_db = await asyncio.to_thread(read_image, pg_target, b.game_id)
        assert in_db.values_bytes() == newer.image.values_bytes() == {"v": b'"before"'}
        assert (await asyncio.to_thread(read_image, pg_target, a.game_id)).get("v") == "a"
        for store in (a, b, c, newer):
            await store.close()

    run(scenario)


@pytest.mark.req("JF-STORE-051", "JF-QUOTA-004")
def test_an_over_quota_member_is_refused_before_it_joins_and_the_others_commit(
    pg_target: str,
) -> None:
    async def scenario() -> None:
        a, b, c = await _open(pg_target, 3, quota=200)
        group = _group(a)
        batches, members = group.batches, group.members
        results = await asyncio.gather(
            a.commit(Projection.of({"v": "a"})),
            b.commit(Projection.of({"v": "x" * 400})),
            c.commit(Projection.of({"v": "c"})),
            return_exceptions=True,
        )
        assert isinstance(results[1], QuotaExceeded) and b.state == "owner"
        assert (group.batches - batches, group.members - members) == (1, 2)
        assert await asyncio.to_thread(_in_db, pg_target, b) == {}
        assert (await asyncio.to_thread(read_image, pg_target, c.game_id)).get("v") == "c"
        for store in (a, b, c):
            await store.close()

    run(scenario)


@pytest.mark.req("JF-STORE-052")
def test_members_are_acknowledged_only_after_the_shared_commit(pg_database: str) -> None:
    """A row lock held elsewhere keeps the batch in flight: no member is acknowledged, and
    no other session sees any member's value, until the statement committed; then all."""

    async def scenario() -> None:
        stores = await _open(pg_database, 3)
        blocker = await psycopg.AsyncConnection.connect(pg_database)
        await blocker.execute(
            "SELECT 1 FROM jfsm_game WHERE game_id = %s FOR UPDATE", (stores[2].game_id,)
        )
        commits = [
            asyncio.create_task(s.commit(Projection.of({"v": n}))) for n, s in enumerate(stores)
        ]
        async with await psycopg.AsyncConnection.connect(pg_database, autocommit=True) as peek:
            for _ in range(200):  # until the batch waits on the lock (never a fixed sleep)
                cur = await peek.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                )
                row = await cur.fetchone()
                if row and row[0]:
                    break
                await asyncio.sleep(0.01)
            assert not any(task.done() for task in commits)
            cur = await peek.execute(
                "SELECT count(*) FROM jfsm_value WHERE game_id = ANY(%s)",
                ([s.game_id for s in stores],),
            )
            assert await cur.fetchone() == (0,)  # stores[0] and [1] are not visible either
        await blocker.rollback()
        await blocker.close()
        await asyncio.gather(*commits)
        for n, store in enumerate(stores):
            assert (await asyncio.to_thread(read_image, pg_database, store.game_id)).get("v") == n
            await store.close()

    run(scenario)


@pytest.mark.req("JF-STORE-052")
def test_a_lost_connection_leaves_every_member_to_resolve_its_own_outcome(
    pg_database: str,
) -> None:
    async def scenario() -> None:
        stores = await _open(pg_database, 3)
        for store in stores:
            await store.commit(Projection.of({"v": "before"}))
        blocker = await psycopg.AsyncConnection.connect(pg_database)
        await blocker.execute(
            "SELECT 1 FROM jfsm_game WHERE game_id = %s FOR UPDATE", (stores[0].game_id,)
        )
        commits = [asyncio.create_task(s.commit(Projection.of({"v": "cut"}))) for s in stores]
        async with await psycopg.AsyncConnection.connect(pg_database, autocommit=True) as peek:
            for _ in range(500):
                cur = await peek.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND application_name = 'jfsm-store'"
                )
                if await cur.fetchall():
                    break
                await asyncio.sleep(0.01)
        await blocker.rollback()
        await blocker.close()
        results = await asyncio.gather(*commits, return_exceptions=True)
        for result, store in zip(results, stores, strict=True):
            assert isinstance(result, StoreUnavailable), result
            assert result.state == "broken" and store.state == "broken"
        for store in stores:  # it did not land: the next call finds that and goes on
            await store.commit(Projection.of({"v": "after"}))
            assert store.state == "owner"
            image = await asyncio.to_thread(read_image, pg_database, store.game_id)
            assert image.get("v") == "after" == store.image.get("v")
            await store.close()

    run(scenario)


@pytest.mark.req("JF-STORE-053")
def test_a_member_the_server_refuses_fails_alone(fresh_database: Callable[[], str]) -> None:
    """A trigger refuses one key (as a constraint or a timeout might refuse a statement):
    the batch fails whole, each member is run again alone, and only the refused one fails,
    with nothing of it written; its store stays usable."""
    target = fresh_database()
    migrate(target)
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN IF NEW.key = 'poison'::bytea THEN"
            " RAISE EXCEPTION 'poison refused'; END IF; RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON jfsm_value"
            " FOR EACH ROW EXECUTE FUNCTION refuse_poison()"
        )

    async def scenario() -> None:
        a, p, c = await _open(target, 3)
        group = _group(a)
        batches = group.batches
        results = await asyncio.gather(
            a.commit(Projection.of({"v": "a"})),
            p.commit(Projection.of({"poison": 1, "v": "p"})),
            c.commit(Projection.of({"v": "c"})),
            return_exceptions=True,
        )
        assert group.batches - batches == 4  # the batch, then each member alone
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], StoreUnavailable) and results[1].state == "open"
        assert "poison refused" in results[1].message and p.state == "owner"
        assert await asyncio.to_thread(_in_db, target, p) == {} == p.image.values_bytes()
        for store, value in ((a, "a"), (c, "c")):
            assert (await asyncio.to_thread(read_image, target, store.game_id)).get("v") == value
        await p.commit(Projection.of({"v": "fine"}))  # still the owner, still usable
        assert (await asyncio.to_thread(read_image, target, p.game_id)).get("v") == "fine"
        for store in (a, p, c):
            await store.close()

    run(scenario)


@pytest.mark.req("JF-STORE-052")
def test_a_cancelled_member_still_lands_whole_in_its_image(pg_database: str) -> None:
    """Cancelling the task awaiting a commit whose batch is in flight: the write lands, the
    store's image shows it, and the cancellation reaches the task afterwards."""

    async def scenario() -> None:
        (store,) = await _open(pg_database, 1)
        blocker = await psycopg.AsyncConnection.connect(pg_database)
        await blocker.execute(
            "SELECT 1 FROM jfsm_game WHERE game_id = %s FOR UPDATE", (store.game_id,)
        )
        seen: list[str] = []

        async def commit_then_more() -> None:
            await store.commit(Projection.of({"v": "landed"}))
            seen.append("returned")
            await asyncio.sleep(0)  # the cancellation arrives here
            seen.append("not cancelled")

        task = asyncio.create_task(commit_then_more())
        for _ in range(20):
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # waits for the batch's outcome
        await blocker.rollback()
        await blocker.close()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == ["returned"]
        image = await asyncio.to_thread(read_image, pg_database, store.game_id)
        assert image.get("v") == "landed" == store.image.get("v")
        await store.commit(Projection.of({"v": "next"}))  # seq and image still agree
        await store.close()

    run(scenario)
