"""The suite's own copies of the spec's pure rules: canonical text, JCS, footprint, keys.

Written from the spec text (decisions D2, D3, D9, D10, D16, D17), *not* imported from the
engine: a suite that shares code with the engine shares its bugs. `tests/suite` pins
these helpers against hand-computed values (and against `spec/vectors/` when it has them).

- A character is a Unicode code point: Python's `len` of a `str` free of lone surrogates.
- Canonical text: `"<summary>\\n" + S + "\\n</summary>\\n"`, then per exchange
  `"<user>\\n" + U + "\\n</user>\\n<assistant>\\n" + A + "\\n</assistant>\\n"`.
- JCS (RFC 8785): members sorted by UTF-16 code units, no white space, strings escaping only
  `"`, `\\\\` and C0 controls (short forms for `\\b \\t \\n \\f \\r`, else `\\u00xx`): exactly
  what the standard library's C `json.dumps(..., ensure_ascii=False)` writes for a string,
  kept because the suite serializes 30 MiB stores many times a run (the `rfc8785` package
  escapes through a Python callback per match: 2.5x slower on the quota scenario). Numbers
  (ECMAScript form) come from the `rfc8785` package, and `tests/spec/test_jcs.py` checks this
  whole function against that package on random values (decision R38). A value that is not
  I-JSON (a lone surrogate, NaN) has no JCS; only an implementation that already broke
  JF-TEXT-001 can hand the suite one, so it gets a stand-in instead of crashing the
  comparison that will report it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import rfc8785

from jfsm.spec import constants

__all__ = [
    "EXCHANGE_ENVELOPE",
    "QUOTA",
    "SUMMARY_ENVELOPE",
    "beneficiaries",
    "canonical_text",
    "change_log",
    "exchange_block",
    "footprint",
    "idempotency_key",
    "jcs",
    "jcs_size",
    "summary_block",
    "utf16_key",
]

QUOTA = constants().quota_bytes


def summary_block(text: str) -> str:
    return "<summary>\n" + text + "\n</summary>\n"


def exchange_block(user: str, assistant: str) -> str:
    return "<user>\n" + user + "\n</user>\n<assistant>\n" + assistant + "\n</assistant>\n"


SUMMARY_ENVELOPE = len(summary_block(""))  # 22
EXCHANGE_ENVELOPE = len(exchange_block("", ""))  # 42


def canonical_text(summary: str | None, exchanges: Iterable[tuple[str, str]]) -> str:
    """The canonical text of a stack (summary block if any, then exchanges in order)."""
    parts = [] if summary is None else [summary_block(summary)]
    parts.extend(exchange_block(u, a) for u, a in exchanges)
    return "".join(parts)


def utf16_key(key: str) -> bytes:
    """Sort key giving JCS member order (UTF-16 code units)."""
    return key.encode("utf-16-be", "surrogatepass")


_LONG: dict[str, str] = {}  # JCS texts of long strings, recently seen (a verify reads each twice)
_LONG_LIMIT = 1 << 25  # code points held in _LONG, keys and texts together: the cache stays small
_long_size = 0


def _string(value: str) -> str:
    # json.dumps with ensure_ascii=False escapes exactly '"', '\\' and C0 controls, with
    # the short forms for \b \t \n \f \r and lower-case \u00xx otherwise: JCS's rule.
    if len(value) < 65536:
        return json.dumps(value, ensure_ascii=False)
    global _long_size
    found = _LONG.get(value)
    if found is None:
        found = json.dumps(value, ensure_ascii=False)
        size = len(value) + len(found)
        if _long_size + size > _LONG_LIMIT:
            _LONG.clear()
            _long_size = 0
        if size <= _LONG_LIMIT:
            _LONG[value] = found
            _long_size += size
    return found


def _number(value: float) -> str:
    # ECMAScript Number.prototype.toString, the hard part of JCS: left to rfc8785.
    try:
        return rfc8785.dumps(value).decode("ascii")
    except rfc8785.CanonicalizationError:  # NaN or an infinity: not I-JSON, see above
        return json.dumps(value)


def jcs(value: Any) -> str:
    """RFC 8785 text of a JSON value (or the stand-in above for a value that is not I-JSON)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: utf16_key(kv[0]))
        return "{" + ",".join(_string(k) + ":" + jcs(v) for k, v in items) + "}"
    raise TypeError(f"{type(value).__name__} is not JSON")


def jcs_size(value: Any) -> int:
    """UTF-8 byte length of the JCS text of `value`."""
    return len(jcs(value).encode("utf-8", "surrogatepass"))


def change_log(base: Mapping[str, Any], store: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The optimized change log (D10): the net diff of `store` against `base`."""
    entries: list[dict[str, Any]] = []
    for key in sorted(set(base) | set(store), key=utf16_key):
        if key in store:
            if key in base and jcs(base[key]) == jcs(store[key]):
                continue
            entries.append({"key": key, "op": "set", "value": store[key]})
        else:
            entries.append({"key": key, "op": "delete"})
    return entries


def footprint(store: Mapping[str, Any], log: Sequence[Any]) -> int:
    """JCS bytes of the store object plus JCS bytes of the change-log array (D9)."""
    return jcs_size(store) + jcs_size(list(log))


def idempotency_key(
    game_id: str,
    catalyst_id: str | None,
    epoch: int,
    through_seq: int,
    text: str,
    retry: int = 0,
) -> str:
    """The `Idempotency-Key` derivation of `spec/compress-v2.json` (`retry`: completed replies
    that ended this same logical compression without publishing since the driver started)."""
    text_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    material = jcs([game_id, catalyst_id, epoch, through_seq, text_hash, retry])
    return "jfsm-" + hashlib.sha256(material.encode("utf-8")).hexdigest()


def beneficiaries(participants: Iterable[Mapping[str, Any]]) -> list[str]:
    """Ids of human, non-spectator participants, without duplicates, sorted by code point."""
    return sorted({p["id"] for p in participants if p["human"] and not p["spectator"]})
