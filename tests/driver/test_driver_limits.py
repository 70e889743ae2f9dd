"""The spec's limits (`spec/constants.json` `limits`): ids, value depth, message depth, read
from the spec and enforced by the engine and the in-process driver."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jfsm.driver import ReferenceDriver
from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput
from jfsm.limits import depth, validate_id
from jfsm.spec import constants, load_json
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor
from tests.driver_helpers import HELLO, spec_with


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def test_limits_are_read_from_the_spec() -> None:
    limits = load_json("constants.json")["limits"]
    spec = constants()
    assert spec.id_pattern == limits["id_pattern"]
    assert spec.value_max_depth == limits["value_max_depth"]
    assert spec.message_max_depth == limits["message_max_depth"]
    assert spec.message_max_bytes == limits["message_max_bytes"]
    # a write message carries its values three levels down: a value at its limit fits
    assert spec.message_max_depth >= spec.value_max_depth + 3


def test_depth_is_iterative_and_counts_containers() -> None:
    assert depth(1) == 0 and depth([]) == 1 and depth({"a": [1]}) == 2
    assert depth(_nested(100_000)) == 100_000  # no RecursionError
    assert depth(_nested(100_000), stop=10) == 11


@pytest.mark.req("JF-ERR-006")
@pytest.mark.parametrize("bad", ["", "x" * 65, "a b", "ü", "g/1", "\ud800", None, 7], ids=ascii)
def test_bad_ids_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput):
        validate_id(bad, "game id")
    with pytest.raises(InvalidInput):
        GameEngine(MemoryStore(), FakeCompressor(), game_id=bad)


@pytest.mark.req("JF-ERR-006")
def test_ids_at_the_limit_are_accepted() -> None:
    assert validate_id("A-z_0" + "9" * 59, "game id") == "A-z_0" + "9" * 59


@pytest.mark.req("JF-ERR-007", "JF-ERR-002")
@pytest.mark.parametrize("cheat", [False, True])
def test_values_nested_past_the_limit_are_invalid_input(cheat: bool) -> None:
    """A value nested about 330 levels raised a raw RecursionError through write/cheat."""
    limit = constants().value_max_depth

    async def run() -> None:
        engine = GameEngine(MemoryStore(), FakeCompressor(), game_id="g")
        assert await engine.write({"ok": _nested(limit)}, cheat=cheat) > 0
        before = engine.dump()
        for levels in (limit + 1, 330, 5000):
            with pytest.raises(InvalidInput, match="nests deeper"):
                await engine.write({"k": _nested(levels)}, cheat=cheat)
        assert engine.dump() == before

    asyncio.run(run())


@pytest.mark.req("JF-ERR-008", "JF-ERR-010")
def test_in_process_handle_refuses_deep_and_id_less_messages() -> None:
    async def run() -> list[dict[str, Any]]:
        driver = ReferenceDriver()
        assert (await driver.handle({"id": 1, "op": "hello", "args": HELLO}))["ok"]
        replies = [
            await driver.handle({"id": 2, "op": "dump", "args": {"x": _nested(100_000)}}),
            await driver.handle({"id": "\ud800", "op": "x"}),
            await driver.handle({"op": "dump", "args": {}}),
            await driver.handle([1, 2]),  # type: ignore[arg-type]
        ]
        await driver.close()
        return replies

    deep, surrogate, missing, array = asyncio.run(run())
    # too deep to be read as a message: id null, as for the others (JF-ERR-008)
    for reply in (deep, surrogate, missing, array):
        assert reply["id"] is None and reply["error"]["code"] == "invalid_input"
    json.dumps(surrogate, ensure_ascii=True)  # the reply is always encodable


@pytest.mark.req("JF-ERR-006")
def test_the_id_pattern_comes_from_the_spec_directory(tmp_path: Path) -> None:
    """With a spec copy whose id pattern allows only digits, the engine follows it."""
    spec = spec_with(tmp_path, limits={"id_pattern": "^[0-9]{1,3}$"})
    code = (
        "from jfsm.limits import validate_id\n"
        "from jfsm.errors import InvalidInput\n"
        "validate_id('123', 'g')\n"
        "try:\n    validate_id('abc', 'g')\nexcept InvalidInput:\n    print('refused')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "JFSM_SPEC_DIR": str(spec)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "refused"


@pytest.mark.req("JF-ERR-006", "JF-ERR-010")
def test_forget_games_refuses_ids_out_of_pattern_and_forgets_nothing(tmp_path: Path) -> None:
    """An id that is no game id (`..`, a slash, too long) is refused before any game is
    released or any folder removed (R80); duplicates are accepted as one."""

    async def run() -> list[dict[str, Any]]:
        driver = ReferenceDriver(tmp_path / "state")
        assert (await driver.handle({"id": 1, "op": "hello", "args": HELLO}))["ok"]
        assert (await driver.handle({"id": 2, "op": "create_game", "args": {"game": "g"}}))["ok"]
        replies = [
            await driver.handle({"id": 3, "op": "forget_games", "args": {"games": ["g", bad]}})
            for bad in ("..", "a/b", "x" * 65, "")
        ]
        replies.append(await driver.handle({"id": 4, "op": "dump", "args": {"game": "g"}}))
        replies.append(
            await driver.handle({"id": 5, "op": "forget_games", "args": {"games": ["g", "g"]}})
        )
        await driver.close()
        return replies

    *refused, dump, duplicates = asyncio.run(run())
    assert all(r["error"]["code"] == "invalid_input" for r in refused)
    assert dump["ok"]  # the valid id named beside a bad one was not forgotten
    assert duplicates["ok"]
    assert (tmp_path / "state").is_dir()
