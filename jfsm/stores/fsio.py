"""The file-system seam of the durable store.

`FileStore` touches the disk only through a `FileSystem`, so tests can inject a crash
(an exception) before or after any write, extension, fsync, rename, truncate or remove, or
replace the disk altogether with a model that forgets whatever was not yet synced.
`OsFileSystem` is the real one. Handles are plain integers (file descriptors for
`OsFileSystem`).

Every method raises `OSError` (or whatever an injected layer raises) on failure, except
`lock`, which raises `BlockingIOError` when another holder has the lock.
"""

from __future__ import annotations

import contextlib
import os
from typing import Protocol

__all__ = ["FileSystem", "OsFileSystem"]

_ZEROS = bytes(1 << 20)
_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class FileSystem(Protocol):
    """The file operations the durable store needs, and nothing more."""

    def makedirs(self, path: str) -> None:
        """Create `path` and its parents if missing."""
        ...

    def listdir(self, path: str) -> list[str]:
        """Names of the entries of directory `path`."""
        ...

    def read(self, path: str) -> bytes:
        """The whole content of file `path`."""
        ...

    def create(self, path: str) -> int:
        """Open `path` for writing from offset 0, created empty (truncated if it exists)."""
        ...

    def open_write(self, path: str) -> int:
        """Open the existing file `path` for writing at explicit offsets (`pwrite`)."""
        ...

    def write(self, handle: int, data: bytes) -> None:
        """Write all of `data` at the handle's position, advancing it."""
        ...

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        """Write all of `data` at byte `offset`; the handle's position is unchanged."""
        ...

    def extend(self, handle: int, start: int, end: int) -> None:
        """Write zeros over bytes [start, end), growing the file to at least `end`.

        Real zeros, not a hole or an unwritten extent: overwriting them later needs no
        block allocation, so `fdatasync` then has no metadata to write.
        """
        ...

    def fsync(self, handle: int) -> None:
        """Make the file's content and metadata (its size included) durable."""
        ...

    def fdatasync(self, handle: int) -> None:
        """Make the file's content durable. The store calls it only when the file's size
        and blocks are already durable (writes inside a synced extension), so it never
        relies on `fdatasync` flushing a size change."""
        ...

    def truncate(self, handle: int, size: int) -> None:
        """Cut the file to `size` bytes."""
        ...

    def close(self, handle: int) -> None:
        """Close a handle from `create` or `open_write`."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace `dst` by `src` (same directory)."""
        ...

    def remove(self, path: str) -> None:
        """Delete file `path`; a missing file is not an error."""
        ...

    def fsync_dir(self, path: str) -> None:
        """Make the directory's entries (creations, renames, removals) durable."""
        ...

    def lock(self, path: str) -> int:
        """Take an exclusive lock on file `path` (created if missing), without waiting.

        Raises `BlockingIOError` when someone else holds it.
        """
        ...

    def unlock(self, handle: int) -> None:
        """Release a lock taken with `lock`."""
        ...


class OsFileSystem:
    """The real file system (POSIX): `os` calls, `fcntl.flock` locks."""

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as file:
            return file.read()

    def create(self, path: str) -> int:
        # No O_APPEND: on Linux, pwrite on an O_APPEND descriptor ignores its offset.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        return os.open(path, flags, 0o644)

    def open_write(self, path: str) -> int:
        return os.open(path, os.O_WRONLY | os.O_CLOEXEC)

    def write(self, handle: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(handle, view)
            view = view[written:]

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(handle, view, offset)
            view = view[written:]
            offset += written

    def extend(self, handle: int, start: int, end: int) -> None:
        while start < end:
            start += os.pwrite(handle, memoryview(_ZEROS)[: min(len(_ZEROS), end - start)], start)

    def fsync(self, handle: int) -> None:
        os.fsync(handle)

    def fdatasync(self, handle: int) -> None:
        _fdatasync(handle)

    def truncate(self, handle: int, size: int) -> None:
        os.ftruncate(handle, size)

    def close(self, handle: int) -> None:
        os.close(handle)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, path: str) -> int:
        import fcntl  # POSIX only; imported here so that importing the stores works anywhere

        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def unlock(self, handle: int) -> None:
        # Closing the descriptor releases the flock; no explicit LOCK_UN needed.
        os.close(handle)
