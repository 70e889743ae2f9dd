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

# Never through a link (decision R74)

Every file the store or the driver opens goes through `open_file`: `O_NOFOLLOW` always, and
a file that is created is created with `O_EXCL`, so a symbolic link planted under one of
their names is refused (`ELOOP`, `EEXIST`) instead of followed to a file of someone else's
choosing. `owned_directory` opens a directory the same way and refuses one that is a link,
belongs to another user or is writable by group or others (`UnsafeDirectory`), unless the
caller trusts it knowingly. `OsFileSystem` opens, renames and removes the files of a store it
has locked relative to the locked directory's descriptor (`openat`), so the directory
cannot be swapped under an open store.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import Literal, Protocol

__all__ = ["FileSystem", "OsFileSystem", "UnsafeDirectory", "open_file", "owned_directory"]

LOCK_FILE = "lock"
_ZEROS = bytes(1 << 20)
_COMPANIONS: dict[int, list[int]] = {}  # a directory lock's descriptor -> its `lock` file's
_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


Opening = Literal["read", "new", "write", "append", "update", "dir"]
_FLAGS: dict[str, int] = {
    "read": os.O_RDONLY,
    "new": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    "write": os.O_WRONLY,
    "append": os.O_RDWR | os.O_APPEND,
    "update": os.O_RDWR,
    "dir": os.O_RDONLY | getattr(os, "O_DIRECTORY", 0),
}
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: Opens-then-creates tried before `open_file(create=True)` gives up on a name that others
#: keep making and removing (each lost race means another process made the file).
_RACES = 8


def open_file(
    path: str | os.PathLike[str],
    how: Opening,
    *,
    dir_fd: int | None = None,
    mode: int = 0o644,
    create: bool = False,
) -> int:
    """Open `path` (relative to `dir_fd` if given) without ever following a link there.

    `how`: `read`; `new` (created, `O_EXCL`: fails if anything, a link included, has the
    name); `write` (an existing file, for `pwrite`); `append` (`O_RDWR | O_APPEND`);
    `update` (`O_RDWR`: `pread` and `pwrite` at their offsets); `dir`. `create` (for
    `write`, `append` and `update`): a missing file is created, with `O_EXCL`; one that
    another process created between the two opens is opened (R239).
    Raises `OSError`: `ELOOP` for a link, `EEXIST` for a taken name, `ENOENT`...
    """
    flags = _FLAGS[how] | _NOFOLLOW
    for _ in range(_RACES):
        try:
            return os.open(path, flags, mode, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
        try:
            return os.open(path, flags | os.O_CREAT | os.O_EXCL, mode, dir_fd=dir_fd)
        except FileExistsError:
            continue  # made by another process meanwhile (or removed again): open it
    return os.open(path, flags | os.O_CREAT | os.O_EXCL, mode, dir_fd=dir_fd)


class UnsafeDirectory(PermissionError):
    """A directory someone else could write into: a link, another user's, or writable by
    group or others. Its message is one line naming the directory and the override."""


def owned_directory(path: str | os.PathLike[str], what: str, *, trusted: bool = False) -> int:
    """A descriptor of directory `path` (never through a link), checked to be ours.

    Refuses with `UnsafeDirectory` a `path` that is a symbolic link, belongs to another user
    or is writable by group or others; `trusted` skips the owner and mode checks (never the
    link check). Raises `OSError` if it cannot be opened (`ENOENT`, `ENOTDIR`...).
    """
    shown = path = os.path.normpath(os.fspath(path))  # a trailing slash would follow a link
    try:
        link = stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        link = False  # opening says why
    if link:
        raise UnsafeDirectory(errno.EPERM, f"{what} is a symbolic link; give its target", shown)
    try:
        fd = open_file(path, "dir")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeDirectory(errno.EPERM, f"{what} is a symbolic link", shown) from None
        raise
    try:
        found = os.fstat(fd)
        problem = None
        if trusted:
            pass
        elif hasattr(os, "geteuid") and found.st_uid != os.geteuid():
            problem = f"{what} belongs to another user (uid {found.st_uid})"
        elif found.st_mode & 0o022:
            problem = f"{what} is writable by group or others (mode {found.st_mode & 0o777:o})"
        if problem is not None:
            raise UnsafeDirectory(
                errno.EPERM, problem + "; use a folder of your own or trust it knowingly", shown
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


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
        """Create `path` empty and open it for writing from offset 0; `FileExistsError` if
        anything (a link included) has that name."""
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
    """The real file system (POSIX): `os` calls, `fcntl.flock` locks, never through a link.

    `trusted`: the exclusive lock accepts a directory of another user or one writable by
    group or others (decision R74); without it that is `UnsafeDirectory`. A link is refused
    either way. The files of a locked directory are reached through its descriptor.
    `shared`: `lock` takes the lock *shared* and holds it for the store's life
    (`BlockingIOError` while a process of one has it exclusively), decisions R95 and R120.
    """

    trusted = False
    #: hold the store's lock shared (decision R120): in a directory shared by several
    #: processes, writers are ordered by each game's epochs (`jfsm.stores.file.ownership`);
    #: the shared hold only keeps a store of one process (exclusive) out while any shared
    #: process has the store open, and the other way round
    shared = False

    def __init__(self, *, trusted: bool = False, shared: bool = False) -> None:
        self.trusted = trusted
        self.shared = shared

    @property
    def _dirs(self) -> dict[str, int]:
        """A locked directory's path -> its descriptor (made here: subclasses in tests do
        not all call `__init__`)."""
        return self.__dict__.setdefault("_locked_dirs", {})

    def _at(self, path: str) -> tuple[str, int | None]:
        """`path` as (name, descriptor of its locked directory), or (path, None)."""
        head, name = os.path.split(path)
        fd = self._dirs.get(os.path.normpath(head or "."))
        return (name, fd) if fd is not None else (path, None)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, mode=0o755, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        fd = self._dirs.get(os.path.normpath(path))
        return os.listdir(path if fd is None else fd)

    def read(self, path: str) -> bytes:
        name, at = self._at(path)
        fd = open_file(name, "read", dir_fd=at)
        with open(fd, "rb", closefd=True) as file:
            return file.read()

    def create(self, path: str) -> int:
        # No O_APPEND: on Linux, pwrite on an O_APPEND descriptor ignores its offset.
        name, at = self._at(path)
        return open_file(name, "new", dir_fd=at)

    def open_write(self, path: str) -> int:
        name, at = self._at(path)
        return open_file(name, "write", dir_fd=at)

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
        (src_name, src_at), (dst_name, dst_at) = self._at(src), self._at(dst)
        os.replace(src_name, dst_name, src_dir_fd=src_at, dst_dir_fd=dst_at)

    def remove(self, path: str) -> None:
        name, at = self._at(path)
        with contextlib.suppress(FileNotFoundError):
            os.remove(name, dir_fd=at)  # a link is removed, never what it points to

    def fsync_dir(self, path: str) -> None:
        locked = self._dirs.get(os.path.normpath(path))
        if locked is not None:
            os.fsync(locked)
            return
        # Read-only, for a flush: a parent reached through a link (macOS's /tmp) is fine.
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, directory: str) -> int:
        return self._lock(directory, shared=False)

    def lock_shared(self, directory: str) -> int:
        """The lock shared (by readers such as `jfsm inspect`): creates nothing, works on a
        read-only copy or another user's store; raises `BlockingIOError` while a writer
        holds it."""
        return self._lock(directory, shared=True)

    def _lock(self, directory: str, *, shared: bool) -> int:
        import fcntl  # POSIX only; imported here so that importing the stores works anywhere

        # a reader (`jfsm inspect`) and a writer of a shared directory both hold it shared
        mode = (fcntl.LOCK_SH if shared or self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        directory = os.path.normpath(directory)
        fds = [owned_directory(directory, f"store {directory}", trusted=shared or self.trusted)]
        try:
            fcntl.flock(fds[0], mode)
            here, locked = os.lstat(directory), os.fstat(fds[0])
            if (here.st_dev, here.st_ino) != (locked.st_dev, locked.st_ino):
                raise BlockingIOError(errno.EWOULDBLOCK, "replaced while locking", directory)
            if shared:
                with contextlib.suppress(FileNotFoundError, PermissionError):
                    fds.append(open_file(LOCK_FILE, "read", dir_fd=fds[0]))
            else:
                fds.append(open_file(LOCK_FILE, "append", dir_fd=fds[0], create=True))
            for fd in fds[1:]:
                fcntl.flock(fd, mode)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        _COMPANIONS[fds[0]] = fds[1:]
        self._dirs[os.path.normpath(directory)] = fds[0]
        return fds[0]

    def unlock(self, handle: int) -> None:
        # LOCK_UN before closing: a process forked meanwhile (any subprocess this process
        # starts) holds a copy of each descriptor until it execs, and closing ours alone
        # would leave the lock held by that copy: the next open would be refused
        # store_locked.
        import fcntl

        for path, fd in list(self._dirs.items()):
            if fd == handle:
                del self._dirs[path]
        for fd in [*_COMPANIONS.pop(handle, []), handle]:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            if fd != handle:
                with contextlib.suppress(OSError):
                    os.close(fd)
        os.close(handle)
