"""Ownership and fencing of a game in a state directory that several processes on one host
share: lease files, one token counter, and a short lock around every write.

# Leases and fencing (decision R95; machine `spec/machines/store_ownership.json`)

This is `jfsm.stores.postgres.fencing` with files in place of rows, for `jfsm driver --state DIR
--shared`: K processes on one host serve the same games, one owner a game.

- **The token counter** `DIR/tokens`: one counter for the whole directory, read, incremented,
  written and `fsync`ed under an exclusive `flock` of that file before the token is handed
  out. A token is never handed out twice, for any game id, even after a game is removed
  and made again (JF-STORE-010's one sequence), and a power loss cannot bring an older value
  back.
- **The lease** `<game folder>/lease`: owner id, token, the boot it was taken in
  (`/proc/sys/kernel/random/boot_id`) and its end on the host's `CLOCK_BOOTTIME` (seconds
  since boot, suspend included; where the system has neither: the wall clock and an empty
  boot id). One fixed-size record, rewritten in place by one `pwrite`: it is not synced, for
  every process that reads it runs on the same kernel, and after a reboot (another boot id)
  every lease is over anyway, the token counter alone being durable.
- **The game lock**: an exclusive `flock` of the lease file, taken only for a moment: around
  an open or a takeover, around every write of the owner (commit, checkpoint, seed,
  participants), every read it serves (`check`) and its close. Never held between writes, so
  a fenced but living owner blocks nobody. A process stopped while it holds the lock (a
  `SIGSTOP` in the middle of a write) holds it past its lease: whoever waits for the lock,
  once the lease in the file has run out and the lock has stayed busy for `GRACE`, ends that
  process (`jfsm.stores.file.holders`, decision R123) and takes the lock, so no open waits on
  an owner beyond its lease (JF-STORE-033). The token counter's lock likewise, once busy for
  a whole lease.
- `take_lease` (under the game lock): while another owner id's lease is live a plain open is
  refused with `StoreLocked` naming the owner. The same owner id reclaims its game at once
  (a restarted worker, R61). Otherwise, or with `takeover`, the caller becomes the owner with
  a new token and a lease of `lease_seconds`. The caller reads the store from disk while it
  still holds the lock (`FileLease` is yielded inside it), so the new owner's image is what
  the files hold, a torn tail left by a killed owner recovered.
- `FileLease.hold()` wraps every write: lock; if the lease file names another token (or is
  no longer the file this lease opened), `StoreFenced` and nothing is written; else the
  write runs, the lease is renewed, the lock released. `renew()` does the renewal alone (an
  idle owner's timer: `LeaseKeeper`; it never writes a lease whose token is not its own,
  JF-STORE-031), `check()` before a read is served (JF-STORE-030), `end()` ends the lease at
  once (close).

Only the host's clock is read, and only processes on this host can share the directory: on a
file system that several hosts mount, their boot ids differ and each would see the others'
leases as over. Use PostgreSQL there.

# Errors

`StoreLocked` (another owner's lease is live), `StoreFenced` (a newer token), `InvalidInput`
(an owner id too long for the lease record), `OSError` from the file system (the callers
turn it into `StoreUnavailable`). A lease record that does not parse (a power loss in the
middle of its write) is a lease that is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from jfsm.errors import InvalidInput, StoreFenced, StoreLocked
from jfsm.stores.file.fsio import open_file
from jfsm.stores.file.holders import end_holders
from jfsm.stores.offload import run_blocking

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "GRACE",
    "LEASE_FILE",
    "TOKENS_FILE",
    "FileLease",
    "LeaseKeeper",
    "LeaseRecord",
    "host_clock",
    "lease_seconds",
    "next_token",
    "read_lease",
    "take_lease",
    "write_new_lease",
]

LEASE_FILE = "lease"
TOKENS_FILE = "tokens"
DEFAULT_LEASE_SECONDS = 30.0
RECORD_SIZE = 1024  # the lease record, padded with spaces: one pwrite
_TOKEN_WIDTH = 20  # the counter: 20 digits and a newline
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
#: seconds a lock must stay busy, its holder's lease over, before the holder is ended (R123)
GRACE = 1.0
_log = logging.getLogger(__name__)


def lease_seconds() -> float:
    """The lease length: `JFSM_LEASE_SECONDS`, else 30. Raises `InvalidInput` for a value
    that is not a positive number."""
    raw = os.environ.get("JFSM_LEASE_SECONDS")
    if raw is None:
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise InvalidInput(f"JFSM_LEASE_SECONDS must be a positive number of seconds, not {raw!r}")
    return value


@functools.cache
def _boot() -> str | None:
    """This boot's id (read once: a process never outlives its boot), None without one."""
    try:
        with open(_BOOT_ID, encoding="ascii") as file:
            boot = file.read().strip()
        time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, AttributeError):
        return None
    return boot


def host_clock() -> tuple[str, float]:
    """(boot id, seconds on this boot's clock): `CLOCK_BOOTTIME` where the system has it,
    else ("", the wall clock)."""
    boot = _boot()
    if boot is None:
        return "", time.time()
    return boot, time.clock_gettime(time.CLOCK_BOOTTIME)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What a lease file says: who owns the game, with which token, until when (on `boot`'s
    clock; `until` 0 is a lease ended by a close)."""

    owner: str
    token: int
    boot: str
    until: float

    def live(self) -> bool:
        boot, now = host_clock()
        return self.boot == boot and now < self.until

    def encode(self) -> bytes:
        data = json.dumps(
            {"owner": self.owner, "token": self.token, "boot": self.boot, "until": self.until},
            ensure_ascii=True,
        ).encode("ascii")
        if len(data) > RECORD_SIZE - 1:
            raise InvalidInput(f"owner id too long for a lease ({len(self.owner)} characters)")
        return data + b" " * (RECORD_SIZE - 1 - len(data)) + b"\n"

    @classmethod
    def decode(cls, data: bytes) -> LeaseRecord | None:
        """The record in `data`; None when there is none or it does not parse."""
        try:
            got = json.loads(data.decode("ascii"))
            owner, token, boot = str(got["owner"]), int(got["token"]), str(got["boot"])
            record = cls(owner, token, boot, float(got["until"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
        return record


def _flock(fd: int, exclusive: bool = True) -> None:
    import fcntl  # POSIX only

    fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_UN)


def _acquire(fd: int, path: str, stuck: Callable[[float], bool]) -> None:
    """Lock `fd` exclusively. While another process holds the lock, `stuck(waited)` (the
    seconds waited so far) says whether that holder overstayed: it is then ended
    (`jfsm.stores.file.holders`) and the wait goes on until the kernel frees the lock."""
    import fcntl  # POSIX only

    began = time.monotonic()
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        waited = time.monotonic() - began
        if stuck(waited):
            for pid in end_holders(fd):
                _log.warning(
                    "ended process %d: it held the lock of %s %.1f s with its lease over "
                    "(stopped or frozen); its write in flight lands whole or not at all",
                    pid,
                    path,
                    waited,
                )
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _lease_overstayed(fd: int, seconds: float) -> Callable[[float], bool]:
    """A lease file's lock holder is stuck once the lock stayed busy `GRACE` (at most the
    lease) and the lease in the file is over; a record that does not parse (its writer
    stopped in the middle of it) once the lock stayed busy a whole lease."""

    def stuck(waited: float) -> bool:
        if waited < min(GRACE, seconds):
            return False
        record = LeaseRecord.decode(_read_at_start(fd))
        return waited >= seconds if record is None else not record.live()

    return stuck


def _read_at_start(fd: int) -> bytes:
    return os.pread(fd, RECORD_SIZE, 0)


def _write_record(fd: int, record: LeaseRecord) -> None:
    data = record.encode()
    written = 0
    while written < len(data):
        written += os.pwrite(fd, data[written:], written)


def _open_locked(path: str, stuck: Callable[[int], Callable[[float], bool]]) -> int:
    """An exclusively `flock`ed descriptor of `path` (created if missing, never through a
    link), the very file the name holds once locked (a file replaced meanwhile, or two
    processes creating it at once: opened again). `stuck(fd)` judges a holder that makes
    us wait (see `_acquire`)."""
    while True:
        try:
            fd = open_file(path, "update", create=True)
        except FileExistsError:
            continue
        try:
            _acquire(fd, path, stuck(fd))
            here, locked = os.lstat(path), os.fstat(fd)
        except FileNotFoundError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if (here.st_dev, here.st_ino) == (locked.st_dev, locked.st_ino):
            return fd
        os.close(fd)


def next_token(root: str, patience: float = DEFAULT_LEASE_SECONDS) -> int:
    """A fencing token never handed out before in the directory `root`: the counter in
    `root/tokens`, incremented and `fsync`ed under its lock before it is returned. A process
    that holds the counter's lock for `patience` seconds is ended (R123).
    Raises `OSError`; a counter file that does not parse is `OSError` `EIO` (never reset)."""
    path = os.path.join(root, TOKENS_FILE)
    fd = _open_locked(path, lambda _fd: lambda waited: waited >= patience)
    try:
        raw = os.pread(fd, _TOKEN_WIDTH + 1, 0)
        if raw and not raw.strip().isdigit():
            raise OSError(errno.EIO, "the token counter does not parse", path)
        token = int(raw.strip() or b"0") + 1
        os.pwrite(fd, str(token).zfill(_TOKEN_WIDTH).encode("ascii") + b"\n", 0)
        os.fsync(fd)
        if not raw:  # a new counter: its name is made durable too
            dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return token
    finally:
        os.close(fd)


def read_lease(folder: str) -> LeaseRecord | None:
    """The lease of the game in `folder` as it is now (no lock: for reports), or None."""
    try:
        fd = open_file(os.path.join(folder, LEASE_FILE), "read")
    except FileNotFoundError:
        return None
    try:
        return LeaseRecord.decode(_read_at_start(fd))
    finally:
        os.close(fd)


def write_new_lease(folder: str, owner: str, token: int, seconds: float) -> None:
    """Write a live lease of `owner` with `token` into `folder`, a game folder nobody else
    sees yet (being created); synced with it by the caller's folder flush."""
    boot, now = host_clock()
    fd = open_file(os.path.join(folder, LEASE_FILE), "new")
    try:
        _write_record(fd, LeaseRecord(owner, token, boot, now + seconds))
        os.fsync(fd)
    finally:
        os.close(fd)


class FileLease:
    """This process's ownership of one game of a shared directory (module docstring): its
    token, and the lease file it keeps open. Use `take_lease`."""

    def __init__(self, game: str, path: str, fd: int, owner: str, token: int, seconds: float):
        self.game = game
        self.path = path
        self.owner = owner
        self.token = token
        self.seconds = seconds
        self.fenced = False  # a newer token was seen: every write is refused from now on
        self._fd: int | None = fd
        # `flock` does not exclude two threads of one process on one descriptor (the renewal
        # timer's and a write's): this does
        self._mutex = threading.Lock()

    def fenced_error(self) -> StoreFenced:
        return StoreFenced(
            f"game {self.game!r} was taken over by a newer owner than token {self.token}; "
            "nothing was written. Close this store",
            state="fenced",
            game=self.game,
            token=self.token,
        )

    @contextlib.contextmanager
    def hold(self, *, renew: bool = True) -> Iterator[None]:
        """The game lock around one write of the owner: `StoreFenced` (nothing done) unless
        the lease file still names this token; the lease renewed after the block (unless
        it raised or `renew` is false). Raises `OSError`; `StoreUnavailable` is the caller's."""
        with self._mutex:
            fd = self._fd
            if self.fenced or fd is None:
                raise self.fenced_error()
            _acquire(fd, self.path, _lease_overstayed(fd, self.seconds))
            try:
                if not self._current(fd):
                    self.fenced = True
                    raise self.fenced_error()
                yield
                if renew:  # best effort: the write itself has landed
                    with contextlib.suppress(OSError):
                        self._write(fd)
            finally:
                _flock(fd, exclusive=False)

    def renew(self) -> bool:
        """Renew the lease if this token is still current (else it is fenced from now on:
        another owner's lease is never touched); returns whether it was. Raises `OSError`."""
        try:
            with self.hold():
                pass
        except StoreFenced:
            return False
        return True

    def check(self) -> None:
        """Before a read is served: `StoreFenced` unless this token is still the game's
        (checked under the game's lock, the lease renewed). Raises `OSError`."""
        if not self.renew():
            raise self.fenced_error()

    def end(self) -> None:
        """End the lease at once (when still current) and close the file. Idempotent; never
        raises for the file system (the lease then simply runs out)."""
        with self._mutex:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                _acquire(fd, self.path, _lease_overstayed(fd, self.seconds))
                if self._current(fd) and not self.fenced:
                    _write_record(fd, LeaseRecord(self.owner, self.token, host_clock()[0], 0.0))
            except OSError:
                pass
            finally:
                os.close(fd)  # releases the lock
            self.fenced = True

    def _current(self, fd: int) -> bool:
        """Whether the lease file is still the one opened and names this token."""
        try:
            here, mine = os.lstat(self.path), os.fstat(fd)
        except FileNotFoundError:
            return False  # the game was removed
        if (here.st_dev, here.st_ino) != (mine.st_dev, mine.st_ino):
            return False  # removed and made again: a newer game
        record = LeaseRecord.decode(_read_at_start(fd))
        return record is not None and record.token == self.token

    def _write(self, fd: int) -> None:
        boot, now = host_clock()
        _write_record(fd, LeaseRecord(self.owner, self.token, boot, now + self.seconds))


@contextlib.contextmanager
def take_lease(
    game: str,
    folder: str,
    root: str,
    owner: str,
    *,
    takeover: bool,
    seconds: float,
    adopt: int | None = None,
) -> Iterator[FileLease]:
    """Make `owner` the owner of the game in `folder`, holding its lock for the block (read
    the store inside it). `adopt`: a token this caller wrote into the lease when it created
    the game; kept if the lease still names it. Raises `StoreLocked` while another owner id's
    lease is live (unless `takeover`), `OSError`. If the block raises, the lease file is put
    back as it was (the token drawn stays unused), so a failed open changes no owner."""
    path = os.path.join(folder, LEASE_FILE)
    fd = _open_locked(path, lambda fd: _lease_overstayed(fd, seconds))
    lease: FileLease | None = None
    record: LeaseRecord | None = None
    try:
        record = LeaseRecord.decode(_read_at_start(fd))
        if record is not None and adopt is not None and record.token == adopt:
            token = adopt
        else:
            if record is not None and not takeover and record.owner != owner and record.live():
                raise StoreLocked(
                    f"game {game!r} is owned by {record.owner} (its lease is live); "
                    "open with takeover to fence it, or wait for the lease to end",
                    game=game,
                    owner=record.owner,
                )
            token = next_token(root, seconds)
        lease = FileLease(game, path, fd, owner, token, seconds)
        lease._write(fd)
        yield lease
    except BaseException:
        if lease is not None and lease._fd is None:  # the block ended it already
            raise
        if lease is not None:  # nothing changes on error: the earlier lease stands again
            with contextlib.suppress(OSError):
                _write_record(fd, record or LeaseRecord(owner, lease.token, "", 0.0))
            lease._fd, lease.fenced = None, True
        os.close(fd)
        raise
    if lease._fd is not None:
        _flock(fd, exclusive=False)


class LeaseKeeper:
    """Renews the leases of a process's open stores every third of the shortest of their
    lengths (`seconds` when it keeps none) on its event loop (the blocking part off it), so
    an idle owner keeps its games; a lease found superseded is marked fenced (and never
    written again). One task, started by the first `keep`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._leases: weakref.WeakSet[FileLease] = weakref.WeakSet()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None  # set when a shorter lease is kept
        self._sleeping = 0.0  # the period of the sleep in progress

    def keep(self, lease: FileLease) -> None:
        """Renew `lease` from now on (a shorter lease than those kept so far cuts the sleep
        in progress short, so it is renewed in time too)."""
        self._leases.add(lease)
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._renew_forever())
        elif self._wake is not None and lease.seconds / 3 < self._sleeping:
            self._wake.set()

    def drop(self, lease: FileLease) -> None:
        self._leases.discard(lease)

    def renew_all(self) -> int:
        """Renew every kept lease (blocking); returns how many are still current."""
        current = 0
        for lease in list(self._leases):
            # on OSError the next round tries again; the lease may run out meanwhile
            with contextlib.suppress(OSError):
                current += lease.renew()
        return current

    def period(self) -> float:
        """Seconds between two renewals: a third of the shortest lease kept."""
        shortest = min((lease.seconds for lease in list(self._leases)), default=self.seconds)
        return max(0.05, shortest / 3)

    async def _renew_forever(self) -> None:
        wake = self._wake
        assert wake is not None
        while self._leases:
            self._sleeping = self.period()
            wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), self._sleeping)
            await run_blocking(self.renew_all)
