"""The games one driver serves now, and the moves that open and close them, one at a time.

A driver keeps at most `max_open` games open (decision R56) and reopens a game closed as idle
when an op names it. The protocol lets a client send several requests at once, so several
ops may name one closed game together. `ServedGames` makes them one open (decision R231,
JF-STORE-038): a process's own requests never fence (`store_fenced`) or lock out
(`store_locked`) each other.

- **One move per game at a time.** Opening a game, closing it and `open_game`'s release and
  reopen are each a *move*, a task of its own; a game has at most one under way. A move
  runs to its end even when the request that started it is cancelled.
- **Single-flight open.** `open(game, opener)` returns the engine serving the game, or
  starts the game's open (`opener`); callers that arrive while that open runs wait for it
  and share its outcome, the engine or the error, and never open beside it.
- **Busy games stay open.** `using(names)` counts the requests in flight per game;
  `close_idle` closes the least recently used games at rest beyond `max_open`, never one
  with a request in flight, one held through `open_game` (`held`), or one with a move under
  way.
- **Releases wait their turn.** `exclusive(game, step)` runs `step` as the game's move once
  the move under way ended (`open_game`, `release_game`): a release never races a reopen.

The engines themselves, their stores and where they come from are the driver's
(`jfsm.driver.dispatch`); this module only orders the moves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

from jfsm.engine import GameEngine

__all__ = ["ServedGames"]

T = TypeVar("T")
Opener = Callable[[], Awaitable[GameEngine | None]]


def _retrieved(task: asyncio.Task[Any]) -> None:
    """Mark a move's outcome as seen (a move whose caller left still ends quietly)."""
    if not task.cancelled():
        task.exception()


class ServedGames:
    """The engines a driver serves, least recently used first (see the module docstring)."""

    def __init__(self, max_open: int) -> None:
        self.max_open = max_open
        self.games: OrderedDict[str, GameEngine] = OrderedDict()
        self.held: set[str] = set()  # owned through open_game: never closed as idle (R81)
        self.busy: Counter[str] = Counter()  # requests in flight per game
        self._moves: dict[str, tuple[str, asyncio.Task[Any]]] = {}  # game -> (kind, task)

    # -- requests ------------------------------------------------------------------------
    @contextlib.contextmanager
    def using(self, names: Iterable[str]) -> Iterator[None]:
        """Count a request in flight on each game of `names` for the block's length."""
        names = list(names)
        self.busy.update(names)
        try:
            yield
        finally:
            self.busy -= Counter(names)  # keeps positive counts only

    # -- moves ---------------------------------------------------------------------------
    def _start(self, game_id: str, kind: str, move: Callable[[], Awaitable[T]]) -> asyncio.Task[T]:
        """Start `move` as the game's move (none may be under way)."""
        assert game_id not in self._moves

        async def run() -> T:
            return await move()

        task = asyncio.get_running_loop().create_task(run())
        self._moves[game_id] = (kind, task)

        def done(finished: asyncio.Task[Any]) -> None:
            if self._moves.get(game_id, (None, None))[1] is finished:
                del self._moves[game_id]
            _retrieved(finished)

        task.add_done_callback(done)
        return task

    @staticmethod
    async def _outcome(task: asyncio.Task[T]) -> T:
        """The move's result once it ended (waiting for it cancels nothing of it)."""
        await asyncio.wait([task])
        return task.result()

    async def _quiet(self, game_id: str) -> None:
        """Return once no move of the game is under way."""
        while (move := self._moves.get(game_id)) is not None:
            await asyncio.wait([move[1]])

    async def open(self, game_id: str, opener: Opener) -> GameEngine | None:
        """The engine serving `game_id`, opened by `opener` if none does (None: no such game).

        One open at a time: a caller arriving while the game's open runs shares its outcome
        (its engine, or its error raised again); one arriving while the game closes or
        another move runs waits for it first. `opener` must serve what it opens (`serve`)."""
        while True:
            engine = self.games.get(game_id)
            if engine is not None:
                return engine
            move = self._moves.get(game_id)
            if move is None:
                return await self._outcome(self._start(game_id, "open", opener))
            kind, task = move
            if kind == "open":
                return await self._outcome(task)
            await asyncio.wait([task])

    async def exclusive(self, game_id: str, step: Callable[[], Awaitable[T]]) -> T:
        """Run `step` as the game's move, once the move under way (if any) ended; an op that
        names the game meanwhile waits for it, then finds the game as `step` left it."""
        while True:
            await self._quiet(game_id)
            if game_id not in self._moves:  # none started since: this one is next
                return await self._outcome(self._start(game_id, "exclusive", step))

    def serve(self, game_id: str, engine: GameEngine) -> GameEngine:
        """Serve `engine` as `game_id` (the most recently used)."""
        self.games[game_id] = engine
        self.games.move_to_end(game_id)
        return engine

    async def drop(self, game_id: str) -> None:
        """Stop serving `game_id` and close its engine, inside the game's own move (or where
        no other move can run). Nothing if it is not served."""
        self.held.discard(game_id)
        engine = self.games.pop(game_id, None)
        if engine is not None:
            await engine.close()

    async def close(self, game_id: str) -> None:
        """Stop serving `game_id` and close its engine, as the game's move (after the move
        under way); an op naming it meanwhile waits, then reopens it."""
        await self.exclusive(game_id, lambda: self.drop(game_id))

    async def close_idle(self) -> None:
        """Close least recently used games at rest until at most `max_open` are open: never
        one with a request in flight, one `held`, or one with a move under way."""
        for game_id in list(self.games):
            if len(self.games) <= self.max_open:
                break
            engine = self.games.get(game_id)
            if (
                engine is None
                or self.busy[game_id] > 0
                or game_id in self.held
                or game_id in self._moves
                or not engine.at_rest()
            ):
                continue
            del self.games[game_id]  # with its move registered before any await
            await self._outcome(self._start(game_id, "close", engine.close))

    async def settle(self) -> None:
        """Return once no move of any game is under way."""
        while self._moves:
            await asyncio.wait([task for _, task in list(self._moves.values())])

    async def close_all(self) -> None:
        """Close every game (after the moves under way)."""
        await self.settle()
        for game_id in list(self.games):
            await self.close(game_id)
        await self.settle()
