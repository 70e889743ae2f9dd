"""Crash safety of the durable file store (decision D12).

- **Every crash point, process death.** A deterministic workload runs over a file-system
  layer that numbers every boundary around a mutating call (before and after each create,
  write, fsync, rename, truncate, remove and directory fsync, plus the middle of each
  write, where half the bytes are out). For each boundary the workload is rerun on a real
  directory with a crash there; the store object is abandoned, its descriptors closed (the
  kernel does that when a process dies) and the directory reopened.
- **Every crash point, power loss.** The same enumeration over a simulated disk that
  remembers what was fsynced: after the crash only synced directory entries and/or synced
  file bytes survive (or half of the unsynced tail), which is what proves the fsyncs.
- **A real process killed with SIGKILL** while committing in a loop.
- Damage: torn tails are dropped, anything else raises `StoreCorrupted` naming file and
  offset; the lock; quota refusals write nothing; failed writes roll back.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jfsm.errors import InvalidTransition, QuotaExceeded, StoreCorrupted, StoreLocked
from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.stores import FileStore, MemoryStore
from jfsm.stores.file import HEADER_SIZE, encode_record
from jfsm.stores.fsio import OsFileSystem

QUOTA = 4_000_000
REPO = Path(__file__).resolve().parents[1]

State = tuple[dict[str, bytes], dict[str, bytes]]


def state_of(image: StoreImage) -> State:
    """Store and checkpoint base: together they fix store, change log and footprint."""
    return image.values_bytes(), image.base_bytes()


# -- file-system layers -------------------------------------------------------------------
class SimulatedCrash(Exception):
    """The process died here."""


class CrashingFileSystem:
    """Wraps a file system, numbers the boundaries around mutating calls, crashes at one.

    After the crash every call raises: the process is dead. Its open handles are closed,
    which releases the lock as the kernel would.
    """

    def __init__(self, inner: Any, crash_at: int | None = None) -> None:
        self.inner = inner
        self.crash_at = crash_at
        self.boundaries = 0
        self.labels: list[str] = []
        self.dead = False
        self._handles: set[int] = set()
        self._locks: set[int] = set()

    def _boundary(self, label: str) -> None:
        self._alive()
        index = self.boundaries
        self.boundaries += 1
        self.labels.append(label)
        if index == self.crash_at:
            self.dead = True
            for handle in self._handles:
                self.inner.close(handle)
            for lock in self._locks:
                self.inner.unlock(lock)
            raise SimulatedCrash(f"crash at boundary {index}: {label}")

    def _alive(self) -> None:
        if self.dead:
            raise SimulatedCrash("the process is dead")

    def _mutate(self, label: str, call: Callable[[], Any]) -> Any:
        self._boundary(f"before {label}")
        result = call()
        self._boundary(f"after {label}")
        return result

    def makedirs(self, path: str) -> None:
        self._alive()
        self.inner.makedirs(path)

    def listdir(self, path: str) -> list[str]:
        self._alive()
        return list(self.inner.listdir(path))

    def read(self, path: str) -> bytes:
        self._alive()
        return bytes(self.inner.read(path))

    def create(self, path: str) -> int:
        def create() -> int:
            handle = int(self.inner.create(path))
            self._handles.add(handle)
            return handle

        return int(self._mutate(f"create {os.path.basename(path)}", create))

    def open_append(self, path: str) -> int:
        self._alive()
        handle = int(self.inner.open_append(path))
        self._handles.add(handle)
        return handle

    def write(self, handle: int, data: bytes) -> None:
        self._boundary("before write")
        if self.crash_at == self.boundaries:
            self.inner.write(handle, data[: len(data) // 2])
        self._boundary("mid write")
        self.inner.write(handle, data)
        self._boundary("after write")

    def fsync(self, handle: int) -> None:
        self._mutate("fsync", lambda: self.inner.fsync(handle))

    def truncate(self, handle: int, size: int) -> None:
        self._mutate("truncate", lambda: self.inner.truncate(handle, size))

    def close(self, handle: int) -> None:
        self._alive()
        self._handles.discard(handle)
        self.inner.close(handle)

    def rename(self, src: str, dst: str) -> None:
        self._mutate(f"rename to {os.path.basename(dst)}", lambda: self.inner.rename(src, dst))

    def remove(self, path: str) -> None:
        self._mutate(f"remove {os.path.basename(path)}", lambda: self.inner.remove(path))

    def fsync_dir(self, path: str) -> None:
        self._mutate("fsync dir", lambda: self.inner.fsync_dir(path))

    def lock(self, path: str) -> int:
        self._alive()
        handle = int(self.inner.lock(path))
        self._locks.add(handle)
        return handle

    def unlock(self, handle: int) -> None:
        self._alive()
        self._locks.discard(handle)
        self.inner.unlock(handle)


class UnsyncedOsFileSystem(OsFileSystem):
    """The real disk without fsyncs: a process crash cannot tell, and it is much faster."""

    def fsync(self, handle: int) -> None:
        pass

    def fsync_dir(self, path: str) -> None:
        pass


class _Inode:
    __slots__ = ("data", "durable")

    def __init__(self, data: bytes = b"") -> None:
        self.data = bytearray(data)
        self.durable = bytes(data)


class SimulatedDisk:
    """One directory in memory that knows which entries and bytes were fsynced."""

    def __init__(self) -> None:
        self.live: dict[str, _Inode] = {}
        self.synced: dict[str, _Inode] = {}
        self.handles: dict[int, _Inode] = {}
        self.locked: set[str] = set()
        self.lock_paths: dict[int, str] = {}
        self._next = 3

    def after_power_loss(self, entries: str, data: str) -> SimulatedDisk:
        """What a reboot finds: `entries` live|synced, `data` all|durable|torn."""
        disk = SimulatedDisk()
        copies: dict[int, _Inode] = {}
        for path, inode in (self.live if entries == "live" else self.synced).items():
            if id(inode) not in copies:
                content = bytes(inode.data)
                if data == "durable":
                    content = inode.durable
                elif data == "torn":
                    extra = content[len(inode.durable) :]
                    durable_prefix = content.startswith(inode.durable)
                    content = inode.durable + (
                        extra[: (len(extra) + 1) // 2] if durable_prefix else b""
                    )
                copies[id(inode)] = _Inode(content)
            disk.live[path] = disk.synced[path] = copies[id(inode)]
        return disk

    def _handle(self, inode: _Inode) -> int:
        self._next += 1
        self.handles[self._next] = inode
        return self._next

    def makedirs(self, path: str) -> None:
        pass

    def listdir(self, path: str) -> list[str]:
        return [os.path.basename(p) for p in self.live if os.path.dirname(p) == path]

    def read(self, path: str) -> bytes:
        if path not in self.live:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return bytes(self.live[path].data)

    def create(self, path: str) -> int:
        inode = self.live.get(path)
        if inode is None:
            inode = self.live[path] = _Inode()
        del inode.data[:]
        return self._handle(inode)

    def open_append(self, path: str) -> int:
        return self._handle(self.live[path])

    def write(self, handle: int, data: bytes) -> None:
        self.handles[handle].data += data

    def fsync(self, handle: int) -> None:
        inode = self.handles[handle]
        inode.durable = bytes(inode.data)

    def truncate(self, handle: int, size: int) -> None:
        del self.handles[handle].data[size:]

    def close(self, handle: int) -> None:
        del self.handles[handle]

    def rename(self, src: str, dst: str) -> None:
        self.live[dst] = self.live.pop(src)

    def remove(self, path: str) -> None:
        self.live.pop(path, None)

    def fsync_dir(self, path: str) -> None:
        self.synced = {p: i for p, i in self.synced.items() if os.path.dirname(p) != path}
        self.synced.update((p, i) for p, i in self.live.items() if os.path.dirname(p) == path)

    def lock(self, path: str) -> int:
        if path in self.locked:
            raise BlockingIOError(errno.EWOULDBLOCK, "locked", path)
        self.locked.add(path)
        self.live.setdefault(path, _Inode())
        handle = self._handle(self.live[path])
        self.lock_paths[handle] = path
        return handle

    def unlock(self, handle: int) -> None:
        self.locked.discard(self.lock_paths.pop(handle))
        del self.handles[handle]


# -- the workload ---------------------------------------------------------------------------
Op = tuple[str, Projection | None]


def build_workload(big: int) -> list[Op]:
    """Commits (some large, astral, refused, empty), deletes, checkpoints, reopens."""
    rng = random.Random(20261202)
    keys = ["a", "é", "𝄞", "\uff61", "jfGameStack.meta", "jfGameStack.chunk.1", "chunk.2"]
    ops: list[Op] = [("open", None)]
    for step in range(50):
        if step in (8, 19, 25, 38):
            ops.append(("checkpoint", None))
        if step in (12, 23, 44):
            ops += [("close", None), ("open", None)]
        if step == 15:
            ops.append(("commit", Projection.of({"a": "x" * QUOTA}, label="refused")))
        if step == 4:
            ops.append(("commit", Projection.of({}, ["absent"], label="no-op")))
        sets: dict[str, Any] = {}
        for key in rng.sample(keys, rng.randint(1, 3)):
            if rng.random() < 0.2:
                sets[key] = f"𝄞é{step}" * big
            else:
                sets[key] = {"step": step, "text": "naïve 😀\n", "list": [1, 2.5, None, True]}
        deletes = [k for k in rng.sample(keys, rng.randint(0, 2)) if k not in sets]
        ops.append(("commit", Projection.of(sets, deletes, label=f"step {step}")))
    ops += [("checkpoint", None), ("commit", Projection.of({"last": 1})), ("close", None)]
    return ops


def expected_states(ops: list[Op]) -> list[State]:
    """states[i] is the state before op i; states[i + 1] the state after it."""
    memory = MemoryStore(quota=QUOTA)
    states = [state_of(memory.image)]
    for kind, projection in ops:
        if kind == "commit":
            assert projection is not None
            if projection.label == "refused":
                with pytest.raises(QuotaExceeded):
                    memory.commit(projection)
            else:
                memory.commit(projection)
        elif kind == "checkpoint":
            memory.checkpoint()
        states.append(state_of(memory.image))
    return states


def run_workload(directory: str, fs: Any, ops: list[Op]) -> int | None:
    """Run `ops`; the index of the op in flight when the process died, or None."""
    store: FileStore | None = None
    for index, (kind, projection) in enumerate(ops):
        try:
            if kind == "open":
                store = FileStore.open(directory, quota=QUOTA, fs=fs)
            elif kind == "close":
                assert store is not None
                store.close()
            elif kind == "checkpoint":
                assert store is not None
                store.checkpoint()
            else:
                assert store is not None and projection is not None
                with contextlib.suppress(QuotaExceeded):
                    store.commit(projection)
        except SimulatedCrash:
            return index  # abandon the store: the process is gone
    return None


def check_reopen(directory: str, fs: Any, allowed: list[State], marker: int) -> int:
    """Reopen after a crash; the state must be one of `allowed`, and the store must work."""
    store = FileStore.open(directory, quota=QUOTA, fs=fs)
    state = state_of(store.image)
    assert state in allowed
    names = sorted(fs.listdir(directory))
    assert [n for n in names if n.startswith("log.")] and not [n for n in names if "tmp" in n]
    assert len([n for n in names if n.startswith("snapshot.")]) <= 1
    store.commit(Projection.of({"marker": marker}))
    store.close()
    with FileStore.open(directory, quota=QUOTA, fs=fs) as again:
        values, base = state_of(again.image)
        assert values.pop("marker") == str(marker).encode()
        assert (values, base) == state
    return allowed.index(state)


@pytest.mark.slow
@pytest.mark.req("JF-ATOM-001", "JF-ATOM-004")
def test_every_crash_point_on_disk_reopens_to_before_or_after(tmp_path: Path) -> None:
    ops = build_workload(big=4000)
    states = expected_states(ops)
    counter = CrashingFileSystem(UnsyncedOsFileSystem())
    assert run_workload(str(tmp_path / "full"), counter, ops) is None
    with FileStore.open(tmp_path / "full", quota=QUOTA) as store:
        assert state_of(store.image) == states[-1]
    total = counter.boundaries
    outcomes = [0, 0]
    recovery_points = 0
    for k in range(total):
        directory = str(tmp_path / f"crash-{k}")
        fs = CrashingFileSystem(UnsyncedOsFileSystem(), crash_at=k)
        index = run_workload(directory, fs, ops)
        assert index is not None, f"no crash at boundary {k}"
        allowed = states[index : index + 2]
        try:
            recovery_points += crash_during_recovery(directory, allowed, k)
            outcomes[check_reopen(directory, OsFileSystem(), allowed, k)] += 1
        except AssertionError as exc:
            raise AssertionError(
                f"crash at boundary {k} ({counter.labels[k]}) in op {index}"
            ) from exc
        shutil.rmtree(directory)
    print(
        f"\n{total} crash points on disk: {outcomes[0]} reopened before, {outcomes[1]} after; "
        f"{recovery_points} more crash points inside the recoveries"
    )
    assert total > 300
    assert min(outcomes) > 50
    assert recovery_points > 50


def crash_during_recovery(directory: str, allowed: list[State], marker: int) -> int:
    """Crash at every boundary of the reopen's own recovery (torn-tail truncation, removal
    of leftovers), on copies of `directory`; each must reopen to what a clean one finds."""
    probe = CrashingFileSystem(UnsyncedOsFileSystem())
    with FileStore.open(shutil.copytree(directory, directory + "-probe"), fs=probe) as store:
        recovered = state_of(store.image)
    assert recovered in allowed
    for j in range(probe.boundaries):
        copy = shutil.copytree(directory, f"{directory}-{j}")
        with pytest.raises(SimulatedCrash):
            FileStore.open(copy, quota=QUOTA, fs=CrashingFileSystem(OsFileSystem(), crash_at=j))
        check_reopen(copy, OsFileSystem(), [recovered], marker)
        shutil.rmtree(copy)
    shutil.rmtree(directory + "-probe")
    return probe.boundaries


@pytest.mark.slow
@pytest.mark.req("JF-ATOM-004", "JF-ATOM-005")
def test_every_crash_point_with_power_loss_keeps_what_was_returned() -> None:
    ops = build_workload(big=400)
    states = expected_states(ops)
    directory = "/simulated/store"
    counter = CrashingFileSystem(SimulatedDisk())
    assert run_workload(directory, counter, ops) is None
    total = counter.boundaries
    modes = [(e, d) for e in ("synced", "live") for d in ("durable", "torn", "all")]
    outcomes = [0, 0]
    for k in range(total):
        disk = SimulatedDisk()
        index = run_workload(directory, CrashingFileSystem(disk, crash_at=k), ops)
        assert index is not None
        for entries, data in modes:
            rebooted = disk.after_power_loss(entries, data)
            try:
                outcomes[check_reopen(directory, rebooted, states[index : index + 2], k)] += 1
            except AssertionError as exc:
                raise AssertionError(
                    f"power loss ({entries} entries, {data} data) at boundary {k} "
                    f"({counter.labels[k]}) in op {index}"
                ) from exc
    print(f"\n{total} crash points x {len(modes)} power-loss views: {outcomes} before/after")
    assert min(outcomes) > 100


# -- a real process, killed ----------------------------------------------------------------
def counter_state(n: int) -> dict[str, Any]:
    """The whole store after `n` commits of the committer: a function of the counter."""
    state: dict[str, Any] = {"counter": n, "blob": "𝄞é" * (n % 40) * 50}
    for slot in range(7):
        latest = n - (n - slot) % 7
        if latest > 0:
            state[f"slot.{slot}"] = latest
    state.update({f"trail.{i}": i for i in range(max(1, n - 2), n + 1)})
    return state


def _committer() -> str:
    """A script that commits counter states in a loop, printing each returned counter."""
    return (
        "from typing import Any\n"
        + inspect.getsource(counter_state)
        + textwrap.dedent(
            """
        import sys
        from jfsm.projection import Projection
        from jfsm.stores import FileStore

        with FileStore.open(sys.argv[1]) as store:
            n = store.image.get("counter") or 0
            while True:
                n += 1
                store.commit(Projection.of(counter_state(n), [f"trail.{n - 3}"]))
                if n % 25 == 0:
                    store.checkpoint()
                print(n, flush=True)
        """
        )
    )


def _python(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", *args], cwd=REPO, env=env, text=True, **kwargs)


@pytest.mark.slow
@pytest.mark.req("JF-ATOM-004")
def test_sigkilled_committer_reopens_to_a_committed_prefix(tmp_path: Path) -> None:
    rng = random.Random(7)
    last = 0
    for _ in range(4):
        child = _python(_committer(), str(tmp_path), stdout=subprocess.PIPE)
        assert child.stdout is not None
        first = int(child.stdout.readline())
        assert first == last + 1
        time.sleep(rng.uniform(0.02, 0.25))
        child.send_signal(signal.SIGKILL)
        printed = [first] + [int(line) for line in child.stdout.read().splitlines() if line]
        child.wait()
        assert child.returncode == -signal.SIGKILL
        returned = printed[-1]
        with FileStore.open(tmp_path) as store:
            counter = store.image.get("counter")
            assert returned <= counter <= returned + 1
            assert store.image.store_json() == counter_state(counter)
        print(f"killed after {returned} returned commits; reopened at {counter}")
        last = counter
    assert last > 4


# -- the lock ------------------------------------------------------------------------------
@pytest.mark.req("JF-ATOM-007")
def test_second_writer_in_process_is_refused(tmp_path: Path) -> None:
    store = FileStore.open(tmp_path)
    with pytest.raises(StoreLocked) as refused:
        FileStore.open(tmp_path)
    assert str(tmp_path) in str(refused.value)
    assert refused.value.details == {"directory": str(tmp_path)}
    store.close()
    store.close()  # idempotent
    with pytest.raises(InvalidTransition):
        store.commit(Projection.of({"a": 1}))
    with FileStore.open(tmp_path) as again:
        assert again.durable


HOLDER = textwrap.dedent(
    """
    import sys
    from jfsm.stores import FileStore
    with FileStore.open(sys.argv[1]):
        print("locked", flush=True)
        sys.stdin.read()
    """
)
OPENER = textwrap.dedent(
    """
    import sys
    from jfsm.errors import StoreLocked
    from jfsm.stores import FileStore
    try:
        FileStore.open(sys.argv[1]).close()
    except StoreLocked as exc:
        print(exc.code, exc.details["directory"])
        sys.exit(3)
    """
)


@pytest.mark.req("JF-ATOM-007")
def test_second_writer_in_another_process_is_refused(tmp_path: Path) -> None:
    holder = _python(HOLDER, str(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == "locked\n"
    with pytest.raises(StoreLocked, match=str(tmp_path)):
        FileStore.open(tmp_path)
    holder.stdin.close()
    assert holder.wait() == 0
    with FileStore.open(tmp_path):
        opener = _python(OPENER, str(tmp_path), stdout=subprocess.PIPE)
        out, _ = opener.communicate()
        assert opener.returncode == 3
        assert out == f"store_locked {tmp_path}\n"


# -- damage --------------------------------------------------------------------------------
PROJECTIONS = [
    Projection.of({"a": 1, "𝄞": "first"}),
    Projection.of({"b": [1, 2]}, ["a"]),
    Projection.of({"c": {"é": "third"}}),
]


def _three_commits(directory: Path, checkpoint_first: bool = False) -> tuple[Path, list[int]]:
    """A store with three committed records; its log and the records' offsets."""
    with FileStore.open(directory) as store:
        if checkpoint_first:
            store.commit(Projection.of({"base": True}))
            store.checkpoint()
        for projection in PROJECTIONS:
            store.commit(projection)
    (log,) = directory.glob("log.*.jfl")
    offsets = [0]
    for projection in PROJECTIONS:
        offsets.append(offsets[-1] + len(encode_record(projection)))
    assert log.stat().st_size == offsets[-1]
    return log, offsets


def _state_after(count: int, base: dict[str, Any] | None = None) -> dict[str, Any]:
    memory = MemoryStore()
    if base:
        memory.commit(Projection.of(base))
    for projection in PROJECTIONS[:count]:
        memory.commit(projection)
    return memory.image.store_json()


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize("cut", [1, 5, HEADER_SIZE, HEADER_SIZE + 7, -1])
def test_torn_tail_is_dropped_and_truncated(tmp_path: Path, cut: int) -> None:
    log, offsets = _three_commits(tmp_path)
    end = offsets[3] + cut if cut < 0 else offsets[2] + cut
    os.truncate(log, end)
    with FileStore.open(tmp_path) as store:
        assert store.image.store_json() == _state_after(2)
        assert log.stat().st_size == offsets[2]
        store.commit(Projection.of({"d": 4}))
    with FileStore.open(tmp_path) as store:
        assert store.image.store_json() == {**_state_after(2), "d": 4}


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize("garbage", [b"\x00" * 300, b"JFr1\x00\x00"])
def test_unwritten_garbage_after_the_last_record_is_a_torn_tail(
    tmp_path: Path, garbage: bytes
) -> None:
    log, offsets = _three_commits(tmp_path)
    with log.open("ab") as file:
        file.write(garbage)
    with FileStore.open(tmp_path) as store:
        assert store.image.store_json() == _state_after(3)
    assert log.stat().st_size == offsets[3]


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize(
    ("record", "within", "reason"),
    [
        (0, HEADER_SIZE + 3, "payload CRC mismatch"),
        (1, HEADER_SIZE + 3, "payload CRC mismatch"),
        (1, 0, "bad magic"),
        (1, 6, "header CRC mismatch"),  # the length field: must not pose as a torn tail
        (0, 10, "header CRC mismatch"),  # the payload CRC field
    ],
)
def test_damage_before_the_last_record_is_refused_with_file_and_offset(
    tmp_path: Path, record: int, within: int, reason: str
) -> None:
    log, offsets = _three_commits(tmp_path, checkpoint_first=True)
    _flip(log, offsets[record] + within)
    damaged = log.read_bytes()
    for _ in range(2):  # refused every time, and the lock is released after each refusal
        with pytest.raises(StoreCorrupted) as refused:
            FileStore.open(tmp_path)
        error = refused.value
        assert error.details["file"] == str(log)
        assert error.details["offset"] == offsets[record]
        assert str(log) in str(error) and f"byte offset {offsets[record]}" in str(error)
        assert reason in str(error)
        assert error.code == "store_corrupted"
    assert log.read_bytes() == damaged  # nothing was truncated or rewritten


@pytest.mark.req("JF-ATOM-006")
def test_damage_in_the_last_record_reads_as_a_torn_write(tmp_path: Path) -> None:
    """Indistinguishable from a write torn by power loss: documented, and dropped."""
    log, offsets = _three_commits(tmp_path)
    _flip(log, offsets[2] + HEADER_SIZE + 3)
    with FileStore.open(tmp_path) as store:
        assert store.image.store_json() == _state_after(2)


def _snapshot_store(directory: Path) -> Path:
    with FileStore.open(directory) as store:
        store.commit(Projection.of({"a": "𝄞" * 10, "b": [1, {"c": None}]}))
        store.checkpoint()
        store.commit(Projection.of({"d": 1}))
    (snapshot,) = directory.glob("snapshot.*.json")
    return snapshot


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize("damage", ["flip", "truncate", "not-json"])
def test_damaged_snapshot_is_refused(tmp_path: Path, damage: str) -> None:
    import zlib

    snapshot = _snapshot_store(tmp_path)
    offset = 0
    if damage == "flip":
        _flip(snapshot, 7)
    elif damage == "truncate":
        os.truncate(snapshot, 9)
    else:  # a checksum that matches bytes that are not a JSON object
        text = b'{"a":1,"b":}'
        snapshot.unlink()
        snapshot = snapshot.with_name(snapshot.name[:18] + f"{zlib.crc32(text):08x}.json")
        snapshot.write_bytes(text)
        offset = 11
    with pytest.raises(StoreCorrupted) as refused:
        FileStore.open(tmp_path)
    assert refused.value.details["file"] == str(snapshot)
    assert refused.value.details["offset"] == offset
    assert str(snapshot) in str(refused.value)


@pytest.mark.req("JF-ATOM-006")
def test_a_log_without_its_snapshot_is_refused(tmp_path: Path) -> None:
    snapshot = _snapshot_store(tmp_path)
    snapshot.unlink()
    with pytest.raises(StoreCorrupted, match=r"log\.00000001\.jfl"):
        FileStore.open(tmp_path)


# -- quota and failed writes -----------------------------------------------------------------
def _files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.mark.req("JF-QUOTA-003")
def test_quota_refusal_writes_nothing_on_disk(tmp_path: Path) -> None:
    with FileStore.open(tmp_path, quota=200) as store:
        store.commit(Projection.of({"a": "x" * 50}))
        before, image = _files(tmp_path), state_of(store.image)
        with pytest.raises(QuotaExceeded) as refused:
            store.commit(Projection.of({"b": "y" * 200}))
        assert refused.value.details["quota"] == 200
        assert _files(tmp_path) == before
        assert state_of(store.image) == image
        store.commit(Projection.of({"b": "y"}))  # still usable
    with FileStore.open(tmp_path, quota=200) as store:
        assert store.image.store_json() == {"a": "x" * 50, "b": "y"}


class FailingFileSystem(OsFileSystem):
    """The real disk, where the next call of each chosen kind fails (a write halfway)."""

    def __init__(self) -> None:
        self.failing: set[str] = set()

    def _fail(self, call: str) -> None:
        if call in self.failing:
            self.failing.discard(call)
            raise OSError(errno.EIO, f"injected {call} failure")

    def write(self, handle: int, data: bytes) -> None:
        if "write" in self.failing:
            super().write(handle, data[: len(data) // 2])
        self._fail("write")
        super().write(handle, data)

    def fsync(self, handle: int) -> None:
        self._fail("fsync")
        super().fsync(handle)

    def truncate(self, handle: int, size: int) -> None:
        self._fail("truncate")
        super().truncate(handle, size)

    def rename(self, src: str, dst: str) -> None:
        self._fail("rename")
        super().rename(src, dst)

    def fsync_dir(self, path: str) -> None:
        self._fail("fsync_dir")
        super().fsync_dir(path)


@pytest.mark.req("JF-ATOM-001")
@pytest.mark.parametrize("failing", ["write", "fsync"])
def test_failed_append_is_rolled_back_and_the_store_stays_usable(
    tmp_path: Path, failing: str
) -> None:
    fs = FailingFileSystem()
    with FileStore.open(tmp_path, fs=fs) as store:
        store.commit(Projection.of({"a": 1}))
        before = _files(tmp_path)
        fs.failing = {failing}
        with pytest.raises(OSError, match="injected"):
            store.commit(Projection.of({"b": 2}, ["a"]))
        assert store.image.store_json() == {"a": 1}
        assert _files(tmp_path) == before
        store.commit(Projection.of({"c": 3}))
    with FileStore.open(tmp_path) as store:
        assert store.image.store_json() == {"a": 1, "c": 3}


@pytest.mark.req("JF-ATOM-001", "JF-ATOM-004")
def test_failed_rollback_breaks_the_store_until_reopened(tmp_path: Path) -> None:
    fs = FailingFileSystem()
    store = FileStore.open(tmp_path, fs=fs)
    store.commit(Projection.of({"a": 1}))
    fs.failing = {"fsync", "truncate"}
    with pytest.raises(OSError, match="injected fsync") as failed:
        store.commit(Projection.of({"b": 2}))
    assert any("broken" in note for note in failed.value.__notes__)
    assert store.image.store_json() == {"a": 1}
    with pytest.raises(InvalidTransition) as refused:
        store.commit(Projection.of({"c": 3}))
    assert refused.value.state == "broken"
    with pytest.raises(InvalidTransition):
        store.checkpoint()
    store.close()
    with FileStore.open(tmp_path) as again:  # like a crash: the failed projection, or not
        assert again.image.store_json() in ({"a": 1}, {"a": 1, "b": 2})


@pytest.mark.parametrize("failing", ["fsync", "rename"])
def test_checkpoint_failing_before_its_rename_changes_nothing(tmp_path: Path, failing: str) -> None:
    fs = FailingFileSystem()
    with FileStore.open(tmp_path, fs=fs) as store:
        store.commit(Projection.of({"a": 1}))
        before, image = _files(tmp_path), state_of(store.image)
        fs.failing = {failing}
        with pytest.raises(OSError, match="injected"):
            store.checkpoint()
        assert state_of(store.image) == image
        assert _files(tmp_path) == before
        store.commit(Projection.of({"b": 2}))
        store.checkpoint()
        assert store.image.change_log() == []
    with FileStore.open(tmp_path) as store:
        assert store.image.store_json() == {"a": 1, "b": 2}
        assert store.image.change_log() == []


def test_checkpoint_failing_after_its_rename_breaks_the_store(tmp_path: Path) -> None:
    fs = FailingFileSystem()
    store = FileStore.open(tmp_path, fs=fs)
    store.commit(Projection.of({"a": 1}))
    fs.failing = {"fsync_dir"}
    with pytest.raises(OSError, match="injected"):
        store.checkpoint()
    with pytest.raises(InvalidTransition, match="broken"):
        store.commit(Projection.of({"b": 2}))
    store.close()
    with FileStore.open(tmp_path) as again:
        assert again.image.store_json() == {"a": 1}
