"""Many workers over many games on one PostgreSQL database, with kills and takeovers.

N forked worker processes (1, 2 and 4) share M games for a few seconds each. A worker takes
a random game (sometimes with `takeover=True`, fencing whoever had it), records a few rounds
and runs generations against the fake compress.v2 of `jfsm_conformance/fake/compress.py` (small
thresholds, so compressions happen; the fake's script mixes successes, refusals, 500s,
empty results and held replies that the test releases later), sometimes recording a round
while its compression is in flight. Every few hundred milliseconds the test kills a random
worker with SIGKILL and starts a new one.

Each worker appends to its own journal, with one unbuffered `write` per line: `try` before a
round, `ack` once `record_round` returned, `fenced` when the round was refused with
`store_fenced`. A torn last line (a kill mid-write) is dropped: it acknowledged nothing.

The checker then reads the database: every acknowledged round is in its game exactly once,
no round is anywhere twice, no round refused as fenced landed, every round's exchange is in
the game stack (exactly, or under the summary: seqs run without a gap from the summary's
`throughSeq` to the last one appended), and every game's recorded footprint equals a full
JCS recount of its rows.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpcore  # noqa: F401  (imported here, before the forks: it takes ~0.5 s)
import httpx
import psycopg
import pytest

from jfsm.engine import GameEngine
from jfsm.errors import JfsmError, StoreFenced, StoreLocked
from jfsm.image import StoreImage
from jfsm.jcs import canonical_bytes
from jfsm.layout import round_key
from jfsm.machines import MACHINE_NAMES, table
from jfsm.memory_index import MemoryIndex
from jfsm.stores.postgres.store import PostgresStore, migrate
from jfsm.transport import HttpCompressor
from jfsm_conformance.fake import compress as fc
from jfsm_conformance.model import replies

GAMES = 24
SECONDS = 4.0
THRESHOLDS = {"game": 1500, "catalyst": 1000}
PARTICIPANTS = [{"id": "p1", "human": True}]
for _name in MACHINE_NAMES:
    table(_name)  # loaded once, before the forks


class Journal:
    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, kind: str, game: str, text: str) -> None:
        os.write(self._fd, (json.dumps([kind, game, text]) + "\n").encode())


async def _play(conninfo: str, url: str, journal: Journal, deadline: float, wid: str) -> None:
    rng = random.Random(wid)
    # No TLS on loopback: skip loading CA certificates (slow in a freshly forked worker).
    client = httpx.AsyncClient(verify=False, timeout=5.0)
    compressor = HttpCompressor(url, client=client, backoff=0.01, max_backoff=0.05)
    counter = 0
    while time.monotonic() < deadline:
        game = f"load-{rng.randrange(GAMES)}"
        try:
            store = await PostgresStore.open(conninfo, game, takeover=rng.random() < 0.3)
        except StoreLocked:
            continue
        engine = GameEngine(
            store, compressor, game_id=game, participants=PARTICIPANTS, thresholds=THRESHOLDS
        )

        async def record(engine: GameEngine = engine, game: str = game) -> None:
            nonlocal counter
            counter += 1
            text = f"{wid}-{counter}"
            journal.write("try", game, text)
            try:
                await engine.record_round(text, "out " + "x" * rng.randrange(50, 400))
            except StoreFenced:
                journal.write("fenced", game, text)
                raise
            journal.write("ack", game, text)

        try:
            for _ in range(rng.randint(1, 8)):
                await record()
                if rng.random() < 0.4:
                    if rng.random() < 0.5:
                        await asyncio.gather(engine.before_generation(), record())
                    else:
                        await engine.before_generation()
        except JfsmError:
            pass  # fenced, unavailable, compression pending: drop this game for now
        finally:
            await engine.close()


def _worker(conninfo: str, url: str, journal: str, deadline: float) -> None:
    wid = f"w{os.getpid()}"
    asyncio.run(_play(conninfo, url, Journal(Path(journal)), deadline, wid))


def _read_journals(directory: Path) -> list[tuple[str, str, str]]:
    lines = []
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                kind, game, text = json.loads(line)
            except ValueError:
                continue  # torn by a kill: acknowledged nothing
            lines.append((kind, game, text))
    return lines


def _check(conninfo: str, journal: list[tuple[str, str, str]]) -> dict[str, int]:
    acked = {(game, text) for kind, game, text in journal if kind == "ack"}
    fenced = {(game, text) for kind, game, text in journal if kind == "fenced"}
    tried = {(game, text) for kind, game, text in journal if kind == "try"}
    found: Counter[tuple[str, str]] = Counter()
    with psycopg.connect(conninfo) as conn:
        games = conn.execute("SELECT game_id, footprint FROM jfsm_game").fetchall()
        for game, footprint in games:
            values: dict[str, bytes] = {}
            base: dict[str, bytes] = {}
            rows = conn.execute(
                "SELECT key, value, base FROM jfsm_value WHERE game_id = %s", (game,)
            )
            for key, value, based in rows:
                if value is not None:
                    values[bytes(key).decode()] = bytes(value)
                if based is not None:
                    base[bytes(key).decode()] = bytes(based)
            image = StoreImage(values, base)
            recount = len(canonical_bytes(image.store_json())) + len(
                canonical_bytes(image.change_log())
            )
            assert footprint == recount, (game, footprint, recount)
            index = MemoryIndex(image)
            numbers = sorted(index.rounds)
            assert numbers == list(range(1, len(numbers) + 1)), (game, numbers)
            for n in numbers:
                found[(game, json.loads(values[round_key(n)])["input"])] += 1
            stack = index.game
            start = 0 if stack.summary is None else stack.summary.through_seq
            next_seq = stack.stack_meta().next_seq
            assert sorted(stack.chunks) == list(range(start + 1, next_seq)), game
            assert next_seq - 1 == len(numbers), (game, next_seq, len(numbers))
    duplicated = [key for key, count in found.items() if count > 1]
    lost = sorted(acked - set(found))
    landed_fenced = sorted(fenced & set(found))
    strangers = sorted(set(found) - tried)
    assert duplicated == [] and lost == [] and landed_fenced == [] and strangers == []
    return {
        "acked": len(acked),
        "landed": len(found),
        "fenced": len(fenced),
        "landed_unacked": len(set(found) - acked),
    }


@pytest.mark.slow
@pytest.mark.req("JF-STORE-011", "JF-STORE-012", "JF-STORE-013", "JF-STORE-014")
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_workers_over_games_lose_nothing(workers: int, fresh_database: Any, tmp_path: Path) -> None:
    conninfo = fresh_database()
    migrate(conninfo)
    ctx = multiprocessing.get_context("fork")
    rng = random.Random(workers)
    kills = 0
    with fc.FakeCompress(hold_timeout=2.0) as fake:
        fake.set_participants(PARTICIPANTS)
        deadline = time.monotonic() + SECONDS
        procs: list[Any] = []

        def spawn() -> None:
            journal = tmp_path / f"journal-{len(procs)}.jsonl"
            proc = ctx.Process(target=_worker, args=(conninfo, fake.url, str(journal), deadline))
            proc.start()
            procs.append(proc)

        for _ in range(workers):
            spawn()
        while time.monotonic() < deadline:
            fake.script(
                replies.success(),
                replies.refuse(),
                replies.success(),
                replies.http_status(500),
                replies.empty(),
                replies.hold(replies.success()),
            )
            time.sleep(rng.uniform(0.3, 0.7))
            fake.release()
            live = [p for p in procs if p.is_alive()]
            if live:
                victim = rng.choice(live)
                os.kill(victim.pid, signal.SIGKILL)
                victim.join()
                kills += 1
                spawn()
        fake.release()
        for proc in procs:
            proc.join(30)
            assert proc.exitcode in (0, -signal.SIGKILL), proc.exitcode
        assert fake.violations == []
    counts = _check(conninfo, _read_journals(tmp_path))
    print(f"workers={workers} kills={kills} {counts}")
    assert counts["acked"] > 0 and kills > 0
