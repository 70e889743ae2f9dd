"""An index of a store's agent memory, kept up to date in O(change).

The engine reads stacks, round numbers and archives through this index instead of scanning
the store. It is built once from a `StoreImage` (O(store): each stack key is decoded and
parsed once) and then told, for every key a committed projection touched, the *record* it
now holds (`learn`), so nothing the engine has just encoded is decoded again (decision
R34). The canonical length of each stack is known in O(1) after every change (D3).

Canonical rounds are counted, not held: their texts stay in the store (as JCS bytes) and
are read back only by a rebuild (`GameMemory.rounds`), so the index costs memory in
proportion to the stacks, not to the game's history. A malformed stack record raises
`InvalidInput` while the index is built.

What the index keeps long is plain data the garbage collector stops tracking (decision
R150): an exact chunk is a tuple of strings (`ChunkTexts`), not its record (a record is two
tracked objects, walked by every full collection for as long as the chunk stays exact), and
the round numbers are the keys of a dict of `None` (a set is always tracked, and walked
entry by entry). So a collection's work for a game does not grow with its history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jfsm.image import StoreImage
from jfsm.layout import ARCHIVES, GAME, StackKeys, scene_keys
from jfsm.records import (
    ArchiveRecord,
    Chunk,
    Record,
    SceneMeta,
    StackMeta,
    Summary,
    parse_record,
)
from jfsm.text import canonical_text, exchange_cost, summary_cost

__all__ = ["ChunkTexts", "MemoryIndex", "StackState", "Stored"]

_SCENE_PREFIX = "jfCatalystStack."
_ROUND_PREFIX = "jfRounds."

#: What a key of agent memory holds once committed: a record, the archives, or nothing.
Stored = Record | Mapping[str, ArchiveRecord] | None

#: What the index keeps of an exact chunk: `(user, assistant, origin)`.
ChunkTexts = tuple[str, str, str]


@dataclass
class StackState:
    """One stack as the index sees it: meta, summary, exact chunks and canonical length.

    `meta` is the game stack's `StackMeta` or a scene stack's `SceneMeta` (None while the
    key is absent).
    """

    keys: StackKeys
    meta: StackMeta | SceneMeta | None = None
    summary: Summary | None = None
    chunks: dict[int, ChunkTexts] = field(default_factory=dict)
    length: int = 0

    @property
    def is_game(self) -> bool:
        """Whether this is the game stack (else a scene's)."""
        return self.keys == GAME

    @property
    def epoch(self) -> int:
        """The stack's epoch (0 while it has no meta)."""
        return 0 if self.meta is None else self.meta.epoch

    def learn(self, key: str, record: Stored) -> None:
        """Account for `key` now holding `record` (None: deleted)."""
        if key == self.keys.meta:
            assert record is None or isinstance(record, (StackMeta, SceneMeta))
            self.meta = record
        elif key == self.keys.summary:
            assert record is None or isinstance(record, Summary)
            if self.summary is not None:
                self.length -= summary_cost(self.summary.text)
            self.summary = record
            if record is not None:
                self.length += summary_cost(record.text)
        elif key.startswith(self.keys.chunk_prefix):
            assert record is None or isinstance(record, Chunk)
            seq = int(key[len(self.keys.chunk_prefix) :])
            old = self.chunks.pop(seq, None)
            if old is not None:
                self.length -= exchange_cost(old[0], old[1])
            if record is not None:
                self.chunks[seq] = (record.user, record.assistant, record.origin)
                self.length += exchange_cost(record.user, record.assistant)

    def parse(self, key: str, value: Any) -> Record:
        """The record a decoded stored value of `key` is (`InvalidInput` if malformed)."""
        if key == self.keys.meta:
            return parse_record(StackMeta if self.is_game else SceneMeta, value)
        if key == self.keys.summary:
            return parse_record(Summary, value)
        return parse_record(Chunk, value)

    def chunk(self, seq: int) -> Chunk:
        """Exact chunk `seq` as its record (`KeyError` if the stack has no such chunk)."""
        user, assistant, origin = self.chunks[seq]
        return Chunk.trusted(seq=seq, user=user, assistant=assistant, origin=origin)

    def ordered(self) -> list[Chunk]:
        """Exact chunks in seq order, as records."""
        return [self.chunk(seq) for seq in sorted(self.chunks)]

    def intervened_after(self, seq: int) -> bool:
        """Whether an exact chunk after `seq` came from an intervene."""
        return any(n > seq and c[2] == "intervene" for n, c in self.chunks.items())

    def text(self) -> str:
        """The canonical text (what is measured and what would be submitted)."""
        chunks = self.chunks
        return canonical_text(
            None if self.summary is None else self.summary.text,
            (chunks[seq][:2] for seq in sorted(chunks)),
        )

    def current_meta(self) -> StackMeta | SceneMeta:
        """The meta record, or the defaults of the stack's kind when absent."""
        if self.meta is not None:
            return self.meta
        return StackMeta() if self.is_game else SceneMeta()

    def stack_meta(self) -> StackMeta:
        """The game stack's meta record (defaults when absent)."""
        meta = self.current_meta()
        assert isinstance(meta, StackMeta), "stack_meta() of a scene stack"
        return meta

    def scene_meta(self) -> SceneMeta | None:
        """A scene stack's meta record, or None when the scene has no stack."""
        assert self.meta is None or isinstance(self.meta, SceneMeta)
        return self.meta

    def all_keys(self) -> list[str]:
        """Every store key of this stack that exists now."""
        out = [self.keys.chunk(seq) for seq in self.chunks]
        if self.summary is not None:
            out.append(self.keys.summary)
        if self.meta is not None:
            out.append(self.keys.meta)
        return out


class MemoryIndex:
    """Game stack, scene stacks, round numbers and archives of one store."""

    def __init__(self, image: StoreImage) -> None:
        self.game = StackState(GAME)
        self.scenes: dict[str, StackState] = {}
        #: The canonical round numbers: the keys of a dict of None (an ordered set that the
        #: garbage collector does not track, see the module docstring).
        self.rounds: dict[int, None] = {}
        self.last_round = 0
        self.archives: dict[str, ArchiveRecord] = {}
        for key in list(image.keys()):
            self.observe(key, image.raw(key))

    def observe(self, key: str, raw: bytes | None) -> None:
        """Account for one key set to `raw` JCS bytes (or deleted), decoding it.

        Used to build the index and for keys set by a plain projection; game-data keys
        (not starting with `jf`) and round records are never decoded.
        """
        if not key.startswith("jf"):
            return
        if raw is None or key.startswith(_ROUND_PREFIX):
            self._learn(key, None if raw is None else _PRESENT)
            return
        value = json.loads(raw)
        if key == ARCHIVES:
            records = {s: parse_record(ArchiveRecord, r) for s, r in (value or {}).items()}
            self._learn(key, records)
        else:
            stack = self._stack_for(key)
            if stack is not None:
                self._learn(key, stack.parse(key, value))

    def learn(self, key: str, record: Stored) -> None:
        """Account for one key a committed projection set to `record` (None: deleted)."""
        if key.startswith("jf"):
            self._learn(key, record)

    def _stack_for(self, key: str) -> StackState | None:
        if GAME.owns(key):
            return self.game
        if key.startswith(_SCENE_PREFIX):
            scene_id = key[len(_SCENE_PREFIX) :].split(".", 1)[0]
            return self.scenes.get(scene_id) or StackState(scene_keys(scene_id))
        return None

    def _learn(self, key: str, record: Stored | object) -> None:
        if GAME.owns(key):
            self.game.learn(key, record)  # type: ignore[arg-type]
        elif key.startswith(_SCENE_PREFIX):
            scene_id = key[len(_SCENE_PREFIX) :].split(".", 1)[0]
            stack = self.scenes.get(scene_id)
            if stack is None:
                stack = self.scenes[scene_id] = StackState(scene_keys(scene_id))
            stack.learn(key, record)  # type: ignore[arg-type]
            if stack.meta is None and not stack.chunks and stack.summary is None:
                del self.scenes[scene_id]
        elif key.startswith(_ROUND_PREFIX):
            n = int(key[len(_ROUND_PREFIX) :])
            if record is None:
                self.rounds.pop(n, None)
                if n == self.last_round:  # only a reset deletes rounds: O(rounds) there
                    self.last_round = max(self.rounds, default=0)
            else:
                self.rounds[n] = None
                self.last_round = max(self.last_round, n)
        elif key == ARCHIVES:
            assert record is None or isinstance(record, Mapping)
            self.archives = dict(record or {})

    def stack(self, scene_id: str | None) -> StackState | None:
        """The game stack (`scene_id` None) or a scene's stack if it exists."""
        return self.game if scene_id is None else self.scenes.get(scene_id)


_PRESENT = object()  # a round key that holds a record (rounds are counted, not parsed)
