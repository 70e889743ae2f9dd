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

import re
from dataclasses import dataclass

from jfsm.errors import InvalidInput
from jfsm.text import require_text

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
_SCENE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


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
    """Return a valid scene id (1 to 64 of `A-Z a-z 0-9 _ -`) or raise `InvalidInput`."""
    text = require_text(scene_id, "scene id")
    if not _SCENE_ID.fullmatch(text):
        raise InvalidInput(
            f"scene id {text!r} must be 1 to 64 characters of A-Z a-z 0-9 _ -", scene=text
        )
    return text


def scene_keys(scene_id: str) -> StackKeys:
    """Key names of a scene's stack."""
    return StackKeys(f"jfCatalystStack.{validate_scene_id(scene_id)}")


def round_key(n: int) -> str:
    """Key of canonical round `n`."""
    return f"jfRounds.{n}"


def is_reserved(key: str) -> bool:
    """Whether `key` is reserved for the workflow (ordinary writes and cheats are refused)."""
    return key.startswith(RESERVED_PREFIX)
