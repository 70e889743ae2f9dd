"""Section 4: peak RSS of an engine holding a ~30 MiB store, as a multiple of its footprint.

Each measurement runs in a fresh subprocess (`python -m benchmarks.memory child ...`) and
reads `resource.getrusage(RUSAGE_SELF).ru_maxrss` (the peak), `VmHWM` of
`/proc/self/status` (the peak of this process image alone) and `/proc/self/statm` (the
resident set once built, after a garbage collection). On Linux `ru_maxrss` survives
fork + exec, so a child started by a big parent would report the parent's size: the
parent therefore stays small (even the store on disk is written by a child) and the table
uses `VmHWM` when it is available.

- `baseline`: the interpreter with the engine, stores and fake compressor imported.
- `built in memory`: a `MemoryStore` filled through the engine (rounds with compression
  checks, game-data writes, checkpoints), then a fresh `GameEngine` over it.
- `reopened from disk`: `FileStore.open` of the same kind of store, then a `GameEngine`.
- `read`: the snapshot reader alone over that store's snapshot file (decision R51): its
  throughput (median of 5 reads) and the peak of its Python allocations (`tracemalloc`)
  over the file's size; a reader that decoded the whole file as text needed over 2x.

The goal (issue 11): peak RSS at most `PEAK_GOAL` times the footprint in both cases.
`BEFORE_R51` keeps the figures of the whole-file reader (commit e2e1584, this command, the
same machine) for the side-by-side table.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.data import MiB, build_store

__all__ = ["run"]

ROOT = Path(__file__).resolve().parent.parent
PEAK_GOAL = 4.0
BEFORE_R51 = {"built in memory": 3.66, "reopened from disk": 4.53}
FULL = {"footprint_mib": 29.5}
QUICK = {"footprint_mib": 0.3}


def _rss_now_kib() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError):
        return None


def _hwm_kib() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _child(argv: list[str]) -> dict[str, Any]:
    from jfsm.engine import GameEngine
    from jfsm.stores.file.store import FileStore
    from jfsm.testing import FakeCompressor

    mode = argv[0]
    engine = None
    footprint = 0
    if mode == "build":
        built = build_store(int(float(argv[1]) * MiB), 10_000)
        engine = GameEngine(built.store, FakeCompressor(), game_id="bench")
    elif mode == "prepare":
        built = build_store(int(float(argv[2]) * MiB), 10_000)
        with FileStore.open_sync(argv[1]) as store:
            store.seed_sync(built.store.image.values_bytes())
            footprint = store.image.footprint()
        return {"mode": mode, "footprint": footprint}
    elif mode == "read":
        return _read(argv[1])
    elif mode == "reopen":
        engine = GameEngine(FileStore.open_sync(argv[1]), FakeCompressor(), game_id="bench")
    elif mode != "baseline":
        raise SystemExit(f"unknown mode {mode!r}")
    if engine is not None:
        footprint = engine.store.image.footprint()
    gc.collect()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result = {
        "mode": mode,
        "footprint": footprint,
        "ru_maxrss_kib": peak,
        "vm_hwm_kib": _hwm_kib(),
        "rss_now_kib": _rss_now_kib(),
    }
    result["peak_rss_kib"] = result["vm_hwm_kib"] or peak
    if engine is not None:
        asyncio.run(engine.close())
    return result


def _read(directory: str) -> dict[str, Any]:
    """Time the snapshot reader over the store's snapshot and trace its allocations."""
    import statistics
    import time
    import tracemalloc
    import zlib

    from jfsm.stores.file.snapshot import read_snapshot

    name = next(n for n in sorted(os.listdir(directory)) if n.startswith("snapshot."))
    path = os.path.join(directory, name)
    with open(path, "rb") as f:
        data = f.read()
    crc = zlib.crc32(data)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        read_snapshot(path, data, crc)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    members = read_snapshot(path, data, crc)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    del members
    return {
        "mode": "read",
        "file_bytes": len(data),
        "median_s": statistics.median(times),
        "traced_peak_bytes": peak,
    }


def _spawn(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", "child", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory child {args} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool = False, log: Any = print) -> dict[str, Any]:
    cfg = QUICK if quick else FULL
    root = tempfile.mkdtemp(prefix="jfsm-bench-memory-", dir=os.environ.get("JFSM_BENCH_TMP"))
    try:
        directory = os.path.join(root, "store")
        _spawn("prepare", directory, str(cfg["footprint_mib"]))
        baseline = _spawn("baseline")
        rows = []
        for label, args in (
            ("built in memory", ("build", str(cfg["footprint_mib"]))),
            ("reopened from disk", ("reopen", directory)),
        ):
            child = _spawn(*args)
            fp = child["footprint"]
            peak = child["peak_rss_kib"] * 1024
            now = (child["rss_now_kib"] or 0) * 1024
            base = baseline["peak_rss_kib"] * 1024
            rows.append(
                {
                    "case": label,
                    "footprint": fp,
                    "footprint_mib": round(fp / MiB, 2),
                    "peak_rss_mib": round(peak / MiB, 1),
                    "ru_maxrss_mib": round(child["ru_maxrss_kib"] / 1024, 1),
                    "rss_after_mib": round(now / MiB, 1),
                    "baseline_rss_mib": round(base / MiB, 1),
                    "peak_over_footprint": round(peak / fp, 2) if fp else None,
                    "peak_minus_baseline_over_footprint": round((peak - base) / fp, 2)
                    if fp
                    else None,
                    "resident_minus_baseline_over_footprint": round((now - base) / fp, 2)
                    if fp and now
                    else None,
                }
            )
            log(f"  memory {label}: peak {peak / MiB:.0f} MiB for {fp / MiB:.1f} MiB")
        read = _spawn("read", directory)
        size = read["file_bytes"]
        reader = {
            "file_mib": round(size / MiB, 2),
            "median_s": round(read["median_s"], 3),
            "mib_per_s": round(size / MiB / read["median_s"], 1),
            "traced_peak_over_file": round(read["traced_peak_bytes"] / size, 2),
        }
        log(f"  memory reader: {reader['mib_per_s']} MiB/s")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "config": dict(cfg),
        "parent_rss_mib_at_spawn": round((_rss_now_kib() or 0) / 1024, 1),
        "baseline_peak_rss_mib": round(baseline["peak_rss_kib"] / 1024, 1),
        "baseline_ru_maxrss_mib": round(baseline["ru_maxrss_kib"] / 1024, 1),
        # Both are about the full size: a quick run's ratios mean nothing.
        "goal_peak_over_footprint": None if quick else PEAK_GOAL,
        "before_r51": {} if quick else BEFORE_R51,
        "cases": rows,
        "reader": reader,
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        print(json.dumps(_child(sys.argv[2:])))
    else:
        print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
