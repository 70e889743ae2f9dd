"""Games shared by several driver processes: the ops `open_game` and `release_game`.

A `ReferenceDriver` with a database `store` declares `capabilities.sharedStore` (decision
R81): every process started with the same `--store` and `--state` serves the same games
(the database holds their memory, the shared state directory their side files), one owner a
game, as the machine `spec/machines/store_ownership.json` says.

- `create_game` makes the creating process the owner (the store's `open`).
- `open_game {game, takeover?}` drops whatever this process held of the game and opens it
  again from the database: a plain open is refused with `store_locked` while another
  process's ownership lives; `takeover: true` fences that owner whatever its state. It
  answers the new fencing token. A game opened so is held until `release_game` (never closed
  as idle, R56), and `forget_games` releases it too.
- `release_game {game}` closes this process's store of the game, which ends its ownership;
  `{}` also for a game it does not hold.
- `hello` opens no game of a shared store: ownership comes only from ops that ask for it.
  An op naming a game this process does not hold opens it plainly; while another process
  owns it the op is refused as for an unknown game.

A write by a process whose ownership another one superseded is refused with `store_fenced`
by the store itself (its token check), and the engine applies nothing of it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from jfsm.errors import InvalidInput
from jfsm.limits import validate_id

if TYPE_CHECKING:
    from jfsm.driver import ReferenceDriver

__all__ = ["shared_ops"]

Op = Callable[[Mapping[str, Any]], Awaitable[Any]]
OPEN_WAIT_SECONDS = 0.5  # a plain open retries store_locked this long (a killed owner's end)


def shared_ops(driver: ReferenceDriver) -> dict[str, Op]:
    """The ops `open_game` and `release_game` of `driver`, by name."""

    async def open_game(args: Mapping[str, Any]) -> Any:
        """Own an existing game of the shared store, with `takeover` whatever its owner's
        state. Raises `StoreLocked` while another owner lives (plain open), `InvalidInput`
        for an unknown game or without a shared store; what this process held of the game
        is closed first either way."""
        game_id = _shared_game(driver, args)
        takeover = args.get("takeover", False)
        if not isinstance(takeover, bool):
            raise InvalidInput("takeover must be a boolean", field="takeover")
        assert driver.state is not None and driver.store is not None
        if game_id not in driver.games and not driver.state.exists(game_id):
            raise InvalidInput(f"unknown game {game_id!r}", field="game")
        await _settled(_close(driver.games.pop(game_id, None)))
        from jfsm.stores.location import open_store

        participants = driver.state.load_participants(driver.state.folder(game_id))
        store = await _settled(
            open_store(driver.store, game_id, takeover=takeover, wait_seconds=OPEN_WAIT_SECONDS)
        )
        try:
            engine = driver._engine(game_id, store, participants)
        except BaseException:
            await _settled(store.close())
            raise
        engine.held = True  # type: ignore[attr-defined]  # read by driver._reopenable
        driver.games[game_id] = engine
        return {"token": store.token}  # a database store

    async def release_game(args: Mapping[str, Any]) -> Any:
        """End this process's ownership of a game; `{}` also for one it does not hold.
        Raises `InvalidInput` without a shared store."""
        game_id = _shared_game(driver, args)
        await _settled(_close(driver.games.pop(game_id, None)))
        return {}

    return {"open_game": open_game, "release_game": release_game}


def _close(engine: Any) -> Any:
    return None if engine is None else engine.close()


async def _settled(value: Any) -> Any:
    """`value`, awaited first if it is awaitable (stores and engines whose open and close
    are coroutines, or plain calls)."""
    return await value if inspect.isawaitable(value) else value


def _shared_game(driver: ReferenceDriver, args: Mapping[str, Any]) -> str:
    if driver.store is None or driver.state is None:
        raise InvalidInput("this driver has no shared store (capabilities.sharedStore)")
    if "game" not in args:
        raise InvalidInput("missing argument 'game'", field="game")
    return validate_id(args["game"], "game")
