"""Crash injection for an in-process driver (the `crash` op, capability `crashInjection`).

Over stdio the conformance suite proves crash atomicity (JF-ATOM-004, JF-ATOM-008) by
killing the driver process with SIGKILL. In process there is no process to kill, so the
durable reference driver (`ReferenceDriver(..., crash_injection=True)`, as
`durable_reference_driver` builds it) opens every `FileStore` over a `CrashSwitch`: a file system
(`jfsm.stores.fsio.FileSystem`, the seam the store's own crash tests use) that forwards to
the real one and numbers the boundaries of every durable write: before and after each
create, extend, fsync, fdatasync, truncate, rename, remove and directory fsync, and before,
in the middle of (half the bytes out) and after each write and pwrite.

`arm(at)` makes the `at`-th boundary from now (0: the next) the crash point. There the
switch dies: the call raises `DriverCrashed`, and so does every later call, so nothing more
reaches the disk, exactly as if the process had been killed there (the kernel keeps what
was written, fsynced or not). The driver then answers every message with an error, and its
`restart()` abandons every engine without closing it (`abandon` closes the descriptors and
releases the locks, as the kernel does for a dead process) and reopens the games from the
directory over a fresh switch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from jfsm.stores.fsio import OsFileSystem

__all__ = ["CrashSwitch", "DriverCrashed"]

T = TypeVar("T")


class DriverCrashed(Exception):
    """The driver died at an injected crash point; nothing it holds in memory counts."""


class CrashSwitch:
    """A `FileSystem` that forwards to `inner` and crashes at the boundary `arm` names."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner if inner is not None else OsFileSystem()
        self.armed: int | None = None  # boundaries still to pass before the crash
        self.used = False  # armed at least once: the next restart is a kill
        self.dead = False
        self.where = ""  # the boundary the crash happened at
        self._handles: set[int] = set()
        self._locks: set[int] = set()

    # -- the switch ----------------------------------------------------------------------
    def arm(self, at: int) -> None:
        """Crash at the `at`-th durable write boundary from now (0: the very next one)."""
        self.armed = at
        self.used = True

    def abandon(self) -> None:
        """Die (if not dead yet) and do what the kernel does for a dead process: close its
        descriptors, release its locks. The stores opened over this switch stay dead."""
        self.dead = True
        self.armed = None
        for handle in self._handles:
            self.inner.close(handle)
        for lock in self._locks:
            self.inner.unlock(lock)
        self._handles.clear()
        self._locks.clear()

    def _alive(self) -> None:
        if self.dead:
            raise DriverCrashed(f"the driver crashed ({self.where}); restart it")

    def _boundary(self, label: str) -> None:
        self._alive()
        if self.armed is None:
            return
        if self.armed > 0:
            self.armed -= 1
            return
        self.dead, self.armed, self.where = True, None, f"crash injected {label}"
        raise DriverCrashed(f"the driver crashed ({self.where}); restart it")

    def _mutate(self, label: str, call: Callable[[], T]) -> T:
        self._boundary("before " + label)
        result = call()
        self._boundary("after " + label)
        return result

    def _write(self, label: str, data: bytes, write: Callable[[bytes], None]) -> None:
        self._boundary("before " + label)
        if self.armed == 0:  # the crash comes mid-write: half the bytes are out
            write(data[: len(data) // 2])
        self._boundary("in the middle of " + label)
        write(data)
        self._boundary("after " + label)

    # -- FileSystem ----------------------------------------------------------------------
    def makedirs(self, path: str) -> None:
        self._alive()
        self.inner.makedirs(path)

    def listdir(self, path: str) -> list[str]:
        self._alive()
        return list(self.inner.listdir(path))

    def read(self, path: str) -> bytes:
        self._alive()
        return bytes(self.inner.read(path))

    def create(self, path: str) -> int:
        def create() -> int:
            handle = int(self.inner.create(path))
            self._handles.add(handle)
            return handle

        return self._mutate("create", create)

    def open_write(self, path: str) -> int:
        self._alive()
        handle = int(self.inner.open_write(path))
        self._handles.add(handle)
        return handle

    def write(self, handle: int, data: bytes) -> None:
        self._write("write", data, lambda chunk: self.inner.write(handle, chunk))

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        self._write("pwrite", data, lambda chunk: self.inner.pwrite(handle, chunk, offset))

    def extend(self, handle: int, start: int, end: int) -> None:
        self._mutate("extend", lambda: self.inner.extend(handle, start, end))

    def fsync(self, handle: int) -> None:
        self._mutate("fsync", lambda: self.inner.fsync(handle))

    def fdatasync(self, handle: int) -> None:
        self._mutate("fdatasync", lambda: self.inner.fdatasync(handle))

    def truncate(self, handle: int, size: int) -> None:
        self._mutate("truncate", lambda: self.inner.truncate(handle, size))

    def close(self, handle: int) -> None:
        self._alive()
        self._handles.discard(handle)
        self.inner.close(handle)

    def rename(self, src: str, dst: str) -> None:
        self._mutate("rename", lambda: self.inner.rename(src, dst))

    def remove(self, path: str) -> None:
        self._mutate("remove", lambda: self.inner.remove(path))

    def fsync_dir(self, path: str) -> None:
        self._mutate("directory fsync", lambda: self.inner.fsync_dir(path))

    def lock(self, directory: str) -> int:
        self._alive()
        handle = int(self.inner.lock(directory))
        self._locks.add(handle)
        return handle

    def unlock(self, handle: int) -> None:
        self._alive()
        self._locks.discard(handle)
        self.inner.unlock(handle)
