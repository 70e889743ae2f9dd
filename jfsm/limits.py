"""The spec's bounds on ids, nesting and message size (`spec/constants.json` `limits`).

Pure checks, no I/O. Each raises `InvalidInput` (nothing is written) when its bound is
broken:

- `validate_id`: a game id or a scene id matches `limits.id_pattern` in full (JF-ERR-006);
- `validate_owner`: a lease's owner id given by the user (`jfsm driver --owner`,
  `JFSM_OWNER`, a store's `owner=`) matches `OWNER_PATTERN`: 1 to 128 characters, letters,
  digits and `._:@-`, a letter or digit first (the reference's own rule, decision R125);
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

__all__ = ["OWNER_PATTERN", "check_value_depth", "depth", "validate_id", "validate_owner"]

#: an owner id: what a pod name, a host name, a worker number or `host:pid` needs, and nothing
#: that could break a line, a log or a lease record (R125)
OWNER_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}"


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


def validate_owner(value: object) -> str:
    """Return `value` if it is a usable owner id (`OWNER_PATTERN`); else `InvalidInput`, one
    line that shows at most 40 characters of it (escaped)."""
    if isinstance(value, str) and re.fullmatch(OWNER_PATTERN, value):
        return value
    shown = repr(value) if not isinstance(value, str) else ascii(value[:40])
    more = (
        f" (and {len(value) - 40} more characters)"
        if isinstance(value, str) and len(value) > 40
        else ""
    )
    raise InvalidInput(
        f"owner id {shown}{more} must be 1 to 128 letters, digits or ._:@- (a letter or a "
        "digit first)",
        field="owner",
    )


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
