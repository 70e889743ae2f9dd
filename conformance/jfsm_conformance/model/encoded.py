"""A store encoded once: each key's RFC 8785 (JCS) text, and what the checks derive from it.

Comparing a dump with the model, deriving the net change log against the checkpoint base
and counting the footprint each need the JCS text of every value. `Encoded` serializes each
value once and answers all three from those texts, byte for byte what `jfsm_conformance.model.canon`
computes from the whole objects (`tests/suite/test_snapshot.py` pins the equality).
The checkpoint base is encoded once per checkpoint (`BaseCache`), not once per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jfsm_conformance.model.canon import jcs, utf16_key

__all__ = ["BaseCache", "Encoded"]


class Encoded:
    """`store` with the JCS text of each value (`texts`)."""

    def __init__(self, store: Mapping[str, Any]) -> None:
        self.store = store
        self.texts = {k: jcs(v) for k, v in store.items()}
        self._order = sorted(store, key=utf16_key)

    def text(self) -> str:
        """The JCS text of the whole store object."""
        return "{" + ",".join(jcs(k) + ":" + self.texts[k] for k in self._order) + "}"

    def size(self) -> int:
        """UTF-8 bytes of `text()`."""
        return len(self.text().encode("utf-8", "surrogatepass"))

    def same_as(self, other: Encoded) -> bool:
        return self.texts == other.texts

    def differing(self, other: Encoded) -> list[str]:
        """Keys (in code-point order) whose presence or value differ from `other`'s."""
        keys = set(self.texts) | set(other.texts)
        return sorted(k for k in keys if self.texts.get(k) != other.texts.get(k))

    def change_log(self, base: Encoded) -> tuple[list[dict[str, Any]], str]:
        """The net diff against `base` (D10) and its JCS text."""
        entries: list[dict[str, Any]] = []
        parts: list[str] = []
        for key in sorted(set(base.texts) | set(self.texts), key=utf16_key):
            if key in self.texts:
                if base.texts.get(key) == self.texts[key]:
                    continue
                entries.append({"key": key, "op": "set", "value": self.store[key]})
                parts.append(f'{{"key":{jcs(key)},"op":"set","value":{self.texts[key]}}}')
            else:
                entries.append({"key": key, "op": "delete"})
                parts.append(f'{{"key":{jcs(key)},"op":"delete"}}')
        return entries, "[" + ",".join(parts) + "]"


class BaseCache:
    """The encoded checkpoint base of each game, kept while the base object stays the same."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Mapping[str, Any], Encoded]] = {}

    def get(self, base: Mapping[str, Any]) -> Encoded:
        found = self._cache.get(id(base))
        if found is None or found[0] is not base:
            if len(self._cache) >= 8:
                self._cache.clear()
            found = (base, Encoded(base))
            self._cache[id(base)] = found
        return found[1]
