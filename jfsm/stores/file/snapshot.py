"""The file store's snapshot: the JCS object key -> value of a checkpoint.

The file's name carries its generation and the CRC-32 of its bytes
(`snapshot.<gen>.<crc>.json`, `jfsm.stores.file.manifest`). `read_snapshot` checks the CRC, that
the bytes are UTF-8 and that they hold one JCS object in the layout written (no white
space, no duplicate names, nothing after it), parsing each value in bounded windows
(`jfsm.stores.file.scan`) and keeping its bytes as they are; with `verify` it also requires
every value and the whole file to be byte for byte what `object_bytes` writes (compared
member by member, without writing it again).

On error: `StoreCorrupted` naming the file, the byte offset and the reason.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from jfsm.jcs import key_order, string_bytes
from jfsm.stores.file.scan import (
    WINDOW,
    Malformed,
    Window,
    corrupted,
    first_difference,
    not_canonical,
    parse_object,
    utf8_error,
)

__all__ = ["object_bytes", "read_snapshot"]


def object_bytes(members: Mapping[str, bytes]) -> bytes:
    """JCS of an object whose values are already JCS bytes."""
    keys = sorted(members, key=key_order)
    return b"{" + b",".join(string_bytes(k) + b":" + members[k] for k in keys) + b"}"


def _layout_difference(members: Mapping[str, bytes], data: bytes) -> int | None:
    """Where `object_bytes(members)` first differs from `data` (None: they are equal),
    compared member by member instead of building the whole object again."""
    view = memoryview(data)
    pos = 0
    for i, key in enumerate(sorted(members, key=key_order)):
        piece = (b"{" if i == 0 else b",") + string_bytes(key) + b":" + members[key]
        if view[pos : pos + len(piece)] != piece:
            return pos + first_difference(piece, data[pos : pos + len(piece)])
        pos += len(piece)
    last = b"}" if members else b"{}"
    if view[pos : pos + len(last)] != last:
        return pos + first_difference(last, data[pos : pos + len(last)])
    pos += len(last)
    return None if pos == len(data) else pos


def read_snapshot(
    path: str, data: bytes, crc: int, verify: bool = False, *, window: int = WINDOW
) -> dict[str, bytes]:
    """The checkpoint base in a snapshot file's bytes `data` whose name says CRC `crc`.

    `window`: how many bytes are decoded as text at once (tests make it tiny). Raises
    `StoreCorrupted` if it is damaged (or, with `verify`, not canonical JCS).
    """
    if zlib.crc32(data) != crc:
        raise corrupted(path, 0, f"snapshot CRC mismatch (expected {crc:08x})")
    bad = utf8_error(data)
    if bad is not None:
        raise corrupted(path, bad, "snapshot is not UTF-8")
    positions: list[tuple[str, int]] | None = [] if verify else None
    try:
        members, end = parse_object(Window(data, len(data), window), 0, positions)
        if end != len(data):
            raise Malformed("data after the object", end)
    except Malformed as exc:
        raise corrupted(path, exc.pos, f"snapshot is not a JCS object ({exc})") from exc
    if verify:
        assert positions is not None
        problem = not_canonical(members, positions)
        differs = None if problem is not None else _layout_difference(members, data)
        if differs is not None:
            problem = Malformed("member order or layout differs", differs)
        if problem is not None:
            raise corrupted(path, problem.pos, f"snapshot is not canonical JCS ({problem})")
    return members
