"""The reference driver's games in a state directory that several driver processes on one host
share (`jfsm driver --state DIR --shared`, decisions R95 and R173).

The directory is laid out as for one process (`jfsm.driver.state`), plus the token sequence
`DIR/tokens.d/` (`jfsm.stores.file.tokens`); each game's store is in the epoch format
(`jfsm.stores.file.epochs`): one epoch of files per ownership, its lease among them. Every
process started with the same `DIR` serves the same games, one owner a game: an op on a game
another process owns is refused with `store_locked` while that owner's lease lives, and a
write by an owner another process superseded with `store_fenced` (nothing of it visible).
This is the contract of `jfsm.driver.pg`'s `DatabaseGames` (PostgreSQL), with the host's
clock for the server's, and the same interface, so `ReferenceDriver` and
`jfsm.driver.shared` serve both alike. Nothing is locked between calls and no process is
ever signalled: a stopped owner is sealed out by the next one (`jfsm.stores.file.ownership`).

- `open(game, create=False)` takes a new epoch of the game and reads the store as the
  previous owner landed it (a torn tail a killed owner left dropped) and the participants;
  a missing game is `InvalidInput`.
- `create` builds the game (empty, or a copy of `source`: store and participants) in a
  folder of its own (`.new-...`), takes its first epoch there, publishes the folder under
  the game's name by one rename (the store stays open across it: it reaches its files
  through its directory's descriptor) and serves it. An existing game is refused
  (`InvalidInput`), never adopted; a failure before the rename removes only the folder this
  call made. A `.new-...` folder is never removed here: another process may be filling it.
- Participants are a side value of the game's store (`participants`), written as the owner
  and fenced like a commit; a game whose store has none yet (made before R173, or just
  created) reads `participants.json`. Telemetry is appended by whichever process
  generates, one line a write, and read from the file, so every process sees every game's
  events.
- The leases of the games a process has open are renewed by one timer (`LeaseKeeper`),
  so an idle owner keeps its games; closing a store ends its lease at once.

Errors: as `FileStore.open_shared` (`StoreLocked`, `StoreUnavailable` naming the
errno, `StoreCorrupted`; a participants file that cannot be read is `StoreCorrupted` naming
it), `InvalidInput` for an unknown or existing game.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from typing import Any

from jfsm.driver.state import GameFolder, StateDamaged, StateDirectory
from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput, JfsmError, StoreCorrupted
from jfsm.jcs import canonical_bytes
from jfsm.limits import validate_id, validate_owner
from jfsm.records import Participant, parse_record
from jfsm.stores.file.lease import LeaseKeeper, lease_seconds
from jfsm.stores.file.store import FileStore, fs_unavailable
from jfsm.stores.offload import run_blocking
from jfsm.telemetry import TelemetrySink

__all__ = ["PARTICIPANTS_SIDE", "SharedDirectoryGames"]

PARTICIPANTS_SIDE = "participants"  # the store's side value holding a game's participants


class SharedDirectoryGames:
    """The games of a driver in the shared state directory `root` (module docstring).

    `owner`: the owner id of this process's leases (`jfsm driver --owner`, `JFSM_OWNER`),
    stable across restarts so a restarted driver reclaims its games at once (R61); else
    unique to each open."""

    def __init__(
        self, root: str | os.PathLike[str], owner: str | None = None, *, trusted: bool = False
    ) -> None:
        self.directory = StateDirectory(root, trusted=trusted)
        self.owner = owner or os.environ.get("JFSM_OWNER") or None
        if self.owner is not None:
            validate_owner(self.owner)
        self.own_seconds = self.seconds = lease_seconds()
        self._keeper = LeaseKeeper(self.seconds)
        self._unique = f"{os.uname().nodename}:{os.getpid()}:{secrets.token_hex(4)}"
        self._opens = 0

    @property
    def lease_seconds(self) -> float:
        """The length of the leases this process takes now."""
        return self.seconds

    def use_lease(self, seconds: float | None) -> None:
        """Take leases of `seconds` from now on (hello's `leaseSeconds`, R122); None: the
        process's own length (`JFSM_LEASE_SECONDS`, default 30). Leases taken before keep
        their length."""
        self.seconds = self.own_seconds if seconds is None else seconds

    def _who(self) -> str:
        if self.owner:
            return self.owner
        self._opens += 1
        return f"{self._unique}:{self._opens}"

    # -- owning --------------------------------------------------------------------------
    async def open(
        self,
        game_id: str,
        *,
        create: bool | None = False,
        takeover: bool = False,
    ) -> tuple[FileStore, list[Participant]]:
        """Own `game_id`'s store and read its participants (`create` must be False: games
        are made by `create`). Errors: see the module docstring."""
        validate_id(game_id, "game")  # before any path is built of it
        if create:
            raise InvalidInput("a shared directory's games are made by create_game")
        who = self._who()
        store, participants = await run_blocking(self._open, game_id, who, takeover)
        self._keep(store)
        return store, participants

    def _keep(self, store: FileStore) -> None:
        assert store.fence is not None
        self._keeper.keep(store.fence)

    def _open(
        self, game_id: str, who: str, takeover: bool, folder: GameFolder | None = None
    ) -> tuple[FileStore, list[Participant]]:
        """`open`, blocking (`folder`: the game's folder, if not yet under its name)."""
        folder = folder or self.directory.folder(game_id)
        if not self._is_game(folder):
            raise InvalidInput(f"no game {game_id!r} in the shared state directory", field="game")
        store = FileStore.open_shared(
            folder.store,
            game=game_id,
            root=self.directory.root,
            owner=who,
            lease_folder=folder.path,
            takeover=takeover,
            lease_seconds=self.seconds,
            trusted=folder.trusted,
        )
        try:  # the earlier owner is fenced now: only this store may change them
            participants = self._participants(folder, store)
        except BaseException as exc:
            store.close_sync()
            if isinstance(exc, StateDamaged):
                raise StoreCorrupted(str(exc), file=str(folder.participants)) from exc
            if isinstance(exc, OSError):
                raise fs_unavailable(str(folder.path), "open", exc, "closed") from exc
            raise
        return store, participants

    def _participants(self, folder: GameFolder, store: FileStore) -> list[Participant]:
        """The game's participants: its store's side value, else (a game made before R173,
        or just created) its `participants.json`. Raises `StateDamaged`, `OSError`."""
        side = store.side(PARTICIPANTS_SIDE)
        if side is None:
            return self.directory.load_participants(folder)
        try:
            items = json.loads(side)
            if not isinstance(items, list):
                raise ValueError("not a list")
            return [parse_record(Participant, item) for item in items]
        except (ValueError, JfsmError) as exc:
            raise StateDamaged(f"{folder.store}: the participants side value: {exc}") from exc

    @staticmethod
    def _is_game(folder: GameFolder) -> bool:
        store = folder.store
        return folder.path.is_dir() and not folder.path.is_symlink() and store.is_dir()

    async def create(
        self,
        into: str,
        source: GameEngine | None,
        busy: set[str],
        games: dict[str, Any],
        engine: Callable[[str, Any, list[Participant]], Any],
    ) -> dict[str, Any]:
        """Create game `into`, empty or as a copy of `source` (store and participants),
        listed in `busy` meanwhile, and add `engine(into, store, participants)` to `games`.
        An existing game `into` is refused (`InvalidInput`), never touched nor adopted."""
        busy.add(into)
        try:
            who = self._who()
            store: FileStore | None = None
            try:
                async with self.directory.new_game(into) as fresh:
                    made = await run_blocking(
                        lambda: FileStore.open_sync(fresh.store, fs=fresh.store_fs())
                    )
                    try:
                        if source is not None:
                            copy = await source.duplicate(made, into)
                            await run_blocking(
                                self.directory.save_participants, fresh, list(copy.participants())
                            )
                    finally:
                        await made.close()
                    # its first epoch, taken before anyone can see it: published owned
                    store, participants = await run_blocking(self._open, into, who, False, fresh)
            except BaseException:
                if store is not None:
                    await store.close()
                raise
            assert store is not None
            self._keep(store)
            games[into] = engine(into, store, participants)
            return {}
        finally:
            busy.discard(into)

    async def save_participants(self, store: FileStore, participants: list[Participant]) -> None:
        """Replace the game's participants as the owner (`StoreFenced`: nothing of it
        visible): the store's side value."""
        data = canonical_bytes([p.to_json() for p in participants])
        await store.write_side(PARTICIPANTS_SIDE, data)

    async def close(self, store: FileStore) -> None:
        """Close the store, which ends its lease at once."""
        if store.fence is not None:
            self._keeper.drop(store.fence)
        await store.close()

    # -- telemetry -----------------------------------------------------------------------
    def telemetry_sink(self, game_id: str) -> TelemetrySink:
        """A sink appending the game's events to its file (one line, flushed, each), off
        the event loop (the engine awaits each write in the background, in order)."""
        folder = self.directory.folder(game_id)
        return lambda event: run_blocking(self.directory.append_telemetry, folder, event)

    async def read_telemetry(self, game_id: str) -> list[Any] | None:
        """The game's saved events, from every process; None if it has none."""
        folder = self.directory.folder(game_id)
        return await run_blocking(self.directory.read_telemetry, folder)
