"""The file store's readers as they were before decision R51: the whole file decoded as one
Latin-1 text. Kept only as the oracle of `tests/stores/test_codec_windows.py`: the windowed readers
must return the same content and raise the same errors (offset and reason) on any bytes.

Verbatim from `jfsm/stores/codec.py` at the commit before R51 (the reading half).
"""

from __future__ import annotations

import codecs
import json
import struct
import zlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from jfsm.errors import InvalidInput, StoreCorrupted
from jfsm.jcs import canonical_bytes, key_order, string_bytes
from jfsm.projection import Projection
from jfsm.text import require_text

__all__ = ["read_log", "read_snapshot"]

MAGIC = b"JFr1"
_HEADER = struct.Struct(">4sIII")
HEADER_SIZE = _HEADER.size
_PAYLOAD_HEAD = '{"deletes":'
_PAYLOAD_SETS = ',"sets":'
_UTF8_CHUNK = 1 << 20


def object_bytes(members: Mapping[str, bytes]) -> bytes:
    """JCS of an object whose values are already JCS bytes."""
    keys = sorted(members, key=key_order)
    return b"{" + b",".join(string_bytes(k) + b":" + members[k] for k in keys) + b"}"


def _payload(projection: Projection) -> bytes:
    deletes = b",".join(string_bytes(k) for k in sorted(projection.deletes, key=key_order))
    return b'{"deletes":[' + deletes + b'],"sets":' + object_bytes(projection.sets) + b"}"


def _record_at(data: bytes, offset: int) -> tuple[bytes, int] | str:
    """The payload and end of the record at `offset`, or why there is no valid record."""
    if len(data) - offset < HEADER_SIZE:
        return "short header"
    magic, length, payload_crc, head_crc = _HEADER.unpack_from(data, offset)
    if magic != MAGIC:
        return "bad magic"
    if zlib.crc32(data[offset : offset + 12]) != head_crc:
        return "header CRC mismatch"
    end = offset + HEADER_SIZE + length
    if end > len(data):
        return "payload past the end of the file"
    payload = data[offset + HEADER_SIZE : end]
    if zlib.crc32(payload) != payload_crc:
        return "payload CRC mismatch"
    return payload, end


def corrupted(path: str, offset: int | None, reason: str) -> StoreCorrupted:
    """The `StoreCorrupted` naming `path`, the byte `offset` (None: the file as a whole,
    missing or not expected there) and the `reason`."""
    if offset is None:
        return StoreCorrupted(f"{path}: {reason}", file=path, reason=reason)
    return StoreCorrupted(
        f"{path}: {reason} at byte offset {offset}", file=path, offset=offset, reason=reason
    )


# -- parsing without re-canonicalizing -------------------------------------------------------
class _Malformed(ValueError):
    """Content not in the layout the store writes; `pos` is a byte index into it."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_Utf8Decoder = codecs.getincrementaldecoder("utf-8")


def _utf8_error(data: bytes) -> int | None:
    """The byte offset of the first invalid UTF-8 in `data`, or None when it is valid.

    Decodes in chunks and drops the text: much faster than one `decode` of a large file
    with astral characters, which builds a 4-bytes-per-character string.
    """
    if data.isascii():
        return None
    decoder = _Utf8Decoder()
    view = memoryview(data)
    try:
        for start in range(0, len(data), _UTF8_CHUNK):
            decoder.decode(view[start : start + _UTF8_CHUNK])
        decoder.decode(b"", True)
    except UnicodeDecodeError:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return exc.start
    return None


def _json_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value starting exactly at `start` (no white space first) and its end."""
    try:
        return _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"not JSON: {exc.msg}", exc.pos) from exc
    except (ValueError, RecursionError) as exc:
        raise _Malformed(f"not JSON: {exc}", start) from exc


def _key(raw: Any, pos: int) -> str:
    """`raw` as a key: a string without lone surrogates."""
    if not isinstance(raw, str):
        raise _Malformed("a key is not a string", pos)
    try:
        return require_text(raw, "key")
    except InvalidInput as exc:
        raise _Malformed(str(exc), pos) from exc


def _parse_object(
    data: bytes, text: str, start: int, positions: list[tuple[str, int]] | None = None
) -> tuple[dict[str, bytes], int]:
    """The JSON object at `start` as member name -> the bytes of its value, and its end.

    `data` must be valid UTF-8 and `text` is `data` decoded as Latin-1, one character per
    byte, so indices are byte offsets. JSON's structure is ASCII and every byte of a
    multi-byte UTF-8 sequence is >= 0x80, which a JSON string may hold as is, so the Latin-1
    reading has the same tokens and boundaries; only names with non-ASCII are decoded
    again from their bytes. Each value is parsed (so it is complete JSON) and dropped; its
    bytes are kept as they are. The layout is the one JCS writes: no white space between
    members. `positions`, when given, receives (name, offset of the value) per member.
    """
    if text[start : start + 1] != "{":
        raise _Malformed("expected '{'", start)
    members: dict[str, bytes] = {}
    i = start + 1
    if text[i : i + 1] == "}":
        return members, i + 1
    while True:
        if text[i : i + 1] != '"':
            raise _Malformed("expected a member name", i)
        raw, colon = _json_at(text, i)
        if not raw.isascii():  # read as Latin-1: decode the name's UTF-8 bytes for real
            raw = json.loads(data[i:colon])
        key = _key(raw, i)
        if text[colon : colon + 1] != ":":
            raise _Malformed("expected ':'", colon)
        _, end = _json_at(text, colon + 1)
        if key in members:
            raise _Malformed(f"duplicate member name {key!r}", i)
        members[key] = data[colon + 1 : end]
        if positions is not None:
            positions.append((key, colon + 1))
        separator = text[end : end + 1]
        if separator == "}":
            return members, end + 1
        if separator != ",":
            raise _Malformed("expected ',' or '}'", end)
        i = end + 1


def _not_canonical(
    members: Mapping[str, bytes], positions: list[tuple[str, int]]
) -> _Malformed | None:
    """The first value that is not the JCS of what it parses to (the `verify` check)."""
    for key, pos in positions:
        value = members[key]
        try:
            canonical = canonical_bytes(json.loads(value))
        except (ValueError, RecursionError) as exc:
            return _Malformed(f"value of {key!r} is not storable JSON ({exc})", pos)
        if canonical != value:
            return _Malformed(f"value of {key!r} is not canonical JCS", pos)
    return None


def _first_difference(a: bytes, b: bytes) -> int:
    """The first index where `a` and `b` differ (their common length if one is a prefix
    of the other or they are equal)."""
    step = 4096
    start = 0
    while start < len(a) and a[start : start + step] == b[start : start + step]:
        start += step
    pairs = zip(a[start : start + step], b[start : start + step], strict=False)
    for i, (x, y) in enumerate(pairs):
        if x != y:
            return start + i
    return min(len(a), len(b))


def _decode_projection(path: str, offset: int, payload: bytes, verify: bool = False) -> Projection:
    """The projection in a record's payload; `StoreCorrupted` at the record's offset if the
    payload is not what `encode_record` writes (see the module docstring, Reading)."""
    try:
        bad = _utf8_error(payload)
        if bad is not None:
            raise _Malformed("not UTF-8", bad)
        text = payload.decode("latin-1")
        if not text.startswith(_PAYLOAD_HEAD + "["):
            raise _Malformed('expected {"deletes":[', 0)
        at = len(_PAYLOAD_HEAD)
        listed, i = _json_at(text, at)
        if not isinstance(listed, list):
            raise _Malformed("deletes is not an array", at)
        if not payload[at:i].isascii():
            listed = json.loads(payload[at:i])
        deletes = frozenset(_key(key, at) for key in listed)
        if not text.startswith(_PAYLOAD_SETS, i):
            raise _Malformed('expected ,"sets":', i)
        positions: list[tuple[str, int]] | None = [] if verify else None
        sets, end = _parse_object(payload, text, i + len(_PAYLOAD_SETS), positions)
        if text[end:] != "}":
            raise _Malformed("expected the final '}'", end)
        both = deletes.intersection(sets)
        if both:
            raise _Malformed(f"keys both set and deleted: {sorted(both)}", 0)
        projection = Projection(MappingProxyType(sets), deletes, "replay")
    except _Malformed as exc:
        reason = f"undecodable log record ({exc} at payload byte {exc.pos})"
        raise corrupted(path, offset, reason) from exc
    if verify:
        assert positions is not None
        problem = _not_canonical(sets, positions)
        canonical = _payload(projection)
        if problem is None and canonical != payload:
            problem = _Malformed("not as encoded", _first_difference(canonical, payload))
        if problem is not None:
            reason = f"log record is not canonical JCS ({problem} at payload byte {problem.pos})"
            raise corrupted(path, offset, reason)
    return projection


def _all_zero(data: bytes, start: int) -> bool:
    return data.count(0, start) == len(data) - start


def read_log(
    path: str, data: bytes, verify: bool = False, header: bytes | None = None
) -> tuple[list[Projection], int]:
    """The committed projections of a log and the end of the last one.

    `header`: the header record the log must start with (None: a log written before R27,
    without one). What follows the end is nothing, zeros (unused preallocation) or a torn
    tail. Raises `StoreCorrupted` when the header is not the one expected, a bad record is
    followed by a valid one, or a record that passes its CRCs does not decode (or fails
    `verify`).
    """
    projections: list[Projection] = []
    offset = 0
    if header is not None:
        if not data.startswith(header):
            raise corrupted(
                path, 0, "log header missing, damaged or of another store or generation"
            )
        offset = len(header)
    while offset < len(data):
        found = _record_at(data, offset)
        if isinstance(found, str):
            if _all_zero(data, offset):
                return projections, offset  # the end of the log
            later = data.find(MAGIC, offset + 1)
            while later != -1:
                if not isinstance(_record_at(data, later), str):
                    raise corrupted(
                        path, offset, f"damaged log record ({found}) before a valid one at {later}"
                    )
                later = data.find(MAGIC, later + 1)
            return projections, offset  # a torn tail
        payload, end = found
        projections.append(_decode_projection(path, offset, payload, verify))
        offset = end
    return projections, offset


def read_snapshot(path: str, data: bytes, crc: int, verify: bool = False) -> dict[str, bytes]:
    """The checkpoint base in a snapshot file. Raises `StoreCorrupted` if it is damaged (or,
    with `verify`, not canonical JCS)."""
    if zlib.crc32(data) != crc:
        raise corrupted(path, 0, f"snapshot CRC mismatch (expected {crc:08x})")
    bad = _utf8_error(data)
    if bad is not None:
        raise corrupted(path, bad, "snapshot is not UTF-8")
    text = data.decode("latin-1")
    positions: list[tuple[str, int]] | None = [] if verify else None
    try:
        members, end = _parse_object(data, text, 0, positions)
        if end != len(data):
            raise _Malformed("data after the object", end)
    except _Malformed as exc:
        raise corrupted(path, exc.pos, f"snapshot is not a JCS object ({exc})") from exc
    if verify:
        assert positions is not None
        problem = _not_canonical(members, positions)
        canonical = object_bytes(members)
        if problem is None and canonical != data:
            problem = _Malformed(
                "member order or layout differs", _first_difference(canonical, data)
            )
        if problem is not None:
            raise corrupted(path, problem.pos, f"snapshot is not canonical JCS ({problem})")
    return members
