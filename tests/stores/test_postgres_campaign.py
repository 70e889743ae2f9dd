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

Checker, on the database at the end: the ledger's audit (`campaign_ledger.audit`, shared
with the failover campaign): acknowledged rounds lost, double owners (two acknowledgements of
one round number with different texts), fenced writes landed (a refused round found in the
database), games whose rows disagree with their recorded footprint or with their ledger.
Goals: all 0.

Group commit is on (R152), with a wait of 2 ms for company, so a driver's concurrent
`record_round`s of different games share statements, fenced members among them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time

import pytest
from campaign_ledger import Driver, Ledger, audit
from pg_fixtures import require_postgres

from jfsm.errors import JfsmError
from jfsm.stores.postgres.server import TemporaryServer
from jfsm.stores.postgres.store import PostgresStore, close_pools, migrate, remove_game
from jfsm_conformance.fake.compress import FakeCompress

IDS = [f"c{n}" for n in range(6)]
SECONDS = 15.0


async def _campaign(target: str, fake_url: str) -> tuple[dict[str, int], Ledger]:
    env = {
        **os.environ,
        "JFSM_PG_LEASE_SECONDS": "1",
        "JFSM_PG_GROUP_COMMIT": "1",
        "JFSM_PG_GROUP_WAIT_MS": "2",
    }
    drivers = [Driver(name, target, fake_url, env) for name in ("A", "B")]
    for driver in drivers:
        await driver.start(f"{driver.name}-1")
    ledger = Ledger()
    counts = {"ops": 0, "kills": 0, "takeovers": 0, "removals": 0, "refused": 0}
    deadline = time.monotonic() + SECONDS
    restarting = {driver.name: asyncio.Lock() for driver in drivers}
    last_kill = [time.monotonic()]

    async def actor(seed: int) -> None:
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
                    try:
                        reply = await driver.call("duplicate", game=rng.choice(IDS), into=game)
                    except ConnectionError:
                        ledger.copy(game)  # killed meanwhile: it may have copied
                        raise
                    # refused before making anything (the id taken, the source unknown), or
                    # else it may have made its copy (a failure after the seed leaves the
                    # game to whoever took it over meanwhile: never deleted)
                    if reply["ok"] or reply["error"]["code"] != "invalid_input":
                        ledger.copy(game)
                elif roll < 0.7:
                    text = ledger.text(f"{driver.name}{driver.generation}")
                    write = ledger.sent(game, text)
                    try:
                        reply = await driver.call("record_round", game=game, input=text, output="o")
                    except ConnectionError:
                        ledger.answer(write, None)
                        raise
                    ledger.answer(write, reply)
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
                        started = time.monotonic()
                        if await asyncio.to_thread(remove_game, target, game):
                            ledger.remove(game, started)
                            counts["removals"] += 1
                    continue
                elif time.monotonic() - last_kill[0] < 1.5:  # kills: at most one per 1.5 s
                    continue
                else:  # kill -9 while a record_round is in flight, then start again
                    last_kill[0] = time.monotonic()
                    async with restarting[driver.name]:
                        text = ledger.text(f"{driver.name}{driver.generation}")
                        write = ledger.sent(game, text)
                        pending = driver.send("record_round", game=game, input=text, output="o")
                        await asyncio.sleep(rng.uniform(0, 0.01))
                        await driver.kill()
                        done = pending.done() and pending.exception() is None
                        ledger.answer(write, pending.result() if done else None)
                        counts["kills"] += 1
                        same = rng.random() < 0.5
                        owner = f"{driver.name}-1" if same else f"{driver.name}-{text}"
                        await driver.start(owner)
                    continue
            except (ConnectionError, AssertionError):  # the driver was killed meanwhile
                continue
            if not reply["ok"]:
                counts["refused"] += 1

    await asyncio.gather(*(actor(seed) for seed in range(4)))
    for driver in drivers:
        await driver.stop()
    return counts, ledger


@pytest.mark.slow
@pytest.mark.req(
    "JF-STORE-010", "JF-STORE-011", "JF-STORE-012", "JF-STORE-013", "JF-STORE-051", "JF-STORE-052"
)
def test_two_drivers_attacking_each_others_ids_lose_nothing() -> None:
    require_postgres()
    with TemporaryServer() as server, FakeCompress() as fake:
        target = server.create_database("campaign")
        migrate(target)

        async def scenario() -> tuple[dict[str, int], Ledger]:
            try:
                return await _campaign(target, fake.url)
            finally:
                await close_pools()

        counts, ledger = asyncio.run(scenario())
        result = {**counts, **audit(target, ledger)}
    print("campaign:", result)
    assert result["acked"] >= 10 and result["kills"] >= 3 and result["takeovers"] >= 3
    assert result["lost"] == 0, result
    assert result["double_owners"] == 0, (result, ledger.mismatches)
    assert result["fenced_landed"] == 0, result
    assert result["footprint_mismatches"] == 0, (result, ledger.mismatches)
