"""One worker, many games: rounds/s and the event loop's stalls (issues 21 and 32; R66, R153).

    uv run python -m benchmarks.concurrency [--quick] --out DIR

Writes `concurrency.json` and `concurrency.md` into DIR; the docs' page comes from `python
-m benchmarks.run`, which runs this as its `concurrency` section (R228). The docs build
draws the page's plots from the JSON (`docs/hooks/jfdocs/plots.py`).

One event loop serves N games (1, 8, 64, 512), each a `GameEngine` whose task records
rounds back to back for a fixed time, after one round off the clock (a new file store's
first commit preallocates its log). Side by side, in one run, in rotating order at each N:

- **filestore**: `FileStore`, its blocking I/O off the loop (R65);
- **postgres**: `PostgresStore`, every game on one shared pool of `pool` connections (R63),
  concurrent commits grouped (R152) unless the variant says otherwise;
- **bare insert**: N tasks doing nothing but `INSERT` of a round's keys and values and
  `COMMIT` (autocommit, `synchronous_commit` on) through a psycopg pool of the same size:
  what a client of that pool reaches with no engine at all. PostgreSQL's goal is a ratio to
  it at 64 games.

During each run: rounds/s (every game's rounds over the wall time); every callback the loop
runs is timed (`asyncio.Handle._run`), the longest and the p99; a ticker sleeping 1 ms again
and again records how late it wakes (the loop's latency, max and p99); the collector's pauses
by generation (`gc.callbacks`); the process's CPU time per round (`time.process_time`: the
engine's own work, and the executor's threads; not the database server's). The loop's
latency is compared with N times the CPU of a round: with N games ready at once, the ticker
waits behind their callbacks, so the latency should grow no faster than that. The idle loop
(no game) is measured in the same run: the machine's floor.

Last, the main job, `jfsm conformance` as CI runs it first (the quick profile, the
default driver and its companions), in a fresh process: its wall time and peak RSS (the
suite's process, and the sum over it and the processes it started, sampled every 0.5 s;
`benchmarks/suite.py`'s wrapper).

The collector runs in every variant. What the imports made is frozen first (`gc.freeze()`
once, before any game is opened, as the Deploying page recommends for a long-running
process): a full collection then walks the games' objects, not the libraries'. The
"unfrozen" variants show the same store with nothing frozen, side by side. Without the
PostgreSQL binaries only the file store runs.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks.common import pct, ratio, run_stamp, section_main
from jfsm.engine import GameEngine
from jfsm.stores.file.store import FileStore
from jfsm.testing import FakeCompressor

__all__ = ["main", "render", "run"]

FULL: dict[str, Any] = {
    "games": [1, 8, 64, 512],
    "seconds": 3.0,
    "reps": 2,
    "tick_s": 0.001,
    "pool": 10,
    "goal_games": [64, 512],
    "main_job": True,
}
QUICK: dict[str, Any] = {
    "games": [1, 4],
    "seconds": 0.3,
    "reps": 1,
    "tick_s": 0.001,
    "pool": 4,
    "goal_games": [4],
    "main_job": False,
}
MAIN_JOB_GOAL_S = 20.0  # issue 32 (item 3): the main job in 20 s on an idle 2-core machine
CALLBACK_GOAL_MS = 5.0  # issue 32: no single callback over 5 ms at 64 and 512 games
PG_OVER_BARE_GOAL = 1.0  # issue 32: PostgreSQL rounds/s >= 1.0x bare INSERT; COMMIT at 64
PG_GOAL_GAMES = 64
TEXT = "the river keeps its course; " * 6


class _Callbacks:
    """Times every callback the event loop runs (`asyncio.Handle._run`) between `start`
    and `take`, which puts the original back."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.original = asyncio.events.Handle._run

    def start(self) -> None:
        original, samples = self.original, self.samples

        def timed(handle: asyncio.Handle) -> None:
            t0 = time.perf_counter()
            original(handle)
            samples.append(time.perf_counter() - t0)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]

    def take(self) -> dict[str, Any]:
        asyncio.events.Handle._run = self.original  # type: ignore[method-assign]
        ms = [x * 1000 for x in self.samples]
        self.samples.clear()
        if not ms:
            return {"callbacks": 0, "max_ms": None, "p99_ms": None}
        return {
            "callbacks": len(ms),
            "max_ms": round(max(ms), 2),
            "p99_ms": round(pct(ms, 0.99), 3),
        }


CALLBACKS = _Callbacks()


class _Collections:
    """The garbage collector's pauses by generation, between `start` and `take`: wall time
    and the loop thread's CPU time (`time.thread_time`), which a shared machine's
    preemption does not inflate."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[tuple[float, float]]] = {}
        self._t0 = (0.0, 0.0)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = (time.perf_counter(), time.thread_time())
        else:
            wall, cpu = time.perf_counter() - self._t0[0], time.thread_time() - self._t0[1]
            self.pauses.setdefault(info["generation"], []).append((wall, cpu))

    def start(self) -> None:
        self.pauses = {}
        gc.callbacks.append(self._callback)

    def take(self) -> dict[str, Any]:
        gc.callbacks.remove(self._callback)
        return {
            f"gen{g}": {
                "count": len(v),
                "max_ms": round(max(w for w, _ in v) * 1000, 2),
                "cpu_max_ms": round(max(c for _, c in v) * 1000, 2),
            }
            for g, v in sorted(self.pauses.items())
        }


async def _ticker(stop: asyncio.Event, tick_s: float, lags: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(tick_s)
        lags.append(time.perf_counter() - t0 - tick_s)


def _lag(lags: list[float]) -> dict[str, Any]:
    ms = [max(0.0, x) * 1000 for x in lags]
    if not ms:
        return {"ticks": 0, "max_ms": None, "p99_ms": None, "median_ms": None}
    return {
        "ticks": len(ms),
        "max_ms": round(max(ms), 2),
        "p99_ms": round(pct(ms, 0.99), 2),
        "median_ms": round(pct(ms, 0.5), 3),
    }


async def _play(
    workers: list[Callable[[int], Awaitable[None]]], seconds: float, tick_s: float
) -> dict[str, Any]:
    """Every worker (one a game) runs its step again and again until the deadline; the
    ticker measures the loop's latency, every callback and collection is timed."""
    lags: list[float] = []
    stop = asyncio.Event()
    ticking = asyncio.create_task(_ticker(stop, tick_s, lags))
    deadline = time.perf_counter() + seconds

    async def loop(step: Callable[[int], Awaitable[None]]) -> int:
        done = 0
        while time.perf_counter() < deadline:
            await step(done)
            done += 1
        return done

    collections = _Collections()
    cpu0, t0 = time.process_time(), time.perf_counter()
    collections.start()
    CALLBACKS.start()
    try:
        counts = await asyncio.gather(*(loop(step) for step in workers))
    finally:
        callbacks = CALLBACKS.take()
        gcs = collections.take()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    stop.set()
    await ticking
    rounds = sum(counts)
    return {
        "rounds": rounds,
        "wall_s": round(wall, 3),
        "rounds_per_s": round(rounds / wall, 1),
        "cpu_ms_per_round": round(cpu * 1000 / rounds, 4) if rounds else None,
        "lag": _lag(lags),
        "callback": callbacks,
        "gc": gcs,
    }


async def _idle(seconds: float, tick_s: float) -> dict[str, Any]:
    lags: list[float] = []
    stop = asyncio.Event()
    ticking = asyncio.create_task(_ticker(stop, tick_s, lags))
    CALLBACKS.start()
    try:
        await asyncio.sleep(seconds)
    finally:
        callbacks = CALLBACKS.take()
    stop.set()
    await ticking
    return {"lag": _lag(lags), "callback": callbacks}


# -- the variants: each opens N games (off the clock) and returns their steps and a closer
Opened = tuple[list[Callable[[int], Awaitable[None]]], Callable[[], Awaitable[None]]]


def _engines_over(stores: list[Any]) -> Opened:
    compressor = FakeCompressor()
    engines = [GameEngine(s, compressor, game_id=f"g{i}") for i, s in enumerate(stores)]

    def step(engine: GameEngine) -> Callable[[int], Awaitable[None]]:
        async def one(n: int) -> None:
            await engine.record_round(f"move {n}", TEXT)

        return one

    async def close() -> None:
        for engine in engines:
            await engine.close()

    return [step(e) for e in engines], close


def _file_opener(root: str) -> Callable[[str, int, dict[str, Any]], Awaitable[Opened]]:
    async def open_games(tag: str, n: int, cfg: dict[str, Any]) -> Opened:
        base = tempfile.mkdtemp(prefix=f"{tag}-", dir=root)
        stores = await asyncio.gather(
            *(FileStore.open(os.path.join(base, f"g{i}")) for i in range(n))
        )
        return _engines_over(list(stores))

    return open_games


def _pg_opener(conninfo: str) -> Callable[[str, int, dict[str, Any]], Awaitable[Opened]]:
    from jfsm.stores.postgres.store import PostgresStore, close_pools

    async def open_games(tag: str, n: int, cfg: dict[str, Any]) -> Opened:
        opened, _ = await PostgresStore.open_many(
            conninfo, [f"{tag}-g{i}" for i in range(n)], pool_size=cfg["pool"]
        )
        steps, close_engines = _engines_over([opened[f"{tag}-g{i}"] for i in range(n)])

        async def close() -> None:
            await close_engines()
            await close_pools()

        return steps, close

    return open_games


def _bare_opener(conninfo: str) -> Callable[[str, int, dict[str, Any]], Awaitable[Opened]]:
    """N tasks inserting a round's keys and values and committing, through a psycopg pool of
    the same size as the store's: no engine, no fencing, no image."""

    async def open_games(tag: str, n: int, cfg: dict[str, Any]) -> Opened:
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        # the bytes of a round as the engine commits it (the keys and values of its projection)
        probe = _Capture()
        await GameEngine(probe, FakeCompressor(), game_id="g").record_round("move 1", TEXT)
        keys = [k.encode() for k in probe.sets]
        values = list(probe.sets.values())
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            await conn.execute("CREATE TABLE IF NOT EXISTS bench_bare (k bytea, v bytea)")
        pool = AsyncConnectionPool(
            conninfo,
            min_size=cfg["pool"],
            max_size=cfg["pool"],
            kwargs={"autocommit": True},
            open=False,
        )
        await pool.open(wait=True)

        async def one(n: int) -> None:
            async with pool.connection() as conn:
                await conn.execute(
                    "INSERT INTO bench_bare SELECT * FROM unnest(%s::bytea[], %s::bytea[])",
                    (keys, values),
                )

        async def close() -> None:
            await pool.close()

        return [one] * n, close

    return open_games


class _Capture:
    """A store that keeps the last projection's sets (the bytes a round commits)."""

    durable = False

    def __init__(self) -> None:
        from jfsm.stores.memory import MemoryStore

        self._inner = MemoryStore()
        self.sets: dict[str, bytes] = {}

    @property
    def image(self) -> Any:
        return self._inner.image

    async def commit(self, projection: Any) -> None:
        await self._inner.commit(projection)
        self.sets = dict(projection.sets)

    async def seed(self, values: Any) -> None:
        await self._inner.seed(values)

    async def checkpoint(self) -> None:
        await self._inner.checkpoint()

    async def close(self) -> None:
        await self._inner.close()


def _measure(
    open_games: Callable[[str, int, dict[str, Any]], Awaitable[Opened]],
    tag: str,
    n: int,
    cfg: dict[str, Any],
    frozen: bool,
) -> dict[str, Any]:
    """N games on a fresh loop; opening, the round off the clock and closing are not timed.
    `frozen`: what exists before the games are opened is frozen (`gc.freeze()`) and thawed
    after."""

    async def scenario() -> dict[str, Any]:
        if frozen:
            gc.collect()
            gc.freeze()
        steps, close = await open_games(tag, n, cfg)
        try:
            await asyncio.gather(*(step(0) for step in steps))  # off the clock
            return await _play(steps, cfg["seconds"], cfg["tick_s"])
        finally:
            await close()

    try:
        return asyncio.run(scenario())
    finally:
        if frozen:
            gc.unfreeze()


def _series(
    variants: dict[str, tuple[Callable[[str, int, dict[str, Any]], Awaitable[Opened]], bool]],
    cfg: dict[str, Any],
    log: Any,
) -> dict[str, list[dict[str, Any]]]:
    """Every variant at every N, `reps` times in rotating order. Per N and variant: the
    best rate of the reps (the least disturbed by the shared machine) and the worst stalls
    (longest callback, latency, collections) of any rep."""
    names = list(variants)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    run_id = 0
    for n in cfg["games"]:
        found: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for rep in range(cfg["reps"]):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                run_id += 1
                opener, frozen = variants[name]
                result = _measure(opener, f"r{run_id}", n, cfg, frozen)
                log(
                    f"  {name} x{n}: {result['rounds_per_s']} rounds/s, longest callback "
                    f"{result['callback']['max_ms']} ms, lag {result['lag']['max_ms']} ms"
                )
                found[name].append(result)
        for name in names:
            rows[name].append(_combine(n, found[name]))
    return rows


def _combine(n: int, reps: list[dict[str, Any]]) -> dict[str, Any]:
    best = max(reps, key=lambda r: r["rounds_per_s"])

    def worst(part: str, key: str) -> Any:
        values = [r[part][key] for r in reps if r[part][key] is not None]
        return max(values) if values else None

    gcs: dict[str, dict[str, Any]] = {}
    for r in reps:
        for gen, pause in r["gc"].items():
            known = gcs.setdefault(gen, {"count": 0, "max_ms": 0.0, "cpu_max_ms": 0.0})
            for key in known:
                known[key] = max(known[key], pause[key])
    cpu = best["cpu_ms_per_round"]
    lag_max = worst("lag", "max_ms")
    return {
        "games": n,
        "rounds_per_s": best["rounds_per_s"],
        "cpu_ms_per_round": cpu,
        "callback_max_ms": worst("callback", "max_ms"),
        "callback_p99_ms": worst("callback", "p99_ms"),
        "lag_max_ms": lag_max,
        "lag_p99_ms": worst("lag", "p99_ms"),
        "ready_cpu_ms": None if cpu is None else round(n * cpu, 3),
        "lag_over_ready_cpu": None if cpu is None else ratio(lag_max, n * cpu),
        "gc": gcs,
        "reps": len(reps),
    }


def run(
    *, quick: bool = False, log: Any = print, main_job: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The file store always; PostgreSQL and the bare client when its binaries are there.
    `main_job`: the main job's measurement taken earlier in the same run (the suite
    section's), shown instead of measuring it a second time."""
    from jfsm.stores.postgres.server import TemporaryServer, why_unavailable

    cfg = QUICK if quick else FULL
    root = tempfile.mkdtemp(prefix="jfsm-bench-conc-")
    result: dict[str, Any] = {"config": cfg, "goal_callback_ms": CALLBACK_GOAL_MS}
    variants: dict[str, Any] = {
        "filestore": (_file_opener(root), True),
        "filestore unfrozen": (_file_opener(root), False),
    }
    try:
        log("concurrency: the idle loop")
        result["idle"] = asyncio.run(_idle(cfg["seconds"], cfg["tick_s"]))
        reason = why_unavailable()
        if reason is not None:
            result["postgres"] = {"available": False, "reason": reason}
            result["variants"] = _series(variants, cfg, log)
        else:
            with TemporaryServer(fsync=True) as server:
                from jfsm.stores.postgres.store import migrate

                conninfo = server.create_database("bench")
                migrate(conninfo)
                result["postgres"] = {"available": True}
                variants.update(
                    {
                        "postgres": (_pg_opener(conninfo), True),
                        "postgres unfrozen": (_pg_opener(conninfo), False),
                        "bare insert": (_bare_opener(conninfo), True),
                    }
                )
                result["variants"] = _series(variants, cfg, log)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["main_job"] = main_job if main_job is not None else _main_job(cfg, log)
    result["goals"] = _goals(result, cfg)
    return result


def _main_job(cfg: dict[str, Any], log: Any) -> dict[str, Any]:
    """`jfsm conformance` (the quick profile, as CI's main job runs it) in a fresh process."""
    if not cfg["main_job"]:
        return {"run": False, "reason": "not run with --quick"}
    from benchmarks.suite import _profile_run

    log("concurrency: the main job (jfsm conformance)")
    return _profile_run("quick")


def _row(result: dict[str, Any], name: str, n: int) -> dict[str, Any] | None:
    rows = result["variants"].get(name) or []
    return next((r for r in rows if r["games"] == n), None)


def _goals(result: dict[str, Any], cfg: dict[str, Any]) -> list[dict[str, Any]]:
    goals: list[dict[str, Any]] = []
    stores = ["filestore"] + (["postgres"] if result["postgres"].get("available") else [])
    for store in stores:
        for n in cfg["goal_games"]:
            row = _row(result, store, n) or {}
            worst = row.get("callback_max_ms")
            goals.append(
                {
                    "goal": f"longest callback, {store}, {n} games",
                    "target": f"≤ {CALLBACK_GOAL_MS:g} ms (collector on)",
                    "measured": f"{worst} ms (p99 {row.get('callback_p99_ms')} ms)",
                    "met": worst is not None and worst <= CALLBACK_GOAL_MS,
                }
            )
    low, high = min(cfg["goal_games"]), max(cfg["goal_games"])
    for store in stores if low != high else []:
        a, b = _row(result, store, low) or {}, _row(result, store, high) or {}
        lag = ratio(b.get("lag_max_ms"), a.get("lag_max_ms"))
        cpu = ratio(b.get("ready_cpu_ms"), a.get("ready_cpu_ms"))
        goals.append(
            {
                "goal": f"the loop's latency, {store}, {low} to {high} games",
                "target": "grows no faster than N × the CPU of a round",
                "measured": f"latency ×{lag}, N × CPU ×{cpu}",
                "met": lag is not None and cpu is not None and lag <= cpu,
            }
        )
    job = result.get("main_job") or {}
    if job.get("run"):
        goals.append(
            {
                "goal": "the main job (`jfsm conformance`): wall time, peak RSS",
                "target": f"≤ {MAIN_JOB_GOAL_S:g} s on an idle machine (issue 32, item 3)",
                "measured": f"{job['wall_s']:.1f} s, exit {job['exit_code']}; peak RSS "
                f"{job['peak_rss_mib']:.0f} MiB (suite), "
                f"{job.get('tree_peak_rss_mib', 0):.0f} MiB "
                "(with the processes it started, sampled every 0.5 s)",
                "met": job["wall_s"] <= MAIN_JOB_GOAL_S,
            }
        )
    if result["postgres"].get("available"):
        n = PG_GOAL_GAMES if PG_GOAL_GAMES in cfg["games"] else max(cfg["games"])
        pg, bare = _row(result, "postgres", n), _row(result, "bare insert", n)
        over = (
            None if pg is None or bare is None else ratio(pg["rounds_per_s"], bare["rounds_per_s"])
        )
        goals.append(
            {
                "goal": f"PostgresStore rounds/s over bare INSERT; COMMIT, {n} games",
                "target": f"≥ {PG_OVER_BARE_GOAL:g}× (pool of {cfg['pool']} each)",
                "measured": f"{over}×",
                "met": over is not None and over >= PG_OVER_BARE_GOAL,
            }
        )
    return goals


def render(result: dict[str, Any]) -> str:
    """`concurrency.md`: the plots (drawn by the docs build from the JSON), then tables."""
    meta = result.get("meta", {})
    out = ["# One worker, many games", ""]
    if meta:
        out += [run_stamp(meta, "concurrency"), ""]
    out += [
        "N games record rounds back to back on one event loop, each store side by side in the "
        "same run, with a client that only inserts and commits on a pool of the same size. "
        "See `benchmarks/concurrency.py` for the method.",
        "",
        "## Goals",
        "",
        "| Goal | Target | Measured | Met |",
        "|---|---|---|---|",
    ]
    for g in result["goals"]:
        out.append(
            f"| {g['goal']} | {g['target']} | {g['measured']} | {'yes' if g['met'] else '**no**'} |"
        )
    job = result.get("main_job") or {}
    if job.get("run"):
        parts = ", ".join(f"{k} {v} s" for k, v in (job.get("slowest_parts_s") or {}).items())
        out += ["", f"The main job's slowest parts: {parts}."]
    idle = result["idle"]
    out += [
        "",
        f"The idle loop (no game) in the same run: longest callback "
        f"{idle['callback']['max_ms']} ms, latency max {idle['lag']['max_ms']} ms, p99 "
        f"{idle['lag']['p99_ms']} ms: the machine's own noise, a floor under every row below.",
        "",
        "## Plots",
        "",
        "![Rounds/s against games](concurrency-rounds.svg)",
        "",
        "![The longest callback against games](concurrency-callback.svg)",
        "",
        "![The loop's latency against games](concurrency-latency.svg)",
        "",
        "## Rounds/s and stalls",
        "",
        "| variant | games | rounds/s | CPU ms a round | longest callback ms | callback p99 ms "
        "| latency max ms | latency p99 ms | N × CPU of a round ms | longest collection ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in result["variants"].items():
        for row in rows:
            longest_gc = max((p["max_ms"] for p in row["gc"].values()), default="–")
            out.append(
                f"| {name} | {row['games']} | {row['rounds_per_s']} | {row['cpu_ms_per_round']} "
                f"| {row['callback_max_ms']} | {row['callback_p99_ms']} | {row['lag_max_ms']} "
                f"| {row['lag_p99_ms']} | {row['ready_cpu_ms']} | {longest_gc} |"
            )
    if result["postgres"].get("available"):
        out += ["", "PostgreSQL over the bare client (rounds/s, same run):"]
        out.append(
            ", ".join(
                f"{n} games {ratio(p['rounds_per_s'], b['rounds_per_s'])}×"
                for n in result["config"]["games"]
                if (p := _row(result, "postgres", n)) and (b := _row(result, "bare insert", n))
            )
            + "."
        )
    else:
        out += ["", f"PostgreSQL not run: {result['postgres'].get('reason')}"]
    cited = result.get("cited") or {}
    store_alone = next((v for k, v in cited.items() if k.startswith("store commits/s")), None)
    out += [
        "",
        "Rounds/s on this page are the engine's: each is a `GameEngine.record_round`, the "
        "engine's own work (encoding, preflight, index) and then the store's commit. They are "
        "not the store's commits/s of the [PostgreSQL page](postgres.md), which calls "
        "`PostgresStore.commit` alone"
        + (
            f" ({store_alone:,} commits/s at 64 games in this run)."
            if store_alone is not None
            else "."
        ),
    ]
    if job.get("cited_from"):
        out += [
            "",
            "The main job's row is the suite section's measurement of the same run "
            "([results](results.md)), not a second one.",
        ]
    out += [
        "",
        "## Collections",
        "",
        "Collections in a run, by generation: how many, the longest (wall ms), and the "
        "longest in the loop thread's CPU time (ms: what the collection itself cost, without "
        "the time the machine gave to other processes meanwhile).",
        "",
        "| variant | games | gen0 count / longest / CPU | gen1 | gen2 |",
        "|---|---|---|---|---|",
    ]
    for name, rows in result["variants"].items():
        for row in rows:
            cells = [
                (
                    f"{row['gc'][g]['count']} / {row['gc'][g]['max_ms']} / "
                    f"{row['gc'][g].get('cpu_max_ms', '–')}"
                )
                if g in row["gc"]
                else "–"
                for g in ("gen0", "gen1", "gen2")
            ]
            out.append(f"| {name} | {row['games']} | " + " | ".join(cells) + " |")
    out += [
        "",
        "## What limits it",
        "",
        "- The longest callback is a collection of the garbage collector or the engine's own "
        "work for one round (encoding, preflight, index), never a write: the file store's I/O "
        "runs on the stores' threads and PostgreSQL's on the socket (R155, R63). A full "
        "collection walks every object the collector tracks: a game keeps a few dozen of them "
        "(R150), the imported libraries about 30,000, which `gc.freeze()` after start-up takes "
        "out of every collection (the unfrozen rows show the difference).",
        "- The loop's latency is the queue of ready callbacks: with N games ready at once the "
        "ticker waits behind their steps, so it grows with N times the CPU of a round, not "
        "faster (the ratio column of the JSON, `lag_over_ready_cpu`).",
        "- Rounds/s is bounded by the CPU of one process (one core: the engine's Python) and, "
        "for PostgreSQL, by the server's CPU and WAL flushes; grouped commits share one "
        "transaction and one flush (R152).",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    return section_main("concurrency", __doc__, run, render, argv)


if __name__ == "__main__":
    sys.exit(main())
