"""Valid text, counting, and the canonical text of a stack (decisions D1 to D3).

A *character* is a Unicode code point. Python's `len` on a `str` counts code points, which is
exactly the unit, once lone surrogates (which a Python `str` can hold but a Unicode scalar
string cannot) are rejected.

The canonical text is the one string that is both measured against the threshold and
submitted to compress.v2:

```
<summary>\\n{S}\\n</summary>\\n                                  (only if the stack has a summary)
<user>\\n{U}\\n</user>\\n<assistant>\\n{A}\\n</assistant>\\n      (per exchange, in seq order)
```

The envelopes are constant, so the length is additive: `SUMMARY_ENVELOPE + len(S)` plus
`EXCHANGE_ENVELOPE + len(U) + len(A)` per exchange; engines keep it in O(1) per change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from jfsm.errors import InvalidInput

__all__ = [
    "EXCHANGE_ENVELOPE",
    "SUMMARY_ENVELOPE",
    "canonical_length",
    "canonical_text",
    "count",
    "exchange_block",
    "exchange_cost",
    "require_text",
    "summary_block",
    "summary_cost",
]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def require_text(value: object, field: str) -> str:
    """Return `value` if it is a valid Unicode string.

    Raises `InvalidInput` naming `field` when it is not a `str` or holds a lone surrogate.
    The text is never normalized or trimmed.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, not {type(value).__name__}", field=field)
    match = _LONE_SURROGATE.search(value)
    if match is not None:
        raise InvalidInput(
            f"{field} holds a lone surrogate U+{ord(match.group()):04X} at code point "
            f"{match.start()}",
            field=field,
            offset=match.start(),
        )
    return value


def count(text: str) -> int:
    """Number of code points in `text` (the spec's counting unit)."""
    return len(text)


def summary_block(summary: str) -> str:
    """The canonical block of a summary."""
    return f"<summary>\n{summary}\n</summary>\n"


def exchange_block(user: str, assistant: str) -> str:
    """The canonical block of one exchange."""
    return f"<user>\n{user}\n</user>\n<assistant>\n{assistant}\n</assistant>\n"


SUMMARY_ENVELOPE = len(summary_block(""))
EXCHANGE_ENVELOPE = len(exchange_block("", ""))


def summary_cost(summary: str) -> int:
    """Code points the summary block adds to the canonical text."""
    return SUMMARY_ENVELOPE + len(summary)


def exchange_cost(user: str, assistant: str) -> int:
    """Code points one exchange block adds to the canonical text."""
    return EXCHANGE_ENVELOPE + len(user) + len(assistant)


def canonical_text(summary: str | None, exchanges: Iterable[tuple[str, str]]) -> str:
    """The canonical text of a stack: its summary (if any), then exchanges in order."""
    parts = [] if summary is None else [summary_block(summary)]
    parts.extend(exchange_block(user, assistant) for user, assistant in exchanges)
    return "".join(parts)


def canonical_length(summary: str | None, exchanges: Iterable[tuple[str, str]]) -> int:
    """`len(canonical_text(...))` without building the string."""
    total = 0 if summary is None else summary_cost(summary)
    return total + sum(exchange_cost(user, assistant) for user, assistant in exchanges)
