"""The file store's readers parse in bounded windows (decision R51) and still read exactly
what the whole-file readers read: the same content, the same `StoreCorrupted` (offset and
reason) on any bytes. The oracle is the reader before R51 (`tests/codec_whole_file.py`)."""

from __future__ import annotations

import json
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import codec_whole_file as whole
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jfsm.errors import StoreCorrupted
from jfsm.jcs import canonical_bytes
from jfsm.projection import Projection
from jfsm.stores.file import scan
from jfsm.stores.file.log import encode_record, read_log
from jfsm.stores.file.snapshot import object_bytes, read_snapshot
from jfsm.stores.file.store import FileStore

PATH = "store/snapshot.00000001.00000000.json"

# Text with ASCII, Latin-1, BMP and astral characters, escapes and JSON's structure.
_TEXT = st.text(
    alphabet=st.sampled_from(list('ab"\\/{}[],:é€\U0001d11e\U0001f600\n\x00 \u2028')),
    max_size=12,
)
_NUMBERS = st.one_of(
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12,
)
_STORES = st.dictionaries(_TEXT, _VALUES, max_size=8)
# Bytes that matter to the parser and to UTF-8: structure, number parts, literals' first
# letters, white space, a zero, lone and leading bytes of multi-byte sequences.
_DAMAGE = st.sampled_from(list(b'{}[]",:\\0159.eE+-tfnuN x\x00\x7f\x80\xbf\xc3\xa9\xe2\xf0\x9f'))
_EDITS = st.lists(
    st.tuples(st.sampled_from(["replace", "insert", "delete"]), st.integers(0, 10**6), _DAMAGE),
    min_size=1,
    max_size=3,
)


def _encoded(store: dict[str, Any]) -> bytes:
    return object_bytes({key: canonical_bytes(value) for key, value in store.items()})


def _damaged(data: bytes, edits: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for op, where, byte in edits:
        at = where % (len(out) + 1)
        if op == "insert":
            out[at:at] = bytes([byte])
        elif at < len(out):
            if op == "replace":
                out[at] = byte
            else:
                del out[at]
    return bytes(out)


def _outcome(read: Callable[[], Any]) -> tuple[str, Any]:
    """What a reader does: ("read", content) or ("refused", the error's details)."""
    try:
        return "read", read()
    except StoreCorrupted as exc:
        return "refused", exc.details


def _snapshot_both(data: bytes, window: int, verify: bool) -> tuple[Any, Any]:
    crc = zlib.crc32(data)
    new = _outcome(lambda: read_snapshot(PATH, data, crc, verify, window=window))
    old = _outcome(lambda: whole.read_snapshot(PATH, data, crc, verify))
    return new, old


def _log_outcome(read: Callable[[], tuple[list[Projection], int]]) -> tuple[str, Any]:
    def content() -> Any:
        projections, end = read()
        return [(dict(p.sets), p.deletes) for p in projections], end

    return _outcome(content)


def _frame(payload: bytes) -> bytes:
    """A record with the right CRCs around any payload."""
    head = b"JFr1" + len(payload).to_bytes(4, "big") + zlib.crc32(payload).to_bytes(4, "big")
    return head + zlib.crc32(head).to_bytes(4, "big") + payload


# -- property tests against the whole-file reader ---------------------------------------
@pytest.mark.req("JF-STORE-028")
@given(store=_STORES, window=st.integers(1, 80), verify=st.booleans())
def test_a_windowed_snapshot_read_is_what_was_written(
    store: dict[str, Any], window: int, verify: bool
) -> None:
    data = _encoded(store)
    new, old = _snapshot_both(data, window, verify)
    expected = {key: canonical_bytes(value) for key, value in store.items()}
    assert new == old == ("read", expected)


@pytest.mark.req("JF-STORE-028")
@given(store=_STORES, edits=_EDITS, window=st.integers(1, 80), verify=st.booleans())
@example(store={"a": 1.5}, edits=[("replace", 7, ord("x"))], window=7, verify=False)
@example(store={"a": 15}, edits=[("insert", 6, ord("."))], window=7, verify=False)
@example(store={"a": "\U0001d11e"}, edits=[("delete", 8, 0)], window=8, verify=False)
def test_a_damaged_snapshot_gets_the_whole_file_readers_verdict(
    store: dict[str, Any], edits: list[tuple[str, int, int]], window: int, verify: bool
) -> None:
    """Damage under a right CRC (what only a buggy or hostile writer leaves): the windowed
    reader reads the same content or refuses at the same offset for the same reason."""
    new, old = _snapshot_both(_damaged(_encoded(store), edits), window, verify)
    assert new == old


_PROJECTIONS = st.lists(
    st.tuples(st.dictionaries(_TEXT, _VALUES, max_size=4), st.sets(_TEXT, max_size=3)).map(
        lambda p: Projection.of(p[0], p[1] - set(p[0]))
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.req("JF-STORE-028")
@given(projections=_PROJECTIONS, window=st.integers(1, 80), verify=st.booleans())
def test_a_windowed_log_read_is_what_was_written(
    projections: list[Projection], window: int, verify: bool
) -> None:
    data = b"".join(encode_record(p) for p in projections) + bytes(7)
    new = _log_outcome(lambda: read_log(PATH, data, verify, window=window))
    old = _log_outcome(lambda: whole.read_log(PATH, data, verify))
    written = [(dict(p.sets), p.deletes) for p in projections]
    assert new == old == ("read", (written, len(data) - 7))


@pytest.mark.req("JF-STORE-028")
@given(
    projections=_PROJECTIONS,
    edits=_EDITS,
    window=st.integers(1, 80),
    verify=st.booleans(),
)
def test_a_damaged_record_gets_the_whole_file_readers_verdict(
    projections: list[Projection],
    edits: list[tuple[str, int, int]],
    window: int,
    verify: bool,
) -> None:
    """A payload damaged under right CRCs, followed by a valid record: the same verdict."""
    payload = encode_record(projections[0])[16:]
    rest = b"".join(encode_record(p) for p in projections[1:])
    data = _frame(_damaged(payload, edits)) + rest + encode_record(Projection.of({"e": 5}))
    new = _log_outcome(lambda: read_log(PATH, data, verify, window=window))
    old = _log_outcome(lambda: whole.read_log(PATH, data, verify))
    assert new == old


@pytest.mark.req("JF-STORE-028")
@given(data=st.binary(max_size=40), chunk=st.integers(1, 9), start=st.integers(0, 5))
@example(data="\U0001d11e".encode() * 3, chunk=3, start=0)
@example(data=b"ab\xf0\x9f\x98", chunk=2, start=0)
@example(data=b"a\xc3(", chunk=2, start=0)
def test_the_chunked_utf8_check_finds_the_first_bad_byte(
    data: bytes, chunk: int, start: int
) -> None:
    """Chunk boundaries (here 1 to 9 bytes apart) inside multi-byte sequences change
    nothing: the offset is where a whole decode of the range fails."""
    start = min(start, len(data))
    try:
        data[start:].decode("utf-8")
        expected = None
    except UnicodeDecodeError as exc:
        expected = start + exc.start
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(scan, "_UTF8_CHUNK", chunk)
        found = scan.utf8_error(b"\xff" * 3 + data + b"\xff", start + 3, len(data) + 3)
    assert found == (None if expected is None else expected + 3)


# -- window boundaries, every one ------------------------------------------------------
_TRICKY = _encoded(
    {
        "a": 1.5,
        "b": -1e21,
        "c": "\U0001d11ex\U0001f600",
        "d": [True, False, None],
        "é": '\\"',
        "n": 1234567890123456,
        "o": {"\U0001f600": [], "x": {}},
    }
)


@pytest.mark.req("JF-STORE-028")
@pytest.mark.parametrize("window", range(1, len(_TRICKY) + 3))
def test_every_window_size_reads_a_snapshot_of_numbers_literals_and_astral_text(
    window: int,
) -> None:
    """Each size puts a boundary somewhere else: inside `1.5` (after `1.`), `-1e+21` (after
    `e` or `+`), `true`, a 4-byte character, an escape, a name; at exactly the file's size
    and one past it."""
    crc = zlib.crc32(_TRICKY)
    expected = whole.read_snapshot(PATH, _TRICKY, crc)
    assert read_snapshot(PATH, _TRICKY, crc, window=window) == expected
    assert read_snapshot(PATH, _TRICKY, crc, True, window=window) == expected


@pytest.mark.req("JF-STORE-028")
@pytest.mark.parametrize("window", range(1, len(_TRICKY) + 3, 3))
@pytest.mark.parametrize("damage", [b"x", b"\x00", b"\xff", b'"', b"."])
def test_a_damaged_byte_at_any_window_boundary_is_refused_as_before(
    window: int, damage: bytes
) -> None:
    """The damaged byte sits at offset `window` (the first byte of the second window) and
    at `window - 1` (the last of the first one): same offset and reason as the oracle."""
    for at in (window - 1, window):
        if not 0 <= at < len(_TRICKY):
            continue
        data = _TRICKY[:at] + damage + _TRICKY[at + 1 :]
        new, old = _snapshot_both(data, window, False)
        assert new == old


@pytest.mark.req("JF-STORE-028")
@pytest.mark.parametrize("window", [1, 2, 4, scan.WINDOW])
def test_an_empty_snapshot_file_is_refused_at_offset_0(window: int) -> None:
    with pytest.raises(StoreCorrupted) as refused:
        read_snapshot(PATH, b"", zlib.crc32(b""), window=window)
    assert refused.value.details["offset"] == 0
    assert "expected '{'" in refused.value.details["reason"]


@pytest.mark.req("JF-STORE-028")
@pytest.mark.parametrize("cut", [0, 1, 2, 3, 4, 5, 6])
def test_a_value_ending_near_the_window_end_is_parsed_again_not_cut(cut: int) -> None:
    """`{"a":15,...}` with the window ending `cut` bytes after `1`: a parse that stops at the
    window's end would read 1, or 1. then fail; the reader reads 15 (and 1.5, 1e+21)."""
    for value in (15, 1.5, 1e21, 12345):
        data = _encoded({"a": value, "b": 0})
        window = len('{"a":') + 1 + cut
        assert read_snapshot(PATH, data, zlib.crc32(data), window=window) == {
            "a": canonical_bytes(value),
            "b": b"0",
        }


@pytest.mark.req("JF-STORE-028")
def test_a_value_larger_than_the_window_grows_it_and_the_next_one_starts_small() -> None:
    big = "x" * 5000
    data = _encoded({"a": big, "b": 1, "c": "\U0001f600" * 700})
    members = read_snapshot(PATH, data, zlib.crc32(data), window=64)
    assert json.loads(members["a"]) == big and members["b"] == b"1"
    assert json.loads(members["c"]) == "\U0001f600" * 700


# -- memory ----------------------------------------------------------------------------
def _multi_mib_store(mib: int) -> dict[str, bytes]:
    """`mib` MiB of values of ~4 KiB: ASCII with some Latin-1 and BMP text."""
    line = ("the keeper of the lighthouse counts é and € " * 100)[:4000]
    count = mib * 1024 * 1024 // (len(line) + 20)
    return {f"key{i:06d}": canonical_bytes(f"{i}:{line}") for i in range(count)}


def _traced_peak(run: Callable[[], object]) -> int:
    """The peak of Python's allocations while `run` runs, over what was allocated before."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        kept = run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del kept
    return peak - before


@pytest.mark.req("JF-STORE-029")
def test_the_snapshot_reader_holds_no_second_copy_of_the_file() -> None:
    """Reading a 6 MiB snapshot allocates its members (about the file's size) and a window,
    never the file again as text: under 1.4x the file, with `verify` too (which compares
    member by member, not a second encoding of the whole object). The whole-file reader,
    measured the same way, needs over 1.9x, and 2.9x with `verify` (the check can tell)."""
    data = object_bytes(_multi_mib_store(6))
    crc = zlib.crc32(data)
    for verify, before in ((False, 1.9), (True, 2.9)):
        windowed = _traced_peak(lambda: read_snapshot(PATH, data, crc, verify))  # noqa: B023
        whole_file = _traced_peak(lambda: whole.read_snapshot(PATH, data, crc, verify))  # noqa: B023
        assert whole_file > before * len(data)
        assert windowed < 1.4 * len(data)


@pytest.mark.req("JF-STORE-029")
def test_reopening_a_multi_mib_store_peaks_under_three_times_its_snapshot(
    tmp_path: Path,
) -> None:
    """The whole reopen (the file's bytes, its members, the image): under 2.6x the snapshot
    file; with a text copy of the file it was over 3x."""
    with FileStore.open_sync(tmp_path) as store:
        store.seed_sync(_multi_mib_store(6))
    size = sum(p.stat().st_size for p in tmp_path.glob("snapshot.*.json"))

    def reopen() -> object:
        store = FileStore.open_sync(tmp_path)
        store.close_sync()
        return store

    assert _traced_peak(reopen) < 2.6 * size


@pytest.mark.req("JF-STORE-029")
def test_the_log_reader_copies_no_payload() -> None:
    """A log of one 6 MiB record (a projection setting many keys): replaying it allocates
    the values (about the record's size) and a window, not the payload again as bytes and
    as text: under 1.4x the log. The whole-file reader copied both: over 2.5x."""
    data = encode_record(Projection.encoded(_multi_mib_store(6)))
    windowed = _traced_peak(lambda: read_log(PATH, data))
    whole_file = _traced_peak(lambda: whole.read_log(PATH, data))
    assert whole_file > 2.5 * len(data)
    assert windowed < 1.4 * len(data)
