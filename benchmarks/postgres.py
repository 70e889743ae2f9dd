"""The PostgreSQL store, as ratios measured in one run against a throwaway server.

    uv run python -m benchmarks.postgres [--quick] --out DIR

Writes `postgres.json` and `postgres.md` into `--out`; the docs' page comes from
`python -m benchmarks.run`, which runs this as its `postgres` section. The server is a
`TemporaryServer` with `fsync=on` (durable commits, like `FileStore`'s `fdatasync` and SQLite's
`synchronous=FULL`), on a Unix socket of the same machine.

1. Commit: the projection sequence of `benchmarks/durable.py` (rounds, summary publications,
   deletes) through `FileStore`, SQLite (WAL, `synchronous=FULL`) and `PostgresStore`, each
   from the same pre-filled state; batches alternate in rotating order. Medians and
   throughput, and the ratios PostgreSQL / FileStore and PostgreSQL / SQLite per batch.
2. O(change): the same round projections committed alternately to a game of ~29 MiB and to
   one of ~0.1 MiB: the ratio of median commit times (goal <= 1.25).
3. Reopen: `PostgresStore.open` of the 29 MiB game against a plain `SELECT` of its rows
   through the same driver (goal <= 2).
4. Workers: 1, 2 and 4 processes, each owning its own game and committing round
   projections for a few seconds: aggregate store commits/s (no engine).
5. The pooled store (`benchmarks/postgres_pool.py`, issue 21): commit latency against a
   bare `INSERT; COMMIT`, connections against games open, rounds/s beside the old
   per-game-connection store; its goals are the rows of the page's Goals table. The engine's
   rounds/s and the loop's stalls at 1 to 512 games are `benchmarks/concurrency.py`'s (issue
   32): a round is the engine's work and then a commit, so the two measures differ.

Needs the PostgreSQL binaries (see `jfsm.stores.postgres.server`); without them it writes a result
that says why.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from benchmarks.common import now_ns, ratio, run_stamp, section_main, summarize
from benchmarks.data import Text, game_value
from benchmarks.durable import SqliteKV, _prefill, projection_sequence
from jfsm.jcs import canonical_bytes
from jfsm.projection import Projection
from jfsm.stores.file.store import FileStore

__all__ = ["main", "run"]

FULL: dict[str, Any] = {
    "prefill_keys": 1_500,
    "projections": 1_500,
    "batch": 25,
    "big_mib": 27.5,
    "small_mib": 0.1,
    "per_op_rounds": 150,
    "reopen_reps": 5,
    "worker_seconds": 4.0,
    "workers": [1, 2, 4],
}
QUICK: dict[str, Any] = {
    "prefill_keys": 20,
    "projections": 30,
    "batch": 10,
    "big_mib": 0.3,
    "small_mib": 0.05,
    "per_op_rounds": 10,
    "reopen_reps": 1,
    "worker_seconds": 0.3,
    "workers": [1, 2],
}


def _round(text: Text, rng: random.Random, seq: int) -> Projection:
    user, assistant = text(rng.randint(100, 600)), text(rng.randint(700, 3400))
    chunk = {"seq": seq, "user": user, "assistant": assistant, "origin": "round"}
    return Projection.of(
        {
            f"jfRounds.{seq}": {"n": seq, "input": user, "output": assistant},
            f"jfGameStack.chunk.{seq}": chunk,
            "jfGameStack.meta": {"nextSeq": seq + 1, "epoch": 0},
        },
        label="round",
    )


def _world(mib: float, seed: int) -> dict[str, bytes]:
    rng, text = random.Random(seed), Text(seed)
    values: dict[str, bytes] = {}
    total, i = 0, 0
    while total < mib * 1024 * 1024:
        raw = canonical_bytes(game_value(text, rng, rng.randint(2048, 8192)))
        values[f"world.{i:06d}"] = raw
        total += len(raw) + 20
        i += 1
    return values


def _commit(conninfo: str, root: str, cfg: dict[str, Any]) -> dict[str, Any]:
    from jfsm.stores.postgres.blocking import BlockingPostgresStore as PostgresStore

    prefill = _prefill(cfg["prefill_keys"], 3)
    sequence = projection_sequence(cfg["projections"], cfg["prefill_keys"])
    file = FileStore.open_sync(os.path.join(root, "filestore"))
    sqlite = SqliteKV(os.path.join(root, "kv.sqlite3"))
    pg = PostgresStore.open(conninfo, "bench-commit")
    # each store's blocking commit (today's PostgresStore; the FileStore's sync surface)
    commits = {"postgres": pg.commit, "filestore": file.commit_sync, "sqlite": sqlite.commit}
    for commit in commits.values():
        commit(prefill)
    file.checkpoint_sync()
    pg.checkpoint()
    names = ["postgres", "filestore", "sqlite"]
    times: dict[str, list[int]] = {name: [] for name in names}
    per_batch: dict[str, list[float]] = {name: [] for name in names}
    batch = cfg["batch"]
    for b, start in enumerate(range(0, len(sequence), batch)):
        part = sequence[start : start + batch]
        order = names[b % 3 :] + names[: b % 3]
        for name in order:
            total = 0
            for _, projection in part:
                t0 = now_ns()
                commits[name](projection)
                dt = now_ns() - t0
                times[name].append(dt)
                total += dt
            per_batch[name].append(total)
    same = pg.image.values_bytes() == file.image.values_bytes()
    same = same and pg.image.footprint() == file.image.footprint()
    file.close_sync()
    sqlite.close()
    pg.close()

    def throughput(name: str) -> float:
        return round(statistics.median(batch / (t / 1e9) for t in per_batch[name]), 1)

    def batch_ratio(a: str, b: str) -> float:
        return round(
            statistics.median(x / y for x, y in zip(per_batch[a], per_batch[b], strict=True)), 3
        )

    return {
        "projections": len(sequence),
        "same_final_state_and_footprint": same,
        "commit": {name: summarize(times[name]) for name in names},
        "commits_per_s": {name: throughput(name) for name in names},
        "ratio_time_postgres_over_filestore": batch_ratio("postgres", "filestore"),
        "ratio_time_postgres_over_sqlite": batch_ratio("postgres", "sqlite"),
    }


def _per_op_and_reopen(conninfo: str, cfg: dict[str, Any]) -> dict[str, Any]:
    import psycopg

    from jfsm.stores.postgres.blocking import BlockingPostgresStore as PostgresStore

    big = PostgresStore.open(conninfo, "bench-big")
    big.seed(_world(cfg["big_mib"], 11))
    small = PostgresStore.open(conninfo, "bench-small")
    small.seed(_world(cfg["small_mib"], 12))
    text, rng = Text(5), random.Random(5)
    times: dict[str, list[int]] = {"big": [], "small": []}
    for seq in range(1, cfg["per_op_rounds"] + 1):
        projection = _round(text, rng, seq % 8 + 1)  # overwrites: both games keep their size
        order = [("big", big), ("small", small)]
        if seq % 2:
            order.reverse()
        for name, store in order:
            t0 = now_ns()
            store.commit(projection)
            times[name].append(now_ns() - t0)
    footprints = {"big": big.image.footprint(), "small": small.image.footprint()}
    big.close()
    small.close()
    opens: list[int] = []
    selects: list[int] = []
    for _ in range(cfg["reopen_reps"]):
        t0 = now_ns()
        store = PostgresStore.open(conninfo, "bench-big")
        opens.append(now_ns() - t0)
        store.close()
        t0 = now_ns()
        with psycopg.connect(conninfo) as conn, conn.cursor(binary=True) as cur:
            cur.execute("SELECT key, value, base FROM jfsm_value WHERE game_id = 'bench-big'")
            cur.fetchall()
        selects.append(now_ns() - t0)
    per_op = ratio(statistics.median(times["big"]), statistics.median(times["small"]))
    reopen = ratio(statistics.median(opens), statistics.median(selects))
    return {
        "footprint_bytes": footprints,
        "commit_big": summarize(times["big"]),
        "commit_small": summarize(times["small"]),
        "ratio_big_over_small": per_op,
        "reopen": summarize(opens),
        "plain_select": summarize(selects),
        "ratio_reopen_over_select": reopen,
        "goals": {
            "per_op_within_1_25": per_op is not None and per_op <= 1.25,
            "reopen_within_2": reopen is not None and reopen <= 2,
        },
    }


def _worker(conninfo: str, game: str, seconds: float, out: Any) -> None:
    from jfsm.stores.postgres.blocking import BlockingPostgresStore as PostgresStore

    store = PostgresStore.open(conninfo, game)
    text, rng = Text(hash(game) & 0xFFFF), random.Random(game)
    projections = [_round(text, rng, seq) for seq in range(1, 401)]
    out.put("ready")
    deadline = time.monotonic() + seconds
    done = 0
    while time.monotonic() < deadline:
        store.commit(projections[done % len(projections)])
        done += 1
    store.close()
    out.put(done)


def _workers(conninfo: str, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    ctx = multiprocessing.get_context("fork")
    rows = []
    for n in cfg["workers"]:
        queue = ctx.Queue()
        procs = [
            ctx.Process(
                target=_worker, args=(conninfo, f"bench-w{n}-{i}", cfg["worker_seconds"], queue)
            )
            for i in range(n)
        ]
        for proc in procs:
            proc.start()
        for _ in procs:
            queue.get(timeout=60)
        commits = sum(queue.get(timeout=120) for _ in procs)
        for proc in procs:
            proc.join()
        rows.append({"workers": n, "commits_per_s": round(commits / cfg["worker_seconds"], 1)})
    base = rows[0]["commits_per_s"]
    for row in rows:
        row["speedup"] = ratio(row["commits_per_s"], base)
    return rows


def run(*, quick: bool = False, log: Any = print) -> dict[str, Any]:
    """All four measurements; `{"available": False, "reason": ...}` without PostgreSQL."""
    from jfsm.stores.postgres.server import TemporaryServer, why_unavailable

    reason = why_unavailable()
    if reason is not None:
        return {"available": False, "reason": reason}
    cfg = QUICK if quick else FULL
    root = tempfile.mkdtemp(prefix="jfsm-bench-pg-")
    try:
        with TemporaryServer(fsync=True) as server:
            from jfsm.stores.postgres.store import migrate

            conninfo = server.create_database("bench")
            migrate(conninfo)
            log("postgres: commit throughput against FileStore and SQLite")
            commit = _commit(conninfo, root, cfg)
            log("postgres: per-op cost at 29 MiB and 0.1 MiB, reopen")
            scale = _per_op_and_reopen(conninfo, cfg)
            log("postgres: rounds/s with 1, 2, 4 workers")
            workers = _workers(conninfo, cfg)
            from benchmarks.postgres_pool import measure

            pool = measure(conninfo, quick=quick, log=log)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "available": True,
        "config": cfg,
        "commit": commit,
        "scale": scale,
        "workers": workers,
        "pool": pool,
    }


def render(result: dict[str, Any]) -> str:
    """`postgres.md`."""
    out = ["# PostgreSQL store benchmarks", ""]
    meta = result.get("meta", {})
    if meta:
        out += [run_stamp(meta, "postgres"), ""]
    if not result.get("available"):
        return "\n".join([*out, f"Not run: {result.get('reason')}", ""])
    c, s = result["commit"], result["scale"]
    if "pool" in result:
        from benchmarks.postgres_pool import render as render_pool

        out += render_pool(result["pool"])
    cited = result.get("cited") or {}
    engine = next((v for k, v in cited.items() if k.startswith("engine rounds/s")), None)
    if engine is not None:
        out += [
            f"In the same run the engine reached {engine:,} rounds/s on this store at 64 games "
            "([One worker, many games](concurrency.md)): a different measure from the store's "
            "commits/s above.",
            "",
        ]
    out += [
        "## Commit (same projections, durable commits)",
        "",
        "| backend | median µs | p90 µs | commits/s |",
        "|---|---|---|---|",
    ]
    for name in ("postgres", "filestore", "sqlite"):
        out.append(
            f"| {name} | {c['commit'][name]['median_us']} | {c['commit'][name]['p90_us']} "
            f"| {c['commits_per_s'][name]} |"
        )
    out += [
        "",
        f"Time ratio PostgreSQL / FileStore: **{c['ratio_time_postgres_over_filestore']}**; "
        f"PostgreSQL / SQLite WAL FULL: **{c['ratio_time_postgres_over_sqlite']}** "
        f"(median over batches). Same final state and footprint as the FileStore: "
        f"{c['same_final_state_and_footprint']}.",
        "",
        "## O(change) and reopen",
        "",
        f"Commit median at {s['footprint_bytes']['big']:,} bytes: "
        f"{s['commit_big']['median_us']} µs; at {s['footprint_bytes']['small']:,} bytes: "
        f"{s['commit_small']['median_us']} µs; ratio **{s['ratio_big_over_small']}** "
        f"(goal <= 1.25: {s['goals']['per_op_within_1_25']}).",
        "",
        f"Reopen of the large game: {s['reopen']['median_us']} µs against a plain SELECT of its "
        f"rows {s['plain_select']['median_us']} µs; ratio **{s['ratio_reopen_over_select']}** "
        f"(goal <= 2: {s['goals']['reopen_within_2']}).",
        "",
        "## Workers (one game each, loopback)",
        "",
        "Processes each committing round projections to its own game with the blocking store "
        "(`BlockingPostgresStore.commit`, no engine): store commits/s in all.",
        "",
        "| workers | store commits/s | speedup |",
        "|---|---|---|",
    ]
    for row in result["workers"]:
        out.append(f"| {row['workers']} | {row['commits_per_s']} | {row['speedup']} |")
    out += [
        "",
        "## What limits it",
        "",
        "- A commit is one SQL statement (one round trip, the fencing check included) and one "
        "WAL flush of about the projection's bytes; its cost does not depend on the game's size "
        "(the quota preflight runs in memory, O(change)).",
        "- Rounds/s grow with workers beyond the number of cores because a commit mostly waits "
        "for the WAL flush, and the server flushes the WAL of concurrent commits together "
        "(group commit). The limits, in order: the WAL flush latency of the disk, then CPU "
        "(server backends, workers and JSON encoding share the cores). Connections are no "
        "limit: every game of a process shares one pool (issue 21).",
        "- Reopen is a single `SELECT` of the game's rows plus building the image (footprint "
        "accounting over every key): it is proportional to the game's size, like the file "
        "store's replay.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    return section_main("postgres", __doc__, run, render, argv)


if __name__ == "__main__":
    sys.exit(main())
