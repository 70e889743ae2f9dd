"""An index of a store's agent memory, kept up to date in O(change).

The engine reads stacks, rounds and archives through this index instead of scanning the
store. It is built once from a `StoreImage` (O(store)) and then told about every key a
committed projection touched (`observe`), so the canonical length of each stack is known
in O(1) after every change, as decision D3 promises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jfsm.image import StoreImage
from jfsm.layout import ARCHIVES, GAME, StackKeys, scene_keys
from jfsm.records import (
    ArchiveRecord,
    Chunk,
    Round,
    SceneMeta,
    StackMeta,
    Summary,
    parse_record,
)
from jfsm.text import canonical_text, exchange_cost, summary_cost

__all__ = ["MemoryIndex", "StackState"]

_SCENE_PREFIX = "jfCatalystStack."
_ROUND_PREFIX = "jfRounds."


@dataclass
class StackState:
    """One stack as the index sees it: meta, summary, exact chunks and canonical length."""

    keys: StackKeys
    meta: dict[str, Any] | None = None
    summary: Summary | None = None
    chunks: dict[int, Chunk] = field(default_factory=dict)
    length: int = 0

    def observe(self, key: str, value: Any) -> None:
        """Account for `key` now holding `value` (None: deleted)."""
        if key == self.keys.meta:
            self.meta = value
        elif key == self.keys.summary:
            if self.summary is not None:
                self.length -= summary_cost(self.summary.text)
            self.summary = None if value is None else parse_record(Summary, value)
            if self.summary is not None:
                self.length += summary_cost(self.summary.text)
        elif key.startswith(self.keys.chunk_prefix):
            seq = int(key[len(self.keys.chunk_prefix) :])
            old = self.chunks.pop(seq, None)
            if old is not None:
                self.length -= exchange_cost(old.user, old.assistant)
            if value is not None:
                chunk = parse_record(Chunk, value)
                self.chunks[seq] = chunk
                self.length += exchange_cost(chunk.user, chunk.assistant)

    def ordered(self) -> list[Chunk]:
        """Exact chunks in seq order."""
        return [self.chunks[seq] for seq in sorted(self.chunks)]

    def text(self) -> str:
        """The canonical text (what is measured and what would be submitted)."""
        return canonical_text(
            None if self.summary is None else self.summary.text,
            ((c.user, c.assistant) for c in self.ordered()),
        )

    def stack_meta(self) -> StackMeta:
        """The game stack's meta record (defaults when absent)."""
        return StackMeta() if self.meta is None else parse_record(StackMeta, self.meta)

    def scene_meta(self) -> SceneMeta | None:
        """A scene stack's meta record, or None when the scene has no stack."""
        return None if self.meta is None else parse_record(SceneMeta, self.meta)

    def all_keys(self) -> list[str]:
        """Every store key of this stack that exists now."""
        out = [self.keys.chunk(seq) for seq in self.chunks]
        if self.summary is not None:
            out.append(self.keys.summary)
        if self.meta is not None:
            out.append(self.keys.meta)
        return out


class MemoryIndex:
    """Game stack, scene stacks, rounds and archives of one store."""

    def __init__(self, image: StoreImage) -> None:
        self.game = StackState(GAME)
        self.scenes: dict[str, StackState] = {}
        self.rounds: dict[int, Round] = {}
        self.last_round = 0
        self.archives: dict[str, ArchiveRecord] = {}
        for key in list(image.keys()):
            self.observe(key, image.raw(key))

    def observe(self, key: str, raw: bytes | None) -> None:
        """Account for one key a committed projection set (`raw` JCS bytes) or deleted.

        Game-data keys (not starting with `jf`) are ignored without being decoded.
        """
        if not key.startswith("jf"):
            return
        value = None if raw is None else json.loads(raw)
        if GAME.owns(key):
            self.game.observe(key, value)
        elif key.startswith(_SCENE_PREFIX):
            scene_id = key[len(_SCENE_PREFIX) :].split(".", 1)[0]
            stack = self.scenes.get(scene_id)
            if stack is None:
                stack = self.scenes[scene_id] = StackState(scene_keys(scene_id))
            stack.observe(key, value)
            if stack.meta is None and not stack.chunks and stack.summary is None:
                del self.scenes[scene_id]
        elif key.startswith(_ROUND_PREFIX):
            n = int(key[len(_ROUND_PREFIX) :])
            if value is None:
                self.rounds.pop(n, None)
                if n == self.last_round:  # only a reset deletes rounds: O(rounds) there
                    self.last_round = max(self.rounds, default=0)
            else:
                self.rounds[n] = parse_record(Round, value)
                self.last_round = max(self.last_round, n)
        elif key == ARCHIVES:
            records = value or {}
            self.archives = {
                scene: parse_record(ArchiveRecord, record) for scene, record in records.items()
            }

    def stack(self, scene_id: str | None) -> StackState | None:
        """The game stack (`scene_id` None) or a scene's stack if it exists."""
        return self.game if scene_id is None else self.scenes.get(scene_id)

    def archives_json(self) -> dict[str, Any]:
        """The archives object as stored."""
        return {scene: record.to_json() for scene, record in self.archives.items()}
