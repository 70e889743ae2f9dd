"""Crashes of the PostgreSQL store: killed workers and an immediate server restart.

A worker replays a fixed script of steps over one game: step `k` is a commit of a projection
that sets and deletes several keys at once, or (every fourth step) a checkpoint. `S_k`, the
store image (store and checkpoint base) after step `k`, is computed by a `MemoryStore`. The
worker acknowledges each step once `commit`/`checkpoint` returned.

- kill -9: a forked worker process is killed at a random instant, during commits and
  checkpoints alike; a takeover (which waits for the row lock of a write still in flight)
  must then find the game exactly `S_acked` or `S_acked+1`: every acknowledged step is
  there, the one in flight is whole or absent.
- server crash: `pg_ctl restart -m immediate` while a worker commits; the worker's write in
  flight fails with `store_unavailable`, and after reopening, the store's `seq` says whether
  it landed, which must agree with the image found.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import pytest
from pg_fixtures import game_id, require_postgres

from jfsm.errors import StoreUnavailable
from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.stores.memory import MemoryStore
from jfsm.stores.postgres.server import TemporaryServer
from jfsm.stores.postgres.store import PostgresStore, close_pools, migrate

KILLS = 40


def step(k: int) -> Projection | None:
    """Step `k` (1-based) of the script: a projection, or None for a checkpoint."""
    if k % 4 == 0:
        return None
    return Projection.of(
        {"step": k, f"k{k % 5}": "é" * (k % 3 * 40), f"m{k % 3}": [k, {"x": k}]},
        [f"k{(k + 1) % 5}"],
    )


class Script:
    """`S_k` for every k, computed on demand with a MemoryStore."""

    def __init__(self) -> None:
        self._store = MemoryStore()
        self.states: list[tuple[dict[str, bytes], dict[str, bytes]]] = [({}, {})]

    def state(self, k: int) -> tuple[dict[str, bytes], dict[str, bytes]]:
        while len(self.states) <= k:
            projection = step(len(self.states))
            if projection is None:
                self._store.image.checkpoint()
            else:
                self._store.image.apply(projection)  # what MemoryStore.commit does
            image = self._store.image
            self.states.append((image.values_bytes(), image.base_bytes()))
        return self.states[k]

    def which(self, image: Any, candidates: Iterator[int] | range) -> int | None:
        found = (image.values_bytes(), image.base_bytes())
        for k in candidates:
            if self.state(k) == found:
                return k
        return None


async def run_step(store: PostgresStore, k: int) -> None:
    projection = step(k)
    if projection is None:
        await store.checkpoint()
    else:
        await store.commit(projection)


async def open_owner(conninfo: str, game: str, timeout: float = 30) -> PostgresStore:
    """Take the game over (waiting for the server while it restarts)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await PostgresStore.open(conninfo, game, takeover=True)
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def taken_over_image(conninfo: str, game: str) -> StoreImage:
    """The game's image as a takeover finds it (on a loop of its own, closed after)."""

    async def take() -> StoreImage:
        try:
            store = await open_owner(conninfo, game)
            await store.close()
            return store.image
        finally:
            await close_pools()

    return asyncio.run(take())


def _worker(conninfo: str, game: str, start: int, out: Connection) -> None:
    async def work() -> None:
        store = await open_owner(conninfo, game)
        out.send(("open", start))
        k = start
        while True:
            await run_step(store, k)
            out.send(("ack", k))
            k += 1

    asyncio.run(work())


@pytest.mark.slow
@pytest.mark.req("JF-STORE-014", "JF-ATOM-004", "JF-STORE-011")
def test_kill_9_at_random_instants(pg_database: str) -> None:
    game = game_id()
    script = Script()
    rng = random.Random(2026)
    ctx = multiprocessing.get_context("fork")
    acked = 0
    in_flight_landed = 0
    for _kill in range(KILLS):
        receive, send = ctx.Pipe(duplex=False)
        worker = ctx.Process(target=_worker, args=(pg_database, game, acked + 1, send))
        worker.start()
        send.close()
        assert receive.poll(30), "the worker did not open the store"
        assert receive.recv() == ("open", acked + 1)
        time.sleep(rng.uniform(0, 0.03))
        os.kill(worker.pid or 0, signal.SIGKILL)
        worker.join()
        while receive.poll():
            try:
                kind, k = receive.recv()
            except EOFError:
                break
            assert kind == "ack" and k == acked + 1
            acked = k
        receive.close()
        image = taken_over_image(pg_database, game)
        found = script.which(image, range(acked, acked + 2))
        assert found is not None, f"after the kill the game is neither S_{acked} nor S_{acked + 1}"
        in_flight_landed += found - acked
        acked = found
    print(f"kills={KILLS} acked={acked} in_flight_landed={in_flight_landed}")
    assert acked > KILLS  # the workers did work between kills
    assert 0 <= in_flight_landed <= KILLS


@pytest.mark.slow
@pytest.mark.req("JF-STORE-014", "JF-ATOM-004")
def test_immediate_server_restart_mid_load() -> None:
    require_postgres()
    with TemporaryServer() as server:
        conninfo = server.create_database("crash")
        migrate(conninfo)
        game = game_id()
        script = Script()
        acked = 0
        outcomes: list[bool] = []
        errors: list[BaseException] = []
        stop = threading.Event()
        restarts = 3

        async def load() -> None:
            nonlocal acked
            store = await open_owner(conninfo, game)
            k = 1
            try:
                while not stop.is_set():
                    try:
                        await run_step(store, k)
                    except StoreUnavailable as exc:
                        if exc.state == "open":  # nothing was sent: the server is starting
                            await asyncio.sleep(0.05)
                            continue
                        assert exc.state == "broken"
                        await store.close()
                        store = await open_owner(conninfo, game, timeout=60)
                        landed = store.seq >= exc.details["seq"]
                        found = script.which(store.image, range(k - 1, k + 1))
                        assert found == (k if landed else k - 1), (found, k, landed)
                        outcomes.append(landed)
                        k = found + 1
                        continue
                    acked = k
                    k += 1
            except BaseException as exc:
                errors.append(exc)
            finally:
                await store.close()
                await close_pools()

        thread = threading.Thread(target=lambda: asyncio.run(load()))
        thread.start()
        try:
            for _ in range(restarts):
                before = acked
                deadline = time.monotonic() + 30
                while acked < before + 20 and time.monotonic() < deadline and not errors:
                    time.sleep(0.005)
                server.restart("immediate")
            deadline = time.monotonic() + 30
            while len(outcomes) < restarts and time.monotonic() < deadline and not errors:
                time.sleep(0.01)
        finally:
            stop.set()
            thread.join(60)
        assert not errors, errors
        print(f"restarts={restarts} acked={acked} landed={outcomes}")
        assert 1 <= len(outcomes) <= restarts  # a restart may find no write in flight
        final = taken_over_image(conninfo, game)
        assert script.which(final, [acked]) == acked
