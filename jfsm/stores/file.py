"""The durable file store: snapshot + checksummed append log + OS lock (decision D12).

# Layout

One directory per store:

- `lock`: held with `flock(LOCK_EX | LOCK_NB)` while a `FileStore` is open on the store.
- `snapshot.<gen>.<crc>.json`: the checkpoint base of generation `gen` (8 digits), the JCS
  object key -> value; `crc` is the CRC-32 of the file's bytes in 8 hex digits, so a
  damaged snapshot is detected. Generation 0 has no snapshot file: its base is `{}`.
- `log.<gen>.jfl`: the projections committed since that checkpoint, one record each. A
  missing log means an empty one.
- `snapshot.<gen>.tmp`: a snapshot being written; never read, removed at open.

Other files in the directory are left alone. A record is a 16-byte header (big-endian
u32s: magic `JFr1`, payload length, CRC-32 of the payload, CRC-32 of the first 12 header
bytes) and the payload, the JCS of `{"deletes": [key...], "sets": {key: value}}`. The
header CRC makes the length trustworthy. The bytes 0x00-0x1F never occur in a JCS
payload, while a length under 512 MiB starts with one, so in a log under 512 MiB no
payload can hold something that passes for a record.

# Protocol

- `commit`: preflight (`QuotaExceeded` writes nothing), append the record in one write,
  fsync, and only then apply it to the in-memory image. The fsync is the commit point.
- `checkpoint` to generation g+1: create the empty `log.g+1`, write the snapshot to its
  temp file and fsync it, rename it into place, fsync the directory. The rename is the
  commit point, the directory fsync makes it durable; then the files of g are removed.
- `open`: the newest snapshot wins; replay its log (read whole: checkpoint to bound it);
  remove leftovers (older generations, temp files, an empty log of the next generation from
  an interrupted checkpoint). Creating a store fsyncs its directory and the parent.

So a crash at any instant reopens to the state before or after the projection or
checkpoint in flight; before/after a checkpoint differ only in the change log.

# Errors

- `open`: the first bad record of the log (short, bad magic or CRC, payload past the end)
  is a torn tail, an uncommitted projection, if no valid record follows it: it is dropped
  and the log truncated there. A bad record followed by a valid one, a record that passes
  its CRCs but does not decode, a snapshot that fails its CRC or does not parse, or a log
  newer than the newest snapshot (other than an empty `log.g+1`) raise `StoreCorrupted`,
  whose message and `details` name the file and the byte offset; nothing is changed then.
  Damage confined to the very last record cannot be told from a torn write and is treated
  as one. Another holder of the lock: `StoreLocked` naming the directory.
- `commit`: when the write or fsync fails, the log is truncated back to the last committed
  record and fsynced, the image is unchanged and the error propagates; the store stays
  usable. If that rollback fails too, the store is *broken*.
- `checkpoint`: a failure before the rename removes what it wrote (best effort) and changes
  nothing; a failure of the directory fsync after it leaves the store *broken*.
- A broken store refuses `commit` and `checkpoint` with `InvalidTransition` (state
  `"broken"`); close it and reopen, which resolves the failed operation to done or not
  done, exactly as after a crash. A closed store refuses them with state `"closed"`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import zlib
from collections.abc import Mapping
from types import TracebackType

from jfsm.errors import InvalidInput, InvalidTransition, JfsmError, StoreCorrupted, StoreLocked
from jfsm.image import QUOTA_BYTES, StoreImage, seeded_image
from jfsm.jcs import key_order, string_bytes
from jfsm.projection import Projection
from jfsm.stores.fsio import FileSystem, OsFileSystem

__all__ = ["FileStore"]

LOCK_NAME = "lock"
MAGIC = b"JFr1"
_HEADER = struct.Struct(">4sIII")
HEADER_SIZE = _HEADER.size
_SNAPSHOT = re.compile(r"snapshot\.(\d{8,})\.([0-9a-f]{8})\.json")
_LOG = re.compile(r"log\.(\d{8,})\.jfl")
_TMP = re.compile(r"snapshot\.\d{8,}\.tmp")


def _snapshot_name(generation: int, crc: int) -> str:
    return f"snapshot.{generation:08d}.{crc:08x}.json"


def _log_name(generation: int) -> str:
    return f"log.{generation:08d}.jfl"


def _object_bytes(members: Mapping[str, bytes]) -> bytes:
    """JCS of an object whose values are already JCS bytes."""
    keys = sorted(members, key=key_order)
    return b"{" + b",".join(string_bytes(k) + b":" + members[k] for k in keys) + b"}"


def encode_record(projection: Projection) -> bytes:
    """The framed log record of `projection`."""
    deletes = b",".join(string_bytes(k) for k in sorted(projection.deletes, key=key_order))
    payload = b'{"deletes":[' + deletes + b'],"sets":' + _object_bytes(projection.sets) + b"}"
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


def _decode_projection(path: str, offset: int, payload: bytes) -> Projection:
    try:
        body = json.loads(payload)
        if not isinstance(body, dict) or set(body) != {"deletes", "sets"}:
            raise ValueError("payload is not {deletes, sets}")
        sets, deletes = body["sets"], body["deletes"]
        if not isinstance(sets, dict) or not isinstance(deletes, list):
            raise ValueError("sets must be an object and deletes an array")
        return Projection.of(sets, deletes, label="replay")
    except (ValueError, JfsmError) as exc:
        raise _corrupted(path, offset, f"undecodable log record ({exc})") from exc


def read_log(path: str, data: bytes) -> tuple[list[Projection], int]:
    """The committed projections of a log and the length of its valid prefix.

    Raises `StoreCorrupted` when a bad record is followed by a valid one.
    """
    projections: list[Projection] = []
    offset = 0
    while offset < len(data):
        found = _record_at(data, offset)
        if isinstance(found, str):
            later = data.find(MAGIC, offset + 1)
            while later != -1:
                if not isinstance(_record_at(data, later), str):
                    raise _corrupted(
                        path, offset, f"damaged log record ({found}) before a valid one at {later}"
                    )
                later = data.find(MAGIC, later + 1)
            return projections, offset  # a torn tail
        payload, end = found
        projections.append(_decode_projection(path, offset, payload))
        offset = end
    return projections, offset


def read_snapshot(path: str, data: bytes, crc: int) -> dict[str, bytes]:
    """The checkpoint base in a snapshot file. Raises `StoreCorrupted` if it is damaged."""
    if zlib.crc32(data) != crc:
        raise _corrupted(path, 0, f"snapshot CRC mismatch (expected {crc:08x})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _corrupted(path, exc.start, "snapshot is not UTF-8") from exc
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        where = len(text[: exc.pos].encode("utf-8"))
        raise _corrupted(path, where, f"snapshot is not JSON ({exc.msg})") from exc
    if not isinstance(body, dict):
        raise _corrupted(path, 0, "snapshot is not a JSON object")
    try:
        return dict(Projection.of(body).sets)
    except JfsmError as exc:
        raise _corrupted(path, 0, f"snapshot holds an unstorable value ({exc})") from exc


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
        self._log_size = log_size
        self._broken = False

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        quota: int = QUOTA_BYTES,
        fs: FileSystem | None = None,
    ) -> FileStore:
        """Open (creating it if missing) the store in `directory`, recovering after a crash.

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
            return cls._recover(path, fs, lock, quota)
        except BaseException:
            with contextlib.suppress(OSError):
                fs.unlock(lock)
            raise

    @classmethod
    def _recover(cls, directory: str, fs: FileSystem, lock: int, quota: int) -> FileStore:
        generation, snapshot, has_log, leftovers = _survey(fs, directory)
        base: dict[str, bytes] = {}
        if snapshot is not None:
            name, crc = snapshot
            path = os.path.join(directory, name)
            base = read_snapshot(path, fs.read(path), crc)
        image = StoreImage(base, quota=quota)
        log_path = os.path.join(directory, _log_name(generation))
        data = fs.read(log_path) if has_log else b""
        projections, size = read_log(log_path, data)
        for projection in projections:
            image.apply_unchecked(projection)
        log = fs.open_append(log_path) if has_log else fs.create(log_path)
        try:
            if not has_log:  # a new store, or a checkpoint whose new log did not survive
                fs.fsync(log)
                fs.fsync_dir(directory)
                if generation == 0:
                    fs.fsync_dir(os.path.dirname(os.path.abspath(directory)))
            elif size < len(data):  # a torn tail
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
        """Append `projection` durably, then apply it.

        Raises `QuotaExceeded` (nothing written), the file system's error (rolled back; see
        the module docstring), or `InvalidTransition` on a closed or broken store.
        """
        self._require_writable()
        self._image.check(projection)
        if projection.is_empty():
            return
        record = encode_record(projection)
        try:
            self._fs.write(self._log, record)
            self._fs.fsync(self._log)
        except BaseException as exc:
            self._roll_back(exc)
            raise
        self._log_size += len(record)
        self._image.apply_unchecked(projection)

    def checkpoint(self) -> None:
        """Write the current store as the new snapshot and start an empty log (compaction).

        Does nothing when no projection was committed since the last snapshot.

        Raises the file system's error (see the module docstring for what is left), or
        `InvalidTransition` on a closed or broken store.
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
        image = seeded_image(self._image, values)
        if self._log_size or self._snapshot is not None:
            raise InvalidInput("only an empty store can be seeded", directory=self._directory)
        self._install_snapshot(image)

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
        except BaseException:
            if renamed:
                self._broken = True
            if log is not None:
                with contextlib.suppress(OSError):
                    fs.close(log)
            if not renamed:
                self._remove([tmp, _log_name(generation)])
            raise
        old = [_log_name(self._generation)]
        if self._snapshot is not None:
            old.append(self._snapshot)
        with contextlib.suppress(OSError):
            fs.close(self._log)
        self._log, self._log_size = log, 0
        self._generation, self._snapshot = generation, snapshot
        image.checkpoint()
        self._image = image
        self._remove(old)

    def close(self) -> None:
        """Close the log and release the lock. Idempotent."""
        if self._lock is None:
            return
        lock, self._lock = self._lock, None
        try:
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
            raise InvalidTransition(f"store {self._directory} is closed", state="closed")
        if self._broken:
            raise InvalidTransition(
                f"store {self._directory} is broken by a failed write; close and reopen it",
                state="broken",
            )

    def _roll_back(self, cause: BaseException) -> None:
        """Cut the log back to its committed length after a failed append."""
        done = False
        try:
            self._fs.truncate(self._log, self._log_size)
            self._fs.fsync(self._log)
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
