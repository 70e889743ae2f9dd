"""Section 1: O(change), not O(store).

(a) `GameEngine.record_round` (projection building, quota preflight, commit, index update)
and (b) `GameEngine.before_generation` on a stack below the threshold (must read only the
kept canonical length), at store footprints from 0.1 to 29 MiB and game stacks from 1,000
to 299,999 code points. Beside them, in the same run and interleaved, a *naive* engine
whose store preflights every commit by re-serializing the whole post-state store and change
log with `jfsm.jcs.canonical_bytes` (what an implementation without an incremental
footprint does), and, for (b), the naive measurement `len(stack.text())`.

Every cell is a separately built store (same seed); one repetition visits every cell once,
in a rotated order, so the cells are interleaved.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Mapping
from typing import Any

from benchmarks.common import Samples, now_ns, ratio, summarize
from benchmarks.data import MiB, Text, build_store, stack_feasible
from jfsm.engine import GameEngine
from jfsm.errors import QuotaExceeded
from jfsm.jcs import canonical_bytes, key_order
from jfsm.projection import Projection
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor

__all__ = ["NaiveStore", "run"]

MEASURED_INPUT, MEASURED_OUTPUT = 60, 240  # a measured round: 342 code points of stack

FULL: dict[str, Any] = {
    "footprints_mib": [0.1, 1, 10, 29],
    "stacks": [1_000, 10_000, 100_000, 299_999],
    "record_reps": 300,
    "naive_reps": 9,
    "naive_stack": 10_000,
    "gen_reps": 400,
    "gen_batch": 10,
    "text_reps": 100,
}
QUICK: dict[str, Any] = {
    "footprints_mib": [0.05, 0.2],
    "stacks": [1_000, 5_000],
    "record_reps": 8,
    "naive_reps": 2,
    "naive_stack": 1_000,
    "gen_reps": 8,
    "gen_batch": 5,
    "text_reps": 4,
}


class NaiveStore(MemoryStore):
    """A memory store whose preflight re-serializes the whole post-state (the baseline).

    It keeps decoded mirrors of the store and of the checkpoint base, so the only O(store)
    work per commit is what a naive preflight must do: build the post-state, diff it
    against the base for the change log, and JCS-serialize both to count their bytes.
    """

    def __init__(self, values: Mapping[str, bytes]) -> None:
        super().__init__(values)
        self._doc = {key: json.loads(raw) for key, raw in values.items()}
        self._base_doc = dict(self._doc)
        self.checked = False

    def naive_footprint(self, projection: Projection) -> tuple[int, dict[str, Any]]:
        post = dict(self._doc)
        for key in projection.deletes:
            post.pop(key, None)
        for key, raw in projection.sets.items():
            post[key] = json.loads(raw)
        log: list[dict[str, Any]] = []
        for key in sorted(set(post).union(self._base_doc), key=key_order):
            if key not in post:
                log.append({"key": key, "op": "delete"})
            elif key not in self._base_doc or post[key] != self._base_doc[key]:
                log.append({"key": key, "op": "set", "value": post[key]})
        return len(canonical_bytes(post)) + len(canonical_bytes(log)), post

    async def commit(self, projection: Projection) -> None:
        would_be, post = self.naive_footprint(projection)
        if would_be > self._image.quota:
            raise QuotaExceeded(
                "naive preflight refused",
                current=-1,
                would_be=would_be,
                quota=self._image.quota,
            )
        self._image.apply_unchecked(projection)
        self._doc = post
        if not self.checked:  # the baseline must count the same bytes as the engine
            if would_be != self._image.footprint():
                raise AssertionError(f"naive {would_be} != engine {self._image.footprint()}")
            self.checked = True

    async def checkpoint(self) -> None:
        await super().checkpoint()
        self._base_doc = dict(self._doc)


def _cell_name(mib: float, stack: int) -> str:
    return f"{mib:g}MiB/{stack}"


async def _measure(cfg: dict[str, Any], cells: dict[str, dict[str, Any]]) -> Samples:
    samples = Samples()
    text = Text(99)
    names = list(cells)
    rounds_in = [text(MEASURED_INPUT) for _ in range(64)]
    rounds_out = [text(MEASURED_OUTPUT) for _ in range(64)]
    batch = cfg["gen_batch"]

    def rotated(seq: list[str], k: int) -> list[str]:
        k %= max(len(seq), 1)
        return seq[k:] + seq[:k]

    # (b) before_generation first, while every stack is exactly at its shaped length.
    for rep in range(cfg["gen_reps"]):
        for name in rotated(names, rep):
            engine = cells[name]["engine"]
            t0 = now_ns()
            for _ in range(batch):
                report = await engine.before_generation()
            samples.add("gen:" + name, (now_ns() - t0) // batch)
            if report.outcome != "not_due":
                raise AssertionError(f"{name}: before_generation did {report.outcome}")
    # (b, naive) measuring by building the canonical text (batched like (b)).
    for rep in range(cfg["text_reps"]):
        for name in rotated(names, rep):
            stack = cells[name]["engine"].index.game
            t0 = now_ns()
            for _ in range(batch):
                length = len(stack.text())
            samples.add("text:" + name, (now_ns() - t0) // batch)
            if length != stack.length:
                raise AssertionError("canonical length drifted")
    # (a) record_round, engine and naive interleaved.
    for rep in range(cfg["record_reps"]):
        i = rep % len(rounds_in)
        for name in rotated(names, rep):
            engine = cells[name]["engine"]
            t0 = now_ns()
            await engine.record_round(rounds_in[i], rounds_out[i])
            samples.add("record:" + name, now_ns() - t0)
            naive = cells[name]["naive"]
            if naive is not None and rep < cfg["naive_reps"]:
                t0 = now_ns()
                await naive.record_round(rounds_in[i], rounds_out[i])
                samples.add("naive:" + name, now_ns() - t0)
    return samples


def run(quick: bool = False, log: Any = print) -> dict[str, Any]:
    cfg = QUICK if quick else FULL
    cells: dict[str, dict[str, Any]] = {}
    skipped: list[dict[str, Any]] = []
    for stack in cfg["stacks"]:
        for mib in cfg["footprints_mib"]:
            target = int(mib * MiB)
            name = _cell_name(mib, stack)
            if not stack_feasible(target, stack):
                skipped.append(
                    {
                        "cell": name,
                        "reason": f"a {stack:,}-char stack needs its rounds in the store too "
                        f"(about {2.2 * stack / MiB:.2f} MiB)",
                    }
                )
                continue
            t0 = now_ns()
            built = build_store(target, stack)
            engine = GameEngine(built.store, FakeCompressor(), game_id="bench")
            naive = None
            if stack == cfg["naive_stack"]:
                naive_store = NaiveStore(built.store.image.values_bytes())
                naive = GameEngine(naive_store, FakeCompressor(), game_id="bench")
            cells[name] = {
                "mib": mib,
                "stack": stack,
                "engine": engine,
                "naive": naive,
                "built": {
                    "footprint": built.footprint,
                    "footprint_mib": round(built.footprint / MiB, 3),
                    "stack_length": built.stack_length,
                    "rounds": built.rounds,
                    "keys": built.keys,
                    "fill_compressions": built.compressions,
                    "build_s": round((now_ns() - t0) / 1e9, 2),
                },
            }
            log(f"  built {name}: {built.footprint / MiB:.3f} MiB, {built.keys} keys")
    gc.collect()
    samples = asyncio.run(_measure(cfg, cells))
    out_cells = []
    for name, cell in cells.items():
        out_cells.append(
            {
                "cell": name,
                "footprint_mib_target": cell["mib"],
                "stack_start": cell["stack"],
                **cell["built"],
                "footprint_after": cell["engine"].store.image.footprint(),
                "record_round": summarize(samples.get("record:" + name, [])),
                "before_generation": summarize(samples.get("gen:" + name, [])),
                "naive_record_round": summarize(samples.get("naive:" + name, [])),
                "naive_measure_text": summarize(samples.get("text:" + name, [])),
            }
        )
    by = {(c["footprint_mib_target"], c["stack_start"]): c for c in out_cells}
    smallest, largest = min(cfg["footprints_mib"]), max(cfg["footprints_mib"])
    ratios = []
    for stack in cfg["stacks"]:
        present = sorted(m for (m, s) in by if s == stack)
        if len(present) < 2:
            continue
        lo, hi = by[(present[0], stack)], by[(present[-1], stack)]
        ratios.append(
            {
                "stack": stack,
                "from_mib": present[0],
                "to_mib": present[-1],
                "record_round_ratio": ratio(
                    hi["record_round"]["median_us"], lo["record_round"]["median_us"]
                ),
                "before_generation_ratio": ratio(
                    hi["before_generation"]["median_us"], lo["before_generation"]["median_us"]
                ),
            }
        )
    # (b) across stack lengths at the largest footprint holding them all.
    stacks_at = {}
    for mib in cfg["footprints_mib"]:
        stacks_at[mib] = sorted(s for (m, s) in by if m == mib)
    naive_cells = [c for c in out_cells if c["naive_record_round"]["n"]]
    naive_ratio = []
    for c in naive_cells:
        naive_ratio.append(
            {
                "cell": c["cell"],
                "engine_us": c["record_round"]["median_us"],
                "naive_us": c["naive_record_round"]["median_us"],
                "naive_over_engine": ratio(
                    c["naive_record_round"]["median_us"], c["record_round"]["median_us"]
                ),
            }
        )
    strict = [r for r in ratios if r["from_mib"] == smallest and r["to_mib"] == largest]
    worst_record = max((r["record_round_ratio"] or 0 for r in strict), default=None)
    worst_gen = max((r["before_generation_ratio"] or 0 for r in ratios), default=None)
    gen_vs_stack = []
    for mib, stacks in stacks_at.items():
        if len(stacks) >= 2:
            lo, hi = by[(mib, stacks[0])], by[(mib, stacks[-1])]
            gen_vs_stack.append(
                {
                    "mib": mib,
                    "from_stack": stacks[0],
                    "to_stack": stacks[-1],
                    "before_generation_ratio": ratio(
                        hi["before_generation"]["median_us"], lo["before_generation"]["median_us"]
                    ),
                    "naive_text_ratio": ratio(
                        hi["naive_measure_text"]["median_us"],
                        lo["naive_measure_text"]["median_us"],
                    ),
                }
            )
    return {
        "config": {k: v for k, v in cfg.items()},
        "measured_round_chars": MEASURED_INPUT + MEASURED_OUTPUT,
        "cells": out_cells,
        "skipped": skipped,
        "ratios_largest_over_smallest": ratios,
        "before_generation_vs_stack": gen_vs_stack,
        "naive": naive_ratio,
        "goal": {
            "text": f"median at {largest:g} MiB within 1.25x of {smallest:g} MiB",
            "record_round_worst_ratio": worst_record,
            "before_generation_worst_ratio": worst_gen,
            "met": bool(
                worst_record is not None
                and worst_gen is not None
                and worst_record <= 1.25
                and worst_gen <= 1.25
            ),
        },
    }
