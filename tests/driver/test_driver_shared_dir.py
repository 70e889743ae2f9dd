"""`jfsm driver --state DIR --shared`: several real driver processes on one state directory,
one owner a game (decision R95), judged over stdio with real `kill -9`.

JF-STORE-010..014 as the workers machine sees them (`open_game`, `release_game`, fenced
writes, a killed owner reclaimed by its owner id, R61), plus what the driver keeps beside
the store: participants written as the owner, games never adopted from another process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.driver_helpers import HELLO, StdioDriver

PEOPLE = [{"id": "p-1", "human": True, "spectator": False}]


@pytest.fixture
def drivers(tmp_path: Path) -> Any:
    started: list[StdioDriver] = []

    def start(owner: str) -> StdioDriver:
        driver = StdioDriver(tmp_path / "state", extra=("--shared", "--owner", owner))
        started.append(driver)
        hello = driver.call("hello", HELLO)
        assert hello["ok"] and hello["result"]["capabilities"]["sharedStore"] is True
        return driver

    yield start
    for driver in started:
        driver.kill()


def _rounds(driver: StdioDriver, game: str) -> list[str]:
    reply = driver.call("dump", {"game": game})
    assert reply["ok"], reply
    store = reply["result"]["store"]
    found = {
        int(k.split(".")[1]): v["input"] for k, v in store.items() if k.startswith("jfRounds.")
    }
    return [found[n] for n in sorted(found)]


def _sigkill(driver: StdioDriver) -> None:
    """`kill -9` the driver, its pipes left to its reader threads (they end at EOF)."""
    os.killpg(driver.proc.pid, signal.SIGKILL)
    driver.proc.wait(60)


def _code(reply: dict[str, Any]) -> str | None:
    return None if reply["ok"] else reply["error"]["code"]


def _record(driver: StdioDriver, game: str, text: str) -> dict[str, Any]:
    return driver.call("record_round", {"game": game, "input": text, "output": "ok"})


def test_two_processes_one_owner_a_game_and_fenced_writes_change_nothing(
    tmp_path: Path, drivers: Any
) -> None:
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert _record(a, "g", "r1")["result"]["round"] == 1
    assert a.call("set_participants", {"game": "g", "participants": PEOPLE})["ok"]
    assert _code(_record(b, "g", "x")) == "store_locked"  # a's lease lives
    assert _code(b.call("open_game", {"game": "g"})) == "store_locked"
    taken = b.call("open_game", {"game": "g", "takeover": True})
    assert taken["ok"] and isinstance(taken["result"]["token"], int)
    participants = (tmp_path / "state").glob("game-*/participants.json")
    saved = {p: p.read_bytes() for p in participants}
    assert _code(_record(a, "g", "fenced")) == "store_fenced"
    changed = {"game": "g", "participants": [*PEOPLE, dict(PEOPLE[0], id="p-2")]}
    assert _code(a.call("set_participants", changed)) == "store_fenced"
    assert {p: p.read_bytes() for p in saved} == saved and saved  # participants untouched
    assert _rounds(b, "g") == ["r1"]
    assert _record(b, "g", "r2")["result"]["round"] == 2
    released = b.call("release_game", {"game": "g"})
    assert released["ok"] and released["result"] == {}
    reopened = a.call("open_game", {"game": "g"})  # released: a plain open succeeds at once
    assert reopened["ok"] and reopened["result"]["token"] > taken["result"]["token"]
    assert _rounds(a, "g") == ["r1", "r2"]


def test_a_killed_driver_restarted_with_its_owner_id_reclaims_its_games(
    tmp_path: Path, drivers: Any
) -> None:
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    for n in range(1, 6):
        assert _record(a, "g", f"r{n}")["ok"]
    a.send_raw(
        json.dumps(
            {"id": 99, "op": "record_round", "args": {"game": "g", "input": "r6", "output": "ok"}}
        ).encode()
        + b"\n"
    )
    _sigkill(a)  # with a round in flight
    assert _code(b.call("open_game", {"game": "g"})) == "store_locked"  # a's lease lives on
    again = drivers("a")
    assert again.call("open_game", {"game": "g"})["ok"]  # reclaimed at once (R61)
    rounds = _rounds(again, "g")
    assert rounds in (["r1", "r2", "r3", "r4", "r5"], ["r1", "r2", "r3", "r4", "r5", "r6"])
    assert _record(again, "g", "r7")["result"]["round"] == len(rounds) + 1


def test_create_and_duplicate_never_adopt_another_process_game(
    tmp_path: Path, drivers: Any
) -> None:
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert _record(a, "g", "r1")["ok"]
    assert _code(b.call("create_game", {"game": "g"})) == "invalid_input"
    assert b.call("create_game", {"game": "h"})["ok"]
    assert _record(b, "h", "h1")["ok"]
    assert _code(b.call("duplicate", {"game": "h", "into": "g"})) == "invalid_input"
    assert _record(a, "g", "r2")["result"]["round"] == 2  # still a's, untouched
    assert b.call("duplicate", {"game": "h", "into": "h2"})["ok"]
    assert _rounds(b, "h2") == ["h1"]
    leftovers = [p.name for p in (tmp_path / "state").iterdir() if p.name.startswith(".new-")]
    assert leftovers == []
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == sorted(
        ["lock.plain", "lock.shared", "tokens"]
        + ["game-" + g.encode().hex() for g in ("g", "h", "h2")]
    )


def test_shared_needs_a_state_directory(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "jfsm.cli", "driver", "--shared"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2 and "--shared needs --state DIR" in run.stderr


def test_a_plain_driver_refuses_a_shared_directory(tmp_path: Path, drivers: Any) -> None:
    a = drivers("a")
    assert a.call("create_game", {"game": "g"})["ok"]  # the directory has a token counter now
    run = subprocess.run(
        [sys.executable, "-m", "jfsm.cli", "driver", "--state", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2 and "add --shared" in run.stderr


def test_an_idle_owner_keeps_its_games_and_a_dead_ones_lease_runs_out(
    drivers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JFSM_LEASE_SECONDS", "1")
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert _record(a, "g", "r1")["ok"]
    time.sleep(2.5)  # over two lease lengths without a write: the timer renewed it
    assert _code(b.call("open_game", {"game": "g"})) == "store_locked"
    assert _record(a, "g", "r2")["ok"]
    _sigkill(a)
    deadline = time.monotonic() + 30
    while _code(opened := b.call("open_game", {"game": "g"})) == "store_locked":
        assert time.monotonic() < deadline  # the dead owner's lease runs out
        time.sleep(0.2)
    assert opened["ok"], opened
    assert _rounds(b, "g") == ["r1", "r2"]


def test_a_damaged_participants_file_is_store_corrupted_and_owns_nothing(
    tmp_path: Path, drivers: Any
) -> None:
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert a.call("release_game", {"game": "g"})["ok"]
    (tmp_path / "state" / ("game-" + b"g".hex()) / "participants.json").write_bytes(b"{oops")
    assert _code(b.call("open_game", {"game": "g"})) == "store_corrupted"
    assert _code(a.call("open_game", {"game": "g"})) == "store_corrupted"  # b owns nothing
