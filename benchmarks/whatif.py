"""What-if: the gains of the optimizations suggested in the benchmark report, measured.

    uv run python -m benchmarks.whatif [--quick] --out DIR

Nothing in `jfsm/` is edited: each suggestion is prototyped *in this process* (a subclass
or a temporary monkeypatch) and measured against the unchanged engine, interleaved, on the
same data. The prototypes must leave observable behaviour unchanged; where cheap, that is
checked (same dump after the same operations, same snapshot contents). Writes
`whatif.json` and `whatif.md` to DIR. The page of its one run at commit `d027c68` is kept
as a past measurement (`docs/benchmarks/history/whatif.md`); its prototypes predate what
landed since, so DIR has no default.

- P1 (the last round number kept instead of recomputed with `max()`) has landed in the
  engine (`MemoryIndex.last_round`), so it is no longer prototyped here.
- P2 `MemoryIndex.observe` skips non-`jf` keys before `json.loads` (engine construction,
  `engine.write`).
- P3 `StateMachine.fire` by a precomputed `(state, event) -> rows` table instead of the
  `transitions` library's dispatch (before_generation, record_round).
- P4 snapshot loading that trusts the CRC and slices each member's JCS bytes out with
  `json.JSONDecoder.raw_decode` instead of `json.loads` + re-canonicalizing every value.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jfsm.game_memory
from benchmarks.common import Samples, now_ns, ratio, summarize
from benchmarks.data import MiB, Text, build_store
from jfsm.engine import GameEngine
from jfsm.errors import InvalidTransition
from jfsm.machines import StateMachine, Transition
from jfsm.memory_index import MemoryIndex
from jfsm.stores.file.snapshot import read_snapshot
from jfsm.stores.file.store import FileStore
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor

FULL = {
    "small_mib": 0.1,
    "large_mib": 29.0,
    "reps": 300,
    "gen_reps": 300,
    "init_reps": 7,
    "snapshot_mib": 29.5,
    "snapshot_reps": 5,
}
QUICK = {
    "small_mib": 0.05,
    "large_mib": 0.3,
    "reps": 10,
    "gen_reps": 10,
    "init_reps": 2,
    "snapshot_mib": 0.3,
    "snapshot_reps": 2,
}


# -- P2 ---------------------------------------------------------------------------------
class JfOnlyIndex(MemoryIndex):
    """P2: game-data keys are never decoded (the index ignores them anyway)."""

    def observe(self, key: str, raw: bytes | None) -> None:
        if key.startswith("jf"):
            super().observe(key, raw)


@contextlib.contextmanager
def jf_only_index() -> Iterator[None]:
    """P2 for engines built inside: `GameMemory` (which builds each engine's index) gets the
    prototype index."""
    saved = jfsm.game_memory.MemoryIndex
    jfsm.game_memory.MemoryIndex = JfOnlyIndex  # type: ignore[misc]
    try:
        yield
    finally:
        jfsm.game_memory.MemoryIndex = saved  # type: ignore[misc]


# -- P3 ---------------------------------------------------------------------------------
_ROWS: dict[tuple[str, str, str], tuple[Transition, ...]] = {}


def _fast_fire(self: StateMachine, event: str) -> Transition:
    state = self.current
    key = (self.table.name, state, event)
    rows = _ROWS.get(key)
    if rows is None:
        rows = _ROWS[key] = self.table.rows(state, event)
    for row in rows:
        if row.guard is not None and not self._guards[row.guard]():
            continue
        if row.unless is not None and self._guards[row.unless]():
            continue
        if row.dest != state:
            self._machine.set_state(row.dest, model=self)
        return row
    raise InvalidTransition(
        f"{self.table.name}: event {event!r} not allowed in state {state!r}", state=state
    )


@contextlib.contextmanager
def fast_fire() -> Iterator[None]:
    saved = StateMachine.fire
    StateMachine.fire = _fast_fire  # type: ignore[method-assign]
    try:
        yield
    finally:
        StateMachine.fire = saved  # type: ignore[method-assign]


# -- P4 ---------------------------------------------------------------------------------
_DECODER = json.JSONDecoder()


def fast_snapshot(data: bytes, crc: int) -> dict[str, bytes]:
    """P4: the CRC vouches for the bytes (the engine wrote them as JCS); slice each member's
    value out instead of re-canonicalizing it. Malformed input raises `ValueError`."""
    if zlib.crc32(data) != crc:
        raise ValueError("snapshot CRC mismatch")
    text = data.decode("utf-8")
    out: dict[str, bytes] = {}
    if text == "{}":
        return out
    if not text.startswith("{"):
        raise ValueError("not an object")
    i = 1
    while True:
        key, i = _DECODER.raw_decode(text, i)
        if not isinstance(key, str) or text[i] != ":":
            raise ValueError(f"bad member at {i}")
        _, end = _DECODER.raw_decode(text, i + 1)
        out[key] = text[i + 1 : end].encode("utf-8")
        if text[end] == "}":
            if end != len(text) - 1:
                raise ValueError("trailing data")
            return out
        if text[end] != ",":
            raise ValueError(f"bad separator at {end}")
        i = end + 1


# -- measurements -----------------------------------------------------------------------
def _engines(cfg: dict[str, Any]) -> dict[str, GameEngine]:
    out: dict[str, GameEngine] = {}
    for size in ("small", "large"):
        for variant in ("today", "P2+P3"):
            built = build_store(int(cfg[f"{size}_mib"] * MiB), 10_000)
            ctx = jf_only_index() if variant == "P2+P3" else contextlib.nullcontext()
            with ctx:
                engine = GameEngine(built.store, FakeCompressor(), game_id="w")
            if variant == "P2+P3" and not isinstance(engine.index, JfOnlyIndex):
                raise RuntimeError("the P2 patch missed: the engine does not use JfOnlyIndex")
            out[f"{size}/{variant}"] = engine
    return out


async def _record_and_generate(cfg: dict[str, Any], engines: dict[str, GameEngine]) -> Samples:
    text = Text(17)
    pairs = [(text(60), text(240)) for _ in range(64)]
    names = list(engines)
    samples = Samples()
    for rep in range(cfg["gen_reps"]):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            ctx = fast_fire() if name.endswith("P3") else contextlib.nullcontext()
            with ctx:
                t0 = now_ns()
                for _ in range(10):
                    await engines[name].before_generation()
                samples.add("gen:" + name, (now_ns() - t0) // 10)
    for rep in range(cfg["reps"]):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            ctx = fast_fire() if name.endswith("P3") else contextlib.nullcontext()
            with ctx:
                t0 = now_ns()
                await engines[name].record_round(*pairs[rep % 64])
                samples.add("rec:" + name, now_ns() - t0)
    return samples


def _same_behaviour() -> bool:
    """Today's engine and the P2+P3 prototype give the same dump after the same ops."""

    async def script(engine: GameEngine) -> dict[str, Any]:
        await engine.write({"world.a": {"x": 1}, "world.b": "y"})
        for i in range(30):
            await engine.record_round(f"in {i}", "out " * (i + 1))
            await engine.before_generation()
        await engine.start_scene("s1")
        await engine.record_scene_exchange("s1", "u", "a")
        await engine.publish_scene("s1", "closing", "meanwhile")
        await engine.reset(20)
        await engine.record_round("after reset", "x")
        await engine.intervene("iv", "revealed and hidden", 8)
        await engine.before_generation()
        await engine.edit_round(3, "edited", "y")
        await engine.record_round("last", "z")
        return engine.dump()

    today = asyncio.run(
        script(GameEngine(MemoryStore(), FakeCompressor(), game_id="w", thresholds={"game": 400}))
    )
    with jf_only_index(), fast_fire():
        proto = asyncio.run(
            script(
                GameEngine(MemoryStore(), FakeCompressor(), game_id="w", thresholds={"game": 400})
            )
        )
    return today == proto


def _engine_init(cfg: dict[str, Any]) -> dict[str, Any]:
    store = build_store(int(cfg["large_mib"] * MiB), 10_000).store
    samples = Samples()
    for rep in range(cfg["init_reps"]):
        for variant in ("today", "P2") if rep % 2 == 0 else ("P2", "today"):
            ctx = jf_only_index() if variant == "P2" else contextlib.nullcontext()
            with ctx:
                t0 = now_ns()
                GameEngine(store, FakeCompressor(), game_id="w")
                samples.add(variant, now_ns() - t0)
    today, p2 = summarize(samples["today"]), summarize(samples["P2"])
    return {
        "footprint_mib": cfg["large_mib"],
        "today": today,
        "P2": p2,
        "P2_over_today": ratio(p2["median_us"], today["median_us"]),
    }


def _snapshot(cfg: dict[str, Any]) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="jfsm-whatif-")
    try:
        built = build_store(int(cfg["snapshot_mib"] * MiB), 10_000, seed=5)
        directory = os.path.join(root, "s")
        with FileStore.open_sync(directory) as store:
            store.seed_sync(built.store.image.values_bytes())
        name = next(n for n in os.listdir(directory) if n.startswith("snapshot."))
        crc = int(name.split(".")[2], 16)
        path = os.path.join(directory, name)
        with open(path, "rb") as f:
            data = f.read()
        same = fast_snapshot(data, crc) == read_snapshot(path, data, crc)
        samples = Samples()
        for rep in range(cfg["snapshot_reps"]):
            order = ["today", "P4", "json.loads"]
            order = order[rep % 3 :] + order[: rep % 3]
            for variant in order:
                t0 = now_ns()
                if variant == "today":
                    read_snapshot(path, data, crc)
                elif variant == "P4":
                    fast_snapshot(data, crc)
                else:
                    json.loads(data)
                samples.add(variant, now_ns() - t0)
        out = {k: summarize(v) for k, v in samples.items()}
        return {
            "snapshot_bytes": len(data),
            "same_contents": same,
            **out,
            "P4_over_today": ratio(out["P4"]["median_us"], out["today"]["median_us"]),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(quick: bool = False) -> dict[str, Any]:
    cfg = QUICK if quick else FULL
    engines = _engines(cfg)
    samples = asyncio.run(_record_and_generate(cfg, engines))
    rows = []
    for variant in ("today", "P2+P3"):
        small = summarize(samples[f"rec:small/{variant}"])
        large = summarize(samples[f"rec:large/{variant}"])
        gen = summarize(samples[f"gen:large/{variant}"])
        rows.append(
            {
                "variant": variant,
                "record_round_small_us": small["median_us"],
                "record_round_large_us": large["median_us"],
                "large_over_small": ratio(large["median_us"], small["median_us"]),
                "before_generation_large_us": gen["median_us"],
            }
        )
    return {
        "config": dict(cfg),
        "same_behaviour": _same_behaviour(),
        "engine": rows,
        "engine_init": _engine_init(cfg),
        "snapshot": _snapshot(cfg),
    }


def render(r: dict[str, Any]) -> str:
    cfg = r["config"]
    lines = [
        "# What-if: measured gains of the suggested optimizations",
        "",
        "`python -m benchmarks.whatif`: each suggestion prototyped in-process (subclass or "
        "temporary monkeypatch, `jfsm/` untouched) and measured against today's engine, "
        "interleaved, medians. Same dump after the same operations (today vs P2+P3): "
        f"{'yes' if r['same_behaviour'] else '**no**'}.",
        "",
        f"record_round and before_generation at {cfg['small_mib']} and {cfg['large_mib']} MiB "
        "(stack 10,000 chars), µs:",
        "",
        "| Variant | record_round small | record_round large | large / small | "
        "before_generation large |",
        "|---|---|---|---|---|",
    ]
    for row in r["engine"]:
        lines.append(
            f"| {row['variant']} | {row['record_round_small_us']:.1f} | "
            f"{row['record_round_large_us']:.1f} | {row['large_over_small']:.3f} | "
            f"{row['before_generation_large_us']:.1f} |"
        )
    ei = r["engine_init"]
    sn = r["snapshot"]
    lines += [
        "",
        f"Engine construction over a {ei['footprint_mib']} MiB store (MemoryIndex build): "
        f"today {ei['today']['median_us'] / 1000:.1f} ms, P2 {ei['P2']['median_us'] / 1000:.1f} "
        f"ms ({ei['P2_over_today']:.2f}×).",
        "",
        f"Snapshot parse ({sn['snapshot_bytes']:,} bytes): today (`read_snapshot`) "
        f"{sn['today']['median_us'] / 1000:.0f} ms, P4 {sn['P4']['median_us'] / 1000:.0f} ms "
        f"({sn['P4_over_today']:.2f}×), plain `json.loads` "
        f"{sn['json.loads']['median_us'] / 1000:.0f} ms; same contents: "
        f"{'yes' if sn['same_contents'] else '**no**'}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.whatif")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    result = run(args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "whatif.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (args.out / "whatif.md").write_text(render(result), encoding="utf-8")
    print(render(result), file=sys.stderr)
    return 0 if result["same_behaviour"] and result["snapshot"]["same_contents"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
