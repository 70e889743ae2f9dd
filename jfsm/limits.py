"""The spec's bounds on ids, nesting and message size (`spec/constants.json` `limits`).

Pure checks, no I/O. Each raises `InvalidInput` (nothing is written) when its bound is
broken:

- `validate_id`: a game id or a scene id matches `limits.id_pattern` in full (JF-ERR-006);
- `check_value_depth`: a value set by a write or a cheat nests at most
  `limits.value_max_depth` arrays and objects (JF-ERR-007);
- `depth`: the nesting depth of any parsed JSON value, computed without recursion, so a
  value nested far deeper than Python's recursion limit is measured, never a
  `RecursionError`.

Depth counts containers: a scalar has depth 0, `[]` and `{}` have depth 1, `[[1]]` depth 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from jfsm.errors import InvalidInput
from jfsm.spec import constants
from jfsm.text import require_text

__all__ = ["check_value_depth", "depth", "validate_id"]


@cache
def _id_pattern() -> re.Pattern[str]:
    return re.compile(constants().id_pattern)


def validate_id(value: object, field: str) -> str:
    """Return `value` if it is a valid game or scene id; `InvalidInput` naming `field`."""
    text = require_text(value, field)
    if not _id_pattern().fullmatch(text):
        shown = text if len(text) <= 80 else text[:80] + "..."
        raise InvalidInput(
            f"{field} {shown!r} must match {constants().id_pattern}; nothing was written",
            field=field,
        )
    return text


def depth(value: Any, stop: int | None = None) -> int:
    """The nesting depth of a JSON value (iterative); stops counting past `stop`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        level += 1
        if level > deepest:
            deepest = level
            if stop is not None and deepest > stop:
                return deepest
        stack.extend((child, level) for child in children)
    return deepest


def check_value_depth(sets: Mapping[str, Any] | None) -> None:
    """Refuse (`InvalidInput`, naming the key) a value nested deeper than the limit."""
    limit = constants().value_max_depth
    for key, value in (sets or {}).items():
        if depth(value, stop=limit) > limit:
            raise InvalidInput(
                f"value of {key!r} nests deeper than {limit} arrays and objects; "
                "nothing was written",
                key=key,
            )
