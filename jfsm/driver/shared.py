"""Games shared by several driver processes: the ops `open_game` and `release_game`.

A `ReferenceDriver` on a database (`store_url`) declares `capabilities.sharedStore`
(decision R81): every process started with the same `--store` serves the same games (the
database holds their memory and their side files), one owner a game, by leases, as the
machine `spec/machines/store_ownership.json` says.

- `create_game` makes the creating process the owner (the store's `open`).
- `open_game {game, takeover?}` drops whatever this process held of the game and opens it
  again from the database: a plain open is refused with `store_locked` while another
  process's ownership lives; `takeover: true` fences that owner whatever its state. It
  answers the new fencing token. A game opened so is held until `release_game` (never closed
  as idle, R56: `ServedGames.held`), and `forget_games` releases it too.
- `release_game {game}` closes this process's store of the game, which ends its ownership;
  `{}` also for a game it does not hold.
- `hello` opens no game of a shared store: ownership comes only from ops that ask for it.
  An op naming a game this process does not hold opens it plainly; while another process's
  lease on it lives the op is refused with `store_locked`.

A write by a process whose ownership another one superseded is refused with `store_fenced`
by the store itself (its token check), and the engine applies nothing of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from jfsm.driver.served import ServedGames
from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput
from jfsm.limits import validate_id

if TYPE_CHECKING:
    from jfsm.driver.pg import DatabaseGames
    from jfsm.driver.shared_dir import SharedDirectoryGames

__all__ = ["Owner", "shared_ops"]

Op = Callable[[Mapping[str, Any]], Awaitable[Any]]


class Owner(Protocol):
    """What the shared ops need of a driver (`ReferenceDriver` is one): its shared store,
    the games it serves, and a way to serve a store it opened. The driver depends on this
    module, never the reverse (no import loop, issue 39)."""

    @property
    def db(self) -> DatabaseGames | SharedDirectoryGames | None: ...

    @property
    def served(self) -> ServedGames: ...

    async def serve_store(self, game_id: str, store: Any, participants: Any) -> GameEngine: ...


def shared_ops(driver: Owner) -> dict[str, Op]:
    """The ops `open_game` and `release_game` of `driver`, by name. Each runs as the game's
    one move (`ServedGames.exclusive`, decision R231): never beside a reopen or a close of
    the game by another op of this process."""
    served = driver.served

    async def release(game_id: str) -> None:
        served.held.discard(game_id)
        await served.drop(game_id)

    async def open_game(args: Mapping[str, Any]) -> Any:
        """Own an existing game of the shared store, with `takeover` whatever its owner's
        state. Raises `StoreLocked` while another owner's lease lives (plain open),
        `InvalidInput` for an unknown game or without a shared store; what this process held
        of the game is closed first either way."""
        game_id = _shared_game(driver, args)
        takeover = args.get("takeover", False)
        if not isinstance(takeover, bool):
            raise InvalidInput("takeover must be a boolean", field="takeover")
        db = driver.db
        assert db is not None

        async def reopen() -> Any:
            await release(game_id)
            store, participants = await db.open(game_id, create=False, takeover=takeover)
            await driver.serve_store(game_id, store, participants)
            served.held.add(game_id)
            return {"token": store.token}

        return await served.exclusive(game_id, reopen)

    async def release_game(args: Mapping[str, Any]) -> Any:
        """End this process's ownership of a game; `{}` also for one it does not hold.
        Raises `InvalidInput` without a shared store."""
        game_id = _shared_game(driver, args)
        await served.exclusive(game_id, lambda: release(game_id))
        return {}

    return {"open_game": open_game, "release_game": release_game}


def _shared_game(driver: Owner, args: Mapping[str, Any]) -> str:
    if driver.db is None:
        raise InvalidInput("this driver has no shared store (capabilities.sharedStore)")
    if "game" not in args:
        raise InvalidInput("missing argument 'game'", field="game")
    return validate_id(args["game"], "game")
