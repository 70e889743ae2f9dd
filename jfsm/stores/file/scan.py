"""Reading JSON out of the file store's bytes in bounded windows, without re-canonicalizing.

The snapshot and log readers (`jfsm.stores.file.snapshot`, `jfsm.stores.file.log`) find the
members of a JCS object in a file's bytes and keep each value's bytes as they are; every
value is parsed (so it is complete JSON) and dropped. On error they raise `Malformed`
(a byte offset into the file and a reason), which the readers turn into `StoreCorrupted`
with `corrupted`.

# Windows (decision R51)

`json` parses `str`, and a file is bytes. Reading the bytes as Latin-1 (one character per
byte) keeps byte offsets and JSON's tokens: the structure is ASCII and every byte of a
multi-byte UTF-8 sequence is >= 0x80, which a JSON string may hold as is (so the bytes must
be valid UTF-8 first: `utf8_error`, and a name with non-ASCII is decoded again from its
bytes). Decoding a whole 30 MiB snapshot that way is a second copy of the file, and it was
the peak of a reopen. A `Window` decodes only `data[base:base + size]` (1 MiB by default)
and moves on: each name and value is parsed in the current window, and one that reaches its
end is parsed again in a window that starts where it starts (twice as large if it already
did). The result is the one a parse of the whole text gives, because:

- the decoder never looks before the value's start, so a window starting there (and
  reaching the end of the data) parses exactly as the whole text does, positions shifted;
- a success is kept only if at least `LOOKAHEAD` characters follow the value in the window:
  a string, array or object ends at its closing character, and a number or literal is
  decided by at most 3 characters after it (`1.` + digit, `1e+` + digit);
- a failure is reported only from a window reaching the end of the data: before that it
  may be the window's cut, so the window grows (to the end of the data, by doublings, on
  the error path: at most one copy of the rest of the file, as before).

So the text held at once is about one window, or twice the largest value.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from typing import Any

from jfsm.errors import InvalidInput, StoreCorrupted
from jfsm.jcs import canonical_bytes
from jfsm.text import require_text

__all__ = [
    "LOOKAHEAD",
    "WINDOW",
    "Malformed",
    "Window",
    "corrupted",
    "first_difference",
    "key_of",
    "not_canonical",
    "parse_object",
    "utf8_error",
    "value_at",
]

#: Bytes decoded as text at once (the window grows for a value that does not fit).
WINDOW = 1 << 20
#: Characters a value parsed in a window must leave after it before the window's end.
LOOKAHEAD = 4
_UTF8_CHUNK = 1 << 20


def corrupted(path: str, offset: int | None, reason: str) -> StoreCorrupted:
    """The `StoreCorrupted` naming `path`, the byte `offset` (None: the file as a whole,
    missing or not expected there) and the `reason`."""
    if offset is None:
        return StoreCorrupted(f"{path}: {reason}", file=path, reason=reason)
    return StoreCorrupted(
        f"{path}: {reason} at byte offset {offset}", file=path, offset=offset, reason=reason
    )


class Malformed(ValueError):
    """Content not in the layout the store writes; `pos` is a byte index into the data."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_Utf8Decoder = codecs.getincrementaldecoder("utf-8")


def utf8_error(data: bytes, start: int = 0, stop: int | None = None) -> int | None:
    """The byte offset of the first invalid UTF-8 in `data[start:stop]`, or None.

    Checks 1 MiB at a time and drops the text (a whole decode of a large file with astral
    characters builds a 4-bytes-per-character string); an ASCII chunk is skipped.
    """
    stop = len(data) if stop is None else stop
    if start == 0 and stop == len(data) and data.isascii():
        return None
    decoder = _Utf8Decoder()
    for at in range(start, stop, _UTF8_CHUNK):
        chunk = data[at : min(at + _UTF8_CHUNK, stop)]
        pending = decoder.getstate()[0]
        if not pending and chunk.isascii():
            continue
        try:
            decoder.decode(chunk)
        except UnicodeDecodeError as exc:  # its start counts from the buffered bytes
            return at - len(pending) + exc.start
    pending = decoder.getstate()[0]
    try:
        decoder.decode(b"", True)
    except UnicodeDecodeError as exc:
        return stop - len(pending) + exc.start
    return None


class Window:
    """The Latin-1 text of `data[base:base + len(text)]`, inside `data[:stop]`; `final`
    when it reaches `stop`. `data[:stop]` must be valid UTF-8 (module docstring)."""

    __slots__ = ("_size", "_view", "base", "data", "final", "size", "stop", "text")

    def __init__(self, data: bytes, stop: int, size: int = WINDOW) -> None:
        if size < 1:
            raise ValueError("a window holds at least one byte")
        self.data = data
        self.stop = stop
        self.size = size
        self._size = size
        self._view = memoryview(data)
        self.base = 0
        self.text = ""
        self.final = stop == 0

    def byte(self, pos: int) -> bytes:
        """The byte at `pos` (empty at or past `stop`), read from the bytes, not the text."""
        return self.data[pos : min(pos + 1, self.stop)]

    def cover(self, pos: int) -> None:
        """Make the window hold `pos` (or end at `stop`), moving it to start there if not."""
        if not (self.base <= pos and (pos < self.base + len(self.text) or self.final)):
            self._load(pos, self.size)

    def widen(self, pos: int) -> None:
        """Start the window at `pos`, twice as large if it already starts there."""
        if pos == self.base:
            self._size *= 2
        else:
            self._size = self.size
        self._load(pos, self._size)

    def _load(self, base: int, size: int) -> None:
        end = min(base + size, self.stop)
        self.text = ""  # drop the old text before decoding the new one
        self.text = codecs.latin_1_decode(self._view[base:end])[0]
        self.base = base
        self.final = end == self.stop


def value_at(window: Window, pos: int) -> tuple[Any, int]:
    """The JSON value starting exactly at `pos` (no white space first) and its end.
    Raises `Malformed` if it is not JSON (at the decoder's position)."""
    while True:
        base, final = window.base, window.final
        if not (base <= pos and (pos < base + len(window.text) or final)):
            window.cover(pos)
            base, final = window.base, window.final
        try:
            value, end = _DECODER.raw_decode(window.text, pos - base)
        except json.JSONDecodeError as exc:
            if final:
                raise Malformed(f"not JSON: {exc.msg}", base + exc.pos) from exc
        except (ValueError, RecursionError) as exc:
            if final:
                raise Malformed(f"not JSON: {exc}", pos) from exc
        else:
            if final or end + LOOKAHEAD <= len(window.text):
                return value, base + end
        window.widen(pos)


def key_of(raw: Any, pos: int) -> str:
    """`raw` as a key: a string without lone surrogates (`Malformed` at `pos` if not)."""
    if not isinstance(raw, str):
        raise Malformed("a key is not a string", pos)
    try:
        return require_text(raw, "key")
    except InvalidInput as exc:
        raise Malformed(str(exc), pos) from exc


def parse_object(
    window: Window, start: int, positions: list[tuple[str, int]] | None = None
) -> tuple[dict[str, bytes], int]:
    """The JSON object at `start` as member name -> the bytes of its value, and its end.

    The layout must be the one JCS writes: no white space, no duplicate names. Each value
    is parsed and dropped, its bytes kept as they are. `positions`, when given, receives
    (name, offset of the value) per member. Raises `Malformed` at the first problem.
    """
    data, stop = window.data, window.stop
    if window.byte(start) != b"{":
        raise Malformed("expected '{'", start)
    members: dict[str, bytes] = {}
    i = start + 1
    if window.byte(i) == b"}":
        return members, i + 1
    while True:
        if i >= stop or data[i] != 0x22:  # '"'
            raise Malformed("expected a member name", i)
        raw, colon = value_at(window, i)
        if not raw.isascii():  # read as Latin-1: decode the name's UTF-8 bytes for real
            raw = json.loads(data[i:colon])
        key = key_of(raw, i)
        if colon >= stop or data[colon] != 0x3A:  # ':'
            raise Malformed("expected ':'", colon)
        _, end = value_at(window, colon + 1)
        if key in members:
            raise Malformed(f"duplicate member name {key!r}", i)
        members[key] = data[colon + 1 : end]
        if positions is not None:
            positions.append((key, colon + 1))
        separator = data[end] if end < stop else None
        if separator == 0x7D:  # '}'
            return members, end + 1
        if separator != 0x2C:  # ','
            raise Malformed("expected ',' or '}'", end)
        i = end + 1


def not_canonical(
    members: Mapping[str, bytes], positions: list[tuple[str, int]]
) -> Malformed | None:
    """The first value that is not the JCS of what it parses to (the `verify` check)."""
    for key, pos in positions:
        value = members[key]
        try:
            canonical = canonical_bytes(json.loads(value))
        except (ValueError, RecursionError) as exc:
            return Malformed(f"value of {key!r} is not storable JSON ({exc})", pos)
        if canonical != value:
            return Malformed(f"value of {key!r} is not canonical JCS", pos)
    return None


def first_difference(a: bytes, b: bytes) -> int:
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
