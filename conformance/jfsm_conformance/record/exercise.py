"""How often each machine rule, session step, compress.v2 reply and outcome was exercised.

A pass means something only if the situations behind it happened. The session and the fake
call `record(kind, name)` at the few places where something happens (a step, a scripted
reply served, a compression settled); the runner wraps each state-machine rule to count it
too. The runner reads the counts with `counting()` and puts them in the report, so a pass
that exercised nothing shows as such.

```python
from jfsm_conformance.record import exercise

with exercise.counting() as counts:
    ...                       # run scenarios and machines
counts.table()                # {"rule": {"generate": 41, ...}, "outcome": {...}, ...}
```

`record` outside `counting()` does nothing. Kinds in use: `rule` (a machine rule called),
`rule_idle` (a machine rule that found nothing to do in the suite's model: no step),
`step` (a session step run), `message` (a protocol message sent to the driver, by op),
`reply` (what the fake answered an attempt: success, refuse,
empty, not_smaller, http_status, malformed, hold, replay...), `outcome` (how a compression
ended: published, refused, transport, empty, not_smaller, stale, quota...). Never raises.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator

__all__ = ["Counts", "counting", "record"]


class Counts:
    """Counters per kind; safe to update from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_kind: dict[str, Counter[str]] = {}

    def add(self, kind: str, name: str, n: int = 1) -> None:
        with self._lock:
            self._by_kind.setdefault(kind, Counter())[name] += n

    def get(self, kind: str, name: str) -> int:
        with self._lock:
            return self._by_kind.get(kind, Counter())[name]

    def table(self) -> dict[str, dict[str, int]]:
        """`{kind: {name: count}}`, kinds and names sorted (a JSON-ready copy)."""
        with self._lock:
            return {
                kind: dict(sorted(counter.items()))
                for kind, counter in sorted(self._by_kind.items())
            }


_current: Counts | None = None


def record(kind: str, name: object) -> None:
    """Count one `name` of `kind` in the current `counting()` block (no-op outside one)."""
    counts = _current
    if counts is not None:
        counts.add(kind, str(name))


@contextlib.contextmanager
def counting() -> Iterator[Counts]:
    """Collect every `record` call made until the block ends (blocks nest; the inner wins)."""
    global _current
    previous, _current = _current, Counts()
    try:
        yield _current
    finally:
        _current = previous
