"""The nemesis's clients: what a deployment's callers do to the workers, recorded in the
history.

Every worker has `clients` concurrent clients. A client picks a game of the run's ledger
games at random and, as a careful caller would, writes only under an ownership whose token
it knows: it first sends `open_game` (plain, or with `takeover`, which fences whoever owned
the game), then, while the worker still holds the game:

- `record_round` with a text that is unique in the run and names the game, the worker, its
  generation and the token it writes under (`g3/w1.2/t57/812`): what the checker reads back;
- a burst of 2 to 4 `record_round`s on one game at once (outstanding together);
- `generate` (thresholds so high that it compresses nothing: the store's values stay the
  replay of the rounds), `checkpoint`, `dump`;
- `release_game`, and now and then a `takeover` of a game it holds.

After a refusal (`store_fenced`, `store_locked`), an unknown outcome, or a restart of its
worker, the client forgets the token and opens the game again before its next write.
`open_game` and `release_game` of one game by one worker wait until that worker's ops on the
game have ended (and the other way round), so that the token a write names is the one the
worker writes under. Churn (`churn`) runs concurrent `create_game`, `duplicate` into and
removals of one id (`remove_game` of the store API on PostgreSQL, after releases;
`forget_games` on a state directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .history import History, message, outcome
from .workers import Worker

__all__ = ["Clients", "GameLock"]


class GameLock:
    """Many writers of rounds at once, or one `open_game` / `release_game` alone."""

    def __init__(self) -> None:
        self.readers = 0
        self.writer = False
        self.changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        async with self.changed:
            await self.changed.wait_for(lambda: not self.writer)
            self.readers += 1
        try:
            yield
        finally:
            async with self.changed:
                self.readers -= 1
                self.changed.notify_all()

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self.changed:
            await self.changed.wait_for(lambda: not self.writer and self.readers == 0)
            self.writer = True
        try:
            yield
        finally:
            async with self.changed:
                self.writer = False
                self.changed.notify_all()


class Clients:
    """The clients of every worker (module docstring)."""

    def __init__(
        self,
        history: History,
        workers: list[Worker],
        games: list[str],
        seed: int,
        *,
        clients: int = 2,
        timeout: float = 30.0,
        remove: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        self.history, self.workers, self.games = history, workers, games
        self.seed, self.clients, self.timeout = seed, clients, timeout
        self.remove = remove  # the store API's removal (PostgreSQL), None: forget_games
        self.tokens: dict[tuple[str, str], tuple[int, int]] = {}  # (worker, game): (gen, token)
        self.locks: dict[tuple[str, str], GameLock] = {}
        self.stopping = asyncio.Event()
        self._texts = 0
        self._tasks: list[asyncio.Task[None]] = []

    # -- the loops -----------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for w, worker in enumerate(self.workers):
            for c in range(self.clients):
                rng = random.Random(f"{self.seed}:{w}:{c}")
                name = f"{worker.name}.c{c}"
                self._tasks.append(loop.create_task(self._client(name, worker, rng)))

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _client(self, name: str, worker: Worker, rng: random.Random) -> None:
        while not self.stopping.is_set():
            if not worker.ready.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(worker.ready.wait(), 1.0)
                continue
            game = rng.choice(self.games)
            try:
                await self._step(name, worker, game, rng)
            except Exception as exc:  # a bug of the client: recorded, the loop goes on
                self.history.add(name, "info", "client-error", worker=worker.name, error=repr(exc))
                await asyncio.sleep(0.1)
            await asyncio.sleep(rng.uniform(0.0, 0.02))

    def _token(self, worker: Worker, game: str) -> int | None:
        known = self.tokens.get((worker.name, game))
        return known[1] if known is not None and known[0] == worker.generation else None

    def _lock(self, worker: Worker, game: str) -> GameLock:
        return self.locks.setdefault((worker.name, game), GameLock())

    async def _step(self, name: str, worker: Worker, game: str, rng: random.Random) -> None:
        token = self._token(worker, game)
        if token is None:
            await self.open(name, worker, game, takeover=rng.random() < 0.3)
            return
        roll = rng.random()
        if roll < 0.03:
            await self.open(name, worker, game, takeover=True)
        elif roll < 0.06:
            await self.release(name, worker, game)
        elif roll < 0.72:
            async with self._lock(worker, game).shared():
                await self.record(name, worker, game)
        elif roll < 0.80:
            async with self._lock(worker, game).shared():
                burst = [self.record(name, worker, game) for _ in range(rng.randint(2, 4))]
                await asyncio.gather(*burst)
        else:
            op = "generate" if roll < 0.88 else "checkpoint" if roll < 0.93 else "dump"
            async with self._lock(worker, game).shared():
                await self.simple(name, worker, game, op)

    # -- one operation each --------------------------------------------------------------
    async def open(self, name: str, worker: Worker, game: str, *, takeover: bool) -> None:
        async with self._lock(worker, game).exclusive():
            generation = worker.generation
            invoked = self.history.invoke(
                name, "open_game", worker=worker.name, game=game, takeover=takeover
            )
            reply = await worker.call("open_game", self.timeout, game=game, takeover=takeover)
            kind, code = outcome(reply)
            if kind == "ok":
                assert reply is not None
                token = int(reply["result"]["token"])
                self.history.complete(invoked, "ok", token=token, generation=generation)
                if worker.generation == generation:
                    self.tokens[(worker.name, game)] = (generation, token)
            else:
                self._failed(invoked, kind, code, reply)
                self.tokens.pop((worker.name, game), None)
                if kind == "fail":
                    await asyncio.sleep(0.05)  # locked: someone else's; try later

    async def release(self, name: str, worker: Worker, game: str) -> None:
        async with self._lock(worker, game).exclusive():
            self.tokens.pop((worker.name, game), None)
            invoked = self.history.invoke(name, "release_game", worker=worker.name, game=game)
            reply = await worker.call("release_game", self.timeout, game=game)
            kind, code = outcome(reply)
            self._failed(invoked, kind, code, reply)

    def _failed(self, invoked: Any, kind: str, code: str, reply: dict[str, Any] | None) -> None:
        """Complete `invoked` as not ok: with the error's message when its outcome is unknown."""
        if kind == "info" or kind == "ok":
            self.history.complete(invoked, kind, code=code, message=message(reply))
        else:
            self.history.complete(invoked, kind, code=code)

    async def record(self, name: str, worker: Worker, game: str) -> None:
        token = self._token(worker, game)
        if token is None:
            return
        self._texts += 1
        text = f"{game}/{worker.name}.{worker.generation}/t{token}/{self._texts}"
        invoked = self.history.invoke(
            name, "record_round", worker=worker.name, game=game, text=text, token=token
        )
        reply = await worker.call("record_round", self.timeout, game=game, input=text, output="o")
        kind, code = outcome(reply)
        if kind == "ok":
            assert reply is not None
            self.history.complete(invoked, "ok", round=int(reply["result"]["round"]))
            return
        self._failed(invoked, kind, code, reply)
        self.tokens.pop((worker.name, game), None)  # open it again before the next write

    async def simple(self, name: str, worker: Worker, game: str, op: str) -> None:
        token = self._token(worker, game)
        invoked = self.history.invoke(name, op, worker=worker.name, game=game, token=token)
        reply = await worker.call(op, self.timeout, game=game)
        kind, code = outcome(reply)
        if kind == "ok" and op == "dump":
            assert reply is not None
            store = reply["result"].get("store", {})
            rounds = sorted(int(k.split(".")[1]) for k in store if k.startswith("jfRounds."))
            self.history.complete(invoked, "ok", rounds=len(rounds))
        else:
            self._failed(invoked, kind, code, reply)
        if kind != "ok":
            self.tokens.pop((worker.name, game), None)

    # -- churn ---------------------------------------------------------------------------
    async def churn(self, game: str, ops: int, rng: random.Random) -> None:
        """`ops` concurrent creations, copies into and removals of `game` (module docstring)."""
        drivers = [w for w in self.workers if w.kind == "driver"]
        work: list[Awaitable[None]] = []
        for n in range(ops):
            worker = rng.choice(drivers)
            roll = rng.random()
            name = f"churn.{n}"
            if roll < 0.35:
                work.append(self._churn_call(name, worker, "create_game", game, game=game))
            elif roll < 0.65:
                source = rng.choice(self.games)
                work.append(
                    self._churn_call(name, worker, "duplicate", game, game=source, into=game)
                )
            else:
                work.append(self._removal(name, game, rng))
        await asyncio.gather(*work)

    async def _churn_call(
        self, name: str, worker: Worker, op: str, target: str, **args: Any
    ) -> None:
        source = args.get("game") if op == "duplicate" else None
        invoked = self.history.invoke(name, op, worker=worker.name, game=target, source=source)
        reply = await worker.call(op, self.timeout, **args)
        kind, code = outcome(reply)
        self._failed(invoked, kind, code, reply)

    async def _removal(self, name: str, game: str, rng: random.Random) -> None:
        drivers = [w for w in self.workers if w.kind == "driver"]
        if self.remove is None:  # a state directory: a driver's forget_games removes it
            worker = rng.choice(drivers)
            await self._churn_call(name, worker, "forget_games", game, games=[game])
            return
        for worker in drivers:  # let it go everywhere, then remove it through the store API
            await worker.call("release_game", self.timeout, game=game)
        invoked = self.history.invoke(name, "remove_game", game=game)
        try:
            removed = await self.remove(game)
        except Exception as exc:
            code = str(getattr(exc, "code", "")) or type(exc).__name__
            kind = "fail" if code in ("store_locked",) else "info"
            self.history.complete(invoked, kind, code=code)
            return
        self.history.complete(invoked, "ok", removed=removed)
