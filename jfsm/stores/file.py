"""The durable file store: snapshot + checksummed preallocated log + OS lock (decision D12).

# Layout

One directory per store:

- `lock`: held with `flock(LOCK_EX | LOCK_NB)` while a `FileStore` is open on the store.
- `snapshot.<gen>.<crc>.json`: the checkpoint base of generation `gen` (8 digits), the JCS
  object key -> value; `crc` is the CRC-32 of the file's bytes in 8 hex digits, so a
  damaged snapshot is detected. Generation 0 has no snapshot file: its base is `{}`.
- `log.<gen>.jfl`: the projections committed since that checkpoint, one record each,
  possibly followed by zeros (unused preallocation). A missing log means an empty one.
- `snapshot.<gen>.tmp`: a snapshot being written; never read, removed at open.

Other files in the directory are left alone. A record is a 16-byte header (big-endian
u32s: magic `JFr1`, payload length, CRC-32 of the payload, CRC-32 of the first 12 header
bytes) and the payload, the JCS of `{"deletes": [key...], "sets": {key: value}}`. The
header CRC makes the length trustworthy. The bytes 0x00-0x1F never occur in a JCS
payload, while a length under 512 MiB starts with one, so in a log under 512 MiB no
payload can hold something that passes for a record. The magic has no zero byte, so no
header is all zeros, and a payload ends with `}`: zeros after a record are never part of it.

# Protocol

- `commit`: preflight (`QuotaExceeded` writes nothing), then write the record with one
  `pwrite` at the end of the last record and `fdatasync`; only then apply it to the
  in-memory image. The `fdatasync` is the commit point. The record always lands inside the
  *preallocated* part of the log: when it would not fit, the log is first extended with
  real zeros (it doubles in size, growing by 1 to 16 MiB, more if the record needs it)
  and `fsync`ed, which makes the new size and blocks durable; the directory does not
  change. So the per-commit `fdatasync` never has a size or block allocation to write: it
  only flushes the record's bytes (on ext4 and XFS; a copy-on-write file system such as
  btrfs or ZFS allocates anew on overwrite, so the gain may not be there).
- `close` gives the unused preallocation back (truncates the log after its last record,
  without a sync: zeros that come back after a power loss are harmless), so a closed
  store's files are exactly what the append-only layout had.
- `checkpoint` to generation g+1: create the empty `log.g+1`, write the snapshot to its
  temp file and fsync it, rename it into place, fsync the directory. The rename is the
  commit point, the directory fsync makes it durable; then the files of g are removed.
- `open`: the newest snapshot wins; replay its log (read whole: checkpoint to bound it);
  if anything follows the last valid record (zeros left by a session that did not close,
  or a torn tail), truncate the log there and fsync it, so a session starts with nothing
  allocated past its last record and only ever writes into extents it synced itself.
  Remove leftovers (older generations, temp files, an empty log of the next generation
  from an interrupted checkpoint). Creating a store fsyncs its directory and the parent.

So a crash at any instant reopens to the state before or after the projection or
checkpoint in flight; before/after a checkpoint differ only in the change log.

# Reading

The CRCs vouch for the bytes, and they are JCS written by this module, so `open` does not
re-canonicalize values: it checks that the content is UTF-8 and has the layout written
(each member name a string, each value complete JSON, parsed and dropped, no duplicate
names, nothing after the object) and keeps each value's bytes as they are in the file.
`FileStore.open(..., verify=True)` checks more, at the cost of re-encoding everything:
each value must be the canonical JCS of what it parses to (so storable I-JSON) and each
snapshot and record must be byte for byte what this module would write for its content.

# Errors

- `open`: after the last valid record, the end of the file or a run of zeros to the end
  is the end of the log. Otherwise the first bad record (short, bad magic or CRC, payload
  past the end) is a torn tail, an uncommitted projection, if no valid record follows it
  (zeros after it included): it is dropped and the log truncated there. A bad record
  followed by a valid one, a record that passes its CRCs but does not decode, a snapshot
  that fails its CRC or does not parse, content that fails `verify`, or a log newer than
  the newest snapshot (other than an empty `log.g+1`) raise `StoreCorrupted`, whose
  message and `details` name the file and the byte offset (of the record, for a log);
  nothing is changed then. Damage confined to the very last record cannot be told from a
  torn write and is treated as one. Another holder of the lock: `StoreLocked` naming the
  directory.
- `commit`: when the extension, write or sync fails, the log is truncated back to the last
  committed record and fsynced (dropping the preallocation), the image is unchanged and
  the error propagates; the store stays usable. If that rollback fails too, the store is
  *broken*.
- `checkpoint`: a failure before the rename removes what it wrote (best effort) and changes
  nothing; a failure of the directory fsync after it leaves the store *broken*.
- A broken store refuses `commit` and `checkpoint` with `StoreUnavailable` (state
  `"broken"`); close it and reopen, which resolves the failed operation to done or not
  done, exactly as after a crash. A closed store refuses them with state `"closed"`.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import struct
import zlib
from collections.abc import Mapping
from types import MappingProxyType, TracebackType
from typing import Any

from jfsm.errors import InvalidInput, StoreCorrupted, StoreLocked, StoreUnavailable
from jfsm.image import QUOTA_BYTES, StoreImage, seeded_image
from jfsm.jcs import canonical_bytes, key_order, string_bytes
from jfsm.projection import Projection
from jfsm.stores.fsio import FileSystem, OsFileSystem
from jfsm.text import require_text

__all__ = ["FileStore"]

LOCK_NAME = "lock"
MAGIC = b"JFr1"
assert 0 not in MAGIC  # so a record header is never all zeros: zeros are the log's end
_HEADER = struct.Struct(">4sIII")
HEADER_SIZE = _HEADER.size
_SNAPSHOT = re.compile(r"snapshot\.(\d{8,})\.([0-9a-f]{8})\.json")
_LOG = re.compile(r"log\.(\d{8,})\.jfl")
_TMP = re.compile(r"snapshot\.\d{8,}\.tmp")
_PAYLOAD_HEAD = '{"deletes":'
_PAYLOAD_SETS = ',"sets":'
_UTF8_CHUNK = 1 << 20


def _snapshot_name(generation: int, crc: int) -> str:
    return f"snapshot.{generation:08d}.{crc:08x}.json"


def _log_name(generation: int) -> str:
    return f"log.{generation:08d}.jfl"


def _object_bytes(members: Mapping[str, bytes]) -> bytes:
    """JCS of an object whose values are already JCS bytes."""
    keys = sorted(members, key=key_order)
    return b"{" + b",".join(string_bytes(k) + b":" + members[k] for k in keys) + b"}"


def _payload(projection: Projection) -> bytes:
    deletes = b",".join(string_bytes(k) for k in sorted(projection.deletes, key=key_order))
    return b'{"deletes":[' + deletes + b'],"sets":' + _object_bytes(projection.sets) + b"}"


def encode_record(projection: Projection) -> bytes:
    """The framed log record of `projection`."""
    payload = _payload(projection)
    head = struct.pack(">4sII", MAGIC, len(payload), zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


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


def _corrupted(path: str, offset: int, reason: str) -> StoreCorrupted:
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
        raise _corrupted(path, offset, reason) from exc
    if verify:
        assert positions is not None
        problem = _not_canonical(sets, positions)
        canonical = _payload(projection)
        if problem is None and canonical != payload:
            problem = _Malformed("not as encoded", _first_difference(canonical, payload))
        if problem is not None:
            reason = f"log record is not canonical JCS ({problem} at payload byte {problem.pos})"
            raise _corrupted(path, offset, reason)
    return projection


def _all_zero(data: bytes, start: int) -> bool:
    return data.count(0, start) == len(data) - start


def read_log(path: str, data: bytes, verify: bool = False) -> tuple[list[Projection], int]:
    """The committed projections of a log and the end of the last one.

    What follows that end is nothing, zeros (unused preallocation) or a torn tail. Raises
    `StoreCorrupted` when a bad record is followed by a valid one, or a record that passes
    its CRCs does not decode (or fails `verify`).
    """
    projections: list[Projection] = []
    offset = 0
    while offset < len(data):
        found = _record_at(data, offset)
        if isinstance(found, str):
            if _all_zero(data, offset):
                return projections, offset  # the end of the log
            later = data.find(MAGIC, offset + 1)
            while later != -1:
                if not isinstance(_record_at(data, later), str):
                    raise _corrupted(
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
        raise _corrupted(path, 0, f"snapshot CRC mismatch (expected {crc:08x})")
    bad = _utf8_error(data)
    if bad is not None:
        raise _corrupted(path, bad, "snapshot is not UTF-8")
    text = data.decode("latin-1")
    positions: list[tuple[str, int]] | None = [] if verify else None
    try:
        members, end = _parse_object(data, text, 0, positions)
        if end != len(data):
            raise _Malformed("data after the object", end)
    except _Malformed as exc:
        raise _corrupted(path, exc.pos, f"snapshot is not a JCS object ({exc})") from exc
    if verify:
        assert positions is not None
        problem = _not_canonical(members, positions)
        canonical = _object_bytes(members)
        if problem is None and canonical != data:
            problem = _Malformed(
                "member order or layout differs", _first_difference(canonical, data)
            )
        if problem is not None:
            raise _corrupted(path, problem.pos, f"snapshot is not canonical JCS ({problem})")
    return members


def _survey(fs: FileSystem, directory: str) -> tuple[int, tuple[str, int] | None, bool, list[str]]:
    """The current generation, its snapshot (name, CRC), whether its log exists, leftovers.

    Raises `StoreCorrupted` for two snapshots of the current generation or a log newer
    than it (other than the empty log of an interrupted checkpoint).
    """
    snapshots: dict[int, list[tuple[str, int]]] = {}
    logs: dict[int, str] = {}
    leftovers: list[str] = []
    for name in sorted(fs.listdir(directory)):
        if match := _SNAPSHOT.fullmatch(name):
            snapshots.setdefault(int(match[1]), []).append((name, int(match[2], 16)))
        elif match := _LOG.fullmatch(name):
            logs[int(match[1])] = name
        elif _TMP.fullmatch(name):
            leftovers.append(name)
    generation = max(snapshots, default=0)
    for gen, found in snapshots.items():
        if gen < generation:
            leftovers.extend(name for name, _ in found)
        elif len(found) > 1:
            path = os.path.join(directory, found[1][0])
            raise _corrupted(path, 0, f"two snapshots of generation {gen}")
    for gen, name in logs.items():
        path = os.path.join(directory, name)
        if gen < generation:
            leftovers.append(name)
        elif gen == generation + 1 and not fs.read(path):
            leftovers.append(name)  # the new log of an interrupted checkpoint
        elif gen > generation:
            raise _corrupted(path, 0, f"log of generation {gen} newer than the newest snapshot")
    current = snapshots.get(generation)
    return generation, current[0] if current else None, generation in logs, leftovers


class FileStore:
    """A durable store in a directory; see the module docstring for layout and errors."""

    durable = True
    #: The log grows in zero-filled extents: by as much as its size (doubling), but at
    #: least `extent_min` and at most `extent_max` bytes, and at least enough for the
    #: record that needs it; its size stays a multiple of `extent_min` (until `close` or
    #: `open` cuts it after the last record). Subclasses (tests) may change them.
    extent_min = 1 << 20
    extent_max = 16 << 20

    def __init__(
        self,
        directory: str,
        fs: FileSystem,
        lock: int,
        image: StoreImage,
        generation: int,
        snapshot: str | None,
        log: int,
        log_size: int,
    ) -> None:
        # Use `FileStore.open`; this only assembles what it recovered.
        self._directory = directory
        self._fs = fs
        self._lock: int | None = lock
        self._image = image
        self._generation = generation
        self._snapshot = snapshot
        self._log = log
        self._log_size = log_size  # the end of the last committed record
        self._allocated = log_size  # the log's synced size: zeros after `_log_size`
        self._broken = False

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        quota: int = QUOTA_BYTES,
        fs: FileSystem | None = None,
        verify: bool = False,
    ) -> FileStore:
        """Open (creating it if missing) the store in `directory`, recovering after a crash.

        `verify` re-canonicalizes every value and re-encodes the snapshot and every log
        record, refusing anything not byte for byte what the store writes; without it the
        CRCs and a parse of each value vouch for the content (module docstring, Reading).

        Raises `StoreLocked` if another writer has it open, `StoreCorrupted` if it is damaged
        (the lock is released again in both cases).
        """
        fs = fs or OsFileSystem()
        path = os.fspath(directory)
        fs.makedirs(path)
        try:
            lock = fs.lock(os.path.join(path, LOCK_NAME))
        except BlockingIOError as exc:
            raise StoreLocked(f"store {path} is locked by another writer", directory=path) from exc
        try:
            return cls._recover(path, fs, lock, quota, verify)
        except BaseException:
            with contextlib.suppress(OSError):
                fs.unlock(lock)
            raise

    @classmethod
    def _recover(
        cls, directory: str, fs: FileSystem, lock: int, quota: int, verify: bool
    ) -> FileStore:
        generation, snapshot, has_log, leftovers = _survey(fs, directory)
        base: dict[str, bytes] = {}
        if snapshot is not None:
            name, crc = snapshot
            path = os.path.join(directory, name)
            base = read_snapshot(path, fs.read(path), crc, verify)
        image = StoreImage(base, quota=quota)
        log_path = os.path.join(directory, _log_name(generation))
        data = fs.read(log_path) if has_log else b""
        projections, size = read_log(log_path, data, verify)
        for projection in projections:
            image.apply_unchecked(projection)
        log = fs.open_write(log_path) if has_log else fs.create(log_path)
        try:
            if not has_log:  # a new store, or a checkpoint whose new log did not survive
                fs.fsync(log)
                fs.fsync_dir(directory)
                if generation == 0:
                    fs.fsync_dir(os.path.dirname(os.path.abspath(directory)))
            elif size < len(data):  # a torn tail, or zeros a session left unused
                fs.truncate(log, size)
                fs.fsync(log)
        except BaseException:
            with contextlib.suppress(OSError):
                fs.close(log)
            raise
        snapshot_name = None if snapshot is None else snapshot[0]
        store = cls(directory, fs, lock, image, generation, snapshot_name, log, size)
        store._remove(leftovers)
        return store

    # -- the Store protocol --------------------------------------------------------------
    @property
    def image(self) -> StoreImage:
        return self._image

    @property
    def directory(self) -> str:
        """The store's directory."""
        return self._directory

    def commit(self, projection: Projection) -> None:
        """Write `projection` durably after the last record, then apply it.

        Raises `QuotaExceeded` (nothing written), the file system's error (rolled back; see
        the module docstring), or `StoreUnavailable` on a closed or broken store.
        """
        self._require_writable()
        self._image.check(projection)
        if projection.is_empty():
            return
        record = encode_record(projection)
        end = self._log_size + len(record)
        fs, log = self._fs, self._log
        try:
            if end > self._allocated:
                size = self._extent_end(end)
                fs.extend(log, self._allocated, size)
                fs.fsync(log)  # the new size and blocks: from now on fdatasync suffices
                self._allocated = size
            fs.pwrite(log, record, self._log_size)
            fs.fdatasync(log)
        except BaseException as exc:
            self._roll_back(exc)
            if isinstance(exc, OSError):
                raise self._unavailable("commit", exc) from exc
            raise
        self._log_size = end
        self._image.apply_unchecked(projection)

    def checkpoint(self) -> None:
        """Write the current store as the new snapshot and start an empty log (compaction).

        Does nothing when no projection was committed since the last snapshot.

        Raises the file system's error (see the module docstring for what is left), or
        `StoreUnavailable` on a closed or broken store.
        """
        self._require_writable()
        if self._log_size == 0:
            return  # nothing committed since the snapshot: it already is the current store
        self._install_snapshot(self._image)

    def seed(self, values: Mapping[str, bytes]) -> None:
        """Fill this *empty* store with `values` as its snapshot: the change log is empty.

        Raises `InvalidInput` if the store is not empty, `QuotaExceeded` if the footprint
        would exceed the quota (nothing written in either case), or as `checkpoint` does.
        """
        self._require_writable()
        self._install_snapshot(seeded_image(self._image, values))

    def _install_snapshot(self, image: StoreImage) -> None:
        """Write `image`'s store as the next generation's snapshot with an empty log, then
        make `image` (checkpointed) the store's image."""
        fs, generation = self._fs, self._generation + 1
        content = _object_bytes(image.values_bytes())
        tmp = f"snapshot.{generation:08d}.tmp"
        snapshot = _snapshot_name(generation, zlib.crc32(content))
        log: int | None = None
        renamed = False
        try:
            log = fs.create(self._path(_log_name(generation)))
            handle = fs.create(self._path(tmp))
            try:
                fs.write(handle, content)
                fs.fsync(handle)
            finally:
                fs.close(handle)
            fs.rename(self._path(tmp), self._path(snapshot))
            renamed = True
            fs.fsync_dir(self._directory)
        except BaseException as exc:
            if renamed:
                self._broken = True
            if log is not None:
                with contextlib.suppress(OSError):
                    fs.close(log)
            if not renamed:
                self._remove([tmp, _log_name(generation)])
            if isinstance(exc, OSError):
                raise self._unavailable("write a snapshot", exc) from exc
            raise
        old = [_log_name(self._generation)]
        if self._snapshot is not None:
            old.append(self._snapshot)
        with contextlib.suppress(OSError):
            fs.close(self._log)
        self._log, self._log_size, self._allocated = log, 0, 0
        self._generation, self._snapshot = generation, snapshot
        image.checkpoint()
        self._image = image
        self._remove(old)

    def close(self) -> None:
        """Give back the log's unused preallocation, close it and release the lock.
        Idempotent."""
        if self._lock is None:
            return
        lock, self._lock = self._lock, None
        try:
            try:
                if self._allocated > self._log_size and not self._broken:
                    # Best effort and not synced: zeros after the last record are harmless.
                    with contextlib.suppress(OSError):
                        self._fs.truncate(self._log, self._log_size)
            finally:
                self._fs.close(self._log)
        finally:
            self._fs.unlock(lock)

    def __enter__(self) -> FileStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._lock is None else "broken" if self._broken else "open"
        return f"FileStore({self._directory!r}, generation={self._generation}, {state})"

    # -- internals -----------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return os.path.join(self._directory, name)

    def _require_writable(self) -> None:
        if self._lock is None:
            raise StoreUnavailable(f"store {self._directory} is closed", state="closed")
        if self._broken:
            raise StoreUnavailable(
                f"store {self._directory} is broken by a failed write; close and reopen it",
                state="broken",
            )

    def _extent_end(self, end: int) -> int:
        """The log's size after the extension that makes room up to `end`."""
        unit = self.extent_min
        step = min(max(self._allocated, unit), self.extent_max)
        return max((self._allocated + step) // unit * unit, -(-end // unit) * unit)

    def _unavailable(self, what: str, cause: OSError) -> StoreUnavailable:
        """The protocol's error for an I/O failure; `state` says whether the store is still
        usable (`open`) or must be reopened (`broken`)."""
        return StoreUnavailable(
            f"store {self._directory} could not {what}: {cause}",
            state="broken" if self._broken else "open",
            errno=cause.errno,
        )

    def _roll_back(self, cause: BaseException) -> None:
        """Cut the log back to its committed length after a failed extension or write."""
        done = False
        try:
            self._fs.truncate(self._log, self._log_size)
            self._fs.fsync(self._log)
            self._allocated = self._log_size
            done = True
        except Exception as exc:
            cause.add_note(f"rolling the log back failed too ({exc!r}); the store is broken")
        finally:
            if not done:
                self._broken = True

    def _remove(self, names: list[str]) -> None:
        """Best-effort removal of files a reopen would ignore or remove anyway."""
        for name in names:
            with contextlib.suppress(OSError):
                self._fs.remove(self._path(name))
