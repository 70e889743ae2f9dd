"""Deterministic workload data: texts, game-data values, and stores filled to a footprint.

Stores are filled the way a game fills them: ordinary game-data keys through
`GameEngine.write`, canonical rounds through `GameEngine.record_round` with a compression
check before every generation (so the game stack is compressed whenever it passes the
spec threshold), periodic checkpoints. The game stack is then shaped to an exact canonical
length with one scripted compression (summary of a chosen size) and a few exact chunks.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from jfsm.engine import GameEngine
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor

__all__ = [
    "BuiltStore",
    "MiB",
    "Text",
    "build_store",
    "game_value",
    "stack_feasible",
]

MiB = 1024 * 1024
ROUND_INPUT = 200  # code points of a filler round's player input
ROUND_OUTPUT = 1_800  # code points of a filler round's simulator output
EXCHANGE_ENVELOPE = 42
SUMMARY_ENVELOPE = 22

_PROSE = (
    "the river keeps its banks while the old guard marches north past the mill "
    "Élodie reads the treaty aloud naïve envoys argue über tariffs 漢字 かな "
    "a storm 🌩 gathers over the harbour and the council votes again "
    'quotes "like this" and back\\slashes and tabs\tappear sometimes'
)
_WORDS = _PROSE.split(" ")


class Text:
    """Deterministic pseudo-prose of exact code-point lengths (mixed ASCII and not)."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        words = [rng.choice(_WORDS) for _ in range(40_000)]
        self._corpus = " ".join(words)
        self._rng = rng

    def __call__(self, n: int) -> str:
        if n <= 0:
            return ""
        start = self._rng.randrange(0, len(self._corpus) - 1)
        out = self._corpus[start : start + n]
        while len(out) < n:
            out += " " + self._corpus[: n - len(out) - 1]
        return out[:n]


def game_value(text: Text, rng: random.Random, size: int) -> dict[str, Any]:
    """An ordinary game-data value of about `size` bytes: nested, with ints and floats."""
    return {
        "kind": rng.choice(["npc", "faction", "city", "item", "quest"]),
        "name": text(rng.randint(8, 24)),
        "hp": rng.randint(0, 500),
        "pos": [round(rng.uniform(-1000, 1000), 3), round(rng.uniform(-1000, 1000), 3)],
        "flags": {"alive": rng.random() < 0.9, "visited": rng.random() < 0.5},
        "tags": [text(6) for _ in range(rng.randint(0, 4))],
        "notes": text(max(1, size - 200)),
    }


def shape_tail(chars: int) -> list[tuple[int, int]]:
    """(input, output) code-point sizes of exact chunks whose canonical cost is `chars`."""
    full = EXCHANGE_ENVELOPE + ROUND_INPUT + ROUND_OUTPUT
    out = []
    while chars >= full + EXCHANGE_ENVELOPE + 100:
        out.append((ROUND_INPUT, ROUND_OUTPUT))
        chars -= full
    if chars < EXCHANGE_ENVELOPE + 2:
        raise ValueError("stack too short to shape")
    out.append((1, chars - EXCHANGE_ENVELOPE - 1))
    return out


def stack_feasible(footprint: int, stack: int) -> bool:
    """Whether a store of `footprint` bytes can hold a game stack of `stack` code points.

    Shaping a stack of L code points needs rounds holding at least L code points (the
    rounds stay in the store) plus the summary itself: about 2.2 L bytes and some slack.
    """
    return footprint >= 2.2 * stack + 16 * 1024


@dataclass
class BuiltStore:
    store: MemoryStore
    footprint: int
    stack_length: int
    rounds: int
    keys: int
    compressions: int


async def _fill_rounds(engine: GameEngine, text: Text, n: int) -> None:
    for _ in range(n):
        await engine.record_round(text(ROUND_INPUT), text(ROUND_OUTPUT))
        await engine.before_generation()


def build_store(target_footprint: int, stack_length: int, seed: int = 1) -> BuiltStore:
    """A checkpointed memory store of about `target_footprint` bytes whose game stack has
    canonical length exactly `stack_length` (a summary plus exact chunks)."""
    return asyncio.run(_build(target_footprint, stack_length, seed))


async def _build(target: int, stack_length: int, seed: int) -> BuiltStore:
    if not stack_feasible(target, stack_length):
        raise ValueError(f"a {target}-byte store cannot hold a {stack_length}-char stack")
    rng = random.Random(seed)
    text = Text(seed)
    store = MemoryStore()
    fake = FakeCompressor()
    fill = GameEngine(store, fake, game_id="bench")
    round_bytes = 2 * (ROUND_INPUT + ROUND_OUTPUT) + 120  # round record + its chunk, roughly
    # The shaped stack, like a live game's: a summary of a tenth of it, then exact chunks
    # of filler rounds, the last one sized to land on `stack_length` exactly.
    summary_chars = max(stack_length // 10, 100)
    tail = shape_tail(stack_length - SUMMARY_ENVELOPE - summary_chars)
    # Rounds: about 40 % of the footprint, with a compression check before every generation.
    rounds = max(int(0.4 * target) // round_bytes, 2)
    await _fill_rounds(fill, text, rounds)
    await fill.checkpoint()
    # Shape: exceed the wanted summary size with exact chunks, then compress once with a
    # scripted summary of exactly `summary_chars` (an engine with a threshold of 1 is due
    # whenever its stack holds a chunk).
    shaper = GameEngine(store, fake, game_id="bench", thresholds={"game": 1})
    while shaper.index.game.length <= summary_chars + 1 or not shaper.index.game.chunks:
        await shaper.record_round(text(ROUND_INPUT), text(ROUND_OUTPUT))
        rounds += 1
    fake.queue({"reply": "success", "summary": "s" * summary_chars})
    report = await shaper.before_generation()
    if report.outcome != "published":
        raise RuntimeError(f"shaping compression failed: {report}")
    for user, assistant in tail:
        await shaper.record_round(text(user), text(assistant))
        rounds += 1
    await shaper.checkpoint()
    if shaper.index.game.length != stack_length:
        raise AssertionError(f"stack {shaper.index.game.length} != {stack_length}")
    # Game data up to the target footprint, checkpointing as a game would.
    n = 0
    while True:
        room = target - store.image.footprint()
        if room < 600:
            break
        batch = {}
        for _ in range(100):
            size = rng.randint(1024, 4096)
            if size + 64 > room:
                size = max(room - 120, 300)
            batch[f"world.{n:06d}"] = game_value(text, rng, size)
            n += 1
            room -= size + 40
            if room < 600:
                break
        await shaper.write(batch)
        await shaper.checkpoint()
    return BuiltStore(
        store=store,
        footprint=store.image.footprint(),
        stack_length=shaper.index.game.length,
        rounds=rounds,
        keys=len(store.image),
        compressions=fake.calls,
    )
