"""Broken shared-store drivers: each breaks one ownership rule, for the workers machine.

Each is the reference driver over PostgreSQL (`jfsm driver --store URL`) with one
flaw, run as K processes of one command:

```
jfsm conformance --workers 2 --driver \
  "stdio:python -m jfsm_conformance.examples.broken_owners FLAW --store URL"
```

- `no_token_check`: a commit refused as fenced is written anyway (the process takes the game
  back and commits), as if writes never compared tokens: JF-STORE-013.
- `takeover_same_token`: a takeover answers the previous owner's token, not a new one:
  JF-STORE-012.
- `lease_unchecked`: a plain `open_game` never looks at the current owner's liveness (it
  always takes the game over): JF-STORE-011.
- `fenced_half_write`: a commit refused as fenced answers `store_fenced` but first writes
  half of its keys: JF-STORE-013.

The flaws live in a store wrapper around the real `PostgresStore` and in the ops' arguments
and replies; the database and its token check are the reference's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from typing import Any

from jfsm.driver import ReferenceDriver, serve_stdio
from jfsm.engine import GameEngine
from jfsm.errors import StoreFenced
from jfsm.projection import Projection
from jfsm.records import Participant

__all__ = ["FLAWS", "OwnersDriver", "main"]

FLAWS = ("no_token_check", "takeover_same_token", "lease_unchecked", "fenced_half_write")


class _FlawedStore:
    """A `PostgresStore` whose fenced commits are bent (`no_token_check`,
    `fenced_half_write`); every other attribute is the real store's."""

    def __init__(self, inner: Any, flaw: str, url: str, game_id: str) -> None:
        self.inner, self.flaw, self.url, self.game_id = inner, flaw, url, game_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit(self, projection: Projection) -> None:
        try:
            await self.inner.commit(projection)
        except StoreFenced:
            from jfsm.stores.postgres import PostgresStore

            back = await PostgresStore.open(self.url, self.game_id, takeover=True)
            if self.flaw == "no_token_check":  # write anyway, and keep writing
                await back.commit(projection)
                await self.inner.close()
                self.inner = back
                return
            keys = sorted(projection.sets)[: max(1, len(projection.sets) // 2)]
            half = Projection.encoded({k: projection.sets[k] for k in keys})
            try:
                await back.commit(half)
            finally:
                await back.close()
            raise


class OwnersDriver(ReferenceDriver):
    """The reference driver over a shared store with one of `FLAWS`."""

    def __init__(self, flaw: str, store_url: str) -> None:
        if flaw not in FLAWS:
            raise ValueError(f"unknown flaw {flaw!r}; choose from {FLAWS}")
        super().__init__(None, store_url=store_url)
        self.flaw = flaw
        self._open_game = self._ops["open_game"]
        self._ops["open_game"] = self._bent_open_game

    def _engine(
        self, game_id: str, store: Any, participants: list[Participant] | tuple[()] = ()
    ) -> GameEngine:
        if self.flaw in ("no_token_check", "fenced_half_write"):
            assert self.store_url is not None
            store = _FlawedStore(store, self.flaw, self.store_url, game_id)
        return super()._engine(game_id, store, participants)

    async def _bent_open_game(self, args: Mapping[str, Any]) -> Any:
        if self.flaw == "lease_unchecked":
            args = {**args, "takeover": True}
        result = await self._open_game(args)
        if self.flaw == "takeover_same_token" and args.get("takeover"):
            result = {"token": result["token"] - 1}
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jfsm_conformance.examples.broken_owners")
    parser.add_argument("flaw", choices=FLAWS)
    parser.add_argument("--store", required=True, help="postgresql://... (migrated)")
    args = parser.parse_args(argv)
    asyncio.run(serve_stdio(OwnersDriver(args.flaw, args.store)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
