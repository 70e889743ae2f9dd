"""An embedded engine as a nemesis worker: the reference `GameEngine` over the public store
API, in a process of its own, answering a subset of the driver protocol on stdio.

`python -m nemesis.embedded (--store URL | --state DIR) --owner ID` reads one JSON request a
line and answers one JSON reply a line (requests may be outstanding at once):

- `hello {compressUrl, leaseSeconds?, thresholds?}`: `{}`;
- `open_game {game, takeover?}`: own the game (`PostgresStore.open(..., create=False)`, or
  `FileStore.open_shared` in the game's folder of the state directory, whose layout
  `jfsm.driver.state` documents), dropping what it held of it: `{token}`;
- `release_game {game}`: close its store (which ends the lease): `{}`;
- `record_round {game, input, output}`, `generate {game}`, `checkpoint {game}`,
  `dump {game}`: the engine's own calls; a game it does not hold is `invalid_input` (it never
  opens one implicitly: its client always knows the token it writes under).

Errors are the engine's typed errors as the driver protocol answers them (`error.code`); any
other exception is `internal_error`. The shared `FileStore` renews its lease on a timer of a
third of its length (the driver's `LeaseKeeper` does this for driver workers); a
`PostgresStore` renews its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput, JfsmError
from jfsm.transport import HttpCompressor

_HUGE = 10**9


class Embedded:
    """The games this process holds, each an engine over its own store."""

    def __init__(self, store_url: str | None, state: Path | None, owner: str) -> None:
        self.store_url, self.state, self.owner = store_url, state, owner
        self.games: dict[str, GameEngine] = {}
        self.compressor: HttpCompressor | None = None
        self.lease = 30.0
        self.thresholds: dict[str, int] = {"game": _HUGE, "catalyst": _HUGE}
        self._renewing: asyncio.Task[None] | None = None

    async def open_store(self, game: str, takeover: bool) -> Any:
        if self.store_url is not None:
            from jfsm.stores.postgres import PostgresStore

            return await PostgresStore.open(
                self.store_url,
                game,
                owner=self.owner,
                takeover=takeover,
                create=False,
                lease_seconds=self.lease,
            )
        from jfsm.stores.file import FileStore

        assert self.state is not None
        folder = self.state / f"game-{game.encode().hex()}"
        if not (folder / "store").is_dir():
            raise InvalidInput(f"no game {game!r} in the state directory", field="game")
        return await asyncio.to_thread(
            FileStore.open_shared,
            folder / "store",
            game=game,
            lease_folder=folder,
            root=self.state,
            owner=self.owner,
            takeover=takeover,
            lease_seconds=self.lease,
        )

    async def renew(self) -> None:
        """Renew the shared file stores' leases, a third of their length apart."""
        while True:
            await asyncio.sleep(self.lease / 3)
            for engine in list(self.games.values()):
                renew = getattr(engine.store, "renew_sync", None)
                if renew is not None:
                    try:
                        await asyncio.to_thread(renew)
                    except (JfsmError, OSError):
                        continue  # a fenced or broken store: its next write says so

    async def handle(self, op: str, args: dict[str, Any]) -> Any:
        if op == "hello":
            self.compressor = HttpCompressor(args["compressUrl"])
            self.lease = float(args.get("leaseSeconds", self.lease))
            self.thresholds.update(args.get("thresholds", {}))
            if self.state is not None and self._renewing is None:
                self._renewing = asyncio.get_running_loop().create_task(self.renew())
            return {}
        game = args.get("game")
        if not isinstance(game, str):
            raise InvalidInput("missing argument 'game'", field="game")
        if op == "open_game":
            await self.release(game)
            store = await self.open_store(game, bool(args.get("takeover", False)))
            assert self.compressor is not None
            self.games[game] = GameEngine(
                store, self.compressor, game_id=game, thresholds=self.thresholds
            )
            return {"token": store.token}
        if op == "release_game":
            await self.release(game)
            return {}
        engine = self.games.get(game)
        if engine is None:
            raise InvalidInput(f"this worker does not hold game {game!r}", field="game")
        if op == "record_round":
            return await engine.record_round(args["input"], args["output"])
        if op == "generate":
            await engine.before_generation()
            return {}
        if op == "checkpoint":
            await engine.checkpoint()
            return {}
        if op == "dump":
            confirm = getattr(engine.store, "confirm", None)
            if confirm is not None:  # a PostgresStore: still the owner? (JF-STORE-030)
                await confirm()
            return engine.dump()
        raise InvalidInput(f"unsupported op {op!r}")

    async def release(self, game: str) -> None:
        engine = self.games.pop(game, None)
        if engine is not None:
            with contextlib.suppress(JfsmError, OSError):  # fenced or broken: closed as it can
                await engine.close()

    async def answer(self, line: bytes, out: asyncio.Lock) -> None:
        message: dict[str, Any] = {}
        try:
            message = json.loads(line)
            result = await self.handle(str(message["op"]), dict(message.get("args", {})))
            reply: dict[str, Any] = {"id": message.get("id"), "ok": True, "result": result}
        except JfsmError as exc:
            reply = {"id": message.get("id"), "ok": False, "error": exc.to_json()}
        except Exception as exc:
            error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            reply = {"id": message.get("id"), "ok": False, "error": error}
        async with out:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


async def serve(embedded: Embedded) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = asyncio.Lock()
    tasks: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        task = loop.create_task(embedded.answer(line, out))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m nemesis.embedded")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--store")
    where.add_argument("--state", type=Path)
    parser.add_argument("--owner", required=True)
    args = parser.parse_args()
    asyncio.run(serve(Embedded(args.store, args.state, args.owner)))


if __name__ == "__main__":
    main()
