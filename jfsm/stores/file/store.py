"""The durable file store: snapshot + checksummed preallocated log + manifest + OS lock
(decisions D12, R27, R28).

**The one concept: one game's durable store on disk, each commit all or nothing.** The
directory's format is the package's essay (`jfsm.stores.file`); what stays here is the
commit protocol, its async and blocking surfaces, and its errors.

# Protocol

- The lock (decision R28): `flock(LOCK_EX | LOCK_NB)` on the directory itself, opened
  read-only, which nobody can unlink under the holder (and on `lock`). `jfsm inspect` takes
  it shared, so it never reads a store while a writer changes it.
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
- `checkpoint` to generation g+1: create `log.g+1` with its header and fsync it, write
  the snapshot to its temp file and fsync it, rename it into place, fsync the directory
  (the new files are durable before anything names them); then write the manifest naming
  them to `manifest.tmp`, fsync it and rename it over `manifest`: that rename is the commit
  point, the second directory fsync makes it durable; then the files of g are removed.
- `open`: read what the manifest names (a directory without one: see
  `jfsm.stores.file.directory`); replay the log (its bytes read whole: checkpoint to bound
  it; parsed in windows, so no second copy of a file is held, decision R51); if
  anything follows the last valid record (zeros left by a session that did not close, or a
  torn tail), truncate the log there and fsync it, so a session starts with nothing
  allocated past its last record and only ever writes into extents it synced itself.
  A new store gets its id and a log with its header; it, or a store written before R27,
  gets its manifest now (temp file, fsync, rename, directory fsync; a new one also fsyncs
  the parent). Then the leftovers are removed.

So a crash at any instant reopens to the state before or after the projection or
checkpoint in flight; before/after a checkpoint differ only in the change log.

# Shared mode (decision R173)

`open_shared` takes a new ownership epoch (`jfsm.stores.file.ownership.take`); from then on
`commit` is the epoch's append (one `O_APPEND` write, `fdatasync`, the position check:
`StoreFenced` once a newer owner sealed the log), `checkpoint` and `seed` continue the epoch
in a new log with a new base (the continuation record is the commit point), `confirm`
checks the log is unsealed, `close` ends the lease. A write whose sync failed, or that was
cut short, leaves the store *broken* (the log is never cut back: others append to it).
A plain `open` of a store in the epoch format converts it to this format first (R175).

# Async and blocking surfaces (decision R65)

`commit`, `seed`, `checkpoint` and `close` are coroutines, one at a time per store: checks
and encoding run on the event loop, the blocking part (write, extension, fsync, rename,
truncate, unlock) off it (`jfsm.stores.offload`), and the image changes on the loop only
once that part succeeded. `commit_sync`, `seed_sync`, `checkpoint_sync` and `close_sync`
are the same operations (the same steps) run in the calling thread, for callers without an
event loop (the crash tests, tools, `with FileStore.open_sync(...)`); use one surface at a
time. Opening is the same: `await FileStore.open(...)` reads and recovers the store off the
loop, `FileStore.open_sync(...)` in the calling thread (decision R162).

# Errors

- `open`: after the last valid record, the end of the file or a run of zeros to the end
  is the end of the log. Otherwise the first bad record (short, bad magic or CRC, payload
  past the end) is a torn tail, an uncommitted projection, if no valid record follows it
  (zeros after it included): it is dropped and the log truncated there. A bad record
  followed by a valid one, a record that passes its CRCs but does not decode, a snapshot
  that fails its CRC or does not parse, content that fails `verify`, a damaged manifest, a
  live file missing, or a store file no run of the protocol leaves (a log with records
  newer than the live one, a file of a later generation) raise `StoreCorrupted`, whose
  message and `details` name the file and the byte offset (of the record, for a log);
  nothing is changed then. Damage confined to the very last record cannot be told from a
  torn write and is treated as one. Another holder of the lock: `StoreLocked` naming the
  directory. A file-system error (permission denied, read-only file system, name too
  long, not a directory...): `StoreUnavailable` with `details` `errno` and `errno_name`.
- `commit`: when the extension, write or sync fails, the log is truncated back to the last
  committed record and fsynced (dropping the preallocation), the image is unchanged and
  the error propagates; the store stays usable. If that rollback fails too, the store is
  *broken*.
- `checkpoint`: a failure before the manifest's rename removes what it wrote (best effort)
  and changes nothing; a failure of that rename or of the directory fsync after it leaves
  the store *broken*.
- A broken store refuses `commit` and `checkpoint` with `StoreUnavailable` (state
  `"broken"`); close it and reopen, which resolves the failed operation to done or not
  done, exactly as after a crash. A closed store refuses them with state `"closed"`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno as errno_names
import functools
import os
import zlib
from collections.abc import Callable, Mapping
from typing import TypeVar

import jfsm.observability as observability
from jfsm.errors import InvalidInput, StoreLocked, StoreUnavailable
from jfsm.image import QUOTA_BYTES, StoreImage, seeded_image
from jfsm.limits import validate_owner
from jfsm.projection import Projection
from jfsm.stores.file.directory import Contents, read_contents
from jfsm.stores.file.epochs import encode_changes, epochs_of
from jfsm.stores.file.fsio import FileSystem, OsFileSystem
from jfsm.stores.file.lease import DEFAULT_LEASE_SECONDS
from jfsm.stores.file.log import encode_record, log_header
from jfsm.stores.file.manifest import (
    MANIFEST_NAME,
    MANIFEST_TMP,
    Manifest,
    encode_manifest,
    log_name,
    parse_name,
    snapshot_name,
)
from jfsm.stores.file.ownership import Epoch, Step, take
from jfsm.stores.file.snapshot import object_bytes
from jfsm.stores.offload import Steps, run_blocking, run_steps, run_steps_sync

T = TypeVar("T")

__all__ = ["FileStore", "fs_unavailable"]


def fs_unavailable(directory: str, what: str, cause: OSError, state: str) -> StoreUnavailable:
    """The protocol's error for a file-system failure: `store_unavailable` naming the errno."""
    code = cause.errno
    name = "no errno" if code is None else errno_names.errorcode.get(code, f"errno {code}")
    reason = cause.strerror or str(cause)
    return StoreUnavailable(
        f"store {directory} could not {what}: {name} ({reason})",
        state=state,
        errno=cause.errno,
        errno_name=name,
    )


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
        store_id: str | None = None,
        epoch: Epoch | None = None,
    ) -> None:
        # Use `FileStore.open`; this only assembles what it recovered.
        self._epoch = epoch  # shared mode: every write lands in this epoch or is fenced (R173)
        self._store_id = store_id  # None until the first checkpoint of a store before R27
        # Where the log's records start: after its header (none in a log from before R27).
        self._log_start = 0 if store_id is None else len(log_header(generation, store_id))
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
        self._writes = 0  # writes landed as the epoch's owner (shared mode, R121)
        self._serial = asyncio.Lock()  # one async operation at a time

    # -- opening -------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        quota: int = QUOTA_BYTES,
        fs: FileSystem | None = None,
        verify: bool = False,
    ) -> FileStore:
        """`open_sync` run off the event loop (decision R162): `store = await
        FileStore.open(directory)` in async code. Arguments and errors as `open_sync`."""
        return await run_blocking(
            functools.partial(cls.open_sync, directory, quota=quota, fs=fs, verify=verify)
        )

    @classmethod
    def open_sync(
        cls,
        directory: str | os.PathLike[str],
        *,
        quota: int = QUOTA_BYTES,
        fs: FileSystem | None = None,
        verify: bool = False,
    ) -> FileStore:
        """Open (creating it if missing) the store in `directory`, recovering after a crash,
        in the calling thread (blocking code; `await FileStore.open(...)` in async code).

        `verify` re-canonicalizes every value and re-encodes the snapshot and every log
        record, refusing anything not byte for byte what the store writes; without it the
        CRCs and a parse of each value vouch for the content (`jfsm.stores.file.log`,
        `jfsm.stores.file.snapshot`).

        Raises `InvalidInput` for a quota that is not a positive integer, `StoreLocked` if
        another writer has it open, `StoreCorrupted` if it is damaged (naming the file),
        `StoreUnavailable` (state `closed`, `details["errno_name"]`) if the file system
        refuses, `EPERM` for a directory that is a link, another user's or writable by group
        or others (R74), `ELOOP` for a file of the store that is a link; `InvalidInput` for
        a path the system cannot take (a NUL in it). The lock is released again in every
        case.

        A store a shared directory's processes owned (the epoch format, decision R173) is
        converted back to this format here: its store, checkpoint base and change log as
        the latest epoch held them; its side values (the shared driver's participants) are
        not kept, for a plain driver never serves a shared directory (R95). Use
        `open_shared` to own a game of a shared directory.
        """
        if type(quota) is not int or quota <= 0:
            raise InvalidInput(f"quota must be a positive integer of bytes, not {quota!r}")
        fs = fs or OsFileSystem()
        path = os.fspath(directory)
        try:
            fs.makedirs(path)
            lock = fs.lock(path)
        except ValueError as exc:  # a NUL in the path
            raise InvalidInput(f"store directory {path!r} is not a usable path: {exc}") from None
        except BlockingIOError as exc:
            raise StoreLocked(f"store {path} is locked by another writer", directory=path) from exc
        except OSError as exc:
            raise fs_unavailable(path, "open", exc, "closed") from exc
        try:
            return cls._recover(path, fs, lock, quota, verify)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                fs.unlock(lock)
            if isinstance(exc, OSError):
                raise fs_unavailable(path, "open", exc, "closed") from exc
            raise

    @classmethod
    @observability.traced(
        observability.lease_name,
        attributes=lambda cls, directory, **given: {
            "jfsm.store.backend": "file",
            "jfsm.game.id": given.get("game", ""),
        },
        on_success=lambda *_, takeover=False, **__: (
            observability.takeover("file") if takeover else None
        ),
    )
    def open_shared(
        cls,
        directory: str | os.PathLike[str],
        *,
        game: str,
        root: str | os.PathLike[str],
        owner: str,
        lease_folder: str | os.PathLike[str] | None = None,
        takeover: bool = False,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        quota: int = QUOTA_BYTES,
        trusted: bool = False,
        step: Step | None = None,
    ) -> FileStore:
        """Own game `game` of a directory that several processes on one host share (decision
        R173) and open its store in `directory`: a new ownership epoch, its token from
        `root`'s sequence (`jfsm.stores.file.tokens`), the store read from the files as the
        previous owner landed them (`jfsm.stores.file.ownership.take`). Every later write
        lands in this epoch or is refused with `StoreFenced` (nothing of it visible), and no
        lock is held between calls. `lease_folder`: the game's folder, where a jfsm before
        R173 kept its lease (read and removed once, R175). `step`: the tests' seam
        (`jfsm.stores.file.ownership`).

        Raises `StoreLocked` while another owner id's lease is live (unless `takeover`), when
        another open of the game won a race, or while a process of one holds the store (R120);
        `StoreCorrupted`; `StoreUnavailable` for a file-system error; `InvalidInput` for an
        owner id that does not match `jfsm.limits.OWNER_PATTERN` or a bad quota.
        """
        validate_owner(owner)
        if type(quota) is not int or quota <= 0:
            raise InvalidInput(f"quota must be a positive integer of bytes, not {quota!r}")
        fs = OsFileSystem(trusted=trusted, shared=True)
        path = os.fspath(directory)
        try:
            fs.makedirs(path)
            lock = fs.lock(path)
        except ValueError as exc:  # a NUL in the path
            raise InvalidInput(f"store directory {path!r} is not a usable path: {exc}") from None
        except BlockingIOError as exc:
            raise StoreLocked(
                f"store {path} is locked by another process (a process of one, or another "
                f"program holding a lock on {path} or its lock file)",
                directory=path,
            ) from exc
        except OSError as exc:
            raise fs_unavailable(path, "open", exc, "closed") from exc
        try:
            epoch, image = take(
                path,
                lock,
                game=game,
                root=os.fspath(root),
                owner=owner,
                takeover=takeover,
                seconds=lease_seconds,
                quota=quota,
                legacy_folder=None if lease_folder is None else os.fspath(lease_folder),
                step=step,
            )
        except BaseException as exc:
            with contextlib.suppress(OSError):
                fs.unlock(lock)
            if isinstance(exc, OSError):
                raise fs_unavailable(path, "open", exc, "closed") from exc
            raise
        return cls(path, fs, lock, image, epoch.generation, None, -1, 0, None, epoch)

    @classmethod
    def _recover(
        cls,
        directory: str,
        fs: FileSystem,
        lock: int,
        quota: int,
        verify: bool,
    ) -> FileStore:
        contents = read_contents(
            directory, fs.listdir(directory), fs.read, quota=quota, verify=verify
        )
        if contents.epoch is not None:  # owned by a shared directory's processes until now
            _convert_from_epochs(fs, directory, contents)
            contents = read_contents(
                directory, fs.listdir(directory), fs.read, quota=quota, verify=verify
            )
        found = contents.survey
        live = found.live
        end = contents.end
        if found.fresh:  # a new store: its id, and a log that starts with its header
            live = Manifest(0, None, live.log, os.urandom(8).hex())
        log_path = os.path.join(directory, live.log)
        log = _create(fs, log_path) if found.fresh else fs.open_write(log_path)
        try:
            if found.fresh:
                assert live.store is not None
                header = log_header(0, live.store)
                fs.write(log, header)
                fs.fsync(log)
                end = len(header)
            elif contents.tail is not None:  # a torn tail, or zeros a session left unused
                fs.truncate(log, contents.end)
                fs.fsync(log)
            if not found.has_manifest:  # a new store, or one written before R27
                _write_manifest(fs, directory, live)
                fs.fsync_dir(directory)
                if found.fresh:
                    fs.fsync_dir(os.path.dirname(os.path.abspath(directory)))
        except BaseException:
            with contextlib.suppress(OSError):
                fs.close(log)
            raise
        store = cls(
            directory,
            fs,
            lock,
            contents.image,
            live.generation,
            live.snapshot,
            log,
            end,
            live.store,
        )
        store._remove(list(found.leftovers))
        return store

    # -- the Store protocol --------------------------------------------------------------
    @property
    def image(self) -> StoreImage:
        return self._image

    @property
    def directory(self) -> str:
        """The store's directory."""
        return self._directory

    @property
    def token(self) -> int | None:
        """The fencing token of this owner (shared mode: its epoch's), else None."""
        return None if self._epoch is None else self._epoch.token

    @property
    def fence(self) -> Epoch | None:
        """The epoch this store writes in (shared mode, R173), else None: its `renew` is what
        a `jfsm.stores.file.lease.LeaseKeeper` calls."""
        return self._epoch

    @property
    def writes(self) -> int:
        """How many writes this handle landed as the epoch's owner (shared mode; each
        checked by its position in the epoch's log); 0 for a store of one process."""
        return self._writes

    @property
    def state(self) -> str:
        """This handle's state in the machine `store_ownership`: `owner`, `fenced`, `broken`
        or `closed`."""
        if self._lock is None:
            return "closed"
        if self._epoch is not None and self._epoch.fenced:
            return "fenced"
        return "broken" if self._broken else "owner"

    async def confirm(self) -> None:
        """Before serving a read of a game of a shared directory (decision R121): check that
        this handle's epoch is still unsealed, renewing the lease when due. Raises
        `StoreFenced` (state `fenced`) once another process took it over, `StoreUnavailable`
        on a closed store or when the log cannot be read. A store of one process only
        checks that it is open."""
        if self._lock is None:
            raise StoreUnavailable(f"store {self._directory} is closed", state="closed")
        epoch = self._epoch
        if epoch is None:
            return
        try:
            await run_blocking(epoch.check)
        except OSError as exc:
            raise self._unavailable("check its owner", exc) from exc

    @observability.traced(
        "jfsm.lease.renew",
        attributes=lambda self: {"jfsm.store.backend": "file"},
        result=lambda renewed: {"jfsm.lease.renewed": int(renewed)},
    )
    def renew_sync(self) -> bool:
        """Shared mode: renew this owner's lease now, as the idle timer does (only while its
        epoch is unsealed, JF-STORE-031); returns whether it was. A store of one process:
        True while open. Raises `StoreUnavailable` when the lease cannot be written, or on
        a closed store."""
        if self._lock is None:
            raise StoreUnavailable(f"store {self._directory} is closed", state="closed")
        if self._epoch is None:
            return True
        try:
            return self._epoch.renew()
        except OSError as exc:
            raise self._unavailable("renew its lease", exc) from exc

    def side(self, name: str) -> bytes | None:
        """Shared mode: the side value `name` (JCS bytes) as this owner last read or wrote
        it, None if never set. A store of one process keeps none (None)."""
        return None if self._epoch is None else self._epoch.sides.get(name)

    async def write_side(self, name: str, value: bytes) -> None:
        """Shared mode: set side value `name` to `value` (JCS bytes) as the owner, fenced as
        a commit is (`StoreFenced`: nothing of it visible). Raises `InvalidInput` on a store
        of one process, `StoreUnavailable` for a file-system error or a closed store."""
        await run_steps(self._serial, self._side(name, value))

    def write_side_sync(self, name: str, value: bytes) -> None:
        """`write_side` done entirely in the calling thread."""
        run_steps_sync(self._side(name, value))

    async def commit(self, projection: Projection) -> None:
        """Write `projection` durably after the last record (off the loop), then apply it
        (on the loop).

        Raises `QuotaExceeded` (nothing written), `StoreUnavailable` for a file-system error
        (rolled back; see the module docstring) or on a closed or broken store.
        """
        await run_steps(self._serial, self._commit(projection))

    def commit_sync(self, projection: Projection) -> None:
        """`commit` done entirely in the calling thread (see the module docstring)."""
        run_steps_sync(self._commit(projection))

    async def checkpoint(self) -> None:
        """Write the current store as the new snapshot and start an empty log (compaction).

        Does nothing when no projection was committed since the last snapshot.

        Raises `StoreUnavailable` for a file-system error (see the module docstring for what
        is left) or on a closed or broken store.
        """
        await run_steps(self._serial, self._checkpoint())

    def checkpoint_sync(self) -> None:
        """`checkpoint` done entirely in the calling thread."""
        run_steps_sync(self._checkpoint())

    async def seed(self, values: Mapping[str, bytes]) -> None:
        """Fill this *empty* store with `values` as its snapshot: the change log is empty.

        Raises `InvalidInput` if the store is not empty, `QuotaExceeded` if the footprint
        would exceed the quota (nothing written in either case), or as `checkpoint` does.
        """
        await run_steps(self._serial, self._seed(values))

    def seed_sync(self, values: Mapping[str, bytes]) -> None:
        """`seed` done entirely in the calling thread."""
        run_steps_sync(self._seed(values))

    async def close(self) -> None:
        """Give back the log's unused preallocation, close it and release the lock (off the
        loop, after the operation in progress, if any). Idempotent."""
        await run_steps(self._serial, self._close())

    def close_sync(self) -> None:
        """`close` done entirely in the calling thread. Idempotent."""
        run_steps_sync(self._close())

    # -- each operation once, as steps (`jfsm.stores.offload.Steps`)
    def _commit(self, projection: Projection) -> Steps:
        self._require_writable()
        self._image.check(projection)
        if projection.is_empty():
            return
        record = encode_record(projection)
        yield functools.partial(self._write_record, record)
        self._log_size += len(record)  # the record is durable: now the image shows it
        self._image.apply_unchecked(projection)

    def _checkpoint(self) -> Steps:
        self._require_writable()
        if self._epoch is not None:
            if self._epoch.records:  # else the base is the current store
                yield from self._continue_epoch(self._image)
        elif self._log_size != self._log_start:  # else the snapshot is the current store
            yield from self._install_snapshot(self._image)

    def _seed(self, values: Mapping[str, bytes]) -> Steps:
        self._require_writable()
        image = seeded_image(self._image, values)
        if self._epoch is not None:
            yield from self._continue_epoch(image)
        else:
            yield from self._install_snapshot(image)

    def _continue_epoch(self, image: StoreImage) -> Steps:
        """Shared mode: continue the epoch in a new log whose base is `image`'s store, then
        make `image` (checkpointed) the store's image."""
        assert self._epoch is not None
        values = image.values_bytes()
        yield functools.partial(self._in_epoch, "write a snapshot", self._epoch.checkpoint, values)
        image.checkpoint()
        self._image = image

    def _close(self) -> Steps:
        if self._lock is not None:
            lock, self._lock = self._lock, None
            yield functools.partial(self._release, lock)

    def _side(self, name: str, value: bytes) -> Steps:
        if self._epoch is None:
            raise InvalidInput("side values are kept only by a store of a shared directory")
        self._require_writable()
        yield functools.partial(
            self._in_epoch, "write a side value", self._epoch.write_side, name, value
        )

    def _in_epoch(self, what: str, write: Callable[..., T], *args: object) -> T:
        """`write(*args)` by the epoch (shared mode): `StoreFenced` passes through (nothing
        of it visible); an `OSError` is `StoreUnavailable` (state `broken` when the write may
        have half landed: close and reopen)."""
        assert self._epoch is not None
        try:
            done = write(*args)
        except OSError as exc:
            self._broken = self._broken or self._epoch.broken
            raise self._unavailable(what, exc) from exc
        self._writes += 1
        return done

    def _write_record(self, record: bytes) -> None:
        """`_append`, or in shared mode the epoch's append (R173)."""
        if self._epoch is not None:
            self._in_epoch("commit", self._epoch.append, record)
        else:
            self._append(record)

    def _append(self, record: bytes) -> None:
        """Write `record` after the last one and fdatasync it (the commit point); on failure
        roll the log back and raise `StoreUnavailable` (or the injected error)."""
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

    def _install_snapshot(self, image: StoreImage) -> Steps:
        """Write `image`'s store as the next generation's snapshot with an empty log, name
        them in the manifest, then make `image` (checkpointed) the store's image."""
        generation, snapshot, log, header_size, store_id = yield functools.partial(
            self._write_snapshot, image
        )
        old = [log_name(self._generation)]
        if self._snapshot is not None:
            old.append(self._snapshot)
        old_log = self._log
        self._log, self._log_size, self._allocated = log, header_size, header_size
        self._generation, self._snapshot, self._store_id = generation, snapshot, store_id
        self._log_start = header_size
        image.checkpoint()
        self._image = image
        yield functools.partial(self._remove, old, old_log)

    def _write_snapshot(self, image: StoreImage) -> tuple[int, str, int, int, str]:
        """`_write_generation` (a store of one process)."""
        return self._write_generation(image)

    def _write_generation(self, image: StoreImage) -> tuple[int, str, int, int, str]:
        """The files of `_install_snapshot`: (generation, snapshot, log handle, header size,
        store id). On failure removes what it wrote (before the manifest's rename) or marks
        the store broken (from it on), and raises `StoreUnavailable`."""
        fs, generation = self._fs, self._generation + 1
        content = object_bytes(image.values_bytes())
        tmp = f"snapshot.{generation:08d}.tmp"
        snapshot = snapshot_name(generation, zlib.crc32(content))
        new_log = log_name(generation)
        store_id = self._store_id or os.urandom(8).hex()
        header = log_header(generation, store_id)
        log: int | None = None
        naming = False  # from the manifest's rename on, the checkpoint may have happened
        try:
            log = _create(fs, self._path(new_log))
            fs.write(log, header)
            fs.fsync(log)
            _write_file(fs, self._path(tmp), content)
            fs.rename(self._path(tmp), self._path(snapshot))
            fs.fsync_dir(self._directory)  # the new files are durable before they are named
            _write_file(
                fs,
                self._path(MANIFEST_TMP),
                encode_manifest(Manifest(generation, snapshot, new_log, store_id)),
            )
            naming = True
            fs.rename(self._path(MANIFEST_TMP), self._path(MANIFEST_NAME))
            fs.fsync_dir(self._directory)
        except BaseException as exc:
            if naming:
                self._broken = True  # reopening tells which manifest is there
            if log is not None:
                with contextlib.suppress(OSError):
                    fs.close(log)
            if not naming:
                self._remove([tmp, snapshot, new_log, MANIFEST_TMP])
            if isinstance(exc, OSError):
                raise self._unavailable("write a snapshot", exc) from exc
            raise
        return generation, snapshot, log, len(header), store_id

    def _release(self, lock: int) -> None:
        """Trim the unused preallocation (best effort, not synced: zeros after the last
        record are harmless), close the log, release the lock. In shared mode: end the lease
        (while still the owner) and close the epoch's log; nothing is trimmed (the log has
        no preallocation, and an owner never cuts a log others append to)."""
        if self._epoch is not None:
            try:
                self._epoch.release()
            finally:
                self._fs.unlock(lock)
            return
        try:
            if self._allocated > self._log_size and not self._broken:
                with contextlib.suppress(OSError):
                    self._fs.truncate(self._log, self._log_size)
        finally:
            try:
                self._fs.close(self._log)
            finally:
                self._fs.unlock(lock)

    def __enter__(self) -> FileStore:
        return self

    async def __aenter__(self) -> FileStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """`async with await FileStore.open(path) as store:` closes it on leaving the block."""
        await self.close()

    def __exit__(self, *exc: object) -> None:
        self.close_sync()

    def __repr__(self) -> str:
        state = "closed" if self._lock is None else "broken" if self._broken else "open"
        return f"FileStore({self._directory!r}, generation={self._generation}, {state})"

    # -- internals -----------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return os.path.join(self._directory, name)

    def _require_writable(self) -> None:
        if self._lock is None:
            raise StoreUnavailable(f"store {self._directory} is closed", state="closed")
        if self._epoch is not None and self._epoch.fenced:
            raise self._epoch.fenced_error()
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
        return fs_unavailable(self._directory, what, cause, "broken" if self._broken else "open")

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

    def _remove(self, names: list[str], handle: int | None = None) -> None:
        """Best-effort removal of files a reopen would ignore or remove anyway (after closing
        `handle`, the previous generation's log)."""
        if handle is not None:
            with contextlib.suppress(OSError):
                self._fs.close(handle)
        for name in names:
            with contextlib.suppress(OSError):
                self._fs.remove(self._path(name))


def _create(fs: FileSystem, path: str) -> int:
    """Create the store's file `path` anew. Whatever has the name already (a leftover of a
    failed write, or a link someone planted) is not live, so it is removed (a link itself,
    never what it points to) and the file created again, never through it (R74)."""
    try:
        return fs.create(path)
    except FileExistsError:
        fs.remove(path)
        return fs.create(path)


def _write_file(fs: FileSystem, path: str, content: bytes) -> None:
    """Create `path` with `content` and fsync it (its name is made durable by the caller)."""
    handle = _create(fs, path)
    try:
        fs.write(handle, content)
        fs.fsync(handle)
    finally:
        fs.close(handle)


def _write_manifest(fs: FileSystem, directory: str, live: Manifest) -> None:
    """Replace the manifest by one naming `live` (the caller fsyncs the directory)."""
    _write_file(fs, os.path.join(directory, MANIFEST_TMP), encode_manifest(live))
    fs.rename(os.path.join(directory, MANIFEST_TMP), os.path.join(directory, MANIFEST_NAME))


def _convert_from_epochs(fs: FileSystem, directory: str, contents: Contents) -> None:
    """A store in the epoch format (`jfsm.stores.file.epochs`) opened by a process of one,
    which holds it exclusively: write its store as a new generation of this format (the
    latest epoch's checkpoint base as the snapshot, its change log as the log's one record),
    name it in the manifest, then remove the epochs' files, the latest epoch's chain of logs
    last and lowest first, so that a crash on the way leaves either format holding the same
    store (decision R175)."""
    state = contents.epoch
    assert state is not None
    names = fs.listdir(directory)
    plain = [parse_name(name) for name in names]
    generation = 1 + max((p.generation or 0 for p in plain if p is not None), default=0)
    store_id = state.header.store
    content = object_bytes(state.base)
    snapshot = snapshot_name(generation, zlib.crc32(content))
    log = log_name(generation)
    handle = _create(fs, os.path.join(directory, log))
    try:
        fs.write(
            handle,
            log_header(generation, store_id)
            + encode_changes(state.base, state.image.values_bytes()),
        )
        fs.fsync(handle)
    finally:
        fs.close(handle)
    tmp = os.path.join(directory, f"snapshot.{generation:08d}.tmp")
    _write_file(fs, tmp, content)
    fs.rename(tmp, os.path.join(directory, snapshot))
    fs.fsync_dir(directory)
    _write_manifest(fs, directory, Manifest(generation, snapshot, log, store_id))
    fs.fsync_dir(directory)
    epochs = epochs_of(names)
    latest = epochs[state.token]
    chain = [each.name for each in state.chain]
    doomed = [
        name for token, files in epochs.items() if token != state.token for name in files.names()
    ]
    doomed += [name for name in latest.logs.values() if name not in chain]
    doomed += chain
    doomed += [*latest.bases.values(), *latest.others]
    for name in doomed:
        fs.remove(os.path.join(directory, name))
    fs.fsync_dir(directory)
