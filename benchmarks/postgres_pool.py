"""The pooled, leased PostgreSQL store against what it replaced and against a bare client,
measured side by side (issue 21, item 7).

Run from `benchmarks/postgres.py` (same throwaway server, `fsync=on`); each measurement is a
ratio taken in one run, never a time compared with a constant. Rounds/s and the event
loop's stalls at 1 to 512 games, beside the FileStore and a bare `INSERT; COMMIT` client,
are `benchmarks/concurrency.py`'s (issue 32); the row "64 games >= 8x one game" was
retired there (R153): on a 2-core machine it measured the CPU, not the store.

1. Commit latency: `PostgresStore.commit` of a round projection against a bare
   single-statement `INSERT ... ; COMMIT` of the same bytes on the same server (autocommit,
   synchronous_commit on), interleaved. Goal: median ratio <= 1.3.
2. Connections used against games open (10, 100, 1,000, all committing at once) with a pool
   of 10: the server's count of connections. Goal: never above the pool size.
3. The old store (one dedicated connection per open game, its liveness a session advisory
   lock, writes blocking the loop) beside the pooled one: store commits/s (`commit` called
   alone, no engine) at 1, 8 and 64 games and its connections; it lives only here, for the
   comparison. These are not the engine's rounds/s of `benchmarks/concurrency.py`.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import statistics
import time
from typing import Any

from benchmarks.common import now_ns, ratio, summarize
from benchmarks.data import Text
from jfsm.projection import Projection

__all__ = ["measure"]

FULL: dict[str, Any] = {
    "seconds": 3.0,
    "latency_reps": 300,
    "connection_games": [10, 100, 1000],
    "old_games": [1, 8, 64],
    "pool": 10,
}
QUICK: dict[str, Any] = {
    "seconds": 0.3,
    "latency_reps": 10,
    "connection_games": [2, 8],
    "old_games": [1, 2],
    "pool": 4,
}


def _rounds(seed: int, count: int = 64) -> list[Projection]:
    text, rng = Text(seed), random.Random(seed)
    out = []
    for seq in range(1, count + 1):
        user, assistant = text(rng.randint(100, 600)), text(rng.randint(700, 3400))
        out.append(
            Projection.of(
                {
                    f"jfRounds.{seq % 8}": {"n": seq, "input": user, "output": assistant},
                    f"jfGameStack.chunk.{seq % 8}": {"seq": seq, "user": user},
                    "jfGameStack.meta": {"nextSeq": seq + 1, "epoch": 0},
                }
            )
        )
    return out


async def _call(result: Any) -> None:
    if inspect.isawaitable(result):
        await result


def _connections(conninfo: str, *, pooled: bool = True) -> int:
    """Server connections to this database: the stores' pools' (`pooled`), or all but ours."""
    import psycopg

    from jfsm.stores.postgres.pool import APPLICATION_NAME

    with psycopg.connect(conninfo, autocommit=True, application_name="jfsm-bench-sampler") as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND application_name <> 'jfsm-bench-sampler'"
            + (" AND application_name = %s" if pooled else ""),
            (APPLICATION_NAME,) if pooled else (),
        ).fetchone()
    return int(row[0]) if row else 0


async def _storm(stores: list[Any], seconds: float) -> float:
    """Commits/s of one task per store committing back to back for `seconds`."""
    done = [0]
    deadline = time.monotonic() + seconds
    projections = _rounds(7)

    async def game(store: Any) -> None:
        n = 0
        while time.monotonic() < deadline:
            await _call(store.commit(projections[n % len(projections)]))
            n += 1
            done[0] += 1

    started = time.monotonic()
    await asyncio.gather(*(game(store) for store in stores))
    return done[0] / (time.monotonic() - started)


async def _pg_rates(conninfo: str, cfg: dict[str, Any]) -> dict[int, float]:
    """The pooled store's commits/s at the old store's numbers of games."""
    from jfsm.stores.postgres.store import PostgresStore, close_pools

    rates: dict[int, float] = {}
    try:
        for n in cfg["old_games"]:
            opened, _ = await PostgresStore.open_many(
                conninfo, [f"rate-{n}-{i}" for i in range(n)], pool_size=cfg["pool"]
            )
            stores = list(opened.values())
            rates[n] = round(await _storm(stores, cfg["seconds"]), 1)
            for store in stores:
                await store.close()
    finally:
        await close_pools()
    return rates


async def _latency(conninfo: str, cfg: dict[str, Any]) -> dict[str, Any]:
    import psycopg

    from jfsm.stores.postgres.store import PostgresStore, close_pools

    projections = _rounds(9)
    store_ns: list[int] = []
    bare_ns: list[int] = []
    try:
        store = await PostgresStore.open(conninfo, "latency", pool_size=cfg["pool"])
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_bare (k bytea, v bytea)")
        await conn.execute("SET synchronous_commit = on")
        for rep in range(cfg["latency_reps"]):
            projection = projections[rep % len(projections)]
            keys = [k.encode() for k in projection.sets]
            values = list(projection.sets.values())
            order = ["store", "bare"] if rep % 2 else ["bare", "store"]
            for which in order:
                t0 = now_ns()
                if which == "store":
                    await store.commit(projection)
                    store_ns.append(now_ns() - t0)
                else:
                    await conn.execute(
                        "INSERT INTO bench_bare SELECT * FROM unnest(%s::bytea[], %s::bytea[])",
                        (keys, values),
                    )
                    bare_ns.append(now_ns() - t0)
        await conn.close()
        await store.close()
    finally:
        await close_pools()
    ratio_median = ratio(statistics.median(store_ns), statistics.median(bare_ns))
    return {"store": summarize(store_ns), "bare": summarize(bare_ns), "ratio": ratio_median}


async def _connections_vs_games(conninfo: str, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    import threading

    from jfsm.stores.postgres.store import PostgresStore, close_pools

    rows = []
    for n in cfg["connection_games"]:
        peak = [0]
        stop = threading.Event()
        baseline = _connections(conninfo)  # other pools of this process (earlier sections)

        def sample(
            peak: list[int] = peak, stop: threading.Event = stop, baseline: int = baseline
        ) -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _connections(conninfo) - baseline)
                stop.wait(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            opened, _ = await PostgresStore.open_many(
                conninfo, [f"conn-{n}-{i}" for i in range(n)], pool_size=cfg["pool"]
            )
            projection = _rounds(3, 1)[0]
            await asyncio.gather(*(store.commit(projection) for store in opened.values()))
            await asyncio.sleep(0.2)
            for store in opened.values():
                await store.close()
        finally:
            await close_pools()
            stop.set()
            sampler.join()
        rows.append({"games": n, "connections": peak[0], "pool": cfg["pool"]})
    return rows


class OldStore:
    """The store before issue 21, for comparison only: a dedicated connection per open
    game held for its liveness (a session advisory lock), blocking writes, the same fenced
    statement."""

    def __init__(self, conninfo: str, game: str) -> None:
        import psycopg

        from jfsm.stores.postgres.fencing import COMMIT

        self._sql = COMMIT
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.game = game
        row = self.conn.execute(
            "INSERT INTO jfsm_game (game_id, token) VALUES (%s, nextval('jfsm_token'))"
            " ON CONFLICT (game_id) DO UPDATE SET token = nextval('jfsm_token') RETURNING token",
            (game,),
        ).fetchone()
        assert row is not None
        self.token = int(row[0])
        self.conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (game,))
        self.footprint = 4
        self.seq = 0

    def commit(self, projection: Projection) -> None:
        row = self.conn.execute(
            self._sql,
            {
                "game": self.game,
                "token": self.token,
                "seq": self.seq,
                "floor_timeline": 0,  # the lost-history check (R181) is not compared here
                "floor_wal": 0,
                "lease": 30.0,
                "footprint": self.footprint,
                "keys": [k.encode() for k in projection.sets],
                "values": list(projection.sets.values()),
                "deletes": [],
            },
            prepare=True,
        ).fetchone()
        assert row is not None and row[0] is not None
        self.seq = int(row[0])

    def close(self) -> None:
        self.conn.close()


async def _old_rates(conninfo: str, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for n in cfg["old_games"]:
        baseline = _connections(conninfo, pooled=False)
        stores = [OldStore(conninfo, f"old-{n}-{i}") for i in range(n)]
        connections = _connections(conninfo, pooled=False) - baseline
        rate = round(await _storm(stores, cfg["seconds"]), 1)
        for store in stores:
            store.close()
        rows.append({"games": n, "commits_per_s": rate, "connections": connections})
    return rows


def measure(conninfo: str, *, quick: bool = False, log: Any = print) -> dict[str, Any]:
    """All three measurements (see the module docstring) and their goals."""
    cfg = QUICK if quick else FULL
    log("postgres pool: commit latency against a bare INSERT")
    latency = asyncio.run(_latency(conninfo, cfg))
    log("postgres pool: connections against games open")
    connections = asyncio.run(_connections_vs_games(conninfo, cfg))
    log("postgres pool: the pooled store and the old per-game-connection store")
    pg = asyncio.run(_pg_rates(conninfo, cfg))
    old = asyncio.run(_old_rates(conninfo, cfg))
    flat = all(row["connections"] <= row["pool"] for row in connections)
    goals = [
        {
            "goal": "commit latency vs bare INSERT; COMMIT",
            "target": "<= 1.3x (median)",
            "measured": f"{latency['ratio']}x",
            "met": latency["ratio"] is not None and latency["ratio"] <= 1.3,
        },
        {
            "goal": "connections used vs games open",
            "target": f"flat at the pool size ({cfg['pool']})",
            "measured": ", ".join(f"{r['games']} games: {r['connections']}" for r in connections),
            "met": flat,
        },
    ]
    return {
        "config": cfg,
        "store_commits_per_s": {"postgres": pg},
        "latency": latency,
        "connections": connections,
        "old_store": old,
        "goals": goals,
    }


def render(result: dict[str, Any]) -> list[str]:
    """The section of `postgres.md`."""
    rates = result["store_commits_per_s"]
    out = [
        "## Goals (issue 21), judged from this run",
        "",
        "| Goal | Target | Measured | Met |",
        "|---|---|---|---|",
    ]
    for g in result["goals"]:
        out.append(
            f"| {g['goal']} | {g['target']} | {g['measured']} | {'yes' if g['met'] else '**no**'} |"
        )
    out += [
        "",
        "## The pooled store against the old one (store commits/s, one process)",
        "",
        "N tasks on one event loop, each calling `PostgresStore.commit` on its own game back to "
        "back, with no engine: the store's commits/s (group commit on, R152), beside the old "
        "store (one connection per open game). The engine's rounds/s against games, beside "
        "the FileStore and a bare client, are on [One worker, many games](concurrency.md): "
        "a round adds the engine's own work to each commit.",
        "",
        "![Store commits/s against games](postgres-commits.svg)",
        "",
        "| games | PostgresStore.commit/s (pool, group commit) "
        "| old store commits/s (a connection per game) |",
        "|---|---|---|",
    ]
    old = {row["games"]: row for row in result["old_store"]}
    for n, rate in rates["postgres"].items():
        before = old.get(int(n))
        shown = (
            f"{before['commits_per_s']} ({before['connections']} connections)" if before else "–"
        )
        out.append(f"| {n} | {rate} | {shown} |")
    lat = result["latency"]
    out += [
        "",
        f"Commit latency: store {lat['store']['median_us']} µs median against a bare "
        f"`INSERT ...; COMMIT` of the same bytes {lat['bare']['median_us']} µs: "
        f"**{lat['ratio']}x**.",
        "",
        "| games open | server connections | pool size |",
        "|---|---|---|",
    ]
    for row in result["connections"]:
        out.append(f"| {row['games']} | {row['connections']} | {row['pool']} |")
    out.append("")
    return out
