"""The durable driver's state directory: crash-safe side files (a real `kill -9` during
participant saves), torn telemetry, and bad entries skipped and reported, never fatal."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from jfsm.driver import ReferenceDriver
from jfsm.driver.state import StateDirectory
from tests.driver_helpers import HELLO, DriverZygote, StdioDriver

PEOPLE = [
    [{"id": f"p{k}-{i}", "human": i % 2 == 0, "spectator": False} for i in range(40)]
    for k in range(4)
]


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _call(driver: ReferenceDriver, op: str, args: dict[str, Any]) -> dict[str, Any]:
    reply = await driver.handle({"id": 1, "op": op, "args": args})
    return reply


def _driver_with_games(state: Path, games: list[str]) -> ReferenceDriver:
    async def build() -> ReferenceDriver:
        driver = ReferenceDriver(state)
        assert (await _call(driver, "hello", HELLO))["ok"]
        for game in games:
            assert (await _call(driver, "create_game", {"game": game}))["ok"]
            reply = await _call(
                driver, "set_participants", {"game": game, "participants": PEOPLE[0]}
            )
            assert reply["ok"]
            assert (
                await _call(driver, "record_round", {"game": game, "input": "i", "output": "o"})
            )["ok"]
        return driver

    return _run(build())


@pytest.mark.slow
@pytest.mark.req("JF-ERR-013")
def test_kill_9_during_participant_saves_leaves_every_game_reachable(tmp_path: Path) -> None:
    """20 real SIGKILLs of `jfsm driver --state DIR` (processes forked from one that has
    imported jfsm, to start fast) while it replaces participants files:
    after each, hello answers, every game reopens, and each game's participants are one of
    the lists that were written (never empty or torn)."""
    state = tmp_path / "state"
    games = ["ga", "gb", "gc"]
    rng = random.Random(12)
    zygote = DriverZygote(tmp_path)
    argv = ["driver", "--state", str(state)]
    driver = zygote.start(argv)
    try:
        assert driver.call("hello", HELLO)["ok"]
        for game in games:
            assert driver.call("create_game", {"game": game})["ok"]
            reply = driver.call("set_participants", {"game": game, "participants": PEOPLE[0]})
            assert reply["ok"]
    finally:
        driver.kill()
    valid = [json.dumps(p, sort_keys=True) for p in PEOPLE]
    for kill in range(21):
        driver = zygote.start(argv)
        try:
            hello = driver.call("hello", HELLO)
            assert hello["ok"], (kill, hello)
            assert hello["result"]["skipped"] == [], kill
            for game in games:
                assert driver.call("dump", {"game": game})["ok"], kill
            saved = [
                json.dumps(json.loads(p.read_text("utf-8")), sort_keys=True)
                for p in state.glob("game-*/participants.json")
            ]
            assert len(saved) == 3 and all(s in valid for s in saved), (kill, saved)
            assert list(state.glob("game-*/.participants.json.*")) == [], kill
            if kill == 20:
                break
            # Fire many saves without waiting, then kill at a random moment among them.
            burst = b"".join(
                json.dumps(
                    {
                        "id": 1000 + n,
                        "op": "set_participants",
                        "args": {"game": games[n % 3], "participants": PEOPLE[n % 4]},
                    }
                ).encode()
                + b"\n"
                for n in range(100)
            )
            driver.send_raw(burst)
            for _ in range(rng.randrange(1, 25)):
                driver.reply()
        finally:
            driver.kill()
    zygote.close()


@pytest.mark.req("JF-ERR-013")
def test_killed_creation_leaves_no_game_and_no_leftover(tmp_path: Path) -> None:
    """A game folder is published whole by one rename: a `.new-...` folder (a creation that
    was killed before it was acknowledged) is removed at startup and is not a game."""
    state = tmp_path / "state"
    driver = _driver_with_games(state, ["keep"])
    asyncio.run(driver.close())
    unfinished = state / ".new-6e6f-1234abcd"
    (unfinished / "store").mkdir(parents=True)
    (unfinished / "participants.json").write_text("[]")

    async def check() -> None:
        again = ReferenceDriver(state)
        hello = await _call(again, "hello", HELLO)
        assert hello["ok"] and hello["result"]["skipped"] == []
        assert sorted(again.games) == ["keep"]
        assert (await _call(again, "create_game", {"game": "no"}))["ok"]
        await again.close()

    _run(check())
    assert not unfinished.exists()


@pytest.mark.req("JF-ERR-013")
def test_participants_are_replaced_atomically(tmp_path: Path) -> None:
    """The participants file is written through a temporary file and a rename: a crash
    between the two leaves the old file and a temporary file, which the next open removes."""
    state = tmp_path / "state"
    driver = _driver_with_games(state, ["g"])
    asyncio.run(driver.close())
    folder = StateDirectory(state).folder("g")
    before = folder.participants.read_bytes()
    (folder.path / ".participants.json.deadbeef.tmp").write_bytes(b'[{"id": "torn')

    async def check() -> None:
        again = ReferenceDriver(state)
        assert (await _call(again, "hello", HELLO))["ok"]
        assert [p.to_json() for p in again.games["g"].participants()] == PEOPLE[0]
        await again.close()

    _run(check())
    assert folder.participants.read_bytes() == before
    assert list(folder.path.glob(".participants.json.*")) == []


@pytest.mark.req("JF-ERR-015")
def test_torn_telemetry_line_is_dropped_and_the_next_event_kept(tmp_path: Path) -> None:
    folders = StateDirectory(tmp_path)
    folder = folders.folder("g")
    folder.path.mkdir()
    folders.append_telemetry(folder, {"event": "compression_attempt", "n": 1})
    with folder.telemetry.open("ab") as handle:
        handle.write(b'{"event": "compression_attempt", "n": 2, "cal')  # killed mid-append
    assert folders.read_telemetry(folder) == [{"event": "compression_attempt", "n": 1}]
    after = StateDirectory(tmp_path)  # a restarted driver appends the next event
    after.append_telemetry(folder, {"event": "compression_attempt", "n": 3})
    assert [e["n"] for e in after.read_telemetry(folder) or []] == [1, 3]


@pytest.mark.req("JF-ERR-015")
def test_telemetry_op_survives_a_torn_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    driver = _driver_with_games(state, ["g"])
    asyncio.run(driver.close())
    folder = StateDirectory(state).folder("g")
    folder.telemetry.write_bytes(b'{"event": "compression_attempt", "n": 1}\n{"event": "comp')

    async def check() -> None:
        again = ReferenceDriver(state)
        assert (await _call(again, "hello", HELLO))["ok"]
        reply = await _call(again, "telemetry", {"game": "g"})
        assert reply == {"id": 1, "ok": True, "result": [{"event": "compression_attempt", "n": 1}]}
        await again.close()

    _run(check())


def _bad_entries(state: Path) -> dict[str, str]:
    """Damage beside two good games; entry name (as reported) -> what it is."""
    (state / "game-zz").mkdir()
    (state / ("game-" + b"ab".hex() + "0")).mkdir()  # odd hex
    (state / ("game-" + b"x y".hex())).mkdir()  # not a valid id
    (state / ("game-" + b"plainfile".hex())).write_text("not a folder")
    (state / ("game-" + b"nostore".hex())).mkdir()
    damaged = StateDirectory(state).folder("damaged")
    (damaged.path / "store").mkdir(parents=True)
    damaged.participants.write_text("")  # what the old driver left after a kill
    raw = os.fsencode(str(state)) + b"/game-\xff\xfe"
    os.mkdir(raw)  # a name that is not UTF-8
    return {
        "game-zz": "name",
        "game-61620": "name",
        "game-782079": "name",
        "game-" + b"plainfile".hex(): "not a folder",
        "game-" + b"nostore".hex(): "no store",
        "game-" + b"damaged".hex(): "participants",
        "game-\\xff\\xfe": "name",
    }


@pytest.mark.req("JF-ERR-014")
def test_bad_entries_are_skipped_and_reported_never_refusing_the_others(tmp_path: Path) -> None:
    state = tmp_path / "state"
    driver = _driver_with_games(state, ["good1", "good2"])
    asyncio.run(driver.close())
    expected = _bad_entries(state)

    async def check() -> None:
        again = ReferenceDriver(state)
        hello = await _call(again, "hello", HELLO)
        assert hello["ok"], hello
        skipped = {s["entry"]: s["reason"] for s in hello["result"]["skipped"]}
        assert sorted(skipped) == sorted(expected), skipped
        assert "participants.json" in skipped["game-" + b"damaged".hex()]
        assert sorted(again.games) == ["good1", "good2"]
        for game in ("good1", "good2"):
            assert (await _call(again, "dump", {"game": game}))["ok"]
        # the damaged game's folder is not overwritten by a new game of the same id
        refused = await _call(again, "create_game", {"game": "damaged"})
        assert refused["error"]["code"] == "invalid_input"
        assert (await _call(again, "create_game", {"game": "fresh"}))["ok"]
        await again.close()

    _run(check())


@pytest.mark.req("JF-ERR-014")
def test_bad_entries_over_stdio_keep_the_driver_serving(tmp_path: Path) -> None:
    state = tmp_path / "state"
    driver = _driver_with_games(state, ["good"])
    asyncio.run(driver.close())
    _bad_entries(state)
    process = StdioDriver(state)
    try:
        hello = process.call("hello", HELLO)
        assert hello["ok"] and len(hello["result"]["skipped"]) == 7
        assert process.call("dump", {"game": "good"})["ok"]
        deadline = time.monotonic() + 30
        while not any(b"skipped game-zz" in line for line in process.stderr):
            assert time.monotonic() < deadline, process.stderr
            time.sleep(0.05)
    finally:
        process.close()


@pytest.mark.req("JF-ERR-013")
def test_duplicate_is_published_whole_with_its_participants(tmp_path: Path) -> None:
    state = tmp_path / "state"
    driver = _driver_with_games(state, ["src"])

    async def dup() -> None:
        assert (await _call(driver, "duplicate", {"game": "src", "into": "copy"}))["ok"]
        await driver.restart()
        assert [p.to_json() for p in driver.games["copy"].participants()] == PEOPLE[0]
        assert driver.games["copy"].dump()["store"] == driver.games["src"].dump()["store"]
        await driver.close()

    _run(dup())
    assert [p.name for p in state.iterdir() if p.name.startswith(".new-")] == []


@pytest.mark.req("JF-ERR-014")
def test_an_unusable_state_directory_fails_hello_cleanly(tmp_path: Path) -> None:
    """hello on a state 'directory' that is a file answers store_unavailable and leaves the
    driver as it was (not half initialised: other ops still ask for hello first)."""
    state = tmp_path / "state"
    state.write_text("a file, not a folder")

    async def check() -> None:
        driver = ReferenceDriver(state)
        hello = await _call(driver, "hello", HELLO)
        assert hello["error"]["code"] == "store_unavailable", hello
        early = await _call(driver, "create_game", {"game": "g"})
        assert early["error"]["code"] == "invalid_input"
        assert "hello" in early["error"]["message"]

    _run(check())
    assert state.read_text() == "a file, not a folder"


def _failing(monkeypatch: pytest.MonkeyPatch, name: str, code: int, when: Any = None) -> None:
    """`os.<name>` fails with `code` (for the calls `when` accepts), as on a full or
    read-only disk (the tests may run as root, whom permission bits do not stop)."""
    real = getattr(os, name)

    def failing(*args: Any, **kwargs: Any) -> Any:
        if when is None or when(*args):
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_side_file_errors_are_store_unavailable_with_the_errno(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """The old driver answered set_participants and create_game on a full or read-only disk
    with internal_error "OSError: [Errno 28]"; store operations answer store_unavailable."""
    driver = _driver_with_games(tmp_path / "state", ["g"])
    name = errno.errorcode[code]

    async def check() -> None:
        with monkeypatch.context() as patch:
            _failing(patch, "write", code)
            reply = await _call(driver, "set_participants", {"game": "g", "participants": []})
            assert reply["error"]["code"] == "store_unavailable", reply
            assert reply["error"]["details"]["errno_name"] == name, reply
        with monkeypatch.context() as patch:
            _failing(patch, "mkdir", code)
            reply = await _call(driver, "create_game", {"game": "h"})
            assert reply["error"]["code"] == "store_unavailable", reply
            assert reply["error"]["details"]["errno_name"] == name, reply
        assert (await _call(driver, "create_game", {"game": "h"}))["ok"]  # nothing was left
        await driver.close()

    _run(check())


def test_a_failed_telemetry_write_is_counted_and_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old driver dropped compression telemetry on ENOSPC without a count."""
    from jfsm.testing import FakeCompressor

    rounds = {"input": "hello there " * 3, "output": "general kenobi " * 3}

    async def check() -> None:
        driver = ReferenceDriver(tmp_path / "s", compressor_factory=lambda url: FakeCompressor())
        hello = {**HELLO, "thresholds": {"game": 10}}
        assert (await _call(driver, "hello", hello))["ok"]
        assert (await _call(driver, "create_game", {"game": "g"}))["ok"]
        _failing(
            monkeypatch, "open", errno.ENOSPC, lambda p, *a: str(p).endswith("telemetry.jsonl")
        )
        for _ in range(2):
            for _ in range(2):
                assert (await _call(driver, "record_round", {"game": "g", **rounds}))["ok"]
            reply = await _call(driver, "generate", {"game": "g"})
            assert reply["result"]["outcome"] == "published", reply  # published all the same
        await driver.games["g"].telemetry_written()  # written off the loop (R151)
        assert driver.games["g"].status()["telemetryFailures"] == 2
        await driver.close()

    _run(check())
    lines = [line for line in capsys.readouterr().err.splitlines() if "telemetry" in line]
    assert len(lines) == 1 and "ENOSPC" in lines[0], lines
