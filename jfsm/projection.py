"""A projection: one planned, atomic change set over the store (decision D11).

Every mutation of a game's memory is exactly one projection: a set of keys to set and a set
of keys to delete, applied all or nothing after a quota preflight of its post-state. A key
may not be both set and deleted by one projection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jfsm.errors import InvalidInput
from jfsm.jcs import canonical_bytes
from jfsm.text import require_text

__all__ = ["Projection"]


@dataclass(frozen=True, slots=True)
class Projection:
    """Keys to set (value as canonical JCS bytes) and keys to delete.

    Build it with `Projection.of(sets, deletes)`, which validates keys and serializes values;
    invalid keys or values raise `InvalidInput` and nothing is built.
    """

    sets: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))
    deletes: frozenset[str] = frozenset()
    label: str = "write"

    @classmethod
    def of(
        cls,
        sets: Mapping[str, Any] | None = None,
        deletes: Iterable[str] = (),
        *,
        label: str = "write",
    ) -> Projection:
        """Validate and encode a change set. Raises `InvalidInput` on a bad key or value."""
        encoded: dict[str, bytes] = {}
        for key, value in (sets or {}).items():
            require_text(key, "key")
            try:
                encoded[key] = canonical_bytes(value)
            except ValueError as exc:
                raise InvalidInput(
                    f"value of {key!r} is not storable JSON: {exc}", key=key
                ) from exc
        gone = frozenset(require_text(key, "key") for key in deletes)
        both = gone.intersection(encoded)
        if both:
            raise InvalidInput(f"keys both set and deleted: {sorted(both)}", keys=sorted(both))
        return cls(MappingProxyType(encoded), gone, label)

    @classmethod
    def encoded(
        cls, sets: Mapping[str, bytes], deletes: Iterable[str] = (), *, label: str = "write"
    ) -> Projection:
        """A change set whose values are already canonical JCS bytes (built once by their
        records). Raises `InvalidInput` on a bad key."""
        for key in sets:
            require_text(key, "key")
        gone = frozenset(require_text(key, "key") for key in deletes)
        both = gone.intersection(sets)
        if both:
            raise InvalidInput(f"keys both set and deleted: {sorted(both)}", keys=sorted(both))
        return cls(MappingProxyType(dict(sets)), gone, label)

    def touched(self) -> frozenset[str]:
        """Every key this projection sets or deletes."""
        return self.deletes.union(self.sets)

    def is_empty(self) -> bool:
        """True when the projection changes nothing at all."""
        return not self.sets and not self.deletes
