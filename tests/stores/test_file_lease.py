"""The file store in a directory that several processes share (decisions R95, R173):
ownership epochs, leases and fencing tokens in files, judged with real processes and real
`kill -9` (`shared_file_worker.py` owns one game per process).

JF-STORE-010 (one owner, tokens from one sequence never reused), JF-STORE-011 (a second open
refused while the lease lives, no lock held between writes), JF-STORE-012 (a takeover fences
a living owner), JF-STORE-013 (a fenced write writes nothing), JF-STORE-014 (a killed
owner's write in flight whole or absent, nothing acknowledged lost), JF-STORE-033 (a frozen
owner delays no takeover, a plain open only its lease). The frozen owner at every step of
its writes and the racing opens are in `test_file_epochs.py`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from file_workers import WAIT, Worker, stopped

from jfsm.errors import StoreCorrupted, StoreFenced, StoreLocked
from jfsm.projection import Projection
from jfsm.stores.file.epochs import epochs_of
from jfsm.stores.file.lease import LeaseRecord, write_lease_at
from jfsm.stores.file.ownership import current_lease
from jfsm.stores.file.store import FileStore
from jfsm.stores.file.tokens import next_token


def _files(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def test_a_second_process_is_refused_while_the_lease_lives_and_its_owner_id_reclaims(
    tmp_path: Path, file_workers: Callable[..., Worker]
) -> None:
    a, b = file_workers(tmp_path, "g", "a"), file_workers(tmp_path, "g", "b")
    first = a.ask("open")
    assert first["ok"] and first["token"] >= 1
    assert a.ask("commit k1") == {"ok": True}
    assert b.ask("open") == {"ok": False, "code": "store_locked"}
    assert a.ask("commit k2") == {"ok": True}  # the refused open changed nothing
    again = file_workers(tmp_path, "g", "a")  # a restarted `a`: the same owner id (R61)
    reclaimed = again.ask("open")
    assert reclaimed["ok"] and reclaimed["token"] > first["token"]
    assert again.ask("keys") == {"keys": ["k1", "k2"]}
    assert a.ask("commit k3") == {"ok": False, "code": "store_fenced"}


def test_a_takeover_fences_a_living_owner_whose_commit_writes_nothing(
    tmp_path: Path, file_workers: Callable[..., Worker]
) -> None:
    a, b = file_workers(tmp_path, "g", "a"), file_workers(tmp_path, "g", "b")
    token_a = a.ask("open")["token"]
    assert a.ask("commit k1") == {"ok": True}
    taken = b.ask("takeover")
    assert taken["ok"] and taken["token"] > token_a
    before = _files(tmp_path / "g" / "store")
    assert a.ask("commit k2") == {"ok": False, "code": "store_fenced"}
    assert a.ask("commit k3") == {"ok": False, "code": "store_fenced"}  # fenced for good
    assert _files(tmp_path / "g" / "store") == before  # not a byte written
    assert b.ask("commit k4") == {"ok": True}
    assert a.ask("close") == {"ok": True}  # a fenced close trims nothing of the new owner's
    assert b.ask("close") == {"ok": True}
    c = file_workers(tmp_path, "g", "c")
    assert c.ask("open")["ok"]  # b's close ended its lease at once
    assert c.ask("keys") == {"keys": ["k1", "k4"]}


@pytest.mark.slow
def test_a_killed_owner_loses_nothing_acknowledged_and_its_lease_runs_out(
    tmp_path: Path, file_workers: Callable[..., Worker]
) -> None:
    a = file_workers(tmp_path, "g", "a", 5.0)
    assert a.ask("open")["ok"]
    a.send("commits 100000")
    while a.next()["ack"] < 30:
        pass
    a.kill()  # in the middle of a commit, most likely
    acknowledged = {f"n{answer['ack']}" for answer in a.answers if "ack" in answer}
    b = file_workers(tmp_path, "g", "b", 5.0)
    assert b.ask("open") == {"ok": False, "code": "store_locked"}  # its lease still lives
    deadline = time.monotonic() + WAIT
    while not (opened := b.ask("open"))["ok"]:  # until the lease runs out
        assert opened["code"] == "store_locked" and time.monotonic() < deadline, opened
        time.sleep(0.2)
    keys = b.ask("keys")["keys"]
    assert acknowledged <= set(keys)
    assert sorted(keys, key=lambda k: int(k[1:])) == [f"n{i}" for i in range(len(keys))]
    assert len(keys) - len(acknowledged) <= 1  # at most the commit in flight, whole
    assert b.ask("commit after") == {"ok": True}  # the torn tail was cut: writes go on


def test_no_lock_is_held_between_writes_nor_taken_by_a_write(
    tmp_path: Path, file_workers: Callable[..., Worker]
) -> None:
    """Another program holding an exclusive `flock` on every file of the game's store
    (except the lock file of decision R120) changes nothing: the owner writes, a takeover
    completes, the fenced owner is refused, nothing waits."""
    a = file_workers(tmp_path, "g", "a")
    assert a.ask("open")["ok"]
    assert a.ask("commit k1") == {"ok": True}
    store = tmp_path / "g" / "store"
    held = []
    try:
        for path in sorted(store.iterdir()):
            if path.name != "lock":
                fd = os.open(path, os.O_RDONLY)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError if a held it
                held.append(fd)
        assert a.ask("commit k2") == {"ok": True}  # a's write takes no lock
        b = file_workers(tmp_path, "g", "b")
        assert b.ask("takeover")["ok"]  # a living, idle owner blocks no takeover
        assert a.ask("commit k3") == {"ok": False, "code": "store_fenced"}
        assert b.ask("keys") == {"keys": ["k1", "k2"]}
    finally:
        for fd in held:
            os.close(fd)


def test_tokens_never_repeat_across_processes_and_removal(tmp_path: Path) -> None:
    script = (
        "import sys; from jfsm.stores.file.tokens import next_token\n"
        "print(' '.join(str(next_token(sys.argv[1])) for _ in range(40)))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE)
        for _ in range(3)
    ]
    tokens = [int(t) for p in procs for t in p.communicate(timeout=WAIT)[0].split()]
    assert sorted(tokens) == list(range(1, 121))  # one sequence, no token twice, no gap

    def open_game() -> FileStore:
        folder = tmp_path / "g"
        folder.mkdir(exist_ok=True)
        return FileStore.open_shared(
            folder / "store", game="g", lease_folder=folder, root=tmp_path, owner="x"
        )

    seen: list[int] = []
    for _ in range(3):  # made, used, removed, made again under the same id
        store = open_game()
        assert store.token is not None
        seen.append(store.token)
        store.commit_sync(Projection.of({"k": 1}))
        store.close_sync()
        shutil.rmtree(tmp_path / "g")
    assert seen == sorted(seen) and len(set(seen)) == 3 and min(seen) > 120
    assert next_token(str(tmp_path)) > max(seen)


def test_a_store_of_a_removed_and_remade_game_is_fenced(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    folder.mkdir()
    kwargs: dict[str, Any] = {"game": "g", "lease_folder": folder, "root": tmp_path}
    old = FileStore.open_shared(folder / "store", owner="a", **kwargs)
    token = old.token
    shutil.rmtree(folder)
    folder.mkdir()
    new = FileStore.open_shared(folder / "store", owner="a", **kwargs)
    with pytest.raises(StoreFenced):  # its lease file is gone: never writes into the new game
        old.commit_sync(Projection.of({"k": 1}))
    assert old.state == "fenced" and new.token is not None and token is not None
    new.commit_sync(Projection.of({"k": 2}))
    old.close_sync()
    new.close_sync()


def test_a_lease_of_an_earlier_boot_is_over(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    folder.mkdir()
    kwargs: dict[str, Any] = {"game": "g", "lease_folder": folder, "root": tmp_path}
    store = FileStore.open_shared(folder / "store", owner="a", **kwargs)
    with pytest.raises(StoreLocked):
        FileStore.open_shared(folder / "store", owner="b", **kwargs)
    record = current_lease(folder / "store")
    assert record is not None and record.owner == "a" and record.live()
    dir_fd = os.open(folder / "store", os.O_RDONLY)
    try:  # as if the host had rebooted since
        write_lease_at(dir_fd, LeaseRecord("a", record.token, "another-boot", record.until))
    finally:
        os.close(dir_fd)
    other = FileStore.open_shared(folder / "store", owner="b", **kwargs)
    assert other.token is not None and other.token > record.token
    with pytest.raises(StoreFenced):
        store.commit_sync(Projection.of({"k": 1}))
    other.close_sync()
    store.close_sync()


def test_a_failed_takeover_changes_no_owner(tmp_path: Path) -> None:
    """A takeover that finds the owner's log damaged is refused before it seals anything:
    the owner goes on writing."""
    folder = tmp_path / "g"
    folder.mkdir()
    kwargs: dict[str, Any] = {"game": "g", "lease_folder": folder, "root": tmp_path}
    store = FileStore.open_shared(folder / "store", owner="a", **kwargs)
    store.commit_sync(Projection.of({"k1": 1}))
    store.commit_sync(Projection.of({"k1b": 1}))
    (log,) = epochs_of(os.listdir(folder / "store"))[store.token or 0].logs.values()
    path = folder / "store" / log
    data = path.read_bytes()
    at = data.index(b'"k1"')
    path.write_bytes(data[:at] + b"X" + data[at + 1 :])  # damage before a valid record
    with pytest.raises(StoreCorrupted):
        FileStore.open_shared(folder / "store", owner="b", takeover=True, **kwargs)
    record = current_lease(folder / "store")
    assert record is not None and (record.owner, record.token) == ("a", store.token)
    store.commit_sync(Projection.of({"k2": 2}))  # still the owner: nothing changed
    store.close_sync()
    damaged = path.read_bytes()
    path.write_bytes(damaged[:at] + b'"' + damaged[at + 1 :])
    again = FileStore.open_shared(folder / "store", owner="b", **kwargs)
    assert sorted(again.image.keys()) == ["k1", "k1b", "k2"]
    again.close_sync()


@pytest.mark.req("JF-STORE-033", "JF-STORE-045")
@pytest.mark.parametrize("takeover", [True, False], ids=["takeover", "plain-open"])
def test_an_owner_frozen_mid_write_delays_a_takeover_not_at_all_and_a_plain_open_its_lease(
    tmp_path: Path, file_workers: Callable[..., Worker], takeover: bool
) -> None:
    """An owner stopped (SIGSTOP) between its write and its sync: a takeover completes while
    it is still stopped, a plain open once its lease (1 s) is over; nobody signals it. When
    it is continued, its write counts only as the new owner read it: landed before the
    seal, it is acknowledged and in the new owner's store."""
    a = file_workers(tmp_path, "g", "a", 1.0)
    token = a.ask("open")["token"]
    assert a.ask("commit k1") == {"ok": True}
    assert a.ask("arm write:appended") == {"ok": True}
    a.send("commit k2")
    deadline = time.monotonic() + WAIT
    while not stopped(a.proc.pid):
        assert time.monotonic() < deadline, "the owner never stopped"
        time.sleep(0.01)
    b = file_workers(tmp_path, "g", "b", 1.0)
    while True:  # answered while `a` is still stopped (Worker.next bounds each wait)
        opened = b.ask("takeover" if takeover else "open")
        if opened["ok"]:
            break
        assert not takeover and opened["code"] == "store_locked", opened
        time.sleep(0.1)
    assert opened["token"] > token
    assert stopped(a.proc.pid) and a.proc.poll() is None  # never ended, still stopped
    keys = b.ask("keys")["keys"]
    assert keys == ["k1", "k2"]  # its bytes came before the seal: read by the new owner
    a.proc.send_signal(signal.SIGCONT)  # the test's own child
    assert a.next() == {"ok": True}  # and so acknowledged
    assert a.ask("commit k3") == {"ok": False, "code": "store_fenced"}
    assert b.ask("commit k4") == {"ok": True}
    assert b.ask("keys")["keys"] == ["k1", "k2", "k4"]


def test_a_closed_store_is_unlocked_while_a_started_process_holds_copies_of_its_locks(
    tmp_path: Path,
) -> None:
    """A process forked while a store is open (any subprocess being started) holds copies of
    the lock's descriptors until it execs; closing the store releases the lock all the same
    (`flock` LOCK_UN), so the store opens again at once instead of `store_locked`."""
    from jfsm.stores.file import fsio

    fs = fsio.OsFileSystem()
    directory = str(tmp_path / "store")
    fs.makedirs(directory)
    handle = fs.lock(directory)
    held = [handle, *fsio._COMPANIONS[handle]]  # what a fork copies: every descriptor
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        pass_fds=held,
    )
    try:
        fs.unlock(handle)
        again = fs.lock(directory)  # BlockingIOError while the child's copies held it
        fs.unlock(again)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
    assert child.returncode == 0
