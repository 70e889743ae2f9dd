"""Ownership epochs of a shared directory (decision R173), at every step.

- The format: what a reader makes of vetoes, seals, torn tails and damage
  (`jfsm.stores.file.epochs`).
- A frozen owner (JF-STORE-033, JF-STORE-045, JF-STORE-046): a real process stopped with
  `SIGSTOP` at each named point of its write, side value, checkpoint and open
  (`jfsm.stores.file.ownership.WRITE_STEPS`, `CHECKPOINT_STEPS`, `TAKE_STEPS`), the game
  taken over from this process while it is stopped (the takeover never waits for it), then
  continued: its write is acknowledged only if the new owner read it, and nothing else of
  it is visible; nobody signals it but this test.
- Racing opens (JF-STORE-049): two opens in threads, stopped at each of their steps, run at
  every interleaving: never two owners that both land writes, two plain opens never both
  succeed, the winner's token above every earlier one, every acknowledged write kept.
- A removed game (JF-STORE-048), the migration of a directory an older jfsm shared (R175),
  the token sequence (R174).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from file_workers import WAIT, Worker

from jfsm.errors import StoreCorrupted, StoreFenced, StoreLocked
from jfsm.image import QUOTA_BYTES
from jfsm.jcs import canonical_bytes
from jfsm.projection import Projection
from jfsm.stores.file import epochs
from jfsm.stores.file.directory import read_contents
from jfsm.stores.file.lease import LeaseRecord, write_lease_at
from jfsm.stores.file.log import encode_record
from jfsm.stores.file.manifest import decode_manifest, encode_epochs_marker
from jfsm.stores.file.ownership import (
    CHECKPOINT_STEPS,
    TAKE_STEPS,
    WRITE_STEPS,
    current_lease,
    remove_store,
)
from jfsm.stores.file.store import FileStore
from jfsm.stores.file.tokens import KEEP, TOKENS_DIR, drawn, next_token


# -- the format ------------------------------------------------------------------------------
def _log(*parts: bytes) -> bytes:
    return b"".join(parts)


HEADER = epochs.encode_header(epochs.EpochHeader(7, 0, None, {}, "0123456789abcdef"))


def _record(key: str) -> bytes:
    return encode_record(Projection.of({key: 1}))


def _parse(data: bytes) -> epochs.EpochLog:
    return epochs.parse_log("/s/epoch.7.0", data, 7, 0)


def _keys(log: epochs.EpochLog) -> list[str]:
    return sorted(k for e in log.entries if isinstance(e, Projection) for k in e.sets)


def test_a_log_is_read_up_to_its_first_seal_and_vetoes_after_its_header_change_nothing() -> None:
    data = _log(
        HEADER,
        _record("a"),
        epochs.veto_record(9),
        _record("b"),
        epochs.seal_record(9),
        _record("void"),  # a frozen owner's write after the seal: for no reader
        epochs.seal_record(10),
    )
    log = _parse(data)
    assert log.begins == "header" and _keys(log) == ["a", "b"]
    assert log.sealed == len(HEADER) + 2 * len(_record("a")) + epochs.FOREIGN_SIZE


def test_how_a_log_begins_decides_whether_its_epoch_is_established() -> None:
    assert _parse(b"").begins == "empty"
    assert _parse(epochs.veto_record(9) + HEADER).begins == "foreign"  # vetoed: never
    assert _parse(HEADER[:10]).begins == "torn"  # being written, or its writer died
    assert _parse(HEADER + epochs.veto_record(9)).begins == "header"
    with_initial = epochs.encode_header(
        epochs.EpochHeader(7, 0, None, {}, "0123456789abcdef", len(_record("a")))
    )
    assert _parse(with_initial + _record("a")[:-1]).begins == "torn"  # the initial is not whole
    whole = _parse(with_initial + _record("a"))
    assert whole.begins == "header" and whole.initial is not None
    with pytest.raises(StoreCorrupted):  # a header of another log
        epochs.parse_log("/s/epoch.8.0", HEADER, 8, 0)


def test_a_torn_tail_is_dropped_and_damage_before_a_valid_record_is_refused() -> None:
    torn = _record("b")[:-3]
    log = _parse(_log(HEADER, _record("a"), torn))
    assert _keys(log) == ["a"] and log.torn and log.sealed is None
    sealed = _parse(_log(HEADER, _record("a"), torn, epochs.seal_record(9)))
    assert _keys(sealed) == ["a"] and sealed.sealed is not None  # a killed writer, then a seal
    damaged = bytearray(_log(HEADER, _record("a"), _record("b")))
    damaged[len(HEADER) + 20] ^= 0xFF
    with pytest.raises(StoreCorrupted) as refused:
        _parse(bytes(damaged))
    assert refused.value.details["offset"] == len(HEADER)
    with pytest.raises(StoreCorrupted):  # a taker's seal after it changes nothing of that
        _parse(bytes(damaged) + epochs.seal_record(9))
    # an owner that found foreign bytes it could not read seals its own epoch after its
    # void write: the bytes from the garbage on count for no reader
    given_up = _parse(
        _log(HEADER, _record("a"), epochs.seal_record(9)[:5], _record("x"), epochs.seal_record(7))
    )
    assert _keys(given_up) == ["a"]


def test_a_continuation_ends_a_log_and_nothing_of_the_owner_may_follow_it() -> None:
    log = _parse(_log(HEADER, _record("a"), epochs.encode_continued(1), epochs.seal_record(9)))
    assert log.continued == 1 and _keys(log) == ["a"]
    with pytest.raises(StoreCorrupted):
        _parse(_log(HEADER, epochs.encode_continued(1), _record("b")))
    after_seal = _parse(_log(HEADER, epochs.seal_record(9), epochs.encode_continued(1)))
    assert after_seal.continued is None  # a continuation after the seal never committed


def test_foreign_bytes_are_judged_whole() -> None:
    assert epochs.foreign_verdict(epochs.veto_record(1) * 2) == "vetoes"
    assert epochs.foreign_verdict(epochs.veto_record(1) + epochs.seal_record(2)) == "sealed"
    assert epochs.foreign_verdict(epochs.seal_record(2)[:-1]) == "garbage"


# -- a frozen owner, at every step -----------------------------------------------------------
def _shared(root: Path, owner: str, **kwargs: Any) -> FileStore:
    folder = root / "g"
    folder.mkdir(exist_ok=True)
    return FileStore.open_shared(
        folder / "store", game="g", lease_folder=folder, root=root, owner=owner, **kwargs
    )


def _on_disk(root: Path) -> Any:
    """The game's store as its files hold it now: (keys, side values)."""
    store = root / "g" / "store"
    contents = read_contents(
        str(store), os.listdir(store), lambda p: Path(p).read_bytes(), quota=QUOTA_BYTES
    )
    sides = {} if contents.epoch is None else dict(contents.epoch.sides)
    return sorted(contents.image.keys()), sides


def _take_over_while_stopped(root: Path, a: Worker) -> FileStore:
    """Take the game over from this process while `a` is stopped: at once, no waiting."""
    a.wait_stopped()
    b = _shared(root, "b", takeover=True)  # returns while `a` is still stopped
    assert a.stopped() and a.proc.poll() is None
    return b


# a write stopped at a point before its bytes reach the log is void; at any later point its
# bytes are before the seal: the taker read them, and the owner's check then passes
LANDED = {
    "write:before": False,
    "write:appended": True,
    "write:synced": True,
    "write:landed": True,
    "checkpoint:before": False,
    "checkpoint:based": False,
    "checkpoint:logged": False,
    "checkpoint:appended": True,
    "checkpoint:synced": True,
    "checkpoint:landed": True,
}
assert set(LANDED) == set(WRITE_STEPS) | set(CHECKPOINT_STEPS)


@pytest.mark.req("JF-STORE-033", "JF-STORE-045", "JF-STORE-046", "JF-STORE-013")
@pytest.mark.parametrize("point", WRITE_STEPS)
@pytest.mark.parametrize("what", ["commit", "side"])
def test_an_owner_stopped_at_any_step_of_a_write_lands_it_only_if_the_taker_read_it(
    tmp_path: Path, file_workers: Callable[..., Worker], point: str, what: str
) -> None:
    a = file_workers(tmp_path, "g", "a")
    assert a.ask("open")["ok"]
    assert a.ask("commit k1") == {"ok": True}
    assert a.ask("side s [1]") == {"ok": True}
    assert a.ask(f"arm {point}") == {"ok": True}
    a.send("commit k2" if what == "commit" else "side s [2]")
    b = _take_over_while_stopped(tmp_path, a)
    read = sorted(b.image.keys()), b.side("s")
    a.proc.send_signal(signal.SIGCONT)  # our own child
    answer = a.next()
    landed = LANDED[point]
    assert answer == ({"ok": True} if landed else {"ok": False, "code": "store_fenced"})
    expected = (["k1", "k2"], b"[1]") if what == "commit" else (["k1"], b"[2]")
    assert read == (expected if landed else (["k1"], b"[1]"))  # in the taker's store iff acked
    assert a.ask("commit k3") == {"ok": False, "code": "store_fenced"}  # fenced from now on
    b.commit_sync(Projection.of({"k4": 1}))
    keys, sides = _on_disk(tmp_path)
    assert keys == sorted([*read[0], "k4"]) and sides == {"s": read[1]}  # nothing of a more
    b.close_sync()


@pytest.mark.slow
@pytest.mark.req("JF-STORE-033", "JF-STORE-046")
@pytest.mark.parametrize("point", CHECKPOINT_STEPS)
def test_an_owner_stopped_at_any_step_of_a_checkpoint_changes_nothing_after_the_takeover(
    tmp_path: Path, file_workers: Callable[..., Worker], point: str
) -> None:
    a = file_workers(tmp_path, "g", "a")
    assert a.ask("open")["ok"]
    assert a.ask("commit k1") == {"ok": True}
    assert a.ask(f"arm {point}") == {"ok": True}
    a.send("checkpoint")
    b = _take_over_while_stopped(tmp_path, a)
    assert sorted(b.image.keys()) == ["k1"]
    continued = b.image.change_log() == []  # the continuation landed before the seal
    a.proc.send_signal(signal.SIGCONT)
    answer = a.next()
    assert answer == ({"ok": True} if LANDED[point] else {"ok": False, "code": "store_fenced"})
    assert continued == LANDED[point]
    assert a.ask("commit k2") == {"ok": False, "code": "store_fenced"}
    b.commit_sync(Projection.of({"k3": 1}))
    assert _on_disk(tmp_path)[0] == ["k1", "k3"]
    b.close_sync()
    names = os.listdir(tmp_path / "g" / "store")
    assert {epochs.parse_epoch_name(n).token for n in names if epochs.parse_epoch_name(n)} == {
        b.token
    }  # a's files (its checkpoint's included) removed by the new owner, none written after


@pytest.mark.slow
@pytest.mark.req("JF-STORE-033", "JF-STORE-049")
@pytest.mark.parametrize("point", TAKE_STEPS)
def test_an_opener_stopped_at_any_step_of_its_open_never_owns_beside_the_taker(
    tmp_path: Path, file_workers: Callable[..., Worker], point: str
) -> None:
    first = _shared(tmp_path, "s")
    first.commit_sync(Projection.of({"k0": 1}))
    first.close_sync()  # released: no lease lives
    a = file_workers(tmp_path, "g", "a")
    assert a.ask(f"arm {point}") == {"ok": True}
    a.send("open")
    b = _take_over_while_stopped(tmp_path, a)
    b.commit_sync(Projection.of({"kb": 1}))
    a.proc.send_signal(signal.SIGCONT)
    opened = a.next()
    if opened["ok"]:  # established before the taker looked: then sealed by it
        assert opened["token"] < (b.token or 0)
        assert a.ask("commit ka") == {"ok": False, "code": "store_fenced"}
    else:
        assert opened["code"] == "store_locked"
    b.commit_sync(Projection.of({"kc": 1}))
    assert _on_disk(tmp_path)[0] == ["k0", "kb", "kc"]
    assert sorted(b.image.keys()) == ["k0", "kb", "kc"]
    b.close_sync()


# -- racing opens, at every interleaving -----------------------------------------------------
STOPS = ("take:drawn", "take:created", "take:scanned", "take:sealed", "take:appended")


class Paced:
    """An open run in a thread that stops at each of `STOPS` until it is let go."""

    def __init__(self, root: Path, owner: str, takeover: bool) -> None:
        self.go = threading.Semaphore(0)
        self.arrived = threading.Semaphore(0)
        self.done = False
        self.store: FileStore | None = None
        self.error: BaseException | None = None

        def step(point: str) -> None:
            if point in STOPS:
                self.arrived.release()
                self.go.acquire()

        def run() -> None:
            self.go.acquire()  # the first segment: the draw of its token
            try:
                self.store = _shared(root, owner, takeover=takeover, step=step)
            except BaseException as exc:
                self.error = exc
            self.done = True
            self.arrived.release()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def advance(self) -> None:
        """Run to its next stop (or its end)."""
        if self.done:
            return
        self.go.release()
        assert self.arrived.acquire(timeout=WAIT), "an open never reached its next stop"


def _interleavings() -> list[str]:
    n = len(STOPS) + 1  # segments of one open
    return [
        "".join("A" if i in chosen else "B" for i in range(2 * n))
        for chosen in map(set, itertools.combinations(range(2 * n), n))
    ]


@pytest.mark.slow
@pytest.mark.req("JF-STORE-049", "JF-STORE-010", "JF-STORE-011", "JF-STORE-012")
@pytest.mark.parametrize("takeover", [True, False], ids=["takeovers", "plain-opens"])
def test_two_racing_opens_at_every_interleaving_leave_one_owner(
    tmp_path: Path, takeover: bool
) -> None:
    """Every interleaving of two opens' segments (from its draw to its next stop), on a
    memory file system where there is one (the order of the steps is what is judged)."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else str(tmp_path)
    outcomes: dict[str, int] = {}
    for order in _interleavings():
        root = Path(tempfile.mkdtemp(dir=base, prefix="jfsm-race-"))
        try:
            outcome = _race(root, order, takeover)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert len(outcomes) >= 2, outcomes  # the interleavings reach different outcomes


def _race(root: Path, order: str, takeover: bool) -> str:
    """Two opens of a game whose owner is alive and idle, its lease over; returns how many
    opens succeeded and which one owns the game in the end."""
    first = _shared(root, "s")
    first.commit_sync(Projection.of({"k0": 1}))
    first_token = first.token or 0
    assert first.fence is not None
    write_lease_at(first.fence.store_fd, LeaseRecord("s", first_token, "", 0.0))
    racers = {"A": Paced(root, "a", takeover), "B": Paced(root, "b", takeover)}
    for who in order:
        racers[who].advance()
    for racer in racers.values():
        racer.thread.join(WAIT)
        assert racer.done
        assert racer.error is None or isinstance(racer.error, StoreLocked), (order, racer.error)
    owners = [r.store for r in racers.values() if r.store is not None]
    assert owners, f"{order}: nobody owns the game"
    if not takeover:
        assert len(owners) == 1, f"{order}: two plain opens both succeeded"
    assert all((o.token or 0) > first_token for o in owners)
    acked = []
    for store in sorted([*owners, first], key=lambda s: s.token or 0):
        try:
            store.commit_sync(Projection.of({f"k{store.token}": 1}))
            acked.append(store.token)
        except StoreFenced:
            pass
    newest = max(owners, key=lambda s: s.token or 0)
    assert acked == [newest.token], f"{order}: writes acknowledged by {acked}"
    assert _on_disk(root)[0] == sorted(["k0", f"k{newest.token}"]), order
    for store in [*owners, first]:
        store.close_sync()
    winner = next(name for name, racer in racers.items() if racer.store is newest)
    return f"{len(owners)} opened, {winner} owns"


# -- removal, migration, tokens --------------------------------------------------------------
@pytest.mark.req("JF-STORE-048")
def test_a_removed_game_fences_its_owner_even_one_stopped_mid_write(
    tmp_path: Path, file_workers: Callable[..., Worker]
) -> None:
    a = file_workers(tmp_path, "g", "a")
    assert a.ask("open")["ok"]
    assert a.ask("commit k1") == {"ok": True}
    assert a.ask("arm write:before") == {"ok": True}
    a.send("commit k2")
    a.wait_stopped()
    remove_store(tmp_path / "g" / "store", tmp_path)  # seals it first, then removes it
    again = _shared(tmp_path, "b")  # made again under the same id
    a.proc.send_signal(signal.SIGCONT)
    assert a.next() == {"ok": False, "code": "store_fenced"}
    assert a.ask("commit k3") == {"ok": False, "code": "store_fenced"}
    assert sorted(again.image.keys()) == [] and _on_disk(tmp_path)[0] == []
    again.close_sync()


@pytest.mark.req("JF-STORE-010")
def test_a_directory_an_older_jfsm_shared_is_converted_by_its_first_open(tmp_path: Path) -> None:
    """Decision R175: the token counter `tokens`, a `lease` in the game's folder, the store in
    the single-process format. A live lease of the older format refuses a plain open; once
    over, the first open converts the store (its change log kept) and tokens go on above
    the old counter; the manifest then keeps the older format's readers out."""
    (tmp_path / "tokens").write_bytes(b"41".zfill(20) + b"\n")
    folder = tmp_path / "g"
    folder.mkdir()
    with FileStore.open_sync(folder / "store") as plain:
        plain.commit_sync(Projection.of({"k1": 1}))
        plain.checkpoint_sync()
        plain.commit_sync(Projection.of({"k2": 2}, deletes=["k1"]))
    old = LeaseRecord.starting("old", 41, 30.0)
    (folder / "lease").write_bytes(old.encode()[:-1].ljust(1023) + b"\n")
    with pytest.raises(StoreLocked, match="old"):
        _shared(tmp_path, "new")
    (folder / "lease").write_bytes(LeaseRecord("old", 41, old.boot, 0.0).encode())
    store = _shared(tmp_path, "new")
    assert (store.token or 0) > 41
    assert sorted(store.image.keys()) == ["k2"]
    assert store.image.change_log() == [
        {"key": "k1", "op": "delete"},
        {"key": "k2", "op": "set", "value": 2},
    ]
    assert not (folder / "lease").exists()
    manifest = (folder / "store" / "manifest").read_bytes()
    assert manifest == encode_epochs_marker()
    with pytest.raises(StoreCorrupted, match="format"):  # what the older reader does with it
        decode_manifest(str(folder / "store" / "manifest"), manifest)
    store.close_sync()
    assert next_token(tmp_path) > (store.token or 0)


def test_tokens_are_pruned_and_never_handed_out_twice(tmp_path: Path) -> None:
    seen = [next_token(tmp_path) for _ in range(3 * KEEP)]
    assert seen == list(range(1, 3 * KEEP + 1))
    left = sorted(int(n) for n in os.listdir(tmp_path / TOKENS_DIR))
    assert len(left) <= KEEP + 1 and left[-1] == seen[-1] == drawn(tmp_path)
    (tmp_path / TOKENS_DIR / "3").touch()  # a draw that listed long ago creates a pruned name
    assert next_token(tmp_path) == seen[-1] + 1


@pytest.mark.req("JF-STORE-015")
def test_a_takeover_keeps_the_checkpoint_base_and_the_change_log(tmp_path: Path) -> None:
    a = _shared(tmp_path, "a")
    a.commit_sync(Projection.of({"k1": 1, "k2": 2}))
    a.checkpoint_sync()
    a.commit_sync(Projection.of({"k3": 3}, deletes=["k1"]))
    a.write_side_sync("participants", canonical_bytes([{"id": "p"}]))
    b = _shared(tmp_path, "b", takeover=True)
    assert b.image.base_bytes() == a.image.base_bytes()
    assert b.image.values_bytes() == a.image.values_bytes()
    assert b.image.change_log() == a.image.change_log() != []
    assert b.image.footprint() == a.image.footprint()
    assert b.side("participants") == canonical_bytes([{"id": "p"}])
    lease = current_lease(tmp_path / "g" / "store")
    assert lease is not None and (lease.owner, lease.token) == ("b", b.token) and lease.live()
    a.close_sync()
    b.close_sync()


def test_inspect_reads_a_shared_store_as_its_latest_epoch(tmp_path: Path) -> None:
    from jfsm.inspection import examine

    a = _shared(tmp_path, "a")
    a.commit_sync(Projection.of({"k1": 1}))
    b = _shared(tmp_path, "b", takeover=True)
    report = examine(str(tmp_path / "g" / "store"))  # while both are open (locks shared)
    files = report["files"]
    assert files["format"] == "epochs" and files["epoch"] == {
        "token": b.token,
        "owner": "b",
        "leaseLive": True,
    }
    assert report["keys"] == 1 and files["tail"] is None and files["leftovers"] == []
    a.close_sync()
    b.close_sync()


@pytest.mark.parametrize("fault", ["short-append", "failed-sync"])
def test_a_write_that_may_have_half_landed_breaks_the_handle_and_the_next_open_settles_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """An owner never cuts its log back (others append to it): a short append or a failed
    sync leaves the store broken (`store_unavailable`, state `broken`); the next open reads
    the record whole (it is in the file) or drops it as a torn tail."""
    from jfsm.errors import StoreUnavailable
    from jfsm.stores.file import ownership

    a = _shared(tmp_path, "a")
    a.commit_sync(Projection.of({"k1": 1}))
    if fault == "short-append":
        real = os.write
        monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data)[: len(data) // 2]))
    else:

        def failing(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(ownership, "_fdatasync", failing)
    with pytest.raises(StoreUnavailable) as broken:
        a.commit_sync(Projection.of({"k2": 2}))
    monkeypatch.undo()
    assert broken.value.state == "broken" and a.state == "broken"
    with pytest.raises(StoreUnavailable):
        a.commit_sync(Projection.of({"k3": 3}))
    a.close_sync()
    again = _shared(tmp_path, "b")
    assert sorted(again.image.keys()) == (["k1"] if fault == "short-append" else ["k1", "k2"])
    again.commit_sync(Projection.of({"k4": 4}))
    again.close_sync()


@pytest.mark.slow
@pytest.mark.req("JF-ATOM-001")
def test_a_crash_at_any_boundary_of_a_conversion_back_loses_nothing(tmp_path: Path) -> None:
    """A process of one converting a shared store back (R175), killed at each write boundary
    of the conversion: the next open, plain or shared, finds the same store and change log."""
    from jfsm.stores.file.crashfs import CrashingFileSystem, SimulatedCrash

    def made() -> Path:
        shutil.rmtree(tmp_path / "g", ignore_errors=True)
        a = _shared(tmp_path, "a")
        a.commit_sync(Projection.of({"k1": 1, "k2": 2}))
        a.checkpoint_sync()
        a.commit_sync(Projection.of({"k3": 3}, deletes=["k1"]))
        a.close_sync()
        return tmp_path / "g" / "store"

    counting = CrashingFileSystem()
    FileStore.open_sync(made(), fs=counting).close_sync()
    points = counting.boundaries
    assert points > 8
    for at in range(points):
        store = made()
        with pytest.raises(SimulatedCrash):
            FileStore.open_sync(store, fs=CrashingFileSystem(crash_at=at)).close_sync()
        opened = FileStore.open_sync(store) if at % 2 else _shared(tmp_path, "b", takeover=True)
        assert opened.image.values_bytes() == {"k2": b"2", "k3": b"3"}, at
        assert opened.image.change_log() == [
            {"key": "k1", "op": "delete"},
            {"key": "k3", "op": "set", "value": 3},
        ], at
        opened.close_sync()
