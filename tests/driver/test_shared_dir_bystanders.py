"""Bystanders of a shared state directory (JF-STORE-045, JF-STORE-047; decision R173): processes
that are not jfsm owners, holding locks on the directory's files while shared drivers open,
take over, write and release. A store signals no process it did not start, and such a lock
delays nothing; only the locks that keep a plain and a shared driver apart (R120) refuse, at
once and in words that name what is locked.

The bystanders: a Python child that takes an `flock` (exclusive, or shared) on every file
and folder of the state directory as they appear (tokens included), and `flock(1)` holding
files and folders while `sleep` runs, as an operator's shell would. After the drivers were
served, each bystander is the process it was (same pid, same start time, not a zombie) and
tells which files it held.

The drivers speak only the protocol, so the test runs unchanged against any build of jfsm
(a jfsm that ends lock holders fails it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.driver_helpers import HELLO, StdioDriver

#: locks every file and folder under `root` (argv[1]) with `flock` (argv[2]: `exclusive` or
#: `shared`), as they appear, until `root/../stop` exists; skips the locks that keep a plain
#: and a shared driver apart when exclusive (argv[3] == "skip-r120"), and the folders games
#: are being made in when shared (a creator locks its new store exclusively). Prints
#: `ready` once it holds a game's file and a token file, then the list it held, and exits 0.
BYSTANDER = r"""
import fcntl, json, os, sys, time
root, mode, skip = sys.argv[1], sys.argv[2], sys.argv[3] == "skip-r120"
how = fcntl.LOCK_EX if mode == "exclusive" else fcntl.LOCK_SH
stop = os.path.join(os.path.dirname(root), "stop")
held, ready, until = {}, False, time.monotonic() + 300

def r120(path):
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    return rel in (".", "lock.shared") or parts[-1] in ("store", "lock")

while not os.path.exists(stop) and time.monotonic() < until:
    paths = [root]
    for here, dirs, files in os.walk(root):
        paths += [os.path.join(here, n) for n in dirs + files]
    for path in paths:
        rel = os.path.relpath(path, root)
        if path in held or (skip and r120(path)):
            continue
        if mode == "shared" and rel.startswith(".new-"):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        held[path] = fd
    games = [p for p in held if os.path.relpath(p, root).startswith("game-") and os.path.isfile(p)]
    tokens = [p for p in held if os.path.relpath(p, root).startswith("tokens")]
    if not ready and games and tokens:
        ready = True
        print("ready", flush=True)
    time.sleep(0.02)
print(json.dumps(sorted(os.path.relpath(p, root) for p in held)), flush=True)
"""


def _start_time(pid: int) -> int:
    """The process's start time (clock ticks since boot): a reused pid has another."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[19])


class Bystander:
    """A process this test started that is not a jfsm owner, and what it looked like."""

    def __init__(self, argv: list[str]) -> None:
        self.name = " ".join(argv[3:] if argv[1] == "-c" else argv)[:120]
        self.proc = subprocess.Popen(  # a group of its own: `flock(1)` runs `sleep` under it
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        self.started = _start_time(self.proc.pid)

    def unharmed(self) -> bool:
        if self.proc.poll() is not None:
            return False
        with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        return state != "Z" and _start_time(self.proc.pid) == self.started

    def end(self) -> None:
        """End it and whatever it started (its own process group, which this test made)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Two shared drivers (leases of 1 s: an owner that waited for a lock would give up its
    lease at once) and the bystanders the test starts; everything ended after."""
    monkeypatch.setenv("JFSM_LEASE_SECONDS", "1")
    state = tmp_path / "state"
    started: list[Any] = []

    def driver(owner: str) -> StdioDriver:
        each = StdioDriver(state, extra=("--shared", "--owner", owner))
        started.append(each)
        assert each.call("hello", HELLO)["ok"]
        return each

    def bystander(argv: list[str]) -> Bystander:
        each = Bystander(argv)
        started.append(each)
        return each

    yield state, driver, bystander
    (tmp_path / "stop").touch()
    for each in started:
        each.kill() if isinstance(each, StdioDriver) else each.end()


def _ok(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["ok"], reply
    return reply.get("result", {})


def _rounds(driver: StdioDriver, game: str) -> list[str]:
    store = _ok(driver.call("dump", {"game": game}))["store"]
    found = {
        int(k.split(".")[1]): v["input"] for k, v in store.items() if k.startswith("jfRounds.")
    }
    return [found[n] for n in sorted(found)]


def _record(driver: StdioDriver, game: str, text: str) -> dict[str, Any]:
    return driver.call("record_round", {"game": game, "input": text, "output": "ok"})


def _wait_ready(bystander: Bystander) -> None:
    assert bystander.proc.stdout is not None
    line = bystander.proc.stdout.readline()  # bounded: it prints within its first passes
    if not line:
        code = bystander.proc.wait(30)
        raise AssertionError(f"the bystander was harmed before it held its locks (exit {code})")
    assert line.strip() == "ready", line


@pytest.mark.slow
@pytest.mark.req("JF-STORE-045", "JF-STORE-047", "JF-STORE-033")
@pytest.mark.parametrize("mode", ["exclusive", "shared"])
def test_bystanders_holding_locks_on_every_file_are_unharmed_and_delay_nothing(
    scene: Any, mode: str
) -> None:
    state, driver, bystander = scene
    a, b = driver("a"), driver("b")
    _ok(a.call("create_game", {"game": "g"}))
    _ok(_record(a, "g", "r1"))
    game = state / ("game-" + b"g".hex())
    flock = shutil.which("flock")
    shells = []
    if flock is not None:  # an operator's shell: `flock FILE sleep 300` (first, so the
        # Python bystander, which skips what it cannot lock, leaves these to it)
        for target in (game / "telemetry.jsonl", state / "tokens.d"):
            if target.exists():
                option = "-x" if mode == "exclusive" else "-s"
                shells.append(bystander([flock, "-n", option, str(target), "sleep", "300"]))
        time.sleep(0.5)  # flock(1) has its lock once it runs `sleep`
        assert all(each.unharmed() for each in shells)
    skip = "skip-r120" if mode == "exclusive" else "all"
    locker = bystander([sys.executable, "-c", BYSTANDER, str(state), mode, skip])
    _wait_ready(locker)
    began = time.monotonic()
    _ok(_record(a, "g", "r2"))
    taken = _ok(b.call("open_game", {"game": "g", "takeover": True}))
    assert isinstance(taken["token"], int)
    _ok(_record(b, "g", "r3"))
    fenced = _record(a, "g", "x")
    assert not fenced["ok"] and fenced["error"]["code"] == "store_fenced", fenced
    _ok(b.call("release_game", {"game": "g"}))
    _ok(a.call("open_game", {"game": "g"}))  # released: a plain open succeeds at once
    _ok(_record(a, "g", "r4"))
    time.sleep(2.5)  # idle past two lease lengths: renewals pass the locks too
    _ok(b.call("create_game", {"game": "h"}))
    _ok(_record(b, "h", "h1"))
    fenced = b.call("open_game", {"game": "g"})  # a's lease lives: refused, a goes on
    assert not fenced["ok"] and fenced["error"]["code"] == "store_locked", fenced
    _ok(_record(a, "g", "r5"))
    assert _rounds(a, "g") == ["r1", "r2", "r3", "r4", "r5"]
    assert time.monotonic() - began < 45  # served, not waiting out anybody
    for each in (locker, *shells):
        assert each.unharmed(), f"bystander {each.name!r} was harmed (exit {each.proc.poll()})"
    (state.parent / "stop").touch()
    out, _ = locker.proc.communicate(timeout=30)
    assert locker.proc.returncode == 0
    held = json.loads(out.strip().splitlines()[-1])
    assert any("/epoch." in f or f.split("/")[-1].startswith("epoch.") for f in held), held
    assert any(f.startswith("tokens.d") for f in held), held
    assert any(os.path.basename(f).startswith("lease.") for f in held), held
    for each in shells:
        assert each.unharmed()
        each.end()


@pytest.mark.req("JF-STORE-047")
def test_a_lock_of_decision_r120_held_by_a_bystander_refuses_at_once_naming_it(
    scene: Any,
) -> None:
    """A store's folder held exclusively by another program: its game is refused with
    `store_locked` naming that folder, at once; the other games are served; the holder lives."""
    state, driver, bystander = scene
    a = driver("a")
    _ok(a.call("create_game", {"game": "g"}))
    _ok(a.call("create_game", {"game": "h"}))
    _ok(a.call("release_game", {"game": "g"}))
    store = state / ("game-" + b"g".hex()) / "store"
    flock = shutil.which("flock")
    if flock is None:
        pytest.skip("util-linux flock(1) is not installed")
    holder = bystander([flock, "-n", "-x", str(store), "sleep", "300"])
    deadline = time.monotonic() + 30
    b = driver("b")
    while True:
        refused = b.call("open_game", {"game": "g"})
        if not refused["ok"] or time.monotonic() > deadline:
            break
        _ok(b.call("release_game", {"game": "g"}))  # flock(1) had not locked it yet
        time.sleep(0.1)
    assert not refused["ok"] and refused["error"]["code"] == "store_locked", refused
    assert str(store) in refused["error"]["message"]
    _ok(_record(a, "h", "h1"))  # the rest is served
    assert holder.unharmed()
