"""A driver's own concurrent requests never refuse each other (issue 38, item 3).

A driver serving more games than `max_open` closes the idle ones and reopens a game when an
op names it. The protocol allows outstanding requests, so several ops may name one closed
game at once: their reopens must be one open (`jfsm.driver.served.ServedGames`), never
several opens that fence (`store_fenced`) or lock out (`store_locked`) each other with no
other process anywhere (JF-STORE-038). Run on every backend that closes games as idle: a
plain state directory, a shared one, and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pg_fixtures import game_id, run_closing_pools

from jfsm.driver import ReferenceDriver
from tests.driver_helpers import HELLO

GAMES = 16  # twice max_open (8): every game is closed as idle before its turn comes
AT_ONCE = 3  # requests sent at once on one game


async def _call(driver: ReferenceDriver, op: str, **args: Any) -> dict[str, Any]:
    return await driver.handle({"id": 1, "op": op, "args": args})


async def refusals(
    driver: ReferenceDriver, games: list[str]
) -> tuple[collections.Counter[str], int]:
    """Make `games`, then send `AT_ONCE` rounds at once on each in turn (the earlier ones
    closed as idle by then): the error codes answered, counted (empty: all answered), and
    how many rounds the games hold afterwards."""
    assert (await _call(driver, "hello", **HELLO))["ok"]
    for game in games:
        assert (await _call(driver, "create_game", game=game))["ok"]
    codes: collections.Counter[str] = collections.Counter()
    held = 0
    try:
        for game in games:
            replies = await asyncio.gather(
                *(
                    _call(driver, "record_round", game=game, input=f"i{n}", output="o")
                    for n in range(AT_ONCE)
                )
            )
            codes.update(r["error"]["code"] for r in replies if not r["ok"])
        for game in games:
            dump = await _call(driver, "dump", game=game)
            if dump["ok"]:
                held += sum(1 for k in dump["result"]["store"] if k.startswith("jfRounds."))
    finally:
        await driver.close()
    return codes, held


def _backends(tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> ReferenceDriver:
    """The driver of `kind`; `-owner`: with an owner id of its own (`--owner`), whose
    opens reclaim the owner's live lease with a new token (R61) instead of being locked out."""
    if kind.endswith("-owner"):
        request.getfixturevalue("monkeypatch").setenv("JFSM_OWNER", "served-" + kind)
        kind = kind.removesuffix("-owner")
    if kind == "state":
        return ReferenceDriver(tmp_path / "state")
    if kind == "shared":
        return ReferenceDriver(tmp_path / "state", shared=True)
    return ReferenceDriver(store_url=str(request.getfixturevalue("pg_database")))


@pytest.mark.req("JF-STORE-038")
@pytest.mark.parametrize("kind", ["state", "shared", "shared-owner", "postgres", "postgres-owner"])
def test_concurrent_requests_on_a_game_closed_as_idle_refuse_nothing(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    """16 games (8 open at most), 3 rounds sent at once on each: 0 refusals, and each game
    holds its 3 rounds. Before `ServedGames` the 3 reopens raced: half the rounds were
    answered `store_fenced` on PostgreSQL and about a third `store_locked` on a state
    directory."""
    driver = _backends(tmp_path, request, kind)
    games = [game_id() for _ in range(GAMES)]
    run: Callable[[], Awaitable[Any]] = lambda: refusals(driver, games)  # noqa: E731
    on_pg = kind.startswith("postgres")
    codes, held = run_closing_pools(run, 120) if on_pg else asyncio.run(run())
    assert codes == collections.Counter(), codes
    assert held == GAMES * AT_ONCE
