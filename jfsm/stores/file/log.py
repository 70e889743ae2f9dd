"""The file store's log: framed records, the header record, and replaying a log's bytes.

A log is a sequence of records, possibly followed by zeros (unused preallocation). A record
is a 16-byte header (big-endian u32s: magic `JFr1`, payload length, CRC-32 of the payload,
CRC-32 of the first 12 header bytes) and the payload, the JCS of
`{"deletes": [key...], "sets": {key: value}}`. The header CRC makes the length trustworthy.
The bytes 0x00-0x1F never occur in a JCS payload, while a length under 512 MiB starts with
one, so in a log under 512 MiB no payload can hold something that passes for a record. The
magic has no zero byte, so no header is all zeros, and a payload ends with `}`: zeros after a
record are never part of it. A log written since R27 starts with a header record naming its
store and generation.

Reading works in place on the log's bytes: each payload is checked (CRCs, UTF-8) and parsed
in bounded windows (`jfsm.stores.file.scan`) without being copied; only the values are.

On error: `StoreCorrupted` naming the file, the record's byte offset and the reason (with
the payload byte where the decoding failed).
"""

from __future__ import annotations

import json
import struct
import zlib
from types import MappingProxyType

from jfsm.jcs import canonical_bytes, key_order, string_bytes
from jfsm.projection import Projection
from jfsm.stores.file.scan import (
    WINDOW,
    Malformed,
    Window,
    corrupted,
    first_difference,
    key_of,
    not_canonical,
    parse_object,
    utf8_error,
    value_at,
)
from jfsm.stores.file.snapshot import object_bytes

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "decode_projection",
    "encode_record",
    "frame",
    "has_commits",
    "header_store",
    "log_header",
    "read_log",
    "record_at",
    "tail_is_zeros",
]

MAGIC = b"JFr1"
assert 0 not in MAGIC  # so a record header is never all zeros: zeros are the log's end
_HEADER = struct.Struct(">4sIII")
HEADER_SIZE = _HEADER.size
_LOG_HEADER = b'{"log":'
_PAYLOAD_HEAD = b'{"deletes":'
_PAYLOAD_SETS = b',"sets":'


def _payload(projection: Projection) -> bytes:
    deletes = b",".join(string_bytes(k) for k in sorted(projection.deletes, key=key_order))
    return b'{"deletes":[' + deletes + b'],"sets":' + object_bytes(projection.sets) + b"}"


def _frame(payload: bytes) -> bytes:
    head = struct.pack(">4sII", MAGIC, len(payload), zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


def frame(payload: bytes) -> bytes:
    """The framed record of `payload` (the epoch logs of a shared directory frame their own
    payloads with it, `jfsm.stores.file.epochs`)."""
    return _frame(payload)


def record_at(data: bytes, offset: int) -> tuple[int, int] | str:
    """Where the payload of the valid record at `offset` starts and ends, or why there is
    no valid record there (short header, bad magic, a CRC mismatch...)."""
    return _record_at(data, offset)


def decode_projection(
    path: str, offset: int, data: bytes, start: int, stop: int, *, window: int = WINDOW
) -> Projection:
    """The projection in the payload `data[start:stop]` of the record at `offset`. Raises
    `StoreCorrupted` naming `path` and `offset` if it is not what `encode_record` writes."""
    return _decode_projection(path, offset, data, start, stop, False, window)


def encode_record(projection: Projection) -> bytes:
    """The framed log record of `projection`."""
    return _frame(_payload(projection))


def log_header(generation: int, store: str) -> bytes:
    """The first record of a log written since R27: it names its store and generation, so
    a log put in place of another (of another store or generation) is refused."""
    return _frame(canonical_bytes({"log": {"generation": generation, "store": store}}))


def _record_at(data: bytes, offset: int) -> tuple[int, int] | str:
    """Where the payload of the valid record at `offset` starts and ends, or why there is
    no valid record there."""
    if len(data) - offset < HEADER_SIZE:
        return "short header"
    magic, length, payload_crc, head_crc = _HEADER.unpack_from(data, offset)
    if magic != MAGIC:
        return "bad magic"
    if zlib.crc32(data[offset : offset + 12]) != head_crc:
        return "header CRC mismatch"
    start = offset + HEADER_SIZE
    end = start + length
    if end > len(data):
        return "payload past the end of the file"
    if zlib.crc32(memoryview(data)[start:end]) != payload_crc:
        return "payload CRC mismatch"
    return start, end


def _decode_projection(
    path: str, offset: int, data: bytes, start: int, stop: int, verify: bool, window: int
) -> Projection:
    """The projection in the payload `data[start:stop]` of the record at `offset`;
    `StoreCorrupted` at that offset if it is not what `encode_record` writes."""
    try:
        bad = utf8_error(data, start, stop)
        if bad is not None:
            raise Malformed("not UTF-8", bad)
        if not data.startswith(_PAYLOAD_HEAD + b"[", start, stop):
            raise Malformed('expected {"deletes":[', start)
        text = Window(data, stop, window)
        at = start + len(_PAYLOAD_HEAD)
        listed, i = value_at(text, at)
        if not isinstance(listed, list):
            raise Malformed("deletes is not an array", at)
        if not data[at:i].isascii():
            listed = json.loads(data[at:i])
        deletes = frozenset(key_of(key, at) for key in listed)
        if not data.startswith(_PAYLOAD_SETS, i, stop):
            raise Malformed('expected ,"sets":', i)
        positions: list[tuple[str, int]] | None = [] if verify else None
        sets, end = parse_object(text, i + len(_PAYLOAD_SETS), positions)
        if end + 1 != stop or data[end:stop] != b"}":
            raise Malformed("expected the final '}'", end)
        both = deletes.intersection(sets)
        if both:
            raise Malformed(f"keys both set and deleted: {sorted(both)}", start)
        projection = Projection(MappingProxyType(sets), deletes, "replay")
    except Malformed as exc:
        reason = f"undecodable log record ({exc} at payload byte {exc.pos - start})"
        raise corrupted(path, offset, reason) from exc
    if verify:
        assert positions is not None
        problem = not_canonical(sets, positions)
        canonical = _payload(projection)
        payload = data[start:stop]
        if problem is None and canonical != payload:
            problem = Malformed("not as encoded", start + first_difference(canonical, payload))
        if problem is not None:
            reason = (
                f"log record is not canonical JCS ({problem} at payload byte {problem.pos - start})"
            )
            raise corrupted(path, offset, reason)
    return projection


def _all_zero(data: bytes, start: int) -> bool:
    return data.count(0, start) == len(data) - start


def header_store(path: str, data: bytes) -> tuple[int, str] | None:
    """The (generation, store id) of the header record `data` starts with, or None when it
    does not start with one. Raises `StoreCorrupted` for a header record that does not
    parse."""
    found = _record_at(data, 0)
    if isinstance(found, str) or not data.startswith(_LOG_HEADER, *found):
        return None
    try:
        named = json.loads(data[found[0] : found[1]])["log"]
        generation, store = named["generation"], named["store"]
    except (ValueError, KeyError, TypeError) as exc:
        raise corrupted(path, 0, "undecodable log header") from exc
    if type(generation) is not int or not isinstance(store, str):
        raise corrupted(path, 0, "undecodable log header")
    return generation, store


def has_commits(data: bytes) -> bool:
    """Whether a log holds a valid projection record (after its header, if it has one)."""
    found = _record_at(data, 0)
    if not isinstance(found, str) and data.startswith(_LOG_HEADER, *found):
        found = _record_at(data, found[1])
    return not isinstance(found, str)


def read_log(
    path: str,
    data: bytes,
    verify: bool = False,
    header: bytes | None = None,
    *,
    window: int = WINDOW,
) -> tuple[list[Projection], int]:
    """The committed projections of a log and the end of the last one.

    `header`: the header record the log must start with (None: a log written before R27,
    without one). What follows the end is nothing, zeros (unused preallocation) or a torn
    tail. `window`: how many bytes are decoded as text at once. Raises `StoreCorrupted`
    when the header is not the one expected, a bad record is followed by a valid one, or a
    record that passes its CRCs does not decode (or fails `verify`).
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
        start, end = found
        projections.append(_decode_projection(path, offset, data, start, end, verify, window))
        offset = end
    return projections, offset


def tail_is_zeros(data: bytes, end: int) -> bool:
    """Whether what follows the last record (at `end`) is only zeros (or nothing): unused
    preallocation, not a torn write."""
    return _all_zero(data, end)
