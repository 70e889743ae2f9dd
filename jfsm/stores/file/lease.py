"""Leases of a game in a directory that several processes on one host share: liveness only
(decisions R95, R173).

A lease says who owns a game and until when, so that a plain open is refused while the owner
lives (JF-STORE-011) and succeeds once it stopped renewing (JF-STORE-032). It decides no
write: a write lands or is fenced by its position in its epoch's log
(`jfsm.stores.file.ownership`), whatever any lease says.

- **One lease per epoch**, `lease.<token>` in the game's store directory: owner id, token,
  the boot it was taken in (`/proc/sys/kernel/random/boot_id`) and its end on the host's
  `CLOCK_BOOTTIME` (seconds since boot, suspend included; where the system has neither: the
  wall clock and an empty boot id). One JSON line, written to a temporary file and renamed
  over the lease: a reader sees the old record or the new one, never a mix. Not synced:
  every reader runs on the same kernel, and after a reboot (another boot id) every lease is
  over anyway.
- **Read only for the latest established epoch**: a plain open reads the lease of the epoch
  it would supersede. An owner that was superseded may still renew, but it rewrites only its
  own epoch's lease, which no open reads any more (JF-STORE-031 by construction); it stops at
  its next renewal, which finds its log sealed.
- `LeaseKeeper` renews the leases of a process's open stores every third of their length, on
  its event loop, the blocking part off it.
- A record that does not parse (a lease being replaced cannot tear, but a file may be
  damaged) or a missing file is a lease that is over.

Only the host's clock is read, and only processes on this host can share the directory: on a
file system that several hosts mount, their boot ids differ and each would see the others'
leases as over. Use PostgreSQL there.

Errors: `InvalidInput` for a lease length that is not a positive number or an owner id too
long for a record; `OSError` from the file system.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import secrets
import time
import weakref
from dataclasses import dataclass
from typing import Protocol

from jfsm.errors import InvalidInput
from jfsm.stores.file.epochs import lease_name
from jfsm.stores.offload import run_blocking

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "LEGACY_LEASE",
    "LeaseKeeper",
    "LeaseRecord",
    "Renewable",
    "host_clock",
    "lease_seconds",
    "read_lease_at",
    "read_legacy_lease",
    "write_lease_at",
]

DEFAULT_LEASE_SECONDS = 30.0
LEGACY_LEASE = "lease"  # decision R95's lease file in a game's folder (read at conversion)
RECORD_MAX = 1024  # bytes of a lease record
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


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
    """What a lease says: who owns the game, with which token, until when (on `boot`'s
    clock; `until` 0 is a lease ended by a close)."""

    owner: str
    token: int
    boot: str
    until: float

    def live(self) -> bool:
        boot, now = host_clock()
        return self.boot == boot and now < self.until

    def encode(self) -> bytes:
        """One JSON line. Raises `InvalidInput` for an owner id too long for a record."""
        data = json.dumps(
            {"owner": self.owner, "token": self.token, "boot": self.boot, "until": self.until},
            ensure_ascii=True,
        ).encode("ascii")
        if len(data) > RECORD_MAX - 1:
            raise InvalidInput(f"owner id too long for a lease ({len(self.owner)} characters)")
        return data + b"\n"

    @classmethod
    def decode(cls, data: bytes) -> LeaseRecord | None:
        """The record in `data` (white space around it ignored); None when there is none or
        it does not parse."""
        try:
            got = json.loads(data.decode("ascii"))
            owner, token, boot = str(got["owner"]), int(got["token"]), str(got["boot"])
            record = cls(owner, token, boot, float(got["until"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
        return record

    @classmethod
    def starting(cls, owner: str, token: int, seconds: float) -> LeaseRecord:
        """A lease of `owner` with `token` that lasts `seconds` from now."""
        boot, now = host_clock()
        return cls(owner, token, boot, now + seconds)


def read_lease_at(directory: int, token: int) -> LeaseRecord | None:
    """Epoch `token`'s lease in the directory open as `directory`, or None (no file, or one
    that does not parse). Raises `OSError` for another failure."""
    try:
        fd = os.open(lease_name(token), os.O_RDONLY | _NOFOLLOW, dir_fd=directory)
    except FileNotFoundError:
        return None
    try:
        return LeaseRecord.decode(os.read(fd, RECORD_MAX))
    finally:
        os.close(fd)


def write_lease_at(directory: int, record: LeaseRecord) -> None:
    """Replace the lease of `record.token` in the directory open as `directory`: a new
    temporary file renamed over it (not synced, module docstring). Raises `OSError`,
    `InvalidInput`; a temporary file left by a failure is removed."""
    data = record.encode()
    tmp = f".{lease_name(record.token)}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=directory)
    try:
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.rename(tmp, lease_name(record.token), src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
        raise


def read_legacy_lease(folder: str | os.PathLike[str]) -> LeaseRecord | None:
    """The lease a jfsm before R173 kept in a game's folder (`lease`, 1,024 bytes padded
    with spaces), or None."""
    try:
        fd = os.open(os.path.join(folder, LEGACY_LEASE), os.O_RDONLY | _NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return LeaseRecord.decode(os.pread(fd, RECORD_MAX, 0))
    finally:
        os.close(fd)


class Renewable(Protocol):
    """What `LeaseKeeper` renews: an ownership with a lease length and a renewal."""

    seconds: float

    def renew(self) -> bool:
        """Renew the lease while still the owner; returns whether it was."""
        ...


class LeaseKeeper:
    """Renews the leases of a process's open stores every third of the shortest of their
    lengths (`seconds` when it keeps none) on its event loop (the blocking part off it), so
    an idle owner keeps its games; a superseded owner's renewal renews nothing (and it is
    fenced from then on). One task, started by the first `keep`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._leases: weakref.WeakSet[Renewable] = weakref.WeakSet()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None  # set when a shorter lease is kept
        self._sleeping = 0.0  # the period of the sleep in progress

    def keep(self, lease: Renewable) -> None:
        """Renew `lease` from now on (a shorter lease than those kept so far cuts the sleep
        in progress short, so it is renewed in time too)."""
        self._leases.add(lease)
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._renew_forever())
        elif self._wake is not None and lease.seconds / 3 < self._sleeping:
            self._wake.set()

    def drop(self, lease: Renewable) -> None:
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
