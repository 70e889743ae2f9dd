"""Broken shared-store drivers: each breaks one ownership rule, for the workers machine.

Each is the reference driver over a shared store, PostgreSQL (`jfsm driver --store URL`)
or a state directory shared on one host (`jfsm driver --state DIR --shared`, R95), with one
flaw, run as K processes of one command:

```
jfsm conformance --workers 2 --driver \
  "stdio:python -m jfsm_conformance.examples.broken_owners FLAW --store URL"
jfsm conformance --workers 2 --driver \
  "stdio:python -m jfsm_conformance.examples.broken_owners FLAW --state {state}"
```

- `no_token_check`: a commit refused as fenced is written anyway (the process takes the game
  back and commits), as if writes never compared tokens: JF-STORE-013.
- `takeover_same_token`: a takeover answers the previous owner's token, not a new one:
  JF-STORE-012.
- `lease_unchecked`: a plain `open_game` never looks at the current owner's liveness (it
  always takes the game over): JF-STORE-011.
- `fenced_half_write`: a commit refused as fenced answers `store_fenced` but first writes
  half of its keys: JF-STORE-013.
- `stale_reads`: an op that writes nothing (a `dump`) never asks the store whether the
  process still owns the game, so a superseded owner serves its old copy: JF-STORE-030.
- `dump_only_reads`: only a `dump` asks the store whether the process still owns the game;
  a superseded owner answers `generate` and `telemetry` from its old copy with `ok`, as an
  engine written from a reading of JF-STORE-030 that stops at its first example would:
  JF-STORE-030 (issue 39).
- `renew_any_owner`: the lease renewal extends whatever lease the game has now, not only
  its own token's, so a superseded owner still running keeps a released game locked:
  JF-STORE-031.
- `leases_never_expire`: leases last 10^9 seconds while hello states the length asked for,
  so a killed owner's games stay locked: JF-STORE-032.
- `refused_open_keeps`: a plain `open_game` refused (`store_locked`) by a superseded owner
  keeps the ownership it had, so its next op on the game answers `store_fenced` instead of
  opening the game plainly, as an engine written from JF-STORE-030's reading alone would
  (decision R204's alternative): JF-STORE-036.

The flaws live in a store wrapper around the real store, in the ops' arguments and replies,
and in the renewal (a renewal statement without its token, a file renewal that rewrites any
lease); the store and its token check are the reference's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Mapping
from typing import Any

from jfsm.driver import ReferenceDriver, serve_stdio
from jfsm.engine import GameEngine
from jfsm.errors import StoreFenced, StoreLocked
from jfsm.projection import Projection
from jfsm.records import Participant
from jfsm.stores.file.lease import LeaseKeeper, LeaseRecord, write_lease_at
from jfsm.stores.file.ownership import Epoch, current_lease_at

__all__ = ["FLAWS", "OwnersDriver", "extend_any_lease", "main"]

FLAWS = (
    "no_token_check",
    "takeover_same_token",
    "lease_unchecked",
    "fenced_half_write",
    "stale_reads",
    "dump_only_reads",
    "renew_any_owner",
    "leases_never_expire",
    "refused_open_keeps",
)
# the ops that name a game but are answered without the process holding it (JF-STORE-036)
_NOT_HOLDING = frozenset({"open_game", "release_game", "create_game"})
FOREVER = 1e9  # seconds: the leases of `leases_never_expire`

# `renew_any_owner` on PostgreSQL: the statement of `jfsm.stores.postgres.fencing.RENEW`
# without its token, answering the token it was given so that no store learns it was fenced
# (and the server's WAL position, as the statement answers it, R181: `{position}`)
_RENEW_ANY = """
WITH renewed AS (
    UPDATE jfsm_game g SET lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
    FROM unnest(%(games)s::text[], %(tokens)s::bigint[]) AS o(game_id, token)
    WHERE g.game_id = o.game_id
    RETURNING g.game_id, o.token
)
SELECT r.game_id, r.token, here.timeline, here.wal, here.marked
FROM {position} AS here LEFT JOIN renewed r ON true
"""


class _AnyLeaseKeeper(LeaseKeeper):
    """`renew_any_owner` on a shared directory: each renewal rewrites the lease the game's
    opens read (its latest epoch's) with a later end, whoever it names."""

    def renew_all(self) -> int:
        for lease in list(self._leases):
            with contextlib.suppress(OSError):
                assert isinstance(lease, Epoch)
                extend_any_lease(lease)
        return len(self._leases)


def extend_any_lease(epoch: Epoch) -> bool:
    """Rewrite the lease of the game's latest established epoch (the one an open reads) to
    end one lease length from now, whatever owner and token it names (a released one comes
    back to life). Also the ownership-rule mutant `renew-only-own` of
    `tests/stores/test_ownership_rules.py`."""
    record = current_lease_at(epoch.store_fd)
    if record is not None:
        later = LeaseRecord.starting(record.owner, record.token, epoch.seconds)
        write_lease_at(epoch.store_fd, later)
    return True  # as a renewal answers: still held


class _FlawedStore:
    """A shared store whose fenced commits are bent (`no_token_check`, `fenced_half_write`);
    every other attribute is the real store's. `games` is the driver's shared games (a
    `DatabaseGames` or a `SharedDirectoryGames`), through which it takes the game back."""

    def __init__(self, inner: Any, flaw: str, games: Any, game_id: str) -> None:
        self.inner, self.flaw, self.games, self.game_id = inner, flaw, games, game_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit(self, projection: Projection) -> None:
        try:
            await self.inner.commit(projection)
        except StoreFenced:
            back, _ = await self.games.open(self.game_id, create=False, takeover=True)
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

    def __init__(self, flaw: str, store_url: str | None, state: str | None = None) -> None:
        if flaw not in FLAWS:
            raise ValueError(f"unknown flaw {flaw!r}; choose from {FLAWS}")
        if (store_url is None) == (state is None):
            raise ValueError("give a database (store_url) or a shared state directory (state)")
        super().__init__(state, store_url=store_url, shared=state is not None)
        self.flaw = flaw
        self._open_game = self._ops["open_game"]
        self._ops["open_game"] = self._bent_open_game
        self._hello = self._ops["hello"]
        self._ops["hello"] = self._bent_hello
        self._kept: set[str] = set()  # `refused_open_keeps`: games whose refused open kept them
        if flaw == "refused_open_keeps":
            for name, op in list(self._ops.items()):
                if name not in _NOT_HOLDING and name != "hello":
                    self._ops[name] = self._fenced_if_kept(op)
            release = self._ops["release_game"]

            async def release_game(args: Mapping[str, Any]) -> Any:
                self._kept.discard(args.get("game"))
                return await release(args)

            self._ops["release_game"] = release_game
        if flaw == "renew_any_owner" and store_url is not None:
            import jfsm.stores.postgres.pool as pool
            from jfsm.stores.postgres.history import POSITION

            # every pool of this process renews without its token
            pool.RENEW = _RENEW_ANY.format(position=POSITION)
        if flaw == "renew_any_owner" and state is not None:
            db = self.db
            db._keeper = _AnyLeaseKeeper(db.seconds)  # type: ignore[union-attr]

    async def _confirm_owner(self, game: str, engine: GameEngine, writes: int) -> None:
        if self.flaw != "stale_reads":
            await super()._confirm_owner(game, engine, writes)

    def _owned_before(self, op: str, args: Mapping[str, Any]) -> tuple[str, GameEngine, int] | None:
        if self.flaw == "dump_only_reads" and op != "dump":
            return None  # answered from memory, never checked at the store
        return super()._owned_before(op, args)

    async def _bent_hello(self, args: Mapping[str, Any]) -> Any:
        result = await self._hello(args)
        if self.flaw == "leases_never_expire" and self.db is not None:
            self.db.use_lease(FOREVER)  # hello stated the length asked for (or its own)
        return result

    def _engine(
        self, game_id: str, store: Any, participants: list[Participant] | tuple[()] = ()
    ) -> GameEngine:
        if self.flaw in ("no_token_check", "fenced_half_write"):
            store = _FlawedStore(store, self.flaw, self.db, game_id)
        return super()._engine(game_id, store, participants)

    def _fenced_if_kept(self, op: Any) -> Any:
        async def bent(args: Mapping[str, Any]) -> Any:
            if isinstance(args, Mapping) and args.get("game") in self._kept:
                raise StoreFenced("this process's ownership of the game was superseded")
            return await op(args)

        return bent

    async def _bent_open_game(self, args: Mapping[str, Any]) -> Any:
        if self.flaw == "lease_unchecked":
            args = {**args, "takeover": True}
        game = args.get("game") if isinstance(args, Mapping) else None
        held = self.flaw == "refused_open_keeps" and game in self.served.held
        try:
            result = await self._open_game(args)
        except StoreLocked:
            if held:
                self._kept.add(game)  # type: ignore[arg-type]
            raise
        self._kept.discard(game)
        if self.flaw == "takeover_same_token" and args.get("takeover"):
            result = {"token": result["token"] - 1}
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jfsm_conformance.examples.broken_owners")
    parser.add_argument("flaw", choices=FLAWS)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="postgresql://... (migrated)")
    where.add_argument("--state", help="a state directory the processes share (R95)")
    args = parser.parse_args(argv)
    asyncio.run(serve_stdio(OwnersDriver(args.flaw, args.store, args.state)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
