"""The file-system seam of the durable store.

`FileStore` touches the disk only through a `FileSystem`, so tests can inject a crash
(an exception) before or after any write, extension, fsync, rename, truncate or remove, or
replace the disk altogether with a model that forgets whatever was not yet synced.
`OsFileSystem` is the real one. Handles are plain integers (file descriptors for
`OsFileSystem`).

Every method raises `OSError` (or whatever an injected layer raises) on failure, except
`lock` and `lock_shared`, which raise `BlockingIOError` when another holder has the lock.

The lock (decision R28) is an `flock` on the store's directory itself, opened read-only: a
directory cannot be unlinked while it holds files, so deleting a file cannot defeat it (it
could when the lock was only the `lock` file: a second writer got in after someone deleted
it). Writers lock the `lock` file too, so that a writer older than R28 is kept out.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Protocol

__all__ = ["FileSystem", "OsFileSystem"]

LOCK_FILE = "lock"
_ZEROS = bytes(1 << 20)
_COMPANIONS: dict[int, list[int]] = {}  # a directory lock's descriptor -> its `lock` file's
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

    def lock(self, directory: str) -> int:
        """Take the exclusive lock of the store in `directory`, without waiting.

        Raises `BlockingIOError` when someone else holds it.
        """
        ...

    def unlock(self, handle: int) -> None:
        """Release a lock taken with `lock` or `lock_shared`."""
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

    def lock(self, directory: str) -> int:
        return self._lock(directory, shared=False)

    def lock_shared(self, directory: str) -> int:
        """The lock shared (by readers such as `jfsm inspect`): creates nothing, works on a
        read-only copy; raises `BlockingIOError` while a writer holds it."""
        return self._lock(directory, shared=True)

    def _lock(self, directory: str, *, shared: bool) -> int:
        import fcntl  # POSIX only; imported here so that importing the stores works anywhere

        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        fds = [os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
        try:
            fcntl.flock(fds[0], mode)
            here, locked = os.stat(directory), os.fstat(fds[0])
            if (here.st_dev, here.st_ino) != (locked.st_dev, locked.st_ino):
                raise BlockingIOError(errno.EWOULDBLOCK, "replaced while locking", directory)
            path = os.path.join(directory, LOCK_FILE)
            if shared:
                with contextlib.suppress(FileNotFoundError, PermissionError):
                    fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
            else:
                fds.append(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
            for fd in fds[1:]:
                fcntl.flock(fd, mode)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        _COMPANIONS[fds[0]] = fds[1:]
        return fds[0]

    def unlock(self, handle: int) -> None:
        # Closing a descriptor releases its flock; no explicit LOCK_UN needed.
        for fd in _COMPANIONS.pop(handle, []):
            with contextlib.suppress(OSError):
                os.close(fd)
        os.close(handle)
