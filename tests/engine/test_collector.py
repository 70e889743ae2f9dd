"""What the garbage collector walks for each open game (issue 32, decision R150).

A full collection of CPython's collector walks every tracked object, so its pause grows
with the objects the open games keep alive: 512 games of 668 tracked objects each (most of
them a `transitions` machine built per instance) paused the event loop for about 150 ms.
Judged by counting, never by the clock: a child process (a clean heap, no test runner's
threads) counts `gc.get_objects()` after `gc.collect()` around opening engines and around
recording rounds. An engine must add a bounded number of tracked objects, and a round none
that outlives the next collection (an exact chunk is kept as a plain tuple of strings, which
the collector stops tracking; the round numbers as the keys of a dict, which it never
tracks).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import asyncio, gc, json, os, sys, tempfile

    from jfsm.engine import GameEngine
    from jfsm.stores.file.store import FileStore
    from jfsm.stores.memory import MemoryStore
    from jfsm.testing import FakeCompressor

    def tracked():
        gc.collect()
        return len(gc.get_objects())

    async def main(kind, root):
        compressor = FakeCompressor()

        async def store(i):
            if kind == "file":
                return await FileStore.open(os.path.join(root, f"g{i}"))
            return MemoryStore()

        first = GameEngine(await store(0), compressor, game_id="g0")
        await first.record_round("warm", "up")  # first-use caches off the count
        before_open = tracked()
        stores = [await store(i) for i in range(1, 41)]
        engines = [GameEngine(s, compressor, game_id=f"g{i + 1}") for i, s in enumerate(stores)]
        for engine in engines:
            await engine.record_round("warm", "up")
        after_open = tracked()
        for n in range(200):
            await first.record_round(f"move {n}", "the river keeps its course " * 4)
        after_rounds = tracked()
        chunks = len(first.index.game.chunks)
        for engine in [first, *engines]:
            await engine.close()
        return {
            "per_engine": (after_open - before_open) / len(engines),
            "per_round": (after_rounds - after_open) / 200,
            "chunks": chunks,
        }

    print(json.dumps(asyncio.run(main(sys.argv[1], tempfile.mkdtemp()))))
    """
)

#: Tracked objects an open game may keep (30 over a memory store, 35 over a file store today:
#: the engine, its memory, index, stores,
#: locks, two machines and their handlers, looked up by name; a machine built per instance was
#: about 330 each).
PER_ENGINE = 80


def _count(kind: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return counts


@pytest.mark.req("JF-CONC-005")
@pytest.mark.parametrize("kind", ["memory", "file"])
def test_an_open_game_keeps_few_tracked_objects_and_a_round_adds_none(kind: str) -> None:
    counts = _count(kind)
    assert counts["chunks"] >= 200, counts  # the rounds stayed exact chunks (no compression)
    assert counts["per_engine"] <= PER_ENGINE, counts
    # a record kept per exact chunk would be 2 objects a round; transients die young
    assert counts["per_round"] < 0.1, counts
