"""Crash injection through the file-system seam: a process that dies at a write boundary.

`CrashingFileSystem` is a `FileSystem` (`jfsm.stores.file.fsio`) that forwards to another one
and numbers the boundaries of every durable write, from 0:

- before and after each create, fsync, fdatasync, truncate, rename, remove and directory
  fsync;
- before, in the middle of and after each write, pwrite and log extension. A crash in the
  middle is a torn write: the first half of the bytes (of the zeros, for an extension) is
  out, the rest never comes. With `tear_extensions=False` an extension has only its before
  and after, as the in-process driver numbers them (the suite's crash points are laid out
  over that numbering).

At the crash point (`crash_at`, or `arm(at)` boundaries from now) it dies: that call raises
`SimulatedCrash`, and so does every later call, so nothing more reaches the disk, exactly
as if the process had been killed there (the kernel keeps what was written, fsynced or
not). Like the kernel for a dead process, it closes the descriptors and releases the locks
the process held, so the directory can be reopened at once. Without a crash point it only
counts (`boundaries`) and, if asked, names each boundary (`labels`), which is how a test
learns how many crash points a workload has before it tries each one.

Users: the store's crash tests (`tests/stores/test_file_store_crash.py`, which enumerate every
crash point of a workload, on disk and under a simulated power loss) and the in-process
conformance driver's `crash` op (`jfsm.driver.crash`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

from jfsm.stores.file.fsio import FileSystem, OsFileSystem

__all__ = ["CrashingFileSystem", "SimulatedCrash"]

T = TypeVar("T")


class SimulatedCrash(Exception):
    """The process died at an injected crash point; nothing it holds in memory counts."""


class CrashingFileSystem:
    """A `FileSystem` that forwards to `inner` (the real one by default), numbers its write
    boundaries and dies at boundary `crash_at` (never, if None)."""

    def __init__(
        self,
        inner: FileSystem | None = None,
        crash_at: int | None = None,
        *,
        keep_labels: bool = False,
        tear_extensions: bool = True,
    ) -> None:
        self.inner: FileSystem = inner if inner is not None else OsFileSystem()
        self.crash_at = crash_at
        self.boundaries = 0  # boundaries passed so far: the index of the next one
        self.labels: list[str] = []  # each boundary's label, with `keep_labels`
        self.dead = False
        self.where = ""  # where it died: the boundary's index and label
        self._keep_labels = keep_labels
        self._tear_extensions = tear_extensions
        self._handles: set[int] = set()
        self._locks: set[int] = set()
        self._counting = threading.Lock()  # stores call from executor threads (R65)

    # -- the crash -------------------------------------------------------------------------
    def arm(self, at: int) -> None:
        """Crash at the `at`-th boundary from now (0: the very next one)."""
        self.crash_at = self.boundaries + at

    def abandon(self) -> None:
        """Die now if not dead yet (the process is killed between two calls)."""
        if not self.dead:
            self._die("abandoned")

    def _die(self, where: str) -> None:
        self.dead, self.where = True, where
        for handle in self._handles:
            self.inner.close(handle)
        for lock in self._locks:
            self.inner.unlock(lock)
        self._handles.clear()
        self._locks.clear()

    def _alive(self) -> None:
        if self.dead:
            raise SimulatedCrash(f"the process is dead ({self.where})")

    def _boundary(self, label: str) -> None:
        with self._counting:  # one number per boundary, whichever thread passes it
            self._alive()
            index = self.boundaries
            self.boundaries += 1
            if self._keep_labels:
                self.labels.append(label)
            if index == self.crash_at:
                self._die(f"crash injected at boundary {index}, {label}")
                raise SimulatedCrash(f"the process died ({self.where})")

    def _mutate(self, label: str, call: Callable[[], T]) -> T:
        self._boundary(f"before {label}")
        result = call()
        self._boundary(f"after {label}")
        return result

    def _torn(self, label: str, first_half: Callable[[], None], whole: Callable[[], None]) -> None:
        self._boundary(f"before {label}")
        if self.crash_at == self.boundaries:  # the crash comes mid-write: half is out
            first_half()
        self._boundary(f"mid {label}")
        whole()
        self._boundary(f"after {label}")

    # -- FileSystem --------------------------------------------------------------------------
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

        return self._mutate(f"create {os.path.basename(path)}", create)

    def open_write(self, path: str) -> int:
        self._alive()
        handle = int(self.inner.open_write(path))
        self._handles.add(handle)
        return handle

    def write(self, handle: int, data: bytes) -> None:
        self._torn(
            "write",
            lambda: self.inner.write(handle, data[: len(data) // 2]),
            lambda: self.inner.write(handle, data),
        )

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        self._torn(
            "pwrite",
            lambda: self.inner.pwrite(handle, data[: len(data) // 2], offset),
            lambda: self.inner.pwrite(handle, data, offset),
        )

    def extend(self, handle: int, start: int, end: int) -> None:
        if not self._tear_extensions:
            self._mutate("extend", lambda: self.inner.extend(handle, start, end))
            return
        self._torn(
            "extend",
            lambda: self.inner.extend(handle, start, start + (end - start) // 2),
            lambda: self.inner.extend(handle, start, end),
        )

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
        self._mutate(f"rename to {os.path.basename(dst)}", lambda: self.inner.rename(src, dst))

    def remove(self, path: str) -> None:
        self._mutate(f"remove {os.path.basename(path)}", lambda: self.inner.remove(path))

    def fsync_dir(self, path: str) -> None:
        self._mutate("fsync dir", lambda: self.inner.fsync_dir(path))

    def lock(self, directory: str) -> int:
        self._alive()
        handle = int(self.inner.lock(directory))
        self._locks.add(handle)
        return handle

    def unlock(self, handle: int) -> None:
        self._alive()
        self._locks.discard(handle)
        self.inner.unlock(handle)
