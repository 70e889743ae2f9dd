"""Section 2: the durable file store against SQLite, and reopening a large store.

Throughput: one deterministic sequence of projections (rounds-like sets of ~1-4 KiB values,
summary publications that set one key and delete 50, plain deletes of game data) committed
through `FileStore.commit` and through stdlib `sqlite3` (WAL, `synchronous=FULL`, one
transaction per projection, a key/value table). Both start from the same pre-filled state
in the same temporary directory; batches of projections alternate between them (which one
goes first alternates too), and the FileStore/SQLite throughput ratio is taken per batch
pair, then its median.

Log write strategies: the raw I/O under a commit, without the store: appending a ~4 KiB
record then `fsync` (what `FileStore.commit` does), appending then `fdatasync`, and
overwriting a preallocated region (zero-filled, or `posix_fallocate`d) then `fdatasync`
(what a reused SQLite WAL amounts to). Interleaved write by write.

Reopen: `FileStore.open` of a ~30 MiB store (snapshot only; and snapshot plus a log of
committed projections) against a plain read of the same files with `json.loads`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import statistics
import struct
import tempfile
from collections.abc import Iterator
from typing import Any

from benchmarks.common import Samples, now_ns, ratio, summarize
from benchmarks.data import MiB, Text, build_store, game_value
from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.stores.file.log import encode_record
from jfsm.stores.file.store import FileStore

__all__ = ["projection_sequence", "run"]

FULL: dict[str, Any] = {
    "prefill_keys": 1_500,
    "projections": 3_000,
    "batch": 25,
    "reopen_mib": 29.5,
    "reopen_base_mib": 25.0,
    "reopen_log_mib": 2.0,
    "reopen_reps": 5,
    "io_writes": 600,
}
QUICK: dict[str, Any] = {
    "prefill_keys": 40,
    "projections": 60,
    "batch": 10,
    "reopen_mib": 0.3,
    "reopen_base_mib": 0.2,
    "reopen_log_mib": 0.05,
    "reopen_reps": 2,
    "io_writes": 20,
}


def _prefill(n: int, seed: int) -> Projection:
    rng = random.Random(seed)
    text = Text(seed)
    return Projection.of(
        {f"world.{i:06d}": game_value(text, rng, rng.randint(1024, 4096)) for i in range(n)},
        label="prefill",
    )


def projection_sequence(n: int, prefill_keys: int, seed: int = 7) -> list[tuple[str, Projection]]:
    """`n` (kind, projection) pairs: ~70 % rounds, ~30 % plain deletes, and a summary
    publication (set the summary, delete the 50 oldest chunks) whenever 50 chunks pile up."""
    return list(iter_projections(n, prefill_keys, seed))


def iter_projections(n: int, prefill_keys: int, seed: int = 7) -> Iterator[tuple[str, Projection]]:
    """The projections of `projection_sequence`, generated lazily."""
    rng = random.Random(seed)
    text = Text(seed)
    world = [f"world.{i:06d}" for i in range(prefill_keys)]
    rng.shuffle(world)
    chunks: list[str] = []
    seq = 0
    for _ in range(n):
        if len(chunks) >= 50 + rng.randint(0, 10):
            gone, chunks = chunks[:50], chunks[50:]
            summary = {
                "text": text(rng.randint(1500, 3500)),
                "throughSeq": seq,
                "compressionCallId": f"call-{seq}",
                "kind": "paxhistoria.game-agent-stack.v1",
            }
            yield "publish", Projection.of({"jfGameStack.summary": summary}, gone, label="pub")
        elif rng.random() < 0.3 and len(world) > 3:
            k = rng.randint(1, 3)
            gone, world = world[:k], world[k:]
            yield "delete", Projection.of(None, gone, label="delete")
        else:
            seq += 1
            user, assistant = text(rng.randint(100, 600)), text(rng.randint(700, 3400))
            sets = {
                f"jfRounds.{seq}": {"n": seq, "input": user, "output": assistant},
                f"jfGameStack.chunk.{seq}": {
                    "seq": seq,
                    "user": user,
                    "assistant": assistant,
                    "origin": "round",
                    "roundId": seq,
                },
                "jfGameStack.meta": {"nextSeq": seq + 1, "epoch": 0},
            }
            chunks.append(f"jfGameStack.chunk.{seq}")
            yield "round", Projection.of(sets, label="round")


class SqliteKV:
    """The baseline: a key/value table in SQLite, WAL mode, `synchronous=FULL`."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL)")

    def commit(self, projection: Projection) -> None:
        cur = self.db.cursor()
        cur.execute("BEGIN")
        try:
            if projection.sets:
                cur.executemany(
                    "INSERT INTO kv (key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    list(projection.sets.items()),
                )
            if projection.deletes:
                cur.executemany("DELETE FROM kv WHERE key = ?", [(k,) for k in projection.deletes])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()


def _throughput(cfg: dict[str, Any], root: str) -> dict[str, Any]:
    prefill = _prefill(cfg["prefill_keys"], 3)
    sequence = projection_sequence(cfg["projections"], cfg["prefill_keys"])
    fs_dir = os.path.join(root, "filestore")
    store = FileStore.open_sync(fs_dir)  # its blocking surface: the commit's own latency
    store.commit_sync(prefill)
    store.checkpoint_sync()  # a game checkpoints; the prefill becomes the snapshot
    kv = SqliteKV(os.path.join(root, "kv.sqlite3"))
    kv.commit(prefill)
    kv.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    samples = Samples()
    ratios: list[float] = []
    fs_tp: list[float] = []
    sq_tp: list[float] = []
    batch = cfg["batch"]
    for b, start in enumerate(range(0, len(sequence), batch)):
        part = sequence[start : start + batch]
        totals = {}
        order: list[tuple[str, Any]] = [("filestore", store.commit_sync), ("sqlite", kv.commit)]
        if b % 2:
            order.reverse()
        for name, commit in order:
            total = 0
            for kind, projection in part:
                t0 = now_ns()
                commit(projection)
                dt = now_ns() - t0
                total += dt
                samples.add(f"{name}:{kind}", dt)
                samples.add(f"{name}:all", dt)
            totals[name] = total
        fs_tp.append(len(part) / (totals["filestore"] / 1e9))
        sq_tp.append(len(part) / (totals["sqlite"] / 1e9))
        ratios.append(totals["sqlite"] / totals["filestore"])
    footprint = store.image.footprint()
    # The same state in both: compare the key sets once.
    rows = dict(kv.db.execute("SELECT key, value FROM kv"))
    same = rows == store.image.values_bytes()
    store.close_sync()
    kv.close()
    # CPU part of FileStore.commit (preflight + record encoding), memory only.
    image = StoreImage()
    image.apply_unchecked(prefill)
    image.checkpoint()
    cpu: list[int] = []
    for _, projection in sequence:
        t0 = now_ns()
        image.check(projection)
        encode_record(projection)
        cpu.append(now_ns() - t0)
        image.apply_unchecked(projection)
    kinds = {}
    for kind in ("round", "publish", "delete"):
        kinds[kind] = {
            "count": sum(1 for k, _ in sequence if k == kind),
            "filestore": summarize(samples.get(f"filestore:{kind}", [])),
            "sqlite": summarize(samples.get(f"sqlite:{kind}", [])),
        }
    value_bytes = [len(v) for _, p in sequence for v in p.sets.values()]
    return {
        "projections": len(sequence),
        "prefill_keys": cfg["prefill_keys"],
        "batch": batch,
        "mean_set_value_bytes": round(statistics.fmean(value_bytes)) if value_bytes else 0,
        "footprint_end": footprint,
        "same_final_state": same,
        "filestore_commits_per_s": round(statistics.median(fs_tp), 1),
        "sqlite_commits_per_s": round(statistics.median(sq_tp), 1),
        "ratio_filestore_over_sqlite": round(statistics.median(ratios), 3),
        "ratio_p10": round(sorted(ratios)[len(ratios) // 10], 3),
        "ratio_p90": round(sorted(ratios)[(len(ratios) * 9) // 10], 3),
        "filestore_commit": summarize(samples.get("filestore:all", [])),
        "sqlite_commit": summarize(samples.get("sqlite:all", [])),
        "filestore_cpu_part": summarize(cpu),
        "by_kind": kinds,
    }


def _io_strategies(cfg: dict[str, Any], root: str) -> list[dict[str, Any]]:
    n = cfg["io_writes"]
    record = random.Random(1).randbytes(4096)
    size = n * len(record) + 4096
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC

    def write_fsync(fd: int, i: int) -> None:
        os.write(fd, record)
        os.fsync(fd)

    def write_fdatasync(fd: int, i: int) -> None:
        os.write(fd, record)
        os.fdatasync(fd)

    def pwrite_fdatasync(fd: int, i: int) -> None:
        os.pwrite(fd, record, i * len(record))
        os.fdatasync(fd)

    def append(path: str) -> int:
        return os.open(path, flags | os.O_APPEND)

    def zeroed(path: str) -> int:
        fd = os.open(path, flags)
        os.write(fd, bytes(size))
        os.fsync(fd)
        return fd

    def fallocated(path: str) -> int:
        fd = os.open(path, flags)
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
        return fd

    variants = [
        ("append + fsync (FileStore today)", append, write_fsync),
        ("append + fdatasync", append, write_fdatasync),
        ("preallocated zeros, pwrite + fdatasync", zeroed, pwrite_fdatasync),
        ("posix_fallocate, pwrite + fdatasync", fallocated, pwrite_fdatasync),
    ]
    fds = [setup(os.path.join(root, f"io-{k}")) for k, (_, setup, _) in enumerate(variants)]
    samples = Samples()
    try:
        for i in range(n):
            k = i % len(variants)
            for j in list(range(k, len(variants))) + list(range(k)):
                label, _, op = variants[j]
                t0 = now_ns()
                op(fds[j], i)
                samples.add(label, now_ns() - t0)
    finally:
        for fd in fds:
            os.close(fd)
    base = statistics.median(samples[variants[0][0]])
    return [
        {
            "strategy": label,
            "record_bytes": len(record),
            **summarize(samples[label]),
            "over_append_fsync": ratio(statistics.median(samples[label]), base),
        }
        for label, _, _ in variants
    ]


def _plain_load(directory: str) -> int:
    """The baseline reopen: read every store file and `json.loads` what it holds."""
    keys = 0
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.startswith("snapshot.") and name.endswith(".json"):
            with open(path, "rb") as f:
                keys += len(json.loads(f.read()))
        elif name.startswith("log."):
            with open(path, "rb") as f:
                data = f.read()
            offset = 0
            while offset + 16 <= len(data):
                length = struct.unpack_from(">I", data, offset + 4)[0]
                json.loads(data[offset + 16 : offset + 16 + length])
                offset += 16 + length
    return keys


def _reopen(cfg: dict[str, Any], root: str) -> list[dict[str, Any]]:
    variants = []
    # A: snapshot only.
    built = build_store(int(cfg["reopen_mib"] * MiB), 10_000, seed=5)
    a_dir = os.path.join(root, "reopen-snapshot")
    with FileStore.open_sync(a_dir) as store:
        store.seed_sync(built.store.image.values_bytes())
        a_fp = store.image.footprint()
    variants.append(("snapshot only", a_dir, a_fp))
    # B: a snapshot plus a log of rounds-like projections.
    base = build_store(int(cfg["reopen_base_mib"] * MiB), 10_000, seed=6)
    b_dir = os.path.join(root, "reopen-log")
    with FileStore.open_sync(b_dir) as store:
        store.seed_sync(base.store.image.values_bytes())
        logged = 0
        for _, projection in iter_projections(1_000_000, 0, seed=11):
            if logged >= cfg["reopen_log_mib"] * MiB:
                break
            if not projection.sets:
                continue
            store.commit_sync(projection)
            logged += sum(len(v) for v in projection.sets.values())
        b_fp = store.image.footprint()
    variants.append(("snapshot + log", b_dir, b_fp))
    samples = Samples()
    for rep in range(cfg["reopen_reps"]):
        for label, directory, _ in variants:
            order = ["open", "plain"] if rep % 2 == 0 else ["plain", "open"]
            for what in order:
                t0 = now_ns()
                if what == "open":
                    FileStore.open_sync(directory).close_sync()
                else:
                    _plain_load(directory)
                samples.add(f"{label}:{what}", now_ns() - t0)
    out = []
    for label, directory, fp in variants:
        files = {
            name: os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)
        }
        opened = summarize(samples[f"{label}:open"])
        plain = summarize(samples[f"{label}:plain"])
        out.append(
            {
                "variant": label,
                "footprint": fp,
                "footprint_mib": round(fp / MiB, 2),
                "bytes_on_disk": sum(files.values()),
                "filestore_open": opened,
                "plain_read_json_loads": plain,
                "open_over_plain": ratio(opened["median_us"], plain["median_us"]),
            }
        )
    return out


def run(quick: bool = False, log: Any = print) -> dict[str, Any]:
    cfg = QUICK if quick else FULL
    root = tempfile.mkdtemp(prefix="jfsm-bench-durable-", dir=os.environ.get("JFSM_BENCH_TMP"))
    try:
        throughput = _throughput(cfg, root)
        log(
            f"  throughput: FileStore {throughput['filestore_commits_per_s']}/s, "
            f"SQLite {throughput['sqlite_commits_per_s']}/s"
        )
        io = _io_strategies(cfg, root)
        reopen = _reopen(cfg, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "config": dict(cfg),
        "sqlite_version": sqlite3.sqlite_version,
        "throughput": throughput,
        "io_strategies": io,
        "reopen": reopen,
        "goal": {
            "text": "throughput ratio FileStore/SQLite >= 1.0",
            "ratio": throughput["ratio_filestore_over_sqlite"],
            "met": throughput["ratio_filestore_over_sqlite"] >= 1.0,
        },
    }
