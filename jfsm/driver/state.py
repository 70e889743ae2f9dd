"""The reference driver's state directory (`jfsm driver --state DIR`), crash-safe.

```
DIR/
  game-<hex of the UTF-8 game id>/     one folder per game
    store/                             the game's durable store (FileStore; shared mode:
                                       its epochs, leases and participants, R173)
    participants.json                  the game's current participants (shared mode: only
                                       until the store holds them, R176)
    telemetry.jsonl                    one compression_attempt event per line
  .new-<hex>-<random>/                 a game being created or duplicated (never a game)
  tokens.d/                            shared mode only: the fencing tokens (R174)
  lock.shared                          shared mode only: held by every shared driver (R120)
```

A directory is served one way at a time (decision R120): a driver without `--shared` holds
the root directory itself (an `flock` shared among plain drivers) for its life, a shared
driver `lock.shared`; each, as it starts, checks that nobody holds the other's
(`hold_mode`), so a plain and a shared driver never serve one directory at once, in either
order (`StoreLocked` for the later one). Every store of a shared driver also holds its
store's lock shared, and a plain one exclusively (`jfsm.stores.file.fsio`), so an embedded
`FileStore` cannot mix them either.

Every write survives a `kill -9` at any instant (decision R25):

- a game folder appears whole or not at all: it is built under `.new-...` (store,
  participants), flushed, renamed into place and the directory flushed; its creator holds
  an `flock` on the `.new-...` folder until then, taken before anything is written in it
  and checked to still hold the folder (a sweeper may have passed between its `mkdir` and
  its lock: it then makes another). A `.new-...` folder whose lock a driver can take at
  `hello` is an unfinished creation whose creator is gone, never acknowledged, and is
  removed whatever its age; one its creator holds is never touched (R124, R233);
- `participants.json` is replaced atomically (temporary file, fsync, rename, directory fsync),
  so it holds the old or the new list, never a torn one;
- `telemetry.jsonl` is append-only, one `write` and one fsync per event; a torn last line
  (the process died mid-append) is dropped on read and closed off by a newline before the
  next append.

Nothing here is opened through a link (decision R74): the root is opened by
`jfsm.stores.file.fsio.owned_directory`, refused if it is a link, another user's or writable by
group or others (`UnsafeDirectory`, unless `trusted`), and created `0700` if missing; a game's
folder is opened relative to the root's descriptor and its files relative to the folder's,
every one by `open_file` (`O_NOFOLLOW`, new files `O_EXCL`). A link planted under a game's
folder, `store`, `participants.json` or `telemetry.jsonl` is refused (`ELOOP`), never
followed.

`scan` lists the games and never fails for one bad entry: a folder whose name is not a valid
game id, a plain file named `game-...`, or a folder without a store is reported as skipped
(JF-ERR-014) and the others are served. Errors: `StateDamaged` (a `ValueError`) for a
participants file that cannot be read; `StoreUnavailable` naming the errno when creating a
game, saving participants or reading telemetry fails (R75); `OSError` from the file system
otherwise (`UnsafeDirectory` for a root not ours).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jfsm.errors import InvalidInput, JfsmError, StoreLocked
from jfsm.limits import validate_id
from jfsm.records import Participant, parse_record
from jfsm.stores.file.fsio import OsFileSystem, open_file, owned_directory
from jfsm.stores.file.store import fs_unavailable
from jfsm.stores.offload import run_blocking

__all__ = ["GameFolder", "Skipped", "StateDamaged", "StateDirectory"]

PARTICIPANTS = "participants.json"
TELEMETRY = "telemetry.jsonl"
STORE = "store"
_GAME = "game-"
_NEW = ".new-"
SHARED_LOCK = "lock.shared"
_NEW_TRIES = 8  # `.new-...` folders a creator makes before giving up (each swept under it)
_MODE_WAIT = 1.0  # seconds a starting driver retries the other mode's file (a peer checking)


def _try_lock(fd: int, exclusive: bool) -> bool:
    import fcntl  # POSIX only

    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _names(path: Path, fd: int) -> bool:
    """Whether `path` still names the directory open as `fd` (not removed, nor replaced)."""
    try:
        here = os.lstat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)


def _mode_conflict(root: Path, shared: bool) -> str:
    if shared:
        return (
            f"state directory {root} is served by a driver without --shared now (or another "
            f"program holds a lock on it or on {SHARED_LOCK}): stop it first (a directory "
            "is served plainly or shared, never both at once)"
        )
    return (
        f"state directory {root} is served by shared drivers (--shared) now (or another "
        f"program holds a lock on {SHARED_LOCK}): add --shared, or stop them first"
    )


class StateDamaged(ValueError):
    """A file of the state directory cannot be read (the message names it)."""


@dataclass(frozen=True, slots=True)
class GameFolder:
    """One game's folder: its id and paths."""

    game_id: str
    path: Path
    trusted: bool = False  # its state directory is trusted knowingly (R74)

    def store_fs(self) -> OsFileSystem:
        """The file system its `FileStore` opens over: links refused, and unless `trusted`,
        a store folder of another user or writable by group or others (R74)."""
        return OsFileSystem(trusted=self.trusted)

    @property
    def store(self) -> Path:
        return self.path / STORE

    @property
    def participants(self) -> Path:
        return self.path / PARTICIPANTS

    @property
    def telemetry(self) -> Path:
        return self.path / TELEMETRY


@dataclass(frozen=True, slots=True)
class Skipped:
    """An entry of the state directory that is not served, and why."""

    entry: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"entry": self.entry, "reason": self.reason}


def printable_name(name: str) -> str:
    """A file name as valid Unicode text (undecodable bytes shown as `\\xNN`)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _fsync_dir(path: Path) -> None:
    fd = open_file(path, "dir")
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _unavailable(where: Path, what: str, state: str = "open") -> Iterator[None]:
    """A file-system error of the driver's own files as the store's: `StoreUnavailable`
    naming the errno (R75), never an `internal_error`."""
    try:
        yield
    except OSError as exc:
        raise fs_unavailable(str(where), what, exc, state) from exc


@contextlib.contextmanager
def _opened_dir(path: Path) -> Iterator[int]:
    """A descriptor of the directory `path`, opened without following a link there."""
    fd = open_file(path, "dir")
    try:
        yield fd
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new content.

    Everything happens relative to the folder's descriptor: the temporary file is new
    (`O_EXCL`), and the rename replaces whatever has the name (a link itself, never its
    target)."""
    tmp = f".{path.name}.{secrets.token_hex(4)}.tmp"
    with _opened_dir(path.parent) as folder:
        fd = open_file(tmp, "new", dir_fd=folder)
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
        os.fsync(folder)


def _read(path: Path) -> bytes:
    """The bytes of file `path`, never through a link (`ELOOP`)."""
    fd = open_file(path, "read")
    with open(fd, "rb", closefd=True) as file:
        return file.read()


class StateDirectory:
    """The folders of a driver's durable games under `root` (created if missing).

    `trusted`: accept a root of another user or writable by group or others (R74)."""

    def __init__(self, root: str | os.PathLike[str], *, trusted: bool = False) -> None:
        self.root = Path(root)
        self.trusted = trusted
        self._tails_closed: set[str] = set()
        self._mode: int | None = None  # the held root (plain) or `lock.shared` (R120)
        self._creating: dict[Path, int] = {}  # `.new-...` folder -> its held descriptor

    def hold_mode(self, shared: bool) -> None:
        """Hold the directory as served plainly or shared for this object's life (R120):
        refused with `StoreLocked` (one line) while a driver of the other mode serves it.
        A plain driver holds the root directory itself (a lock shared by plain drivers), a
        shared one the file `lock.shared`; each takes its own first, then checks that nobody
        holds the other's. Idempotent. Raises `OSError` if they cannot be opened."""
        if self._mode is not None:
            return
        self.claim()
        with _opened_dir(self.root) as root:
            if shared:
                fd = open_file(SHARED_LOCK, "update", dir_fd=root, create=True, mode=0o600)
            else:
                fd = open_file(".", "dir", dir_fd=root)
            try:
                if shared:
                    other: int | None = open_file(".", "dir", dir_fd=root)
                else:
                    try:  # no such file: no shared driver ever served the directory
                        other = open_file(SHARED_LOCK, "read", dir_fd=root)
                    except FileNotFoundError:
                        other = None
                try:
                    deadline = time.monotonic() + _MODE_WAIT
                    # mine first, then the other's: of two drivers starting at once, at least
                    # one sees the other (both may refuse, never both serve)
                    while not (_try_lock(fd, False) and (other is None or _try_lock(other, True))):
                        if time.monotonic() > deadline:
                            raise StoreLocked(
                                _mode_conflict(self.root, shared), directory=str(self.root)
                            )
                        time.sleep(0.02)
                finally:
                    if other is not None:
                        os.close(other)  # the other's: checked, never held
            except BaseException:
                os.close(fd)
                raise
        self._mode = fd
        weakref.finalize(self, os.close, fd)

    def claim(self) -> None:
        """Create the root (mode 0700) if missing and check it is ours (R74).

        Raises `UnsafeDirectory` (a `PermissionError`, one line) for a root that is a link,
        another user's or writable by group or others; `OSError` if it cannot be made."""
        what = f"state directory {self.root}"
        try:
            fd = owned_directory(self.root, what, trusted=self.trusted)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.makedirs(self.root, mode=0o700)
            fd = owned_directory(self.root, what, trusted=self.trusted)
        os.close(fd)

    def check_folder(self, folder: GameFolder) -> None:
        """Raise `OSError` (`ELOOP`) unless the game's folder is a folder of the root reached
        without a link (its `store` is checked by `FileStore.open`)."""
        with _opened_dir(self.root) as root:
            os.close(open_file(folder.path.name, "dir", dir_fd=root))

    def folder(self, game_id: str) -> GameFolder:
        """The folder of `game_id` (which may not exist)."""
        name = _GAME + game_id.encode("utf-8").hex()
        return GameFolder(game_id, self.root / name, self.trusted)

    def exists(self, game_id: str) -> bool:
        return os.path.lexists(self.folder(game_id).path)

    # -- listing -------------------------------------------------------------------------
    def scan(self) -> tuple[list[GameFolder], list[Skipped]]:
        """Every game folder, and the entries skipped (never raises for one entry).

        Removes unfinished creations whose creator is gone (`sweep_unfinished`). Raises
        `OSError` only when the root itself cannot be created or listed.
        """
        self.claim()
        games: list[GameFolder] = []
        skipped: list[Skipped] = []
        with os.scandir(self.root) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            path = self.root / name
            if name.startswith(_NEW):
                self._sweep(path)
                continue
            if not name.startswith(_GAME):
                continue
            problem = None
            game_id = ""
            try:
                game_id = validate_id(bytes.fromhex(name[len(_GAME) :]).decode("utf-8"), "id")
            except (ValueError, JfsmError):
                problem = "the name is not game- and the hex of a valid game id"
            if problem is None and (path.is_symlink() or not path.is_dir()):
                problem = "not a folder"
            if problem is None and ((path / STORE).is_symlink() or not (path / STORE).is_dir()):
                problem = "no store folder inside (a link is not one)"
            if problem is None:
                games.append(GameFolder(game_id, path, self.trusted))
            else:
                skipped.append(Skipped(printable_name(name), problem))
        return games, skipped

    def sweep_unfinished(self) -> list[str]:
        """Remove the `.new-...` folders whose creator is gone: those whose lock this call
        takes, whatever their age (R233); returns their names. A folder being filled (its
        creator holds it) is never touched. Never raises for one folder."""
        try:
            with os.scandir(self.root) as entries:
                names = sorted(e.name for e in entries if e.name.startswith(_NEW))
        except OSError:
            return []
        return [name for name in names if self._sweep(self.root / name)]

    @staticmethod
    def _sweep(path: Path) -> bool:
        """Remove the `.new-...` folder `path` if its lock can be taken (its creator is gone,
        or has not locked it yet: it then sees it gone and makes another); whether it was
        removed. Never raises."""
        try:
            fd = open_file(path, "dir")
        except OSError:
            return False
        try:
            if not _try_lock(fd, True):
                return False  # its creator is filling it
            if not _names(path, fd):
                return False  # published (renamed) or removed meanwhile
            shutil.rmtree(path, ignore_errors=True)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    # -- creating ------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def new_game(self, game_id: str) -> AsyncIterator[GameFolder]:
        """A fresh folder, published under the game's name when the block ends normally.

        Fill it inside the block (its `store` folder, `save_participants`); close what you
        opened there before the block ends. The folder is renamed into place and the
        directory flushed on success, removed on any exception. Every file-system call runs
        off the event loop (`run_blocking`, R65). `InvalidInput` if the game's folder exists
        already; `StoreUnavailable` naming the errno if it cannot be made.
        """
        final = self.folder(game_id)
        tmp = await run_blocking(self._begin_game, final)
        try:
            with _unavailable(final.path, "create the game", "closed"):
                yield GameFolder(game_id, tmp, self.trusted)
            await run_blocking(self._publish_game, tmp, final)
        except BaseException:
            await run_blocking(shutil.rmtree, tmp, True)
            raise
        finally:  # the folder's lock, held while it was filled (R124)
            with contextlib.suppress(OSError):
                os.close(self._creating.pop(tmp))

    def _begin_game(self, final: GameFolder) -> Path:
        """Make the temporary folder of `final`, locked (blocking).

        The lock is taken before anything is written in the folder, then the folder is
        checked to be still there: a sweeper that passed between the `mkdir` and the lock
        removed it, or holds it to remove it, and another is made (R233)."""
        with _unavailable(final.path, "create the game", "closed"):
            if os.path.lexists(final.path):
                raise InvalidInput(f"game {final.game_id!r} already exists in the state directory")
            self.claim()
            for _ in range(_NEW_TRIES):
                tmp = self.root / f"{_NEW}{final.path.name[len(_GAME) :]}-{secrets.token_hex(4)}"
                tmp.mkdir(mode=0o755)
                try:
                    fd = open_file(tmp, "dir")
                except FileNotFoundError:
                    continue  # swept already
                # held until published or removed: a sweeper leaves it alone (R124)
                if _try_lock(fd, True) and _names(tmp, fd):
                    self._creating[tmp] = fd
                    return tmp
                os.close(fd)  # a sweeper has it, or had it: it removes it, not us
            raise OSError(
                errno.EAGAIN, f"{_NEW_TRIES} creation folders swept as they were made", str(tmp)
            )

    def _publish_game(self, tmp: Path, final: GameFolder) -> None:
        """Flush `tmp` and rename it to `final` (blocking); the caller removes `tmp` on error."""
        with _unavailable(final.path, "create the game", "closed"):
            _fsync_dir(tmp)
            if os.path.lexists(final.path):
                raise InvalidInput(f"game {final.game_id!r} already exists in the state directory")
            try:
                os.rename(tmp, final.path)
            except OSError as exc:  # made meanwhile by another process (a shared directory)
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise InvalidInput(
                        f"game {final.game_id!r} already exists in the state directory"
                    ) from None
                raise
            _fsync_dir(self.root)

    # -- participants --------------------------------------------------------------------
    def save_participants(self, folder: GameFolder, participants: Iterable[Participant]) -> None:
        """Replace the participants file atomically."""
        data = json.dumps([p.to_json() for p in participants], ensure_ascii=False)
        with _unavailable(folder.path, "save the participants"):
            atomic_write(folder.participants, data.encode("utf-8"))

    def load_participants(self, folder: GameFolder) -> list[Participant]:
        """The saved participants (none if never saved); `StateDamaged` if unreadable.

        Removes temporary files a crash left behind. Raises `OSError` (`ELOOP`) for a game
        folder that is a link (never followed).
        """
        self.check_folder(folder)
        for leftover in folder.path.glob(f".{PARTICIPANTS}.*.tmp"):
            with contextlib.suppress(OSError):
                leftover.unlink()
        try:
            raw = _read(folder.participants)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateDamaged(f"{folder.participants}: {exc}") from exc
        try:
            items = json.loads(raw.decode("utf-8"))
            if not isinstance(items, list):
                raise ValueError("not a list")
            return [parse_record(Participant, item) for item in items]
        except (ValueError, RecursionError, JfsmError) as exc:
            raise StateDamaged(f"{folder.participants}: not a participants list: {exc}") from exc

    # -- telemetry -----------------------------------------------------------------------
    def append_telemetry(self, folder: GameFolder, event: dict[str, Any]) -> None:
        """Append one event as one line, flushed (closing off a torn tail first).

        Raises `OSError`: `ELOOP` if the file is a link (nothing is written), `ENOSPC`..."""
        line = json.dumps(event, ensure_ascii=True).encode("ascii") + b"\n"
        fd = open_file(folder.telemetry, "append", create=True)
        try:
            key = str(folder.path)
            if key not in self._tails_closed:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # the torn line becomes a line of its own
                self._tails_closed.add(key)
            _write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_telemetry(self, folder: GameFolder) -> list[dict[str, Any]] | None:
        """Every complete event, oldest first (torn or foreign lines dropped); `None` if
        the game has no telemetry file."""
        try:
            raw = _read(folder.telemetry)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP for a link, EIO...
            raise fs_unavailable(str(folder.path), "read the telemetry", exc, "open") from exc
        events = []
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                event = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict):
                events.append(event)
        return events
