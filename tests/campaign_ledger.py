"""What the fault campaigns on PostgreSQL share: a `jfsm driver` process spoken to over stdio,
the ledger of every round they sent, and the audit of a database against that ledger.

`Driver` starts `jfsm driver --owner ID --store URL` in a session of its own and matches
replies to requests by id; `kill` is `kill -9` of its process group.

`Ledger` records each `record_round` a campaign sends (each text unique) and how it ended:
- acknowledged (`ok`, with the round number the reply gave),
- refused (`store_fenced`, `store_locked`, `store_history_lost`, `invalid_input`, ...: the
  store says nothing of it was written),
- unknown (`store_unavailable`, no reply because the driver was killed, or any other error:
  it may or may not have landed),
the removals of a game id the campaign itself made (an acknowledged round of a removed
game is gone on purpose), and the games it filled with `duplicate` (their first rounds were
sent to another game).

`audit(target, ledger)` reads every game at the end and counts:
- `lost`: an acknowledged round that is not in its game, with its text, at the round
  number its reply gave (unless the campaign removed that game after the acknowledgement);
- `double_owners`: two acknowledgements of one (game, life of the id, round number) with
  different texts (an acknowledgement answered while a removal of its game ran is left out:
  which life it hit is unknown);
- `fenced_landed`: a round the store refused (`store_fenced`, `store_locked`) whose text is
  in the database all the same;
- `footprint_mismatches`: a game whose stored rounds the ledger cannot explain (a text never
  sent to it, or refused), whose rounds are not numbered 1..n, whose recorded footprint
  (`jfsm_game.footprint`) differs from its rows' recount, or whose store differs from the
  one its ledger produces: the reference engine over a memory store, given the same rounds
  in the same order (every round the database holds was acknowledged or of unknown outcome).
  A game filled by `duplicate` is held to its recount only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from jfsm.engine import GameEngine
from jfsm.errors import JfsmError
from jfsm.layout import round_key
from jfsm.stores.memory import MemoryStore
from jfsm.stores.postgres.schema import connect
from jfsm.stores.postgres.store import read_image
from jfsm.testing import FakeCompressor

DRIVER = [sys.executable, "-c", "import sys; from jfsm.cli import main; sys.exit(main())"]
# refusals that wrote nothing (store_history_lost: a database that lost acknowledged writes,
# JF-STORE-062)
REFUSED = ("store_fenced", "store_locked", "invalid_input", "quota_exceeded", "store_history_lost")


class Driver:
    """One `jfsm driver --store URL` process on stdio; replies matched to requests by id."""

    def __init__(self, name: str, target: str, fake_url: str, env: dict[str, str]) -> None:
        self.name, self.target, self.fake_url, self.env = name, target, fake_url, env
        self.proc: asyncio.subprocess.Process | None = None
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.next_id = 0
        self.reader: asyncio.Task[None] | None = None
        self.generation = 0

    async def start(self, owner: str) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *DRIVER,
            "driver",
            "--owner",
            owner,
            "--store",
            self.target,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
        )
        self.generation += 1
        self.reader = asyncio.get_running_loop().create_task(self._read(self.proc))
        reply = await self.call("hello", protocol=1, compressUrl=self.fake_url)
        assert reply["ok"], reply

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            reply = json.loads(line)
            future = self.waiting.pop(reply.get("id"), None)
            if future is not None and not future.done():
                future.set_result(reply)
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("driver gone"))
        self.waiting.clear()

    def send(self, op: str, **args: Any) -> asyncio.Future[dict[str, Any]]:
        assert self.proc is not None and self.proc.stdin is not None
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        message = {"id": self.next_id, "op": op, "args": args}
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        return future

    async def call(self, op: str, timeout: float = 120, **args: Any) -> dict[str, Any]:
        return await asyncio.wait_for(self.send(op, **args), timeout)

    async def kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        if self.reader is not None:
            await self.reader

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            await self.kill()


@dataclass
class Write:
    """One `record_round` sent: its game, text, when, and how it ended."""

    game: str
    text: str
    sent: float
    outcome: str = "pending"  # ok | refused | unknown
    code: str = ""  # the error code of a refusal or an unknown outcome
    round: int | None = None
    answered: float | None = None


@dataclass
class Ledger:
    """Every round a campaign sent and how each ended (see the module docstring)."""

    writes: list[Write] = field(default_factory=list)
    removed: dict[str, list[float]] = field(default_factory=dict)
    copied: dict[str, list[float]] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)  # why a game failed the audit
    _removal_starts: dict[str, list[float]] = field(default_factory=dict)
    _texts: int = 0

    def text(self, prefix: str) -> str:
        self._texts += 1
        return f"{prefix}-{self._texts}"

    def sent(self, game: str, text: str) -> Write:
        write = Write(game, text, time.monotonic())
        self.writes.append(write)
        return write

    def answer(self, write: Write, reply: dict[str, Any] | None) -> None:
        """Record `reply` (None: no reply, the driver died) as `write`'s outcome."""
        write.answered = time.monotonic()
        if reply is not None and reply.get("ok"):
            write.outcome, write.round = "ok", int(reply["result"]["round"])
            return
        code = "" if reply is None else str(reply.get("error", {}).get("code", ""))
        write.code = code or "no reply"
        write.outcome = "refused" if code in REFUSED else "unknown"

    def remove(self, game: str, started: float) -> None:
        """The campaign removed `game` by a call started at `started` and ending now."""
        self.removed.setdefault(game, []).append(time.monotonic())
        self._removal_starts.setdefault(game, []).append(started)

    def copy(self, into: str) -> None:
        """A `duplicate` into game `into` ended now and may have made the game: answered
        ok, or with an error after it began, or without an answer (its driver died)."""
        self.copied.setdefault(into, []).append(time.monotonic())

    def is_copy(self, game: str) -> bool:
        """Whether the game's current life may have begun as a copy: a copy that ended after
        the last removal started (a removal and a copy that overlap count as a copy)."""
        last_removal = max(self._removal_starts.get(game, [0.0]))
        return any(t > last_removal for t in self.copied.get(game, []))

    def during_removal(self, write: Write) -> bool:
        """Whether `write` was answered while a removal of its game was running."""
        starts, ends = self._removal_starts.get(write.game, []), self.removed.get(write.game, [])
        spans = zip(starts, ends, strict=True)  # one start and one end a removal
        return any(start <= (write.answered or 0) <= end for start, end in spans)

    @property
    def acked(self) -> list[Write]:
        return [w for w in self.writes if w.outcome == "ok"]

    def ack_times(self) -> list[float]:
        return sorted(w.answered for w in self.acked if w.answered is not None)

    def epoch(self, write: Write) -> int:
        """Which life of its game id `write` hit (removals the campaign made before its
        answer)."""
        return sum(1 for t in self.removed.get(write.game, []) if t < (write.answered or 0))


def _replayed(game: str, texts: list[str]) -> Any:
    """The store image the reference engine makes of `texts` recorded as rounds, in order."""
    store = MemoryStore()

    async def replay() -> None:
        engine = GameEngine(store, FakeCompressor(), game_id=game)
        for text in texts:
            await engine.record_round(text, "o")

    asyncio.run(replay())
    return store.image


def audit(target: str, ledger: Ledger) -> dict[str, int]:
    """Check the database at `target` against `ledger` (see the module docstring)."""
    lost = double = fenced = mismatched = replayed = 0
    by_slot: dict[tuple[str, int, int], set[str]] = {}
    for write in ledger.acked:
        assert write.round is not None
        if ledger.during_removal(write):
            continue  # which life of the id it hit is unknown
        by_slot.setdefault((write.game, ledger.epoch(write), write.round), set()).add(write.text)
    for slot, texts in by_slot.items():
        if len(texts) > 1:
            double += 1
            ledger.mismatches.append(f"double owners of {slot}: {sorted(texts)}")
    images: dict[str, Any] = {}
    for game in sorted({w.game for w in ledger.writes}):
        with contextlib.suppress(JfsmError):  # a game removed and never made again
            images[game] = read_image(target, game)
    for write in ledger.acked:
        if any(t > (write.answered or 0) for t in ledger.removed.get(write.game, [])):
            continue  # removed after the acknowledgement, by the campaign itself
        image = images.get(write.game)
        stored = None if image is None else image.get(round_key(write.round or 0))
        if not isinstance(stored, dict) or stored.get("input") != write.text:
            lost += 1
    sent_to = {(w.game, w.text): w for w in ledger.writes}
    recorded = _recorded_footprints(target, list(images))
    for game, image in images.items():
        texts: list[str] = []
        n = 1
        while isinstance(stored := image.get(round_key(n)), dict):
            texts.append(str(stored.get("input")))
            n += 1
        names = image.keys()
        extra = [name for name in names if name.startswith("jfRounds.")][len(texts) :]
        explained = True
        for text in texts:
            write = sent_to.get((game, text))
            if write is not None and write.outcome == "refused":
                fenced += 1
            if write is None or write.outcome == "refused":
                explained = False
        if recorded.get(game) != image.footprint():
            mismatched += 1
            ledger.mismatches.append(
                f"{game}: footprint recorded {recorded.get(game)}, recounted {image.footprint()}"
            )
        elif ledger.is_copy(game):
            continue
        else:
            replayed += 1
            ledgers = _replayed(game, texts).values_bytes()
            if extra or not explained or ledgers != image.values_bytes():
                mismatched += 1
                stored = image.values_bytes()
                differ = sorted(k for k in {*ledgers, *stored} if ledgers.get(k) != stored.get(k))
                strangers = [
                    (w.game, w.text, w.outcome, w.code)
                    for w in ledger.writes
                    if w.text in texts and (w.game != game or w.outcome == "refused")
                ]
                ledger.mismatches.append(
                    f"{game}: rounds {texts}, unexplained {strangers}, extra {extra}, "
                    f"keys unlike the ledger's store {differ[:6]}"
                )
    return {
        "acked": len(ledger.acked),
        "unknown": sum(1 for w in ledger.writes if w.outcome == "unknown"),
        "refused": sum(1 for w in ledger.writes if w.outcome == "refused"),
        "lost": lost,
        "double_owners": double,
        "fenced_landed": fenced,
        "footprint_mismatches": mismatched,
        "games_replayed": replayed,
    }


def _recorded_footprints(target: str, games: list[str]) -> dict[str, int]:
    conn = connect(target)
    try:
        rows = conn.execute(
            "SELECT game_id, footprint FROM jfsm_game WHERE game_id = ANY(%s)", (games,)
        ).fetchall()
    finally:
        conn.close()
    return {row[0]: int(row[1]) for row in rows}
