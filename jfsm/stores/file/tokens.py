"""The fencing tokens of a directory that several processes share: one sequence for the whole
directory, drawn without a lock (decision R174).

`DIR/tokens.d/` holds one empty file per recently drawn token, named by its number. To draw:

1. list the folder; n = 1 + the highest number there (or the older format's counter
   `DIR/tokens`, decision R95, if higher: a directory written by an older jfsm goes on past
   it);
2. create `tokens.d/<n>` with `O_EXCL`; if the name is taken, another process drew n: start
   again;
3. list the folder again: if a number more than `KEEP` above n is there, n may be a name
   step 5 removed after it was handed out (and created again by a process that listed
   before): remove it and start again. A name within `KEEP` of the highest was never
   removed, so it was never handed out before;
4. `fsync` the folder: the name is durable before the token is used, so after a power loss
   the highest name is still at least every token used;
5. remove the names more than `KEEP` below n (never the highest ones).

So a token is never handed out twice, for any game, even after a game was removed and made
again (JF-STORE-010), and a later draw gets a higher one. Nothing is locked: a process
stopped anywhere in a draw delays nobody (it holds no lock), and whatever it creates after
it resumes is a name others skip. Every runtime can do it (`O_EXCL`: Node's `'wx'`, Java's
`CREATE_NEW`, Go's `os.O_EXCL`).

Errors: `OSError` from the file system; the older counter that does not parse is `OSError`
`EIO` (never reset); a folder that keeps changing for `ATTEMPTS` tries is `EAGAIN`.
"""

from __future__ import annotations

import contextlib
import errno
import os

__all__ = ["KEEP", "LEGACY_COUNTER", "TOKENS_DIR", "drawn", "next_token"]

TOKENS_DIR = "tokens.d"
LEGACY_COUNTER = "tokens"  # decision R95's counter file (read, never written)
KEEP = 16  # names kept below the highest
ATTEMPTS = 10_000
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
_MAX = 2**63 - 1


def _numbers(folder: int) -> list[int]:
    return [int(name) for name in os.listdir(folder) if name.isdigit() and name.isascii()]


def _legacy(root: int) -> int:
    """The older format's counter (0 without one)."""
    try:
        fd = os.open(LEGACY_COUNTER, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=root)
    except FileNotFoundError:
        return 0
    try:
        raw = os.pread(fd, 64, 0).strip()
    finally:
        os.close(fd)
    if raw and not (raw.isdigit() and raw.isascii()):
        raise OSError(errno.EIO, "the older token counter does not parse", LEGACY_COUNTER)
    return int(raw or b"0")


def _folder(root: int) -> int:
    """A descriptor of `tokens.d` (created, and made durable in the root, if missing)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(TOKENS_DIR, flags, dir_fd=root)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):
            os.mkdir(TOKENS_DIR, 0o700, dir_fd=root)
            os.fsync(root)
    return os.open(TOKENS_DIR, flags, dir_fd=root)


def drawn(root: str | os.PathLike[str]) -> int:
    """The highest token drawn in `root` so far (0: none), read without drawing."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    top = os.open(root, flags)
    try:
        highest = _legacy(top)
        try:
            folder = os.open(TOKENS_DIR, flags | getattr(os, "O_NOFOLLOW", 0), dir_fd=top)
        except FileNotFoundError:
            return highest
        try:
            return max([highest, *_numbers(folder)])
        finally:
            os.close(folder)
    finally:
        os.close(top)


def next_token(root: str | os.PathLike[str]) -> int:
    """A fencing token never handed out before in the directory `root`, greater than every
    one handed out before this call began (module docstring). Raises `OSError`."""
    top = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    try:
        folder = _folder(top)
        try:
            return _draw(top, folder)
        finally:
            os.close(folder)
    finally:
        os.close(top)


def _draw(top: int, folder: int) -> int:
    legacy = _legacy(top)
    for _ in range(ATTEMPTS):
        n = max([legacy, *_numbers(folder)]) + 1
        if n > _MAX:
            raise OSError(errno.EOVERFLOW, "the fencing tokens are used up", TOKENS_DIR)
        try:
            os.close(os.open(str(n), _FLAGS, 0o600, dir_fd=folder))
        except FileExistsError:
            continue  # another process drew n
        present = _numbers(folder)
        if max(present) - KEEP > n:
            with contextlib.suppress(OSError):
                os.unlink(str(n), dir_fd=folder)
            continue  # far below the highest: n may be a pruned name created again
        os.fsync(folder)
        for old in present:
            if old < n - KEEP:
                with contextlib.suppress(OSError):
                    os.unlink(str(old), dir_fd=folder)
        return n
    raise OSError(errno.EAGAIN, "the token folder kept changing", TOKENS_DIR)
