"""Owning a game in a directory that several processes on one host share: ownership epochs,
with no lock, no wait and no signal (decision R173; the files: `jfsm.stores.file.epochs`).

**The one concept: who may write a shared game's store, decided by the order of appends and
exclusive creations alone.** Taking an epoch, an owner's writes and checkpoints in it, and
sealing it, with the I/O they need and nothing else.

This is `jfsm.stores.postgres.fencing` with files in place of rows, for `jfsm driver --state
DIR --shared`: K processes on one host serve the same games, one owner a game
(JF-STORE-010..014, 030..033, 045..048). It rests on two orderings that every runtime's
file API gives on a local file system: appends to a file opened with `O_APPEND` are totally
ordered (each lands at the end, whole, none between another's positioning and writing), and
a name is created by one `O_EXCL` open only. Nothing is locked, so nothing is waited for,
and no process is ever signalled: a process stopped anywhere (`SIGSTOP`, a frozen container)
delays no takeover, and a lock another program holds on any of these files changes nothing.

# An owner's write (`Epoch.append`)

The owner appends each record to its epoch's last log with **one** `write` (a short write
breaks the handle), `fdatasync`s it, then checks its **position**: the record must start at
the end of the owner's previous record (the file offset after the write minus the record's
length, or the bytes read back there). Foreign bytes before it are a seal (or a veto, which
changes nothing): the write did not count, for every reader reads a log only up to its first
seal; it answers `StoreFenced`, nothing of it visible, and the handle is fenced from then on.
A write in flight when a taker seals the log lands either before the seal (the taker reads
it, and its owner's check then passes) or after it (void, and the check fails); a stopped
owner that resumes after a takeover can never land an acknowledged write (JF-STORE-046).
A write whose log was removed (the game removed, perhaps made again) is fenced too
(JF-STORE-048). A read is served after the same check without a write: the log's size still
the owner's end (JF-STORE-030).

# A taker (`take`: an open, or an open with takeover)

1. Draw a token T (`jfsm.stores.file.tokens`) and create its first log `epoch.T.0`, empty,
   with `O_EXCL`.
2. List the store: an epoch above T means another open is under way: this one lost
   (`StoreLocked`, its own file removed).
3. From the highest epoch below T down, find the latest *established* one, L: an epoch whose
   lowest log begins with a whole header. One that does not yet is vetoed first (a veto
   appended), then read again: if its header came first it is established (L), else it is
   dead for good. So the epochs below T are settled before anything is judged: two opens
   racing each create their file before listing, and at least one sees the other.
4. A plain open reads L's lease: live and another owner id's, the open is refused
   (`StoreLocked`, nothing sealed: the old owner goes on). Takeover, the same owner id (R61),
   or a lease that is over go on. The store L holds is read (and checked) before anything
   else is written.
5. **Seal** L: append a seal to the last log of its chain; if a continuation of a
   checkpoint landed in that log before the seal, seal its next log too. From the seal on,
   L's owner can land nothing.
6. Read L's store again up to its first seal (the bytes its owner landed before the seal).
   With no established epoch, the store is the single-process format's, converted here
   (R175): its snapshot and log, and the lease of a jfsm before R173 in the game's folder.
7. Write T's lease, then its base (L's base linked, not copied; a new file for a converted
   store), make the directory durable, and append in **one** write T's header and the
   initial record (the change log carried over), `fdatasync`, and check it starts at 0: a
   veto first means a higher open won (`StoreLocked`, its files removed).
8. Write the manifest that keeps older jfsm versions out (once), and remove the files of
   every epoch below T and of the single-process format.

A taker never waits for anything: a stopped owner is simply sealed. An open that fails after
step 5 has fenced L without an owner taking its place; L's lease then runs out as a dead
owner's does (its owner renews no more once it sees the seal).

# A checkpoint within an epoch (`Epoch.checkpoint`)

Write the new base and the next log `epoch.T.(g+1)` with its header, make them durable,
then append the continuation `{"continued": g+1}` to log g with the position check: that
append is the commit point. A fenced continuation leaves the new files as leftovers, which
the owner removes. The older log and base are removed after.

# Seams

`step`: a callable given each named point of a take, write or checkpoint as it passes it
(`TAKE_STEPS`, `WRITE_STEPS`, `CHECKPOINT_STEPS`): the tests stop an owner at each
(`SIGSTOP`) or interleave two takers there. None in production.

Errors: `StoreLocked` (a live owner for a plain open; an open that lost a race),
`StoreFenced`, `StoreCorrupted` (naming the file and offset), `OSError` from the file system
(the store turns it into `StoreUnavailable`). A handle whose write may have half landed
(a short write, a failed sync) is *broken*: it must be closed, and the next open settles
what landed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jfsm.errors import StoreFenced, StoreLocked
from jfsm.image import StoreImage
from jfsm.stores.file.directory import read_plain_contents
from jfsm.stores.file.epochs import (
    EpochFiles,
    EpochHeader,
    EpochState,
    base_name,
    encode_changes,
    encode_continued,
    encode_header,
    encode_side,
    epochs_of,
    follow,
    foreign_verdict,
    has_seal,
    latest_established,
    log_name,
    parse_epoch_name,
    parse_log,
    read_state,
    seal_record,
    veto_record,
)
from jfsm.stores.file.lease import (
    LEGACY_LEASE,
    LeaseRecord,
    read_lease_at,
    read_legacy_lease,
    write_lease_at,
)
from jfsm.stores.file.manifest import (
    MANIFEST_NAME,
    encode_epochs_marker,
    is_epochs_marker,
    parse_name,
)
from jfsm.stores.file.snapshot import object_bytes
from jfsm.stores.file.tokens import next_token

__all__ = [
    "CHECKPOINT_STEPS",
    "TAKE_STEPS",
    "WRITE_STEPS",
    "Epoch",
    "Step",
    "current_lease",
    "current_lease_at",
    "remove_store",
    "seal_store",
    "take",
]

Step = Callable[[str], None]
#: the named points of a take, in order (`step` is told each as it passes it)
TAKE_STEPS = (
    "take:drawn",
    "take:created",
    "take:scanned",
    "take:checked",
    "take:sealed",
    "take:read",
    "take:leased",
    "take:based",
    "take:appended",
    "take:synced",
    "take:established",
    "take:cleaned",
)
#: the named points of an owner's write (a projection or a side value)
WRITE_STEPS = ("write:before", "write:appended", "write:synced", "write:landed")
#: the named points of a checkpoint (or seed) inside an epoch
CHECKPOINT_STEPS = (
    "checkpoint:before",
    "checkpoint:based",
    "checkpoint:logged",
    "checkpoint:appended",
    "checkpoint:synced",
    "checkpoint:landed",
)
RETRIES = 100  # scans restarted when a file vanished meanwhile (its owner's checkpoint)
HEAD = 1 << 16  # bytes read to tell how a log begins
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
_fdatasync = getattr(os, "fdatasync", os.fsync)


def _nothing(_point: str) -> None:
    return None


class _Lost(Exception):
    """This open lost a race to the open of epoch `token`."""

    def __init__(self, token: int) -> None:
        super().__init__(token)
        self.token = token


# -- file primitives relative to the store's directory ---------------------------------------
def _read(directory: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=directory)
    with open(fd, "rb", closefd=True) as file:
        return file.read()


class ShortAppend(OSError):
    """An append that wrote only part of its record (a full disk, a quota): a torn record is
    in the file, and its writer must not append after it."""


def _append_once(fd: int, data: bytes) -> None:
    """One `write` of all of `data` at the end of the file; `ShortAppend` (`EIO`) for a short
    one. A failing `write` (an `OSError`) wrote nothing."""
    written = os.write(fd, data)
    if written != len(data):
        raise ShortAppend(errno.EIO, f"short append ({written} of {len(data)} bytes)")


def _append_foreign(directory: int, name: str, record: bytes) -> None:
    """Append a foreign record (a veto or a seal) to log `name` (never creating it: a log
    removed meanwhile is `FileNotFoundError`). Not synced (decision R173: a seal is durable
    as soon as anything after it is)."""
    fd = os.open(name, os.O_WRONLY | os.O_APPEND | _NOFOLLOW, dir_fd=directory)
    try:
        os.write(fd, record)
    finally:
        os.close(fd)


def _create_log(directory: int, name: str, *, replace: bool = False) -> int:
    """Create log `name` (read and append), `O_EXCL`; `replace`: a leftover of this epoch's
    own under the name is removed first."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    try:
        return os.open(name, flags, 0o644, dir_fd=directory)
    except FileExistsError:
        if not replace:
            raise
        os.unlink(name, dir_fd=directory)
        return os.open(name, flags, 0o644, dir_fd=directory)


def _write_base(directory: int, token: int, generation: int, values: Mapping[str, bytes]) -> str:
    """Write `values` as the base of log `token.generation`, synced; returns its name."""
    content = object_bytes(values)
    name = base_name(token, generation, zlib.crc32(content))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    try:
        fd = os.open(name, flags, 0o644, dir_fd=directory)
    except FileExistsError:  # this epoch's own leftover (a checkpoint that failed)
        os.unlink(name, dir_fd=directory)
        fd = os.open(name, flags, 0o644, dir_fd=directory)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return name


def _link_base(
    directory: int, source: str | None, token: int, values: Mapping[str, bytes]
) -> str | None:
    """The base of a new epoch's first log: `source` (the previous base, holding `values`)
    linked under the new name, or written anew where it cannot be linked; None for an
    empty base."""
    if not values:
        return None
    crc = None
    if source is not None:
        parsed = parse_epoch_name(source) or parse_name(source)
        crc = None if parsed is None else parsed.crc
    if source is not None and crc is not None:
        name = base_name(token, 0, crc)
        try:
            os.link(source, name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
            return name
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory)
    return _write_base(directory, token, 0, values)


def _generation(name: str) -> int:
    parsed = parse_epoch_name(name)
    assert parsed is not None and parsed.generation is not None
    return parsed.generation


def _remove(directory: int, names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=directory)


# -- an owner's epoch --------------------------------------------------------------------------
class Epoch:
    """This process's ownership of one game: its epoch's token, its last log (open for
    appends) and where its own last record ends. Made by `take`; module docstring."""

    def __init__(
        self,
        *,
        directory: str,
        dir_fd: int,
        game: str,
        owner: str,
        token: int,
        seconds: float,
        header: EpochHeader,
        fd: int,
        end: int,
        records: int,
        step: Step | None = None,
    ) -> None:
        self.directory = directory
        self.game = game
        self.owner = owner
        self.token = token
        self.seconds = seconds
        self.generation = header.generation
        self.sides = dict(header.sides)
        self.fenced = False  # a seal was seen: every write is refused from now on
        self.broken = False  # a write may have half landed: close and reopen
        self.closed = False
        self.records = records  # own records since the base (the initial record included)
        self._dir = dir_fd
        self._base = header.base
        self._store = header.store
        self._fd = fd
        self._end = end  # the end of this owner's last record in its last log
        self._step = step or _nothing
        self._renewed = time.monotonic()
        # the renewal timer's thread and a write's must not interleave a check and an append
        self._mutex = threading.Lock()

    @property
    def store_fd(self) -> int:
        """The store directory's descriptor (the store's, valid while the store is open)."""
        return self._dir

    def fenced_error(self) -> StoreFenced:
        return StoreFenced(
            f"game {self.game!r} was taken over by a newer owner than token {self.token}; "
            "nothing of the write counts. Close this store",
            state="fenced",
            game=self.game,
            token=self.token,
        )

    # -- writes --------------------------------------------------------------------------
    def append(self, record: bytes) -> None:
        """Land one projection record (module docstring). Raises `StoreFenced` (nothing of it
        visible), `OSError` (nothing written, or the handle `broken`)."""
        with self._mutex:
            self._require()
            self._land(record, "write")
            self.records += 1
            self._renew_if_due()

    def write_side(self, name: str, value: bytes) -> None:
        """Land side value `name` (JCS bytes `value`); as `append`."""
        with self._mutex:
            self._require()
            self._land(encode_side(name, value), "write")
            self.sides[name] = value
            self._renew_if_due()

    def checkpoint(self, values: Mapping[str, bytes]) -> None:
        """Continue the epoch in a new log whose base is `values` (module docstring). Raises
        `StoreFenced` (nothing changed), `OSError` (the new files removed, or `broken`)."""
        with self._mutex:
            self._require()
            following = self.generation + 1
            step = self._step
            step("checkpoint:before")
            made: list[str] = []
            fd: int | None = None
            try:
                base = _write_base(self._dir, self.token, following, values) if values else None
                made += [base] if base else []
                step("checkpoint:based")
                name = log_name(self.token, following)
                fd = _create_log(self._dir, name, replace=True)
                made.append(name)
                header = encode_header(
                    EpochHeader(self.token, following, base, self.sides, self._store)
                )
                _append_once(fd, header)
                _fdatasync(fd)
                os.fsync(self._dir)
                step("checkpoint:logged")
                self._land(encode_continued(following), "checkpoint")
            except BaseException:
                if fd is not None:
                    os.close(fd)
                if not self.broken:  # the continuation did not land: they are leftovers
                    _remove(self._dir, made)
                raise
            old = [log_name(self.token, self.generation), *([self._base] if self._base else [])]
            os.close(self._fd)
            self._fd, self._end, self.generation = fd, len(header), following
            self._base, self.records = base, 0
            _remove(self._dir, old)
            self._renew_if_due()

    def _land(self, record: bytes, phase: str) -> None:
        """Append `record`, sync it and check its position (the module docstring's steps)."""
        step = self._step
        step(f"{phase}:before")
        try:
            _append_once(self._fd, record)
        except ShortAppend:
            self.broken = True  # a torn record ends the log: the next open drops it
            raise
        step(f"{phase}:appended")
        try:
            _fdatasync(self._fd)
        except OSError:
            self.broken = True  # in the file, perhaps not durable: the next open settles it
            raise
        step(f"{phase}:synced")
        self._check_position(len(record), continued=phase == "checkpoint")
        step(f"{phase}:landed")

    def _check_position(self, length: int, continued: bool = False) -> None:
        """The record just appended starts at this owner's end, or only vetoes lie between:
        it counts, for it came before any seal. Otherwise the handle is fenced and
        `StoreFenced` raised. A log removed (its name gone) without a seal after the record
        is a game removed: fenced too (a taker seals a log before it removes it). Not for a
        `continued` record: a taker that read it sealed the next log instead."""
        found = os.fstat(self._fd)
        start = self._end
        if found.st_size != self._end + length:
            start = os.lseek(self._fd, 0, os.SEEK_CUR) - length
            if start < self._end:
                self.broken = True
                raise OSError(errno.EIO, f"an append landed at {start}, before this owner's end")
            if start > self._end:
                self._fence(foreign_verdict(os.pread(self._fd, start - self._end, self._end)))
        if found.st_nlink == 0 and not continued:
            after = os.pread(self._fd, max(0, found.st_size - start - length), start + length)
            if foreign_verdict(after) != "sealed" or not after:
                self._fence("removed")
        self._end = start + length

    def _fence(self, verdict: str) -> None:
        """Unless `verdict` is `vetoes`: fenced from now on, `StoreFenced` raised. Foreign
        bytes it cannot read are followed by a seal of its own, so that readers know its
        void records after them (`jfsm.stores.file.epochs`)."""
        if verdict == "vetoes":
            return
        self.fenced = True
        if verdict == "garbage":
            with contextlib.suppress(OSError):
                os.write(self._fd, seal_record(self.token))
        raise self.fenced_error()

    def _superseded(self) -> bool:
        """Whether the log was sealed (or removed) since this owner's last record; vetoes
        after it are stepped over."""
        found = os.fstat(self._fd)
        if found.st_nlink == 0:
            return True
        if found.st_size == self._end:
            return False
        after = os.pread(self._fd, found.st_size - self._end, self._end)
        if self.broken:  # its own record, whole or torn, may follow its end: only a seal counts
            return has_seal(after)
        verdict = foreign_verdict(after)
        if verdict == "vetoes":
            self._end = found.st_size
            return False
        with contextlib.suppress(StoreFenced):
            self._fence(verdict)
        return True

    def _require(self) -> None:
        if self.closed or self.fenced:
            raise self.fenced_error()
        if self.broken:
            raise OSError(errno.EIO, "a write may have half landed; close and reopen the store")

    # -- reads and the lease ---------------------------------------------------------------
    def check(self) -> None:
        """Before a read is served: `StoreFenced` unless this epoch's log is still unsealed
        (JF-STORE-030); the lease renewed when a third of it has passed. Raises `OSError`."""
        with self._mutex:
            if self.closed or self.fenced or self._superseded():
                self.fenced = True
                raise self.fenced_error()
            self._renew_if_due()

    def renew(self) -> bool:
        """Renew the lease while this epoch's log is unsealed (else it is fenced from now
        on); returns whether it was. Raises `OSError`."""
        with self._mutex:
            if self.closed or self.fenced or self._superseded():
                self.fenced = True
                return False
            self._write_lease(time_left=self.seconds)
            return True

    def _renew_if_due(self) -> None:
        if time.monotonic() - self._renewed >= self.seconds / 3:
            with contextlib.suppress(OSError):  # the timer tries again
                self._write_lease(time_left=self.seconds)

    def _write_lease(self, time_left: float) -> None:
        write_lease_at(self._dir, LeaseRecord.starting(self.owner, self.token, time_left))
        self._renewed = time.monotonic()

    def release(self) -> None:
        """End the lease at once (while still the owner) and close the log. Idempotent;
        never raises for the file system (the lease then simply runs out)."""
        with self._mutex:
            if self.closed:
                return
            self.closed = True
            try:
                if not self.fenced and not self._superseded():
                    write_lease_at(self._dir, LeaseRecord(self.owner, self.token, "", 0.0))
            except OSError:
                pass
            finally:
                os.close(self._fd)


# -- taking a game ---------------------------------------------------------------------------
@dataclass(slots=True)
class _Found:
    """What a taker found: the latest established epoch (None: the store is in the
    single-process format, or new) and the directory's epochs."""

    latest: int | None
    epochs: dict[int, EpochFiles]


class _Taker:
    """One run of `take` (module docstring), its steps as methods."""

    def __init__(self, directory: str, dir_fd: int, game: str, token: int, step: Step) -> None:
        self.directory, self.dir, self.game, self.token = directory, dir_fd, game, token
        self.step = step
        self.sealed: set[int] = set()  # epochs this taker sealed (judged before, never again)

    def read(self, name: str) -> bytes:
        return _read(self.dir, os.path.basename(name))

    def scan(self) -> _Found:
        """Steps 2 and 3: lose to a higher epoch, veto the unestablished ones below, find
        the latest established one."""
        epochs = epochs_of(os.listdir(self.dir))
        higher = [token for token in epochs if token > self.token]
        if higher:
            raise _Lost(max(higher))
        for token in sorted((t for t in epochs if t < self.token), reverse=True):
            files = epochs[token]
            lowest = files.lowest()
            if lowest is None:
                continue
            begins = self._begins(files, lowest)
            if begins == "header":
                return _Found(token, epochs)
            if begins == "foreign":
                continue  # dead
            _append_foreign(self.dir, lowest, veto_record(self.token))
            if self._begins(files, lowest) == "header":  # its header came first
                return _Found(token, epochs)
        return _Found(None, epochs)

    def _begins(self, files: EpochFiles, name: str) -> str:
        """How log `name` begins, read from its first `HEAD` bytes (the whole file when its
        header and initial record are longer)."""
        path = os.path.join(self.directory, name)
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=self.dir)
        try:
            data = os.pread(fd, HEAD, 0)
            log = parse_log(path, data, files.token, min(files.logs), head=True)
            if log.begins == "torn" and len(data) == HEAD:
                data = self.read(name)
                log = parse_log(path, data, files.token, min(files.logs), head=True)
        finally:
            os.close(fd)
        return log.begins

    def files_of(self, token: int) -> EpochFiles:
        """Epoch `token`'s files now; `FileNotFoundError` when its logs are gone (a newer
        owner removed them: the scan starts again)."""
        files = epochs_of(os.listdir(self.dir)).get(token, EpochFiles(token))
        if not files.logs:
            raise FileNotFoundError(errno.ENOENT, f"epoch {token} was removed", self.directory)
        return files

    def state(self, token: int, quota: int, known: EpochState | None = None) -> EpochState:
        """The store epoch `token` holds now (`known`: read before; only what its last log
        gained since is read again when that log is still the last)."""
        files = self.files_of(token)
        chain = follow(self.directory, files, self.read, decode_last=False)
        last = chain[-1]
        path = os.path.join(self.directory, last.name)
        generation = _generation(last.name)
        if known is not None and known.last.name == last.name:
            log = parse_log(path, self.read(last.name), token, generation, resume=known.last)
            for entry in log.entries[len(known.last.entries) :]:
                if isinstance(entry, tuple):
                    known.sides[entry[0]] = entry[1]
                else:
                    known.image.apply_unchecked(entry)
            known.chain[-1] = log
            return known
        chain[-1] = parse_log(path, self.read(last.name), token, generation)
        return read_state(self.directory, files, self.read, quota=quota, chain=chain)

    def seal(self, token: int) -> None:
        """Step 5: seal the last log of epoch `token`'s chain, and the next one after a
        continuation that landed before the seal."""
        while True:
            files = self.files_of(token)
            last = follow(self.directory, files, self.read, decode_last=False)[-1]
            if last.sealed is not None:
                return
            _append_foreign(self.dir, last.name, seal_record(self.token))
            generation = _generation(last.name)
            path = os.path.join(self.directory, last.name)
            again = parse_log(path, self.read(last.name), token, generation, decode=False)
            if again.continued is None:
                return

    def cleanup(self) -> None:
        """Step 8: remove every file of the epochs below this one and of the single-process
        format (never a file of this epoch or a higher one, never `manifest` or `lock`)."""
        doomed = []
        for name in os.listdir(self.dir):
            parsed = parse_epoch_name(name)
            if parsed is not None:
                if parsed.token < self.token:
                    doomed.append(name)
                continue
            plain = parse_name(name)
            if plain is not None and plain.kind in (
                "snapshot",
                "log",
                "snapshot-tmp",
                "manifest-tmp",
            ):
                doomed.append(name)
        _remove(self.dir, doomed)


def take(
    directory: str,
    dir_fd: int,
    *,
    game: str,
    root: str,
    owner: str,
    takeover: bool,
    seconds: float,
    quota: int,
    legacy_folder: str | None = None,
    step: Step | None = None,
) -> tuple[Epoch, StoreImage]:
    """Make `owner` the owner of the game whose store is the directory `directory` (open as
    `dir_fd`, held by the caller), with a new epoch (module docstring); returns the epoch
    and the store's image. `legacy_folder`: the game's folder, where a jfsm before R173 kept
    its lease. Raises `StoreLocked` (a live lease of another owner id for a plain open; a
    race lost), `StoreCorrupted`, `OSError`; a failed take removes the files it made."""
    at = step or _nothing
    token = next_token(root)
    at("take:drawn")
    mine = log_name(token, 0)
    fd = _create_log(dir_fd, mine)
    made = [mine]
    taker = _Taker(directory, dir_fd, game, token, at)
    try:
        at("take:created")
        epoch, image = _take(taker, fd, made, owner, takeover, seconds, quota, legacy_folder)
    except BaseException as exc:
        os.close(fd)
        _remove(dir_fd, made)
        if isinstance(exc, _Lost):
            raise _lost(game, dir_fd, exc.token) from None
        raise
    return epoch, image


def _lost(game: str, dir_fd: int, token: int) -> StoreLocked:
    record = read_lease_at(dir_fd, token)
    who = record.owner if record is not None else "another process"
    return StoreLocked(
        f"game {game!r} was opened by {who} meanwhile (token {token}); "
        "open it with takeover to fence it, or try again",
        game=game,
        owner=who,
    )


def _take(
    taker: _Taker,
    fd: int,
    made: list[str],
    owner: str,
    takeover: bool,
    seconds: float,
    quota: int,
    legacy_folder: str | None,
) -> tuple[Epoch, StoreImage]:
    at, token, dir_fd = taker.step, taker.token, taker.dir
    for _ in range(RETRIES):
        try:
            found = taker.scan()
            at("take:scanned")
            if found.latest is None:
                state = _plain(taker, owner, takeover, quota, legacy_folder)
            else:
                state = _supersede(taker, found.latest, owner, takeover, quota)
            break
        except FileNotFoundError:
            continue  # a log removed by its owner's checkpoint, or by a newer opener
    else:
        raise OSError(errno.EAGAIN, "the game's files kept changing", taker.directory)
    base_values, base_file, sides, store, image = (
        state.base,
        state.file,
        state.sides,
        state.store,
        state.image,
    )
    write_lease_at(dir_fd, LeaseRecord.starting(owner, token, seconds))
    made.append(f"lease.{token:020d}")
    at("take:leased")
    base = _link_base(dir_fd, base_file, token, base_values)
    if base is not None:
        made.append(base)
    initial = encode_changes(base_values, image.values_bytes())
    header = EpochHeader(token, 0, base, sides, store, len(initial))
    os.fsync(dir_fd)  # its first log's name and its base are durable before it is used
    at("take:based")
    opening = encode_header(header) + initial
    _append_once(fd, opening)
    at("take:appended")
    _fdatasync(fd)
    at("take:synced")
    if os.lseek(fd, 0, os.SEEK_CUR) != len(opening) or os.fstat(fd).st_nlink == 0:
        raise _Lost(_highest(dir_fd, token))  # vetoed by a newer open (or the game removed)
    at("take:established")
    if state.fresh:  # a new store's own name in its parent, durable before it is used
        parent = os.open(
            os.path.dirname(os.path.abspath(taker.directory)),
            os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC,
        )
        try:
            os.fsync(parent)
        finally:
            os.close(parent)
    _mark_epochs(dir_fd)
    taker.cleanup()
    if legacy_folder is not None and state.converted:  # its lease: older owners fenced
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(legacy_folder, LEGACY_LEASE))
    at("take:cleaned")
    epoch = Epoch(
        directory=taker.directory,
        dir_fd=dir_fd,
        game=taker.game,
        owner=owner,
        token=token,
        seconds=seconds,
        header=header,
        fd=fd,
        end=len(opening),
        records=1 if initial else 0,
        step=taker.step,
    )
    return epoch, image


@dataclass(frozen=True, slots=True)
class _State:
    """The store a taker read: its checkpoint base (and the file holding it), side values,
    store id and image; `converted`: read from the single-process format."""

    base: dict[str, bytes]
    file: str | None
    sides: dict[str, bytes]
    store: str
    image: StoreImage
    converted: bool = False
    fresh: bool = False  # a store directory with nothing in it yet


def _refused(game: str, record: LeaseRecord | None, owner: str, takeover: bool) -> None:
    if takeover or record is None or record.owner == owner or not record.live():
        return
    raise StoreLocked(
        f"game {game!r} is owned by {record.owner} (its lease is live); "
        "open with takeover to fence it, or wait for the lease to end",
        game=game,
        owner=record.owner,
    )


def _supersede(taker: _Taker, latest: int, owner: str, takeover: bool, quota: int) -> _State:
    """Steps 4 to 6 with an established epoch: judge its lease, read it, seal it, read on."""
    if latest not in taker.sealed:  # a retry after the seal judges nothing again
        _refused(taker.game, read_lease_at(taker.dir, latest), owner, takeover)
    known = taker.state(latest, quota)  # checked before anything is sealed
    taker.step("take:checked")
    taker.seal(latest)
    taker.sealed.add(latest)
    taker.step("take:sealed")
    state = taker.state(latest, quota, known)
    taker.step("take:read")
    header = state.header
    return _State(state.base, header.base, state.sides, header.store, state.image)


def _plain(
    taker: _Taker, owner: str, takeover: bool, quota: int, legacy_folder: str | None
) -> _State:
    """Steps 4 to 6 without an established epoch: a store in the single-process format (a
    new one, one a plain driver made, or one a jfsm before R173 shared), converted."""
    if legacy_folder is not None:
        _refused(taker.game, read_legacy_lease(legacy_folder), owner, takeover)
    taker.step("take:checked")
    taker.step("take:sealed")
    names = [n for n in os.listdir(taker.dir) if parse_epoch_name(n) is None]
    contents = read_plain_contents(taker.directory, names, taker.read, quota=quota)
    taker.step("take:read")
    live = contents.survey.live
    store = live.store or os.urandom(8).hex()
    fresh = contents.survey.fresh
    return _State(
        contents.image.base_bytes(), live.snapshot, {}, store, contents.image, True, fresh
    )


def _highest(dir_fd: int, token: int) -> int:
    above = [t for t in epochs_of(os.listdir(dir_fd)) if t > token]
    return max(above, default=token)


def _mark_epochs(dir_fd: int) -> None:
    """Replace the manifest by the epoch format's marker unless it is one already."""
    try:
        current = _read(dir_fd, MANIFEST_NAME)
    except FileNotFoundError:
        current = b""
    if is_epochs_marker(current):
        return
    tmp = f".{MANIFEST_NAME}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=dir_fd)
    try:
        try:
            os.write(fd, encode_epochs_marker())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, MANIFEST_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        _remove(dir_fd, [tmp])
        raise
    os.fsync(dir_fd)


def seal_store(dir_fd: int, token: int) -> int:
    """Fence every owner of the store open as `dir_fd` before it is removed: veto each epoch
    not yet established, seal each established one (as the holder of `token`, a token drawn
    for it). Returns how many epochs it sealed. Raises `OSError`, `StoreCorrupted`."""
    sealed = 0
    taker = _Taker("", dir_fd, "", token, _nothing)
    for _ in range(RETRIES):
        try:
            epochs = epochs_of(os.listdir(dir_fd))
            for each in sorted(epochs):
                files = epochs[each]
                lowest = files.lowest()
                if lowest is None:
                    continue
                if taker._begins(files, lowest) in ("empty", "torn"):
                    _append_foreign(dir_fd, lowest, veto_record(token))
                if taker._begins(files, lowest) == "header":
                    taker.seal(each)
                    sealed += 1
            return sealed
        except FileNotFoundError:
            continue
    raise OSError(errno.EAGAIN, "the game's files kept changing")


def current_lease(directory: str | os.PathLike[str]) -> LeaseRecord | None:
    """The lease of the latest established epoch of the store in `directory`, read only (for
    reports and tests): None without one, or when it does not parse. Raises `OSError`,
    `StoreCorrupted`."""
    dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    try:
        return current_lease_at(dir_fd)
    finally:
        os.close(dir_fd)


def current_lease_at(dir_fd: int) -> LeaseRecord | None:
    """`current_lease` of the store directory open as `dir_fd`."""
    epochs = epochs_of(os.listdir(dir_fd))
    latest = latest_established(
        "", epochs, lambda name: _read(dir_fd, os.path.basename(name)), below=2**64
    )
    return None if latest is None else read_lease_at(dir_fd, latest)


def remove_store(directory: str | os.PathLike[str], root: str | os.PathLike[str]) -> None:
    """Remove the store of a game of a shared directory: every owner sealed out first
    (`seal_store`, with a token drawn from `root`'s sequence), so that an owner stopped in
    the middle of a write lands nothing acknowledged after it resumes (and its log is gone
    anyway); then its files and the directory. Raises `OSError`, `StoreCorrupted`."""
    path = os.fspath(directory)
    dir_fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    try:
        seal_store(dir_fd, next_token(root))
    finally:
        os.close(dir_fd)
    shutil.rmtree(path)
