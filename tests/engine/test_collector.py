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

import asyncio
import gc
import json
import subprocess
import sys
import textwrap
import threading
import weakref
from pathlib import Path
from typing import Any

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


IN_FLIGHT = textwrap.dedent(
    """
    import asyncio, gc, json, os, sys, tempfile, threading

    from jfsm.engine import GameEngine
    from jfsm.stores.file.fsio import OsFileSystem
    from jfsm.stores.file.store import FileStore
    from jfsm.testing import FakeCompressor

    release = threading.Event()
    held = []

    class Held(OsFileSystem):
        def fdatasync(self, handle):
            if holding:
                held.append(handle)
                release.wait(60)
            super().fdatasync(handle)

    holding = False

    async def main(root):
        global holding
        games = 40
        compressor = FakeCompressor()
        stores = [
            await FileStore.open(os.path.join(root, f"g{i}"), fs=Held()) for i in range(games)
        ]
        engines = [GameEngine(s, compressor, game_id=f"g{i}") for i, s in enumerate(stores)]
        for engine in engines:
            await engine.record_round("warm", "up")
        gc.collect()
        at_rest = len(gc.get_objects())
        holding = True
        rounds = [asyncio.create_task(e.record_round("move", "text " * 20)) for e in engines]
        for _ in range(500):  # until every round waits for its write (threads or queue)
            await asyncio.sleep(0.01)
            if all(e.memory.lock.locked() for e in engines) and held:
                break
        await asyncio.sleep(0.05)
        gc.collect()
        in_flight = len(gc.get_objects())
        holding = False
        release.set()
        await asyncio.gather(*rounds)
        for engine in engines:
            await engine.close()
        return {"per_game": (in_flight - at_rest - len(rounds)) / games, "held": len(held)}

    print(json.dumps(asyncio.run(main(tempfile.mkdtemp()))))
    """
)

#: Tracked objects a round in flight keeps while its write waits (35 today: the call chain's
#: coroutines, the round's records and projection, one future; an executor future wrapped in
#: an asyncio future and shielded was 68).
PER_ROUND_IN_FLIGHT = 48


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


@pytest.mark.req("JF-CONC-005")
def test_a_round_in_flight_keeps_few_tracked_objects() -> None:
    """While 40 games' writes wait (held in `fdatasync`, in the stores' threads or queued for
    them), each round in flight keeps a bounded number of objects: the collector walks all of
    them at every collection, so at 512 games they are its pause."""
    done = subprocess.run(
        [sys.executable, "-c", IN_FLIGHT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["held"] >= 1, counts  # the writes did wait
    assert 0 < counts["per_game"] <= PER_ROUND_IN_FLIGHT, counts


@pytest.mark.req("JF-CONC-005")
def test_a_store_thread_is_free_and_holds_nothing_once_it_hands_a_result_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store thread counts itself idle, and drops the work's function, arguments and result,
    before it hands the result back (R240). The thread is held right after it hands back a
    `Result` (the loop's `call_soon_threadsafe` waits there) while the awaiting task goes on:
    its dropped result is collected at once, and its next call is taken by the same thread
    once released, so calls made one after the other never start a second one (CI's stop 43
    counted 20 more tracked objects over 200 rounds: threads started while the first was
    still handing back)."""
    from jfsm.stores import offload

    monkeypatch.setattr(offload, "_threads", offload._Threads(4))
    main = threading.get_ident()
    looked: list[threading.Event] = []

    class Result:
        pass

    class HeldHandBack(asyncio.SelectorEventLoop):
        def call_soon_threadsafe(self, callback: Any, *args: Any, **kwargs: Any) -> Any:
            parts = [x for a in args for x in (a if isinstance(a, list) else [a])]
            hold = threading.get_ident() != main and any(isinstance(x, Result) for x in parts)
            del parts  # this frame keeps only what the caller passed
            handle = super().call_soon_threadsafe(callback, *args, **kwargs)
            if hold:
                looked[-1].wait(10)  # held until the task has looked
            return handle

    async def scenario() -> list[bool]:
        alive = []
        for _ in range(5):
            looked.append(threading.Event())
            result = await offload.run_blocking(Result)
            ref = weakref.ref(result)
            del result
            await asyncio.sleep(0)  # the loop drops the handle that woke this task
            gc.collect()
            alive.append(ref() is not None)
            after = asyncio.ensure_future(offload.run_blocking(int))
            await asyncio.sleep(0)  # submitted while the thread is still held
            looked[-1].set()
            await after
        return alive

    loop = HeldHandBack()
    try:
        assert loop.run_until_complete(scenario()) == [False] * 5  # nothing kept by the thread
    finally:
        for event in looked:
            event.set()
        loop.close()
    assert offload._threads.started == 1  # one thread served every call
