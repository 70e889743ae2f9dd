"""The store image: current store, checkpoint base, optimized change log, footprint.

This is the pure core every store backend wraps. It holds each value as its canonical JCS
bytes and keeps the footprint (decision D9) *incrementally*: applying or previewing a
projection costs time proportional to the keys it touches, never to the store.

JCS of an object with n members is `{` + members joined by `,` + `}`, so its size is
`2 + Σ member + max(n - 1, 0)`; each member is `"key":value`. The change log (D10) is a JCS
array of entries, one per key whose current value differs from the checkpoint base, so its
size follows the same arithmetic. A key's log entry depends only on its base and current
value, which is what makes the netting rules (create-then-delete and set-back leave no
entry) fall out for free.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from jfsm.errors import InvalidInput, QuotaExceeded
from jfsm.jcs import key_order, string_bytes
from jfsm.projection import Projection
from jfsm.spec import constants

__all__ = ["QUOTA_BYTES", "StoreImage", "seeded_image"]

QUOTA_BYTES = constants().quota_bytes

_SET_HEAD = len(b'{"key":')
_SET_MID = len(b',"op":"set","value":')
_DELETE_TAIL = len(b',"op":"delete"}')


def _member_size(key_size: int, value: bytes) -> int:
    return key_size + 1 + len(value)


def _entry_size(key_size: int, value: bytes | None) -> int:
    if value is None:
        return _SET_HEAD + key_size + _DELETE_TAIL
    return _SET_HEAD + key_size + _SET_MID + len(value) + 1


def _container_size(total: int, count: int) -> int:
    return 2 + total + max(count - 1, 0)


class _Tally:
    """Running size of a JCS container: sum of member sizes and member count."""

    __slots__ = ("count", "total")

    def __init__(self, total: int = 0, count: int = 0) -> None:
        self.total = total
        self.count = count

    def change(self, member: int | None, sign: int) -> None:
        """Add (`sign` +1) or remove (-1) a member of `member` bytes; None is no member."""
        if member is not None:
            self.total += sign * member
            self.count += sign

    def size(self) -> int:
        return _container_size(self.total, self.count)


class StoreImage:
    """Store object, checkpoint base and change log, with an O(change) footprint.

    `quota` is in bytes; `apply` refuses a projection whose post-state footprint exceeds it.
    """

    def __init__(
        self,
        values: Mapping[str, bytes] | None = None,
        base: Mapping[str, bytes] | None = None,
        *,
        quota: int = QUOTA_BYTES,
    ) -> None:
        self.quota = quota
        self._key_sizes: dict[str, int] = {}
        self._store = _Tally()
        self._log = _Tally()
        self._values = dict(values or {})
        self._base = dict(self._values if base is None else base)
        for key in set(self._values).union(self._base):
            ks = self._key_sizes[key] = len(string_bytes(key))
            value = self._values.get(key)
            self._store.change(None if value is None else _member_size(ks, value), +1)
            if value != self._base.get(key):
                self._log.change(_entry_size(ks, value), +1)

    # -- reading -------------------------------------------------------------------------
    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> Iterator[str]:
        """Keys of the store, in no particular order."""
        return iter(self._values)

    def raw(self, key: str) -> bytes | None:
        """The JCS bytes of `key`'s value, or None when absent."""
        return self._values.get(key)

    def get(self, key: str) -> Any:
        """The decoded value of `key`, or None when absent (a fresh object each call)."""
        raw = self._values.get(key)
        return None if raw is None else json.loads(raw)

    def values_bytes(self) -> dict[str, bytes]:
        """A copy of the current store as key -> JCS bytes."""
        return dict(self._values)

    def base_bytes(self) -> dict[str, bytes]:
        """A copy of the checkpoint base as key -> JCS bytes."""
        return dict(self._base)

    def store_json(self) -> dict[str, Any]:
        """The store object, decoded."""
        return {key: json.loads(raw) for key, raw in self._values.items()}

    def change_log(self) -> list[dict[str, Any]]:
        """The optimized change log (D10): one entry per changed key, JCS key order."""
        entries = []
        for key in sorted(self._changed_keys(), key=key_order):
            value = self._values.get(key)
            if value is None:
                entries.append({"key": key, "op": "delete"})
            else:
                entries.append({"key": key, "op": "set", "value": json.loads(value)})
        return entries

    def _changed_keys(self) -> Iterator[str]:
        for key in set(self._values).union(self._base):
            if self._values.get(key) != self._base.get(key):
                yield key

    def footprint(self) -> int:
        """Bytes of JCS(store) + JCS(change log), kept incrementally."""
        return self._store.size() + self._log.size()

    # -- changing ------------------------------------------------------------------------
    def preview(self, projection: Projection) -> int:
        """Footprint after `projection`, computed in O(touched keys); nothing changes."""
        store = _Tally(self._store.total, self._store.count)
        log = _Tally(self._log.total, self._log.count)
        for key in projection.touched():
            self._account(key, projection.sets.get(key), store, log)
        return store.size() + log.size()

    def check(self, projection: Projection) -> int:
        """Preflight: the post-state footprint, or `QuotaExceeded` with the numbers."""
        would_be = self.preview(projection)
        if would_be > self.quota:
            current = self.footprint()
            raise QuotaExceeded(
                f"{projection.label} would take the footprint from {current} to {would_be} "
                f"bytes, over the quota of {self.quota}",
                current=current,
                would_be=would_be,
                quota=self.quota,
            )
        return would_be

    def apply(self, projection: Projection) -> None:
        """Preflight then apply `projection` all or nothing. Raises `QuotaExceeded`."""
        self.check(projection)
        self.apply_unchecked(projection)

    def apply_unchecked(self, projection: Projection) -> None:
        """Apply without the quota check (replaying a projection already committed)."""
        for key in projection.deletes:
            self._set_key(key, None)
        for key, value in projection.sets.items():
            self._set_key(key, value)

    def checkpoint(self) -> None:
        """Make the current store the base: the change log becomes empty."""
        self._base = dict(self._values)
        self._log = _Tally()
        self._key_sizes = {key: self._key_sizes[key] for key in self._values}

    # -- bookkeeping ---------------------------------------------------------------------
    def _key_size(self, key: str) -> int:
        size = self._key_sizes.get(key)
        if size is None:
            size = len(string_bytes(key))
        return size

    def _account(self, key: str, new: bytes | None, store: _Tally, log: _Tally) -> int:
        """Move `key`'s contribution in `store` and `log` from its current value to `new`
        (None: absent); returns the key's JCS size."""
        ks = self._key_size(key)
        old = self._values.get(key)
        base = self._base.get(key)
        store.change(None if old is None else _member_size(ks, old), -1)
        store.change(None if new is None else _member_size(ks, new), +1)
        if old != base:
            log.change(_entry_size(ks, old), -1)
        if new != base:
            log.change(_entry_size(ks, new), +1)
        return ks

    def _set_key(self, key: str, new: bytes | None) -> None:
        ks = self._account(key, new, self._store, self._log)
        if new is None:
            self._values.pop(key, None)
        else:
            self._values[key] = new
        if new is None and key not in self._base:
            self._key_sizes.pop(key, None)
        else:
            self._key_sizes[key] = ks


def seeded_image(current: StoreImage, values: Mapping[str, bytes]) -> StoreImage:
    """A new image holding `values` as checkpointed base, for seeding an empty store.

    Raises `InvalidInput` if `current` is not empty and `QuotaExceeded` if the seeded
    footprint exceeds `current.quota`; `current` is never changed.
    """
    if len(current) or current.footprint() != _container_size(0, 0) * 2:
        raise InvalidInput("only an empty store can be seeded", keys=len(current))
    image = StoreImage(values, quota=current.quota)
    if image.footprint() > current.quota:
        raise QuotaExceeded(
            f"seeding would take the footprint to {image.footprint()} bytes, "
            f"over the quota of {current.quota}",
            current=current.footprint(),
            would_be=image.footprint(),
            quota=current.quota,
        )
    return image
