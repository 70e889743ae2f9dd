"""`jfsm driver --state DIR --shared`: several real driver processes on one state directory,
one owner a game (decision R95), judged over stdio with real `kill -9`.

JF-STORE-010..014 as the workers machine sees them (`open_game`, `release_game`, fenced
writes, a killed owner reclaimed by its owner id, R61), plus what the driver keeps beside
the store: participants written as the owner, games never adopted from another process.
"""

from __future__ import annotations

import errno
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


def _participants_held(state: Path, game: str) -> Any:
    """The game's participants as its store's files hold them now (its side value, R173)."""
    from jfsm.image import QUOTA_BYTES
    from jfsm.stores.file.directory import read_contents

    store = state / ("game-" + game.encode().hex()) / "store"
    contents = read_contents(
        str(store), os.listdir(store), lambda p: Path(p).read_bytes(), quota=QUOTA_BYTES
    )
    assert contents.epoch is not None
    return json.loads(contents.epoch.sides["participants"])


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
    saved = _participants_held(tmp_path / "state", "g")
    assert saved == PEOPLE
    assert _code(_record(a, "g", "fenced")) == "store_fenced"
    changed = {"game": "g", "participants": [*PEOPLE, dict(PEOPLE[0], id="p-2")]}
    assert _code(a.call("set_participants", changed)) == "store_fenced"
    assert _participants_held(tmp_path / "state", "g") == saved  # participants untouched
    assert _rounds(b, "g") == ["r1"]
    assert _record(b, "g", "r2")["result"]["round"] == 2
    released = b.call("release_game", {"game": "g"})
    assert released["ok"] and released["result"] == {}
    reopened = a.call("open_game", {"game": "g"})  # released: a plain open succeeds at once
    assert reopened["ok"] and reopened["result"]["token"] > taken["result"]["token"]
    assert _rounds(a, "g") == ["r1", "r2"]


@pytest.mark.slow
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
        ["lock.shared", "tokens.d"] + ["game-" + g.encode().hex() for g in ("g", "h", "h2")]
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


@pytest.mark.slow
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


# -- issue 30: the edges ------------------------------------------------------------------------
def _start_cli(state: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    """`jfsm driver --state STATE EXTRA...` with nothing on stdin: it either refuses at once
    (exit 2, one line) or serves until the end of its input (exit 0)."""
    return subprocess.run(
        [sys.executable, "-m", "jfsm.cli", "driver", "--state", str(state), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        input="",  # a pipe at its end (a /dev/null stdin cannot be polled by the event loop)
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
@pytest.mark.req("JF-STORE-034")
@pytest.mark.parametrize("idle", [False, True], ids=["open", "closed-as-idle"])
def test_a_shared_driver_is_refused_on_a_directory_a_plain_driver_serves(
    tmp_path: Path, idle: bool
) -> None:
    state = tmp_path / "state"
    plain = StdioDriver(state)
    try:
        assert plain.call("hello", HELLO)["ok"]
        assert plain.call("create_game", {"game": "g"})["ok"]
        assert _record(plain, "g", "r1")["ok"]
        for n in range(9 if idle else 0):  # past max_open (8): g is closed as idle
            assert plain.call("create_game", {"game": f"other{n}"})["ok"]
        run = _start_cli(state, "--shared", "--owner", "s")
        assert run.returncode == 2, run
        assert len(run.stderr.splitlines()) == 1 and "without --shared" in run.stderr
        assert _record(plain, "g", "r2")["result"]["round"] == 2
        assert _rounds(plain, "g") == ["r1", "r2"]
    finally:
        plain.kill()


@pytest.mark.slow
@pytest.mark.req("JF-STORE-034", "JF-STORE-050")
def test_a_plain_driver_is_refused_on_a_directory_a_shared_driver_serves(
    tmp_path: Path, drivers: Any
) -> None:
    drivers("a")  # serving, no game made yet: no token counter
    run = _start_cli(tmp_path / "state")
    assert run.returncode == 2, run
    assert len(run.stderr.splitlines()) == 1 and "served by shared drivers" in run.stderr


@pytest.mark.req("JF-STORE-034")
@pytest.mark.parametrize("what", ["lock.shared", "a store's lock", "telemetry"])
def test_a_file_another_process_makes_between_open_and_create_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """Shared drivers starting at once all serve (R239): the file that one of them opens or
    creates (`lock.shared`, a store's `lock`, a game's telemetry) made by another process
    between its open and its exclusive create is opened, never refused with `EEXIST`
    (CI's stop 43: a driver exited "File exists" beside three others)."""
    from jfsm.driver.state import SHARED_LOCK, StateDirectory
    from jfsm.stores.file.fsio import open_file

    real = os.open
    made: list[str] = []

    def racing(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if flags & os.O_CREAT or made:
            return real(path, flags, mode, dir_fd=dir_fd)
        try:
            return real(path, flags, mode, dir_fd=dir_fd)
        except FileNotFoundError:  # another process makes it now, then this one creates
            os.close(real(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd))
            made.append(os.fsdecode(path))
            raise

    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    if what == "lock.shared":
        directory = StateDirectory(root)
        monkeypatch.setattr(os, "open", racing)
        directory.hold_mode(shared=True)
        monkeypatch.undo()
        assert made == [SHARED_LOCK]
    else:
        name = str(root / ("lock" if what == "a store's lock" else "telemetry.jsonl"))
        monkeypatch.setattr(os, "open", racing)
        fd = open_file(name, "append", create=True)
        monkeypatch.undo()
        os.close(fd)
        assert made == [name]
    link = root / "link"
    link.symlink_to(root / "elsewhere")
    with pytest.raises(OSError) as refused:  # a link is still refused, never followed
        open_file(link, "append", create=True)
    assert refused.value.errno == errno.ELOOP and not (root / "elsewhere").exists()


@pytest.mark.req("JF-STORE-034", "JF-STORE-050")
def test_plain_and_shared_stores_of_one_game_exclude_each_other_in_either_order(
    tmp_path: Path,
) -> None:
    """Below the drivers: a store of one process (exclusive lock for its life) and a store of
    a shared directory (its lock held shared for its life) never write one game together,
    whichever opened first, including after the plain one closed it as idle."""
    from jfsm.errors import StoreLocked
    from jfsm.projection import Projection
    from jfsm.stores.file.store import FileStore

    folder = tmp_path / "g"
    folder.mkdir()
    kwargs: dict[str, Any] = {"game": "g", "lease_folder": folder, "root": tmp_path, "owner": "s"}
    plain = FileStore.open_sync(folder / "store")
    with pytest.raises(StoreLocked):
        FileStore.open_shared(folder / "store", **kwargs)
    plain.commit_sync(Projection.of({"k1": 1}))
    plain.close_sync()  # closed as idle by a plain driver
    shared = FileStore.open_shared(folder / "store", **kwargs)
    with pytest.raises(StoreLocked):  # the plain driver reopening it
        FileStore.open_sync(folder / "store")
    shared.commit_sync(Projection.of({"k2": 2}))
    shared.close_sync()
    again = FileStore.open_sync(folder / "store")
    assert sorted(again.image.keys()) == ["k1", "k2"]
    again.close_sync()


@pytest.mark.req("JF-STORE-030")
def test_a_superseded_owner_answers_store_fenced_to_reads(tmp_path: Path, drivers: Any) -> None:
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert _record(a, "g", "r1")["ok"]
    assert b.call("open_game", {"game": "g", "takeover": True})["ok"]
    assert _record(b, "g", "r2")["ok"]
    for op in ("dump", "telemetry", "generate", "checkpoint"):
        reply = a.call(op, {"game": "g"})
        assert _code(reply) == "store_fenced", (op, reply)
        assert "result" not in reply
    assert _code(a.call("write", {"game": "g", "sets": {}})) == "store_fenced"  # writes nothing
    assert _rounds(b, "g") == ["r1", "r2"]
    assert a.call("release_game", {"game": "g"})["ok"]
    assert _code(a.call("dump", {"game": "g"})) == "store_locked"  # not held: a plain open


@pytest.mark.req("JF-STORE-036")
def test_an_op_on_a_game_not_held_opens_it_plainly(tmp_path: Path, drivers: Any) -> None:
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert a.call("release_game", {"game": "g"})["ok"]
    released = b.call("release_game", {"game": "g"})  # not held: {} all the same
    assert released["ok"] and released["result"] == {}
    assert _rounds(b, "g") == []  # b now owns it
    assert _code(a.call("dump", {"game": "g"})) == "store_locked"
    assert _code(_record(a, "g", "x")) == "store_locked"  # doing nothing
    assert b.call("release_game", {"game": "g"})["ok"]
    assert _record(a, "g", "r1")["result"]["round"] == 1  # released: opened and run
    assert _rounds(a, "g") == ["r1"]


@pytest.mark.req("JF-STORE-036", "JF-STORE-030")
def test_a_refused_open_game_leaves_the_process_holding_nothing(
    tmp_path: Path, drivers: Any
) -> None:
    """A superseded owner whose plain `open_game` is refused holds nothing of the game any
    more (issue 39, R204): its next op opens the game plainly (`store_locked` while the new
    owner's lease lives), never `store_fenced` from the ownership it dropped; once the new
    owner released it, that op runs on the game as the store holds it."""
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert _record(a, "g", "r1")["ok"]
    assert b.call("open_game", {"game": "g", "takeover": True})["ok"]
    assert _record(b, "g", "r2")["ok"]
    assert _code(a.call("dump", {"game": "g"})) == "store_fenced"  # still holds: superseded
    assert _code(a.call("open_game", {"game": "g"})) == "store_locked"
    for op in ("dump", "telemetry", "generate"):
        assert _code(a.call(op, {"game": "g"})) == "store_locked", op  # holds nothing
    assert _code(_record(a, "g", "x")) == "store_locked"
    assert b.call("release_game", {"game": "g"})["ok"]
    assert _rounds(a, "g") == ["r1", "r2"]  # opened plainly: the store as b left it


@pytest.mark.req("JF-STORE-036", "JF-STORE-030")
def test_a_second_hello_duplicate_and_forget_games_hold_what_the_page_says(
    tmp_path: Path, drivers: Any
) -> None:
    """The rows of "What a process holds" (R204) for a second `hello` (what it held before),
    `duplicate` (`into` held too, with a token of its own) and `forget_games` (nothing of
    the games named: their leases end, and an op on them opens them plainly)."""
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert _record(a, "g", "r1")["ok"]
    assert a.call("hello", HELLO)["ok"]
    assert _code(b.call("open_game", {"game": "g"})) == "store_locked"  # a still holds g
    assert _record(a, "g", "r2")["ok"]
    assert a.call("duplicate", {"game": "g", "into": "h"})["ok"]
    assert _code(b.call("open_game", {"game": "h"})) == "store_locked"  # a holds h
    assert b.call("open_game", {"game": "h", "takeover": True})["ok"]
    assert _code(a.call("dump", {"game": "h"})) == "store_fenced"  # held, superseded
    assert _rounds(a, "g") == ["r1", "r2"]  # g is a's still: h's token is its own
    assert a.call("forget_games", {"games": ["g", "h"]})["ok"]
    assert _code(a.call("dump", {"game": "h"})) == "store_locked"  # holds nothing of h
    assert b.call("open_game", {"game": "g"})["ok"]  # g's lease ended with the forget
    assert _rounds(b, "g") == _rounds(b, "h") == ["r1", "r2"]


@pytest.mark.req("JF-STORE-030")
def test_a_superseded_owner_answers_its_own_refusals_store_fenced(
    tmp_path: Path, drivers: Any
) -> None:
    """An op a current owner refuses for a reason of its own (an `edit_round` of a round its
    memory lacks) is answered `store_fenced` by a superseded owner, which would otherwise
    show its stale copy (R238): a's copy has one round, the game two."""
    a, b = drivers("a"), drivers("b")
    assert a.call("create_game", {"game": "g"})["ok"]
    assert _record(a, "g", "r1")["ok"]
    edit = {"game": "g", "round": 2, "input": "e", "output": "e"}
    assert _code(a.call("edit_round", edit)) == "invalid_input"  # current: its own refusal
    assert b.call("open_game", {"game": "g", "takeover": True})["ok"]
    assert _record(b, "g", "r2")["ok"]
    assert _code(a.call("edit_round", edit)) == "store_fenced"
    assert _code(a.call("edit_round", {**edit, "round": 9})) == "store_fenced"
    assert b.call("edit_round", edit)["ok"]
    assert _rounds(b, "g") == ["r1", "e"]


BAD_OWNERS = {
    "empty": "",
    "blank": " ",
    "space": "a b",
    "newline": "a\nb",
    "tab": "tab\there",
    "64KiB": "x" * 65536,
    "non-ascii": "é",
    "dash": "-leading",
    "slash": "a/b",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("owner", "how"),
    [
        pytest.param(owner, how, id=f"{name}-{how}")
        for name, owner in BAD_OWNERS.items()
        for how in ("--owner", "JFSM_OWNER")
        if owner or how == "--owner"  # an empty JFSM_OWNER is an unset one: an id per process
    ],
)
def test_an_owner_id_is_checked_at_start(tmp_path: Path, owner: str, how: str) -> None:
    if how == "--owner":
        run = _start_cli(tmp_path / "state", "--shared", f"--owner={owner}")
    else:
        run = _start_cli(tmp_path / "state", "--shared", env={"JFSM_OWNER": owner})
    assert run.returncode == 2, run
    assert len(run.stderr.splitlines()) == 1 and how in run.stderr, run.stderr
    assert len(run.stderr) < 300  # never the whole value
    assert not (tmp_path / "state").exists()  # refused before anything was made


def test_a_usable_owner_id_is_accepted(tmp_path: Path) -> None:
    run = _start_cli(tmp_path / "state", "--shared", "--owner", "pod-7.worker_2:host@az-1")
    assert run.returncode == 0, run


@pytest.mark.req("JF-STORE-035", "JF-STORE-051")
def test_a_killed_creators_folders_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    import fcntl

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    dead, held, young = (state / f".new-{n}-0000" for n in ("dead", "held", "young"))
    for folder in (dead, held, young):
        (folder / "store").mkdir(parents=True)
        (folder / "participants.json").write_text("[]")
    old = time.time() - 3600
    for folder in (dead, held):
        os.utime(folder, (old, old))
    fd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # its creator is filling it
        driver = StdioDriver(state, extra=("--shared", "--owner", "a"))
        try:
            assert driver.call("hello", HELLO)["ok"]
            assert driver.call("create_game", {"game": "g"})["ok"]
        finally:
            driver.kill()
        assert not dead.exists()
        assert not young.exists()  # nobody holds it: gone whatever its age (R233)
        assert held.exists()
    finally:
        os.close(fd)


@pytest.mark.req("JF-STORE-036")
def test_a_game_never_opened_shared_is_opened_plainly_by_the_first_op(
    tmp_path: Path, drivers: Any
) -> None:
    """A game a plain driver made (no lease file) has no owner that lives: the first op of a
    shared driver naming it opens it plainly, and a second shared driver is then refused."""
    state = tmp_path / "state"
    plain = StdioDriver(state)
    try:
        assert plain.call("hello", HELLO)["ok"]
        assert plain.call("create_game", {"game": "g"})["ok"]
        assert _record(plain, "g", "r1")["ok"]
    finally:
        plain.kill()
    a, b = drivers("a"), drivers("b")
    assert _rounds(a, "g") == ["r1"]
    assert _code(b.call("dump", {"game": "g"})) == "store_locked"
    assert _record(a, "g", "r2")["result"]["round"] == 2
