"""The PostgreSQL store at scale (issue 21, item 4), on loopback, with short leases.

1. One process opens 10,000 games (`open_many`, batches of 1,000) on a pool of 20
   connections and commits to every one of them at once (at most 400 commits in flight);
   the server's connection count, sampled throughout, never exceeds the pool.
2. Four worker processes own 2,500 games each (leases of 2 s) and commit "rounds" to random
   games of theirs, 40 at a time, journaling each acknowledged round (one unbuffered write
   after `commit` returned) and each round refused as fenced. Meanwhile the test kills a
   worker with SIGKILL twice (its replacement, another owner id, takes its games as their
   leases expire), takes 200 games of a live worker over (that worker's next writes to them
   are fenced), and restarts the server once with `pg_ctl restart -m immediate`.

Checker, over the database at the end: every acknowledged round is in its game (lost: 0),
no round text is stored twice (duplicated: 0), no round refused as fenced is stored (fenced
commits landed: 0), and every game's recorded footprint equals a full recount of its rows.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_fixtures import require_postgres

from jfsm.errors import JfsmError, StoreFenced, StoreUnavailable
from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.stores.postgres.server import TemporaryServer
from jfsm.stores.postgres.store import PostgresStore, close_pools, migrate

pytestmark = pytest.mark.slow

GAMES = 10_000
POOL = 20
WORKERS = 4
LEASE = 2.0
SECONDS = 16.0


def _connections(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def _recount(conninfo: str) -> tuple[dict[str, StoreImage], dict[str, int]]:
    """Every game's image from its rows, and its recorded footprint."""
    values: dict[str, dict[str, bytes]] = {}
    bases: dict[str, dict[str, bytes]] = {}
    with psycopg.connect(conninfo) as conn:
        recorded = dict(conn.execute("SELECT game_id, footprint FROM jfsm_game").fetchall())
        with conn.cursor(binary=True) as cur:
            cur.execute("SELECT game_id, key, value, base FROM jfsm_value")
            for game, key, value, base in cur:
                name = bytes(key).decode()
                if value is not None:
                    values.setdefault(game, {})[name] = bytes(value)
                if base is not None:
                    bases.setdefault(game, {})[name] = bytes(base)
    images = {
        game: StoreImage(values.get(game, {}), bases.get(game, {}), quota=1 << 40)
        for game in recorded
    }
    return images, {game: int(fp) for game, fp in recorded.items()}


def _footprints_differing(conninfo: str) -> int:
    images, recorded = _recount(conninfo)
    return sum(1 for game, image in images.items() if image.footprint() != recorded[game])


@pytest.mark.slow
@pytest.mark.req("JF-STORE-010", "JF-STORE-013")
def test_one_process_holds_10000_games_on_20_connections() -> None:
    require_postgres()
    with TemporaryServer() as server:
        conninfo = server.create_database("scale1")
        migrate(conninfo)
        peak = [0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _connections(conninfo) - 1)  # minus the sampler's own
                stop.wait(0.2)

        async def scenario() -> int:
            stores: dict[str, PostgresStore] = {}
            ids = [f"g{n:05d}" for n in range(GAMES)]
            for start in range(0, GAMES, 1000):
                opened, refused = await PostgresStore.open_many(
                    conninfo, ids[start : start + 1000], pool_size=POOL
                )
                assert refused == {}
                stores.update(opened)
            gate = asyncio.Semaphore(400)

            async def commit(store: PostgresStore) -> None:
                async with gate:
                    await store.commit(Projection.of({"game": store.game_id, "n": 1}))

            await asyncio.gather(*(commit(store) for store in stores.values()))
            open_now = sum(1 for store in stores.values() if store.state == "owner")
            for store in stores.values():
                await store.close()
            return open_now

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            open_now = asyncio.run(_closing(scenario()))
        finally:
            stop.set()
            sampler.join()
        print(f"scale: {open_now} games open, peak server connections {peak[0]}")
        assert open_now == GAMES
        assert 0 < peak[0] <= POOL
        assert _footprints_differing(conninfo) == 0


async def _closing(coro: Any) -> Any:
    try:
        return await coro
    finally:
        await close_pools()


# -- four workers, kills, takeovers, a server restart -------------------------------------------
def _worker(conninfo: str, slot: int, incarnation: int, journal: str) -> None:
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def note(*fields: Any) -> None:
        os.write(fd, (json.dumps(fields) + "\n").encode())

    async def work() -> None:
        ids = [f"w{slot}-{n:04d}" for n in range(GAMES // WORKERS)]
        owner = f"w{slot}.{incarnation}"
        stores: dict[str, PostgresStore] = {}
        while len(stores) < len(ids):  # the previous incarnation's leases run out meanwhile
            missing = [g for g in ids if g not in stores]
            try:
                for start in range(0, len(missing), 500):
                    opened, _ = await PostgresStore.open_many(
                        conninfo, missing[start : start + 500], lease_seconds=LEASE, owner=owner
                    )
                    stores.update(opened)
            except StoreUnavailable:
                pass
            if len(stores) < len(ids):
                await asyncio.sleep(0.3)
        note("ready", slot)
        rng = random.Random(f"{slot}.{incarnation}")
        live = list(stores)
        locks = {g: asyncio.Lock() for g in live}

        async def rounds() -> None:
            while live:
                game = rng.choice(live)
                async with locks[game]:
                    store = stores[game]
                    n = int(store.image.get("last") or 0) + 1
                    text = f"{owner}:{game}:{n}"
                    try:
                        await store.commit(Projection.of({f"r{n}": text, "last": n}))
                    except StoreFenced:
                        note("fenced", game, n, text)
                        if game in live:
                            live.remove(game)
                        continue
                    except JfsmError:
                        await asyncio.sleep(0.05)  # server restarting: the next call asks
                        continue
                    note("ack", game, n, text)

        await asyncio.gather(*(rounds() for _ in range(40)))

    asyncio.run(work())


@pytest.mark.slow
@pytest.mark.req("JF-STORE-011", "JF-STORE-012", "JF-STORE-013", "JF-STORE-014")
def test_four_workers_with_kills_takeovers_and_a_server_restart(tmp_path: Path) -> None:
    require_postgres()
    ctx = multiprocessing.get_context("fork")
    with TemporaryServer() as server:
        conninfo = server.create_database("scale4")
        migrate(conninfo)
        journal = str(tmp_path / "journal.jsonl")
        incarnations = Counter[int]()
        workers: dict[int, Any] = {}

        def start(slot: int) -> None:
            incarnations[slot] += 1
            proc = ctx.Process(
                target=_worker, args=(conninfo, slot, incarnations[slot], journal), daemon=True
            )
            proc.start()
            workers[slot] = proc

        def ready() -> int:
            if not os.path.exists(journal):
                return 0
            return sum(1 for line in Path(journal).read_text().splitlines() if '"ready"' in line)

        for slot in range(WORKERS):
            start(slot)
        deadline = time.monotonic() + 60
        while ready() < WORKERS and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready() == WORKERS, "the workers did not open their games"
        began = time.monotonic()
        events = [(2.0, "kill"), (5.0, "takeover"), (8.0, "restart"), (11.0, "kill")]
        rng = random.Random(4)
        taken = 0
        for at, what in events:
            time.sleep(max(0.0, began + at - time.monotonic()))
            if what == "kill":
                slot = rng.randrange(WORKERS)
                os.kill(workers[slot].pid, signal.SIGKILL)
                workers[slot].join()
                start(slot)  # a new owner id: it waits for the leases to run out
            elif what == "takeover":
                slot = rng.randrange(WORKERS)
                victims = [f"w{slot}-{n:04d}" for n in rng.sample(range(GAMES // WORKERS), 200)]

                async def take(victims: list[str] = victims) -> int:
                    opened, _ = await PostgresStore.open_many(conninfo, victims, takeover=True)
                    for store in opened.values():
                        await store.close()
                    return len(opened)

                taken = asyncio.run(_closing(take()))
            else:
                server.restart("immediate")
        time.sleep(max(0.0, began + SECONDS - time.monotonic()))
        for proc in workers.values():
            os.kill(proc.pid, signal.SIGKILL)
            proc.join()
        # -- the checker -----------------------------------------------------------------
        acked: list[tuple[str, int, str]] = []
        fenced: list[tuple[str, int, str]] = []
        for line in Path(journal).read_text().splitlines():
            try:
                fields = json.loads(line)
            except ValueError:
                continue  # a torn last line: it acknowledged nothing
            if fields[0] == "ack":
                acked.append(tuple(fields[1:]))  # type: ignore[arg-type]
            elif fields[0] == "fenced":
                fenced.append(tuple(fields[1:]))  # type: ignore[arg-type]
        images, recorded = _recount(conninfo)
        stored = Counter(
            value
            for image in images.values()
            for key, value in image.store_json().items()
            if key.startswith("r")
        )
        lost = sum(1 for game, n, text in acked if images[game].get(f"r{n}") != text)
        duplicated = sum(count - 1 for count in stored.values() if count > 1)
        fenced_landed = sum(1 for _game, _n, text in fenced if stored[text])
        differing = sum(1 for g, image in images.items() if image.footprint() != recorded[g])
        print(
            f"scale: acked={len(acked)} fenced={len(fenced)} taken_over={taken} "
            f"kills=2 restarts=1 lost={lost} duplicated={duplicated} "
            f"fenced_landed={fenced_landed} footprints_differing={differing}"
        )
        assert len(acked) > 1000 and taken == 200 and len(fenced) > 0
        assert (lost, duplicated, fenced_landed, differing) == (0, 0, 0, 0)
