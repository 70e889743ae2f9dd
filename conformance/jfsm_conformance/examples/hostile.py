"""Broken drivers that let hostile input through, one limit each (for
`tests/suite/test_hostile.py`, and for trying the suite out):

```
jfsm conformance --driver python:jfsm_conformance.examples.hostile:long_ids
```

- `long_ids`: an id longer than `limits.id_pattern` allows is cut to the longest allowed
  and served: JF-ERR-006.
- `deep_values`: a value nesting past `limits.value_max_depth` is written as its JSON text:
  JF-ERR-007.
- `null_id_missing`: bytes that are no message are answered with id 0, not null:
  JF-ERR-008.
- `reads_long`: a message past `limits.message_max_bytes` is read whole and served:
  JF-ERR-009.
- `unknown_op_writes`: an unknown op writes a game-data key before it answers
  `unsupported_op`: JF-ERR-010.
- `deletes_checked_late`: a `write` applies its `sets` before it looks at its `deletes`, so
  one whose `deletes` hold a key with a lone surrogate is refused with `invalid_input` after
  writing: JF-TEXT-001 (a text with a lone surrogate writes nothing).
"""

from __future__ import annotations

import json
import re
from typing import Any

from jfsm.limits import depth
from jfsm.spec import constants
from jfsm_conformance.examples.broken import BrokenDriver

__all__ = [
    "deep_values",
    "deletes_checked_late",
    "long_ids",
    "null_id_missing",
    "reads_long",
    "unknown_op_writes",
]


class _WireDriver(BrokenDriver):
    """A broken driver that also takes bytes as they arrive (`handle_bytes`)."""

    async def handle_bytes(self, data: bytes) -> dict[str, Any]:
        reply: dict[str, Any] = await self.inner.handle_bytes(data)
        return reply


class _LongIds(BrokenDriver):
    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        args = message.get("args") if isinstance(message, dict) else None
        if isinstance(args, dict):
            for slot in ("game", "scene", "into"):
                value = args.get(slot)
                if isinstance(value, str) and len(value) > 64 and re.fullmatch(r"\w+", value):
                    args[slot] = value[:64]
        return await super().handle(message)


class _DeepValues(BrokenDriver):
    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        args = message.get("args") if isinstance(message, dict) else None
        if isinstance(args, dict) and message.get("op") in ("write", "cheat"):
            sets = args.get("sets")
            if isinstance(sets, dict):
                args["sets"] = {
                    k: json.dumps(v) if isinstance(v, (list, dict)) and _deep(v) else v
                    for k, v in sets.items()
                }
        return await super().handle(message)


def _deep(value: Any) -> bool:
    return depth(value) > constants().value_max_depth


class _NullIdMissing(_WireDriver):
    async def handle_bytes(self, data: bytes) -> dict[str, Any]:
        reply = await super().handle_bytes(data)
        if reply.get("id") is None:
            reply["id"] = 0
        return reply


class _ReadsLong(_WireDriver):
    async def handle_bytes(self, data: bytes) -> dict[str, Any]:
        if len(data) <= constants().message_max_bytes:
            return await super().handle_bytes(data)
        try:  # past the limit: read whole anyway
            message = json.loads(data)
        except ValueError:
            return await super().handle_bytes(data)
        if not isinstance(message, dict):
            return await self.inner.handle(message)
        return await self.handle(message)


class _UnknownOpWrites(BrokenDriver):
    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(message, dict):
            return await super().handle(message)
        args = message.get("args")
        if message.get("op") not in self.inner._ops and isinstance(args, dict):
            await self.call("write", {"game": args.get("game"), "sets": {"seen-op": True}})
        return await super().handle(message)


class _DeletesCheckedLate(BrokenDriver):
    async def bend_write(self, message: dict[str, Any]) -> dict[str, Any]:
        args = message.get("args")
        if isinstance(args, dict) and isinstance(args.get("sets"), dict):
            deletes = args.get("deletes")
            if isinstance(deletes, list) and any(_not_scalar(k) for k in deletes):
                await self.call("write", {"game": args.get("game"), "sets": args["sets"]})
        return await self.inner.handle(message)


def _not_scalar(text: Any) -> bool:
    """A string holding a lone surrogate (not a string of Unicode scalar values)."""
    return isinstance(text, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def long_ids() -> BrokenDriver:
    return _LongIds()


def deep_values() -> BrokenDriver:
    return _DeepValues()


def null_id_missing() -> BrokenDriver:
    return _NullIdMissing()


def reads_long() -> BrokenDriver:
    return _ReadsLong()


def unknown_op_writes() -> BrokenDriver:
    return _UnknownOpWrites()


def deletes_checked_late() -> BrokenDriver:
    return _DeletesCheckedLate()
