"""Short excerpts of observed text for failure messages: where a needle sits, a clipped repr."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["around", "as_json", "find", "short"]


def find(value: Any, needle: str) -> str | None:
    """The context of the first string (or key) inside `value` containing `needle`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if needle in item:
                return around(item, needle)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def around(text: str, needle: str, width: int = 60) -> str:
    """`width` characters either side of the first `needle` in `text` ("" if absent)."""
    i = text.find(needle)
    return text[max(0, i - width) : i + len(needle) + width] if i >= 0 else ""


def short(value: Any, width: int = 80) -> str:
    """The repr of `value`, its middle elided past `width` characters."""
    text = repr(value)
    return text if len(text) <= width else text[: width // 2] + "…" + text[-width // 2 :]


def as_json(value: Any, width: int = 200) -> str:
    """`value` as the wire writes it (JSON: `null`, `true`, `"text"`), never a Python repr
    such as `None` (R197); its middle elided past `width` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        text = str(value)
    return text if len(text) <= width else text[: width // 2] + "…" + text[-width // 2 :]
