"""The store's key layout (decision D8).

```
jfGameStack.meta                     StackMeta
jfGameStack.summary                  Summary
jfGameStack.chunk.<seq>              Chunk
jfCatalystStack.<id>.meta            SceneMeta
jfCatalystStack.<id>.summary         Summary
jfCatalystStack.<id>.chunk.<seq>     Chunk
jfCatalystArchives                   {<id>: ArchiveRecord}
jfRounds.<n>                         Round
```

Every key starting with `jf` is reserved for the workflow; any other key is game data.
"""

from __future__ import annotations

from dataclasses import dataclass

from jfsm.limits import validate_id

__all__ = [
    "ARCHIVES",
    "GAME",
    "RESERVED_PREFIX",
    "StackKeys",
    "is_reserved",
    "round_key",
    "scene_keys",
    "validate_scene_id",
]

RESERVED_PREFIX = "jf"
ARCHIVES = "jfCatalystArchives"


@dataclass(frozen=True, slots=True)
class StackKeys:
    """Key names of one stack."""

    prefix: str

    @property
    def meta(self) -> str:
        return f"{self.prefix}.meta"

    @property
    def summary(self) -> str:
        return f"{self.prefix}.summary"

    @property
    def chunk_prefix(self) -> str:
        return f"{self.prefix}.chunk."

    def chunk(self, seq: int) -> str:
        return f"{self.prefix}.chunk.{seq}"

    def owns(self, key: str) -> bool:
        """Whether `key` belongs to this stack."""
        return key.startswith(self.prefix + ".")


GAME = StackKeys("jfGameStack")


def validate_scene_id(scene_id: object) -> str:
    """Return a valid scene id (the spec's `limits.id_pattern`: 1 to 64 of
    `A-Z a-z 0-9 _ -`) or raise `InvalidInput`."""
    return validate_id(scene_id, "scene id")


def scene_keys(scene_id: str) -> StackKeys:
    """Key names of a scene's stack."""
    return StackKeys(f"jfCatalystStack.{validate_scene_id(scene_id)}")


def round_key(n: int) -> str:
    """Key of canonical round `n`."""
    return f"jfRounds.{n}"


def is_reserved(key: str) -> bool:
    """Whether `key` is reserved for the workflow (ordinary writes and cheats are refused)."""
    return key.startswith(RESERVED_PREFIX)
