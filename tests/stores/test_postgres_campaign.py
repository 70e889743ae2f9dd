"""The fault campaign of issue 21, kept: two driver processes on one database attack each
other's game ids, and a checker counts acknowledged writes lost and double owners.

Two `jfsm driver --store URL` processes (stdio, leases of 1 s) share six game ids. For about
fifteen seconds a random actor, one of the drivers or a third party on the store itself,
does what it can to any id: `create_game` (often an id the other driver has),
`duplicate` into any id, `record_round` (the writes counted: each text unique),
`forget_games`, a takeover (a store opened with `takeover=True` by the third party, then
closed), a removal of a game whose lease has run out, and `kill -9` of a driver while its
`record_round` is in flight (the driver is started again, half the time with the same owner
id, which reclaims its games at once, half the time with a new one).

Checker, on the database at the end:
- lost: a round acknowledged (`record_round` answered ok) that is not in its game, with its
  text, at the round number the reply gave, unless the third party removed that game after
  the acknowledgement (a removal the test itself made, and counted);
- double owners: two acknowledgements of the same (game, round number) with different
  texts, or a round number acknowledged in a game whose database round holds another text
  that was acknowledged too.
Goals: both 0.

Group commit is on (R152), with a wait of 2 ms for company, so a driver's concurrent
`record_round`s of different games share statements, fenced members among them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from typing import Any

import pytest
from pg_fixtures import require_postgres

from jfsm.errors import JfsmError
from jfsm.layout import round_key
from jfsm.stores.postgres.server import TemporaryServer
from jfsm.stores.postgres.store import PostgresStore, close_pools, migrate, read_image, remove_game
from jfsm_conformance.fake.compress import FakeCompress

IDS = [f"c{n}" for n in range(6)]
SECONDS = 15.0
DRIVER = [sys.executable, "-c", "import sys; from jfsm.cli import main; sys.exit(main())"]


class Driver:
    """One `jfsm driver` process on stdio; replies matched to requests by id."""

    def __init__(self, name: str, target: str, fake_url: str, env: dict[str, str]) -> None:
        self.name, self.target, self.fake_url, self.env = name, target, fake_url, env
        self.proc: asyncio.subprocess.Process | None = None
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.next_id = 0
        self.reader: asyncio.Task[None] | None = None
        self.generation = 0

    async def start(self, owner: str) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *DRIVER,
            "driver",
            "--owner",
            owner,
            "--store",
            self.target,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
        )
        self.generation += 1
        self.reader = asyncio.get_running_loop().create_task(self._read(self.proc))
        reply = await self.call("hello", protocol=1, compressUrl=self.fake_url)
        assert reply["ok"], reply

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            reply = json.loads(line)
            future = self.waiting.pop(reply.get("id"), None)
            if future is not None and not future.done():
                future.set_result(reply)
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("driver gone"))
        self.waiting.clear()

    def send(self, op: str, **args: Any) -> asyncio.Future[dict[str, Any]]:
        assert self.proc is not None and self.proc.stdin is not None
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        message = {"id": self.next_id, "op": op, "args": args}
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        return future

    async def call(self, op: str, **args: Any) -> dict[str, Any]:
        return await asyncio.wait_for(self.send(op, **args), 60)

    async def kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        if self.reader is not None:
            await self.reader

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            await self.kill()


async def _campaign(target: str, fake_url: str) -> dict[str, int]:
    env = {
        **os.environ,
        "JFSM_PG_LEASE_SECONDS": "1",
        "JFSM_PG_GROUP_COMMIT": "1",
        "JFSM_PG_GROUP_WAIT_MS": "2",
    }
    drivers = [Driver(name, target, fake_url, env) for name in ("A", "B")]
    for driver in drivers:
        await driver.start(f"{driver.name}-1")
    acked: list[tuple[str, int, str, float]] = []  # game, round, text, when
    removed: dict[str, list[float]] = {}
    counts = {"ops": 0, "kills": 0, "takeovers": 0, "removals": 0, "refused": 0}
    counter = 0
    deadline = time.monotonic() + SECONDS
    restarting = {driver.name: asyncio.Lock() for driver in drivers}
    last_kill = [time.monotonic()]

    async def actor(seed: int) -> None:
        nonlocal counter
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            counts["ops"] += 1
            game = rng.choice(IDS)
            driver = rng.choice(drivers)
            roll = rng.random()
            if restarting[driver.name].locked():
                async with restarting[driver.name]:
                    pass  # wait for the restart
            try:
                if roll < 0.15:
                    reply = await driver.call("create_game", game=game)
                elif roll < 0.3:
                    reply = await driver.call("duplicate", game=rng.choice(IDS), into=game)
                elif roll < 0.7:
                    counter += 1
                    text = f"{driver.name}{driver.generation}-{counter}"
                    reply = await driver.call("record_round", game=game, input=text, output="o")
                    if reply["ok"]:
                        acked.append((game, reply["result"]["round"], text, time.monotonic()))
                elif roll < 0.78:
                    reply = await driver.call("forget_games", games=[game])
                elif roll < 0.86:  # a third party takes the game over, fencing its owner
                    with contextlib.suppress(JfsmError):
                        store = await PostgresStore.open(target, game, takeover=True, create=False)
                        await store.close()
                        counts["takeovers"] += 1
                    continue
                elif roll < 0.95:  # a third party removes a game whose lease has run out
                    with contextlib.suppress(JfsmError):
                        if await asyncio.to_thread(remove_game, target, game):
                            removed.setdefault(game, []).append(time.monotonic())
                            counts["removals"] += 1
                    continue
                elif time.monotonic() - last_kill[0] < 1.5:  # kills: at most one per 1.5 s
                    continue
                else:  # kill -9 while a record_round is in flight, then start again
                    last_kill[0] = time.monotonic()
                    async with restarting[driver.name]:
                        counter += 1
                        text = f"{driver.name}{driver.generation}-{counter}"
                        pending = driver.send("record_round", game=game, input=text, output="o")
                        await asyncio.sleep(rng.uniform(0, 0.01))
                        await driver.kill()
                        with contextlib.suppress(Exception):
                            if pending.done() and pending.result()["ok"]:
                                round_n = pending.result()["result"]["round"]
                                acked.append((game, round_n, text, time.monotonic()))
                        counts["kills"] += 1
                        same = rng.random() < 0.5
                        owner = f"{driver.name}-1" if same else f"{driver.name}-{counter}"
                        await driver.start(owner)
                    continue
            except (ConnectionError, AssertionError):  # the driver was killed meanwhile
                continue
            if not reply["ok"]:
                counts["refused"] += 1

    await asyncio.gather(*(actor(seed) for seed in range(4)))
    for driver in drivers:
        await driver.stop()
    # -- the checker ---------------------------------------------------------------------
    lost = double = 0
    by_slot: dict[tuple[str, int, int], set[str]] = {}
    for game, n, text, when in acked:
        epoch = sum(1 for t in removed.get(game, []) if t < when)  # the id's life it hit
        by_slot.setdefault((game, epoch, n), set()).add(text)
    double += sum(1 for texts in by_slot.values() if len(texts) > 1)
    for game, n, text, when in acked:
        if any(t > when for t in removed.get(game, [])):
            continue  # removed after the acknowledgement, by the test itself
        try:
            image = read_image(target, game)
        except JfsmError:
            lost += 1
            continue
        stored = image.get(round_key(n))
        if not isinstance(stored, dict) or stored.get("input") != text:
            lost += 1
    return {**counts, "acked": len(acked), "lost": lost, "double_owners": double}


@pytest.mark.req(
    "JF-STORE-010", "JF-STORE-011", "JF-STORE-012", "JF-STORE-013", "JF-STORE-051", "JF-STORE-052"
)
def test_two_drivers_attacking_each_others_ids_lose_nothing() -> None:
    require_postgres()
    with TemporaryServer() as server, FakeCompress() as fake:
        target = server.create_database("campaign")
        migrate(target)

        async def scenario() -> dict[str, int]:
            try:
                return await _campaign(target, fake.url)
            finally:
                await close_pools()

        result = asyncio.run(scenario())
    print("campaign:", result)
    assert result["acked"] >= 10 and result["kills"] >= 3 and result["takeovers"] >= 3
    assert result["lost"] == 0, result
    assert result["double_owners"] == 0, result
