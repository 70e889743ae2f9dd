"""The reference driver's state directory (`jfsm driver --state DIR`), crash-safe.

```
DIR/
  game-<hex of the UTF-8 game id>/     one folder per game
    store/                             the game's durable store (FileStore)
    participants.json                  the game's current participants
    telemetry.jsonl                    one compression_attempt event per line
  .new-<hex>-<random>/                 a game being created or duplicated (never a game)
```

Every write survives a `kill -9` at any instant (decision R25):

- a game folder appears whole or not at all: it is built under `.new-...` (store,
  participants), flushed, renamed into place and the directory flushed; a `.new-...` folder
  found at startup is an unfinished creation that was never acknowledged and is removed;
- `participants.json` is replaced atomically (temporary file, fsync, rename, directory fsync),
  so it holds the old or the new list, never a torn one;
- `telemetry.jsonl` is append-only, one `write` and one fsync per event; a torn last line
  (the process died mid-append) is dropped on read and closed off by a newline before the
  next append.

`scan` lists the games and never fails for one bad entry: a folder whose name is not a valid
game id, a plain file named `game-...`, or a folder without a store is reported as skipped
(JF-ERR-014) and the others are served. Errors: `StateDamaged` (a `ValueError`) for a
participants file that cannot be read; `OSError` from the file system otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jfsm.errors import InvalidInput, JfsmError
from jfsm.limits import validate_id
from jfsm.records import Participant, parse_record

__all__ = ["GameFolder", "Skipped", "StateDamaged", "StateDirectory"]

PARTICIPANTS = "participants.json"
TELEMETRY = "telemetry.jsonl"
STORE = "store"
_GAME = "game-"
_NEW = ".new-"


class StateDamaged(ValueError):
    """A file of the state directory cannot be read (the message names it)."""


@dataclass(frozen=True, slots=True)
class GameFolder:
    """One game's folder: its id and paths."""

    game_id: str
    path: Path

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
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new content."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


class StateDirectory:
    """The folders of a driver's durable games under `root` (created if missing)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._tails_closed: set[str] = set()

    def folder(self, game_id: str) -> GameFolder:
        """The folder of `game_id` (which may not exist)."""
        return GameFolder(game_id, self.root / (_GAME + game_id.encode("utf-8").hex()))

    def exists(self, game_id: str) -> bool:
        return os.path.lexists(self.folder(game_id).path)

    # -- listing -------------------------------------------------------------------------
    def scan(self) -> tuple[list[GameFolder], list[Skipped]]:
        """Every game folder, and the entries skipped (never raises for one entry).

        Removes unfinished creations (`.new-...`). Raises `OSError` only when the root
        itself cannot be created or listed.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        games: list[GameFolder] = []
        skipped: list[Skipped] = []
        with os.scandir(self.root) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            path = self.root / name
            if name.startswith(_NEW):
                shutil.rmtree(path, ignore_errors=True)
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
            if problem is None and not (path / STORE).is_dir():
                problem = "no store folder inside"
            if problem is None:
                games.append(GameFolder(game_id, path))
            else:
                skipped.append(Skipped(printable_name(name), problem))
        return games, skipped

    # -- creating ------------------------------------------------------------------------
    @contextlib.contextmanager
    def new_game(self, game_id: str) -> Iterator[GameFolder]:
        """A fresh folder, published under the game's name when the block ends normally.

        Fill it inside the block (its `store` folder, `save_participants`); close what you
        opened there before the block ends. The folder is renamed into place and the
        directory flushed on success, removed on any exception. `InvalidInput` if the game's
        folder exists already.
        """
        final = self.folder(game_id)
        if os.path.lexists(final.path):
            raise InvalidInput(f"game {game_id!r} already exists in the state directory")
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f"{_NEW}{final.path.name[len(_GAME) :]}-{secrets.token_hex(4)}"
        tmp.mkdir()
        try:
            yield GameFolder(game_id, tmp)
            _fsync_dir(tmp)
            if os.path.lexists(final.path):
                raise InvalidInput(f"game {game_id!r} already exists in the state directory")
            os.rename(tmp, final.path)
            _fsync_dir(self.root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    # -- participants --------------------------------------------------------------------
    def save_participants(self, folder: GameFolder, participants: Iterable[Participant]) -> None:
        """Replace the participants file atomically."""
        data = json.dumps([p.to_json() for p in participants], ensure_ascii=False)
        atomic_write(folder.participants, data.encode("utf-8"))

    def load_participants(self, folder: GameFolder) -> list[Participant]:
        """The saved participants (none if never saved); `StateDamaged` if unreadable.

        Removes temporary files a crash left behind.
        """
        for leftover in folder.path.glob(f".{PARTICIPANTS}.*.tmp"):
            with contextlib.suppress(OSError):
                leftover.unlink()
        try:
            raw = folder.participants.read_bytes()
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
        """Append one event as one line, flushed (closing off a torn tail first)."""
        line = json.dumps(event, ensure_ascii=True).encode("ascii") + b"\n"
        fd = os.open(folder.telemetry, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
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
            raw = folder.telemetry.read_bytes()
        except FileNotFoundError:
            return None
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
