"""Crash safety of the durable file store (decision D12).

- **Every crash point, process death.** A deterministic workload runs over a file-system
  layer that numbers every boundary around a mutating call (before and after each create,
  write, pwrite, log extension, fsync, fdatasync, rename, truncate, remove and directory
  fsync, plus the middle of each write, pwrite and extension, where half the bytes are
  out). For each boundary the workload is rerun on a real directory with a crash there;
  the store object is abandoned, its descriptors closed (the kernel does that when a
  process dies) and the directory reopened. Both with the store's own log extents and with
  tiny ones, so extensions (first, doubling, capped, oversized for a record) are many.
- **Every crash point, power loss.** The same enumeration over a simulated disk that
  remembers what was synced: after the crash only synced directory entries and/or synced
  file bytes survive, or the first half of every unsynced write, or only the second half
  (out-of-order sectors: zeros where the first half was), which is what proves the
  fsyncs. Its `fdatasync` is stricter than POSIX: it persists bytes within the synced size
  but never a size change, so the log extension's own fsync is proven necessary too.
- **A real process killed with SIGKILL** while committing in a loop.
- Damage: torn tails are dropped, anything else raises `StoreCorrupted` naming file and
  offset; the lock; quota refusals write nothing; failed writes roll back.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from jfsm.errors import QuotaExceeded, StoreCorrupted, StoreLocked, StoreUnavailable
from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.stores import FileStore, MemoryStore
from jfsm.stores.file.crashfs import CrashingFileSystem, SimulatedCrash
from jfsm.stores.file.fsio import OsFileSystem
from jfsm.stores.file.log import HEADER_SIZE, MAGIC, encode_record, log_header
from jfsm.stores.file.manifest import MANIFEST_NAME, Manifest, decode_manifest, encode_manifest

QUOTA = 4_000_000
REPO = Path(__file__).resolve().parents[2]

State = tuple[dict[str, bytes], dict[str, bytes]]


def state_of(image: StoreImage) -> State:
    """Store and checkpoint base: together they fix store, change log and footprint."""
    return image.values_bytes(), image.base_bytes()


# -- file-system layers -------------------------------------------------------------------
# The crashing layer is the product's (`jfsm.stores.file.crashfs`, also the in-process driver's
# `crash` op): it numbers every boundary around a mutating call and, given `crash_at`, dies
# there, closing its handles and releasing the lock as the kernel would.


class UnsyncedOsFileSystem(OsFileSystem):
    """The real disk without fsyncs: a process crash cannot tell, and it is much faster."""

    def fsync(self, handle: int) -> None:
        pass

    def fdatasync(self, handle: int) -> None:
        pass

    def fsync_dir(self, path: str) -> None:
        pass


Pending = tuple[int, bytes | None]  # (offset, bytes written) or (size, None): a truncation


def _write_at(content: bytearray, offset: int, data: bytes) -> None:
    if offset > len(content):
        content.extend(bytes(offset - len(content)))  # a hole reads as zeros
    content[offset : offset + len(data)] = data


def _replay(durable: bytes, pending: list[Pending], part: str) -> bytes:
    """`durable` with the unsynced changes: all of each write, its first or second half."""
    content = bytearray(durable)
    for offset, data in pending:
        if data is None:
            del content[offset:]
            content.extend(bytes(offset - len(content)))
            continue
        half = (len(data) + 1) // 2
        if part == "first":
            data = data[:half]
        elif part == "second":
            offset, data = offset + half, data[half:]
        _write_at(content, offset, data)
    return bytes(content)


class _Inode:
    """A file: its live bytes, what survives a power loss, and the writes in between."""

    __slots__ = ("data", "durable", "pending")

    def __init__(self, data: bytes = b"") -> None:
        self.data = bytearray(data)
        self.durable = bytes(data)
        self.pending: list[Pending] = []

    def write(self, offset: int, data: bytes) -> None:
        _write_at(self.data, offset, data)
        self.pending.append((offset, bytes(data)))

    def truncate(self, size: int) -> None:
        del self.data[size:]
        self.data.extend(bytes(size - len(self.data)))
        self.pending.append((size, None))

    def fsync(self) -> None:
        self.durable, self.pending = bytes(self.data), []

    def fdatasync(self) -> None:
        """Stricter than POSIX: the bytes within the synced size persist, a size change
        does not (it stays pending)."""
        durable = bytearray(self.durable)
        common = min(len(durable), len(self.data))
        durable[:common] = self.data[:common]
        self.durable = bytes(durable)
        if len(self.data) > len(durable):
            self.pending = [(len(durable), bytes(self.data[len(durable) :]))]
        elif len(self.data) < len(durable):
            self.pending = [(len(self.data), None)]
        else:
            self.pending = []

    def after_power_loss(self, data: str) -> bytes:
        if data == "all":
            return bytes(self.data)
        if data == "durable":
            return self.durable
        return _replay(self.durable, self.pending, "first" if data == "torn" else "second")


class SimulatedDisk:
    """One directory in memory that knows which entries and bytes were synced."""

    def __init__(self) -> None:
        self.live: dict[str, _Inode] = {}
        self.synced: dict[str, _Inode] = {}
        self.handles: dict[int, _Inode] = {}
        self.positions: dict[int, int] = {}
        self.locked: set[str] = set()
        self.lock_paths: dict[int, str] = {}
        self._next = 3

    def after_power_loss(self, entries: str, data: str) -> SimulatedDisk:
        """What a reboot finds: `entries` live|synced, `data` all|durable|torn|late (torn:
        the first half of every unsynced write persisted; late: only the second half)."""
        disk = SimulatedDisk()
        copies: dict[int, _Inode] = {}
        for path, inode in (self.live if entries == "live" else self.synced).items():
            if id(inode) not in copies:
                copies[id(inode)] = _Inode(inode.after_power_loss(data))
            disk.live[path] = disk.synced[path] = copies[id(inode)]
        return disk

    def _handle(self, inode: _Inode) -> int:
        self._next += 1
        self.handles[self._next] = inode
        self.positions[self._next] = 0
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
        inode.truncate(0)
        return self._handle(inode)

    def open_write(self, path: str) -> int:
        return self._handle(self.live[path])

    def write(self, handle: int, data: bytes) -> None:
        self.handles[handle].write(self.positions[handle], data)
        self.positions[handle] += len(data)

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        self.handles[handle].write(offset, data)

    def extend(self, handle: int, start: int, end: int) -> None:
        self.handles[handle].write(start, bytes(end - start))

    def fsync(self, handle: int) -> None:
        self.handles[handle].fsync()

    def fdatasync(self, handle: int) -> None:
        self.handles[handle].fdatasync()

    def truncate(self, handle: int, size: int) -> None:
        self.handles[handle].truncate(size)

    def close(self, handle: int) -> None:
        del self.handles[handle]
        del self.positions[handle]

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
        handle = self._handle(_Inode())
        self.lock_paths[handle] = path
        return handle

    def unlock(self, handle: int) -> None:
        self.locked.discard(self.lock_paths.pop(handle))
        del self.handles[handle]
        del self.positions[handle]


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
                    memory.image.apply(projection)
            else:
                memory.image.apply(projection)
        elif kind == "checkpoint":
            memory.image.checkpoint()
        states.append(state_of(memory.image))
    return states


def run_workload(
    directory: str, fs: Any, ops: list[Op], store_cls: type[FileStore] = FileStore
) -> int | None:
    """Run `ops`; the index of the op in flight when the process died, or None."""
    store: FileStore | None = None
    for index, (kind, projection) in enumerate(ops):
        try:
            if kind == "open":
                store = store_cls.open_sync(directory, quota=QUOTA, fs=fs)
            elif kind == "close":
                assert store is not None
                store.close_sync()
            elif kind == "checkpoint":
                assert store is not None
                store.checkpoint_sync()
            else:
                assert store is not None and projection is not None
                with contextlib.suppress(QuotaExceeded):
                    store.commit_sync(projection)
        except SimulatedCrash:
            return index  # abandon the store: the process is gone
    return None


def check_reopen(
    directory: str,
    fs: Any,
    allowed: list[State],
    marker: int,
    store_cls: type[FileStore] = FileStore,
) -> int:
    """Reopen after a crash; the state must be one of `allowed`, and the store must work.

    On a simulated disk, a second power loss right after the first commit of the reopened
    store must keep that commit: recovery left nothing unsynced that the commit relies on.
    """
    store = store_cls.open_sync(directory, quota=QUOTA, fs=fs)
    state = state_of(store.image)
    assert state in allowed
    names = sorted(fs.listdir(directory))
    assert [n for n in names if n.startswith("log.")] and not [n for n in names if "tmp" in n]
    assert len([n for n in names if n.startswith("snapshot.")]) <= 1
    store.commit_sync(Projection.of({"marker": marker}))
    views = [fs.after_power_loss("synced", "durable")] if isinstance(fs, SimulatedDisk) else []
    store.close_sync()
    for view in [fs, *views]:
        with store_cls.open_sync(directory, quota=QUOTA, fs=view) as again:
            values, base = state_of(again.image)
            assert values.pop("marker", None) == str(marker).encode()
            assert (values, base) == state
    return allowed.index(state)


class TinyExtents(FileStore):
    """Log extents of 2 to 8 KiB instead of 1 to 16 MiB: the workloads extend the log
    often, with every kind of extension (first, doubling, capped, larger for a record)."""

    extent_min = 2048
    extent_max = 8192


EXTENTS = pytest.mark.parametrize(
    "store_cls", [FileStore, TinyExtents], ids=["own extents", "tiny extents"]
)


@pytest.mark.slow
@pytest.mark.req("JF-ATOM-001", "JF-ATOM-004")
@EXTENTS
def test_every_crash_point_on_disk_reopens_to_before_or_after(
    tmp_path: Path, store_cls: type[FileStore]
) -> None:
    ops = build_workload(big=4000)
    states = expected_states(ops)
    counter = CrashingFileSystem(UnsyncedOsFileSystem(), keep_labels=True)
    assert run_workload(str(tmp_path / "full"), counter, ops, store_cls) is None
    with store_cls.open_sync(tmp_path / "full", quota=QUOTA) as store:
        assert state_of(store.image) == states[-1]
    total = counter.boundaries
    outcomes = [0, 0]
    recovery_points = 0
    for k in range(total):
        directory = str(tmp_path / f"crash-{k}")
        fs = CrashingFileSystem(UnsyncedOsFileSystem(), crash_at=k)
        index = run_workload(directory, fs, ops, store_cls)
        assert index is not None, f"no crash at boundary {k}"
        allowed = states[index : index + 2]
        try:
            recovery_points += crash_during_recovery(directory, allowed, k, store_cls)
            outcomes[check_reopen(directory, OsFileSystem(), allowed, k, store_cls)] += 1
        except AssertionError as exc:
            raise AssertionError(
                f"crash at boundary {k} ({counter.labels[k]}) in op {index}"
            ) from exc
        shutil.rmtree(directory)
    extensions = counter.labels.count("before extend")
    print(
        f"\n[{store_cls.__name__}] {total} crash points on disk ({extensions} log extensions): "
        f"{outcomes[0]} reopened before, {outcomes[1]} after; "
        f"{recovery_points} more crash points inside the recoveries"
    )
    assert total > 300
    for label in ("create manifest.tmp", "rename to manifest", "fsync dir"):
        assert f"before {label}" in counter.labels  # the manifest's boundaries are enumerated
    assert min(outcomes) > 50
    assert recovery_points > 50
    assert extensions >= (5 if store_cls is FileStore else 15)


def crash_during_recovery(
    directory: str, allowed: list[State], marker: int, store_cls: type[FileStore] = FileStore
) -> int:
    """Crash at every boundary of the reopen's own recovery (truncation of a torn tail or of
    unused preallocation, removal of leftovers), on copies of `directory`; each must reopen
    to what a clean one finds."""
    probe = CrashingFileSystem(UnsyncedOsFileSystem())
    with store_cls.open_sync(shutil.copytree(directory, directory + "-probe"), fs=probe) as store:
        recovered = state_of(store.image)
    assert recovered in allowed
    for j in range(probe.boundaries):
        copy = shutil.copytree(directory, f"{directory}-{j}")
        with pytest.raises(SimulatedCrash):
            store_cls.open_sync(
                copy, quota=QUOTA, fs=CrashingFileSystem(OsFileSystem(), crash_at=j)
            )
        check_reopen(copy, OsFileSystem(), [recovered], marker, store_cls)
        shutil.rmtree(copy)
    shutil.rmtree(directory + "-probe")
    return probe.boundaries


@pytest.mark.req("JF-STORE-023", "JF-ATOM-004")
def test_every_crash_point_of_a_migration_reopens_to_the_same_store(tmp_path: Path) -> None:
    """A store written before R27 (no manifest), with a torn tail and leftovers: a crash at
    each boundary of the open that truncates, writes the manifest and removes leftovers
    reopens to the same store."""
    directory = tmp_path / "legacy"
    with FileStore.open_sync(directory, quota=QUOTA) as store:
        for projection in PROJECTIONS:
            store.commit_sync(projection)
        store.checkpoint_sync()
        store.commit_sync(Projection.of({"after": "checkpoint"}))
        expected = state_of(store.image)
    (directory / MANIFEST_NAME).unlink()
    (log,) = directory.glob("log.*.jfl")
    with log.open("ab") as file:
        file.write(encode_record(Projection.of({"torn": 1}))[:-4])
    (directory / "snapshot.00000000.tmp").write_bytes(b"{")
    boundaries = crash_during_recovery(str(directory), [expected], 1)
    assert boundaries >= 10
    labels = CrashingFileSystem(UnsyncedOsFileSystem(), keep_labels=True)
    copy = shutil.copytree(directory, tmp_path / "probe")
    FileStore.open_sync(copy, quota=QUOTA, fs=labels).close_sync()
    assert {"before rename to manifest", "before truncate"} <= set(labels.labels)


POWER_LOSS_VIEWS = [(e, d) for e in ("synced", "live") for d in ("durable", "torn", "late", "all")]


@pytest.mark.slow
@pytest.mark.req("JF-ATOM-004", "JF-ATOM-005")
@EXTENTS
def test_every_crash_point_with_power_loss_keeps_what_was_returned(
    store_cls: type[FileStore],
) -> None:
    ops = build_workload(big=400)
    states = expected_states(ops)
    directory = "/simulated/store"
    counter = CrashingFileSystem(SimulatedDisk(), keep_labels=True)
    assert run_workload(directory, counter, ops, store_cls) is None
    total = counter.boundaries
    outcomes = [0, 0]
    for k in range(total):
        disk = SimulatedDisk()
        index = run_workload(directory, CrashingFileSystem(disk, crash_at=k), ops, store_cls)
        assert index is not None
        for entries, data in POWER_LOSS_VIEWS:
            rebooted = disk.after_power_loss(entries, data)
            allowed = states[index : index + 2]
            try:
                outcomes[check_reopen(directory, rebooted, allowed, k, store_cls)] += 1
            except AssertionError as exc:
                raise AssertionError(
                    f"power loss ({entries} entries, {data} data) at boundary {k} "
                    f"({counter.labels[k]}) in op {index}"
                ) from exc
    extensions = counter.labels.count("before extend")
    print(
        f"\n[{store_cls.__name__}] {total} crash points ({extensions} log extensions) x "
        f"{len(POWER_LOSS_VIEWS)} power-loss views: {outcomes} before/after"
    )
    assert min(outcomes) > 100
    assert extensions >= (5 if store_cls is FileStore else 15)


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

        with FileStore.open_sync(sys.argv[1]) as store:
            n = store.image.get("counter") or 0
            while True:
                n += 1
                store.commit_sync(Projection.of(counter_state(n), [f"trail.{n - 3}"]))
                if n % 25 == 0:
                    store.checkpoint_sync()
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
        with FileStore.open_sync(tmp_path) as store:
            counter = store.image.get("counter")
            assert returned <= counter <= returned + 1
            assert store.image.store_json() == counter_state(counter)
        print(f"killed after {returned} returned commits; reopened at {counter}")
        last = counter
    assert last > 4


# -- the lock ------------------------------------------------------------------------------
@pytest.mark.req("JF-ATOM-007")
def test_second_writer_in_process_is_refused(tmp_path: Path) -> None:
    store = FileStore.open_sync(tmp_path)
    with pytest.raises(StoreLocked) as refused:
        FileStore.open_sync(tmp_path)
    assert str(tmp_path) in str(refused.value)
    assert refused.value.details == {"directory": str(tmp_path)}
    store.close_sync()
    store.close_sync()  # idempotent
    with pytest.raises(StoreUnavailable):
        store.commit_sync(Projection.of({"a": 1}))
    with FileStore.open_sync(tmp_path) as again:
        assert again.durable


HOLDER = textwrap.dedent(
    """
    import sys
    from jfsm.stores import FileStore
    with FileStore.open_sync(sys.argv[1]):
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
        FileStore.open_sync(sys.argv[1]).close_sync()
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
        FileStore.open_sync(tmp_path)
    holder.stdin.close()
    assert holder.wait() == 0
    with FileStore.open_sync(tmp_path):
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
    with FileStore.open_sync(directory) as store:
        if checkpoint_first:
            store.commit_sync(Projection.of({"base": True}))
            store.checkpoint_sync()
        for projection in PROJECTIONS:
            store.commit_sync(projection)
    (log,) = directory.glob("log.*.jfl")
    offsets = [_log_start(log)]
    for projection in PROJECTIONS:
        offsets.append(offsets[-1] + len(encode_record(projection)))
    assert log.stat().st_size == offsets[-1]
    return log, offsets


def _log_start(log: Path) -> int:
    """Where the records of `log` start: after its header record (decision R27)."""
    manifest = log.parent / MANIFEST_NAME
    live = decode_manifest(str(manifest), manifest.read_bytes())
    assert live.store is not None and log.name == live.log
    return len(log_header(live.generation, live.store))


def _state_after(count: int, base: dict[str, Any] | None = None) -> dict[str, Any]:
    memory = MemoryStore()
    if base:
        memory.image.apply(Projection.of(base))
    for projection in PROJECTIONS[:count]:
        memory.image.apply(projection)
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
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == _state_after(2)
        assert log.stat().st_size == offsets[2]
        store.commit_sync(Projection.of({"d": 4}))
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == {**_state_after(2), "d": 4}


NEXT = encode_record(Projection.of({"next": "𝄞" * 300}))
ZEROS = bytes(5000)


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(ZEROS[:300], id="zeros: the end of the log"),
        pytest.param(ZEROS[:1], id="one zero"),
        pytest.param(b"JFr1\x00\x00", id="torn header"),
        pytest.param(b"JFr1\x00\x00" + ZEROS, id="torn header, zeros"),
        pytest.param(NEXT[: len(NEXT) // 2] + ZEROS, id="first half, zeros"),
        pytest.param(bytes(len(NEXT) // 2) + NEXT[len(NEXT) // 2 :] + ZEROS, id="second half"),
        pytest.param(NEXT[:-1] + b"\x00" + ZEROS, id="all but the last byte"),
        pytest.param(NEXT[:HEADER_SIZE] + ZEROS, id="header only"),
    ],
)
def test_whatever_follows_the_last_record_without_a_valid_one_is_dropped(
    tmp_path: Path, garbage: bytes
) -> None:
    """Zeros (preallocation a session did not give back) end the log; anything else is a
    torn tail (bad record, no valid one after it): dropped, and the log cut after the last
    committed record either way."""
    log, offsets = _three_commits(tmp_path)
    with log.open("ab") as file:
        file.write(garbage)
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == _state_after(3)
        assert log.stat().st_size == offsets[3]
        store.commit_sync(Projection.of({"d": 4}))
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == {**_state_after(3), "d": 4}


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize("zeros", [0, 8192], ids=["trimmed log", "zeros after the records"])
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
    tmp_path: Path, record: int, within: int, reason: str, zeros: int
) -> None:
    log, offsets = _three_commits(tmp_path, checkpoint_first=True)
    with log.open("ab") as file:
        file.write(bytes(zeros))  # the unused preallocation of a session that did not close
    _flip(log, offsets[record] + within)
    damaged = log.read_bytes()
    for _ in range(2):  # refused every time, and the lock is released after each refusal
        with pytest.raises(StoreCorrupted) as refused:
            FileStore.open_sync(tmp_path)
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
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == _state_after(2)


def _snapshot_store(directory: Path) -> Path:
    with FileStore.open_sync(directory) as store:
        store.commit_sync(Projection.of({"a": "𝄞" * 10, "b": [1, {"c": None}]}))
        store.checkpoint_sync()
        store.commit_sync(Projection.of({"d": 1}))
    (snapshot,) = directory.glob("snapshot.*.json")
    return snapshot


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize("damage", ["flip", "truncate", "not-json"])
def test_damaged_snapshot_is_refused(tmp_path: Path, damage: str) -> None:
    snapshot = _snapshot_store(tmp_path)
    offset = 0
    if damage == "flip":
        _flip(snapshot, 7)
    elif damage == "truncate":
        os.truncate(snapshot, 9)
    else:  # a checksum that matches bytes that are not a JSON object
        snapshot = _replace_snapshot(tmp_path, b'{"a":1,"b":}')
        offset = 11
    with pytest.raises(StoreCorrupted) as refused:
        FileStore.open_sync(tmp_path)
    assert refused.value.details["file"] == str(snapshot)
    assert refused.value.details["offset"] == offset
    assert str(snapshot) in str(refused.value)


@pytest.mark.req("JF-ATOM-006")
def test_a_log_without_its_snapshot_is_refused(tmp_path: Path) -> None:
    snapshot = _snapshot_store(tmp_path)
    snapshot.unlink()
    with pytest.raises(StoreCorrupted, match=r"snapshot\.00000001\.[0-9a-f]{8}\.json: missing"):
        FileStore.open_sync(tmp_path)
    (tmp_path / MANIFEST_NAME).unlink()  # a store without a manifest: the legacy rules
    with pytest.raises(StoreCorrupted, match=r"log\.00000001\.jfl"):
        FileStore.open_sync(tmp_path)


# -- the preallocated log ----------------------------------------------------------------------
class RecordingFileSystem(OsFileSystem):
    """The real disk, noting the log-writing calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def extend(self, handle: int, start: int, end: int) -> None:
        self.calls.append(("extend", start, end))
        super().extend(handle, start, end)

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        self.calls.append(("pwrite", offset, len(data)))
        super().pwrite(handle, data, offset)

    def fsync(self, handle: int) -> None:
        self.calls.append(("fsync",))
        super().fsync(handle)

    def fdatasync(self, handle: int) -> None:
        self.calls.append(("fdatasync",))
        super().fdatasync(handle)

    def truncate(self, handle: int, size: int) -> None:
        self.calls.append(("truncate", size))
        super().truncate(handle, size)


def test_no_record_header_is_all_zeros() -> None:
    """What lets zeros mark the end of the log: every header starts with the magic, which
    has no zero byte, and every record ends with its payload's `}`."""
    assert 0 not in MAGIC
    for projection in [*PROJECTIONS, Projection.of({}, ["a"]), Projection.of({"": 0})]:
        record = encode_record(projection)
        assert record[:4] == MAGIC and record[-1:] == b"}"


@pytest.mark.req("JF-ATOM-001")
def test_commits_write_into_a_synced_zero_extent_and_only_fdatasync(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    store = FileStore.open_sync(tmp_path, fs=fs)
    (log,) = tmp_path.glob("log.*.jfl")
    start = _log_start(log)
    records = [encode_record(projection) for projection in PROJECTIONS]
    ends = [start + sum(map(len, records[: i + 1])) for i in range(3)]
    fs.calls.clear()
    store.commit_sync(PROJECTIONS[0])
    # Grow the log with zeros and fsync that (size and blocks), then write and fdatasync.
    extent = FileStore.extent_min
    assert fs.calls == [
        ("extend", start, extent),
        ("fsync",),
        ("pwrite", start, len(records[0])),
        ("fdatasync",),
    ]
    fs.calls.clear()
    store.commit_sync(PROJECTIONS[1])
    store.commit_sync(PROJECTIONS[2])
    assert fs.calls == [
        ("pwrite", ends[0], len(records[1])),
        ("fdatasync",),
        ("pwrite", ends[1], len(records[2])),
        ("fdatasync",),
    ]
    data = log.read_bytes()
    assert len(data) == extent
    assert data[start : ends[2]] == b"".join(records) and not data[ends[2] :].strip(b"\x00")
    fs.calls.clear()
    store.close_sync()
    assert fs.calls == [("truncate", ends[2])]  # the preallocation given back, unsynced
    assert log.read_bytes()[start:] == b"".join(records)
    with FileStore.open_sync(tmp_path, fs=fs) as again:
        assert again.image.store_json() == _state_after(3)
        fs.calls.clear()
        again.commit_sync(Projection.of({"d": 4}))
        assert fs.calls[:2] == [("extend", ends[2], extent), ("fsync",)]


def test_extents_double_up_to_the_cap_and_make_room_for_a_large_record(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    sizes = []
    with TinyExtents.open_sync(tmp_path, fs=fs) as store:  # extents of 2 KiB, doubling to 8 KiB
        for i in range(60):
            projection = Projection.of({"k": f"{i:03d}" + "x" * 251})
            sizes.append(len(encode_record(projection)))
            store.commit_sync(projection)
        big = Projection.of({"big": "y" * 20_000})
        sizes.append(len(encode_record(big)))
        store.commit_sync(big)
        extensions = [call[1:] for call in fs.calls if call[0] == "extend"]
        (log,) = tmp_path.glob("log.*.jfl")
        start = _log_start(log)  # the header record, under 100 bytes
        assert sizes[0] == 300 and sum(sizes[:60]) == 18_000 and start < 100
        assert extensions == [
            (start, 2048),  # the first extent
            (2048, 4096),  # doubling
            (4096, 8192),
            (8192, 16384),
            (16384, 24576),  # capped at 8 KiB
            (24576, 38912),  # the big record (18,000 to 38,048) needs more than 8 KiB
        ]
        assert log.stat().st_size == 38912
    assert log.stat().st_size == start + sum(sizes)
    with TinyExtents.open_sync(tmp_path) as store:
        assert store.image.get("big") == "y" * 20_000 and store.image.get("k") == "059" + "x" * 251


@pytest.mark.req("JF-ATOM-004")
def test_a_store_left_open_reopens_through_its_zero_tail(tmp_path: Path) -> None:
    """What a killed process leaves: the log with the zeros after its records. Reopen reads
    up to the zeros and cuts them off (synced), so the new session extends for itself."""
    live = tmp_path / "live"
    store = FileStore.open_sync(live)
    for projection in PROJECTIONS:
        store.commit_sync(projection)
    left = Path(shutil.copytree(live, tmp_path / "left"))
    store.close_sync()
    (log,) = left.glob("log.*.jfl")
    assert log.stat().st_size == FileStore.extent_min
    fs = RecordingFileSystem()
    with FileStore.open_sync(left, fs=fs) as store:
        assert store.image.store_json() == _state_after(3)
        end = _log_start(log) + len(b"".join(encode_record(p) for p in PROJECTIONS))
        assert fs.calls == [("truncate", end), ("fsync",)]
        assert log.stat().st_size == end
        store.commit_sync(Projection.of({"d": 4}))
    with FileStore.open_sync(left) as store:
        assert store.image.store_json() == {**_state_after(3), "d": 4}


# -- reading: the fast path and verify ---------------------------------------------------------
def _replace_snapshot(directory: Path, text: bytes) -> Path:
    """Put `text` in place of the store's snapshot, under a name with its right CRC, and
    name it in the manifest."""
    (old,) = directory.glob("snapshot.*.json")
    old.unlink()
    path = old.with_name(old.name[:18] + f"{zlib.crc32(text):08x}.json")
    path.write_bytes(text)
    manifest = directory / MANIFEST_NAME
    live = decode_manifest(str(manifest), manifest.read_bytes())
    manifest.write_bytes(
        encode_manifest(Manifest(live.generation, path.name, live.log, live.store))
    )
    return path


def _frame(payload: bytes) -> bytes:
    """A record with the right CRCs around any payload."""
    head = MAGIC + len(payload).to_bytes(4, "big") + zlib.crc32(payload).to_bytes(4, "big")
    return head + zlib.crc32(head).to_bytes(4, "big") + payload


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize(
    ("text", "offset"),
    [
        (b'{"a":NaN}', 5),
        (b'{"a":-Infinity}', 5),
        (b'{"a":"\xff"}', 6),  # not UTF-8
        (b'{"a":1,"a":2}', 7),  # a duplicate name
        (b'{"a":1}x', 7),
        (b'{"a":1}\x00', 7),
        (b'{"\\ud800":1}', 1),  # a lone surrogate
        (b'{"a": 1}', 5),  # white space: not the layout written
        (b'{"a":[1,}', 8),
        (b'{"a":1,}', 7),
        (b"{1:2}", 1),
        (b"[1]", 0),
        (b"", 0),
    ],
)
@pytest.mark.parametrize("verify", [False, True], ids=["fast", "verify"])
def test_a_snapshot_with_the_right_crc_but_malformed_content_is_refused(
    tmp_path: Path, text: bytes, offset: int, verify: bool
) -> None:
    snapshot = _replace_snapshot(_snapshot_store(tmp_path).parent, text)
    with pytest.raises(StoreCorrupted) as refused:
        FileStore.open_sync(tmp_path, verify=verify)
    assert refused.value.details["file"] == str(snapshot)
    assert refused.value.details["offset"] == offset


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize(
    ("text", "offset", "reason"),
    [
        (b'{"a":1.0}', 5, "value of 'a' is not canonical JCS"),
        (b'{"a":[1, 2]}', 5, "value of 'a' is not canonical JCS"),
        (b'{"a":"\\u00e9"}', 5, "value of 'a' is not canonical JCS"),
        (b'{"a":1e400}', 5, "value of 'a' is not storable JSON"),
        (b'{"a":"\\udd1e"}', 5, "value of 'a' is not storable JSON"),
        (b'{"b":1,"a":2}', 2, "member order or layout differs"),
        (b'{"\\u0061":1}', 2, "member order or layout differs"),
    ],
)
def test_verify_refuses_a_snapshot_that_is_valid_json_but_not_canonical(
    tmp_path: Path, text: bytes, offset: int, reason: str
) -> None:
    """The fast path keeps the bytes the CRC vouches for; `verify` re-canonicalizes."""
    snapshot = _replace_snapshot(_snapshot_store(tmp_path).parent, text)
    with FileStore.open_sync(tmp_path) as store:
        assert set(store.image.keys()) == {"a", "b", "d"} - ({"b"} if b'"b"' not in text else set())
    with pytest.raises(StoreCorrupted) as refused:
        FileStore.open_sync(tmp_path, verify=True)
    assert refused.value.details["file"] == str(snapshot)
    assert refused.value.details["offset"] == offset
    assert reason in str(refused.value)


@pytest.mark.req("JF-ATOM-006")
@pytest.mark.parametrize(
    ("payload", "verify_only"),
    [
        (b'{"deletes":[],"sets":{"a":}}', False),
        (b'{"deletes":[],"sets":{"a":NaN}}', False),
        (b'{"deletes":["a"],"sets":{"a":1}}', False),  # both set and deleted
        (b'{"deletes":[1],"sets":{}}', False),
        (b'{"deletes":{},"sets":{}}', False),
        (b'{"sets":{},"deletes":[]}', False),
        (b'{"deletes":[],"sets":{}} ', False),
        (b'{"deletes":[],"sets":{"\xc3":1}}', False),  # not UTF-8
        (b'{"deletes":[],"sets":{"a":1.0}}', True),
        (b'{"deletes":["b","a"],"sets":{}}', True),  # order
        (b'{"deletes":["a","a"],"sets":{}}', True),
    ],
)
def test_a_record_with_the_right_crcs_but_bad_content_is_refused_at_its_offset(
    tmp_path: Path, payload: bytes, verify_only: bool
) -> None:
    log, offsets = _three_commits(tmp_path, checkpoint_first=True)
    valid = encode_record(Projection.of({"e": 5}))
    with log.open("ab") as file:
        file.write(_frame(payload) + valid + bytes(100))
    for verify in (False, True):
        if verify_only and not verify:
            with FileStore.open_sync(tmp_path) as store:
                assert store.image.get("e") == 5
            continue
        with pytest.raises(StoreCorrupted) as refused:
            FileStore.open_sync(tmp_path, verify=verify)
        assert refused.value.details["file"] == str(log)
        assert refused.value.details["offset"] == offsets[3]
        reason = "not canonical" if verify_only else "undecodable log record"
        assert reason in str(refused.value)


@pytest.mark.req("JF-ATOM-004")
def test_fast_and_verified_reopen_find_the_same_store(tmp_path: Path) -> None:
    tricky = {
        'é𝄞\n"\\': {"x": [1, 2.5, None, True, '\u0000\u001f"\\/'], "": {}},
        "\uff61": "😀" * 10,
        "𝄞": -0.0,
        "n": [1e21, 1e-7, 123456789012345, -5e-324, 0.1],
        "": "",
    }
    with FileStore.open_sync(tmp_path) as store:
        store.commit_sync(Projection.of(tricky))
        store.checkpoint_sync()
        store.commit_sync(Projection.of({'é𝄞\n"\\': "changed", "new": tricky}, ["\uff61"]))
        expected = state_of(store.image)
    for verify in (False, True):
        with FileStore.open_sync(tmp_path, verify=verify) as store:
            assert state_of(store.image) == expected
    values, base = expected
    for raw in [*values.values(), *base.values()]:  # every value kept in canonical form
        assert Projection.of({"k": json.loads(raw)}).sets["k"] == raw


# -- quota and failed writes -----------------------------------------------------------------
def _files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.mark.req("JF-QUOTA-003")
def test_quota_refusal_writes_nothing_on_disk(tmp_path: Path) -> None:
    with FileStore.open_sync(tmp_path, quota=200) as store:
        store.commit_sync(Projection.of({"a": "x" * 50}))
        before, image = _files(tmp_path), state_of(store.image)
        with pytest.raises(QuotaExceeded) as refused:
            store.commit_sync(Projection.of({"b": "y" * 200}))
        assert refused.value.details["quota"] == 200
        assert _files(tmp_path) == before
        assert state_of(store.image) == image
        store.commit_sync(Projection.of({"b": "y"}))  # still usable
    with FileStore.open_sync(tmp_path, quota=200) as store:
        assert store.image.store_json() == {"a": "x" * 50, "b": "y"}


class FailingFileSystem(OsFileSystem):
    """The real disk, where the next call of each chosen kind fails (a write halfway),
    after `passes` calls of the chosen kinds went through."""

    def __init__(self) -> None:
        self.failing: set[str] = set()
        self.passes = 0

    def _fail(self, call: str) -> None:
        if call in self.failing and self.passes > 0:
            self.passes -= 1
        elif call in self.failing:
            self.failing.discard(call)
            raise OSError(errno.EIO, f"injected {call} failure")

    def write(self, handle: int, data: bytes) -> None:
        if "write" in self.failing:
            super().write(handle, data[: len(data) // 2])
        self._fail("write")
        super().write(handle, data)

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        if "pwrite" in self.failing:
            super().pwrite(handle, data[: len(data) // 2], offset)
        self._fail("pwrite")
        super().pwrite(handle, data, offset)

    def extend(self, handle: int, start: int, end: int) -> None:
        if "extend" in self.failing:
            super().extend(handle, start, (start + end) // 2)
        self._fail("extend")
        super().extend(handle, start, end)

    def fsync(self, handle: int) -> None:
        self._fail("fsync")
        super().fsync(handle)

    def fdatasync(self, handle: int) -> None:
        self._fail("fdatasync")
        super().fdatasync(handle)

    def truncate(self, handle: int, size: int) -> None:
        self._fail("truncate")
        super().truncate(handle, size)

    def rename(self, src: str, dst: str) -> None:
        self._fail("rename")
        super().rename(src, dst)

    def fsync_dir(self, path: str) -> None:
        self._fail("fsync_dir")
        super().fsync_dir(path)


def _contents(directory: Path) -> dict[str, bytes]:
    """The files, each log without the zeros after its last record (a record ends in `}`)."""
    files = _files(directory)
    return {n: d.rstrip(b"\x00") if n.startswith("log.") else d for n, d in files.items()}


@pytest.mark.req("JF-ATOM-001")
@pytest.mark.parametrize(
    ("failing", "room"),
    [
        ("extend", False),  # the log must grow first: fail writing its zeros
        ("fsync", False),  # or syncing them
        ("pwrite", False),
        ("fdatasync", False),
        ("pwrite", True),  # the record fits in the preallocated zeros
        ("fdatasync", True),
    ],
)
def test_failed_commit_is_rolled_back_and_the_store_stays_usable(
    tmp_path: Path, failing: str, room: bool
) -> None:
    fs = FailingFileSystem()
    with FileStore.open_sync(tmp_path, fs=fs) as store:
        store.commit_sync(Projection.of({"a": 1}))
    (log,) = tmp_path.glob("log.*.jfl")
    committed = log.stat().st_size
    with FileStore.open_sync(tmp_path, fs=fs) as store:  # a new session: nothing preallocated
        if room:
            store.commit_sync(Projection.of({"a": 2}))
            store.commit_sync(Projection.of({"a": 1}))
            committed = len(log.read_bytes().rstrip(b"\x00"))
        before = _contents(tmp_path)
        fs.failing = {failing}
        with pytest.raises(StoreUnavailable, match=f"injected {failing}"):
            store.commit_sync(Projection.of({"b": 2}, ["a"]))
        assert not fs.failing
        assert store.image.store_json() == {"a": 1}
        assert _contents(tmp_path) == before
        assert log.stat().st_size == committed  # cut back after the last record, synced
        store.commit_sync(Projection.of({"c": 3}))
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == {"a": 1, "c": 3}


@pytest.mark.req("JF-ATOM-001", "JF-ATOM-004")
def test_failed_rollback_breaks_the_store_until_reopened(tmp_path: Path) -> None:
    fs = FailingFileSystem()
    store = FileStore.open_sync(tmp_path, fs=fs)
    store.commit_sync(Projection.of({"a": 1}))
    fs.failing = {"fdatasync", "truncate"}
    with pytest.raises(StoreUnavailable, match="injected fdatasync") as failed:
        store.commit_sync(Projection.of({"b": 2}))
    assert isinstance(failed.value.__cause__, OSError)
    assert any("broken" in note for note in failed.value.__cause__.__notes__)
    assert failed.value.state == "broken"
    assert store.image.store_json() == {"a": 1}
    with pytest.raises(StoreUnavailable) as refused:
        store.commit_sync(Projection.of({"c": 3}))
    assert refused.value.state == "broken"
    with pytest.raises(StoreUnavailable):
        store.checkpoint_sync()
    store.close_sync()
    with FileStore.open_sync(tmp_path) as again:  # like a crash: the failed projection, or not
        assert again.image.store_json() in ({"a": 1}, {"a": 1, "b": 2})


class WritebackThenFailDisk(SimulatedDisk):
    """A simulated disk whose next sync of a chosen kind makes the data durable and then
    reports failure anyway (EIO after a partial writeback: the caller cannot know)."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()

    def _fail(self, call: str) -> None:
        if call in self.failing:
            self.failing.discard(call)
            raise OSError(errno.EIO, f"injected {call} failure after writeback")

    def fsync(self, handle: int) -> None:
        super().fsync(handle)
        self._fail("fsync")

    def fdatasync(self, handle: int) -> None:
        super().fdatasync(handle)
        self._fail("fdatasync")


@pytest.mark.req("JF-ATOM-001", "JF-ATOM-004")
@pytest.mark.parametrize("failing", ["fdatasync", "fsync"])
def test_a_rolled_back_commit_stays_rolled_back_after_a_power_loss(failing: str) -> None:
    """The record of a commit that raised may have reached the disk; the rollback's own
    sync must make sure no reboot brings it back."""
    directory = "/simulated/store"
    disk = WritebackThenFailDisk()
    with FileStore.open_sync(directory, fs=disk) as store:
        store.commit_sync(Projection.of({"a": 1}))
    with FileStore.open_sync(directory, fs=disk) as store:  # the next commit extends the log
        if failing == "fdatasync":
            store.commit_sync(Projection.of({"a": 2}))  # now the record fits: no fsync
        disk.failing = {failing}
        with pytest.raises(StoreUnavailable, match=f"injected {failing}"):
            store.commit_sync(Projection.of({"b": 2}))
        before = state_of(store.image)
        for entries, data in POWER_LOSS_VIEWS:
            with FileStore.open_sync(directory, fs=disk.after_power_loss(entries, data)) as again:
                assert state_of(again.image) == before, (entries, data)
        store.commit_sync(Projection.of({"c": 3}))
        after = state_of(store.image)
    for entries, data in POWER_LOSS_VIEWS:
        with FileStore.open_sync(directory, fs=disk.after_power_loss(entries, data)) as again:
            assert state_of(again.image) == after, (entries, data)


@pytest.mark.req("JF-STORE-021")
@pytest.mark.parametrize(
    ("failing", "passes"),
    [("fsync", 0), ("rename", 0), ("fsync_dir", 0), ("fsync", 1)],
    ids=["snapshot fsync", "snapshot rename", "directory fsync", "manifest fsync"],
)
def test_checkpoint_failing_before_the_manifest_rename_changes_nothing(
    tmp_path: Path, failing: str, passes: int
) -> None:
    fs = FailingFileSystem()
    with FileStore.open_sync(tmp_path, fs=fs) as store:
        store.commit_sync(Projection.of({"a": 1}))
        before, image = _files(tmp_path), state_of(store.image)
        fs.failing, fs.passes = {failing}, passes
        with pytest.raises(StoreUnavailable, match="injected"):
            store.checkpoint_sync()
        assert not fs.failing
        assert state_of(store.image) == image
        assert _files(tmp_path) == before
        store.commit_sync(Projection.of({"b": 2}))
        store.checkpoint_sync()
        assert store.image.change_log() == []
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == {"a": 1, "b": 2}
        assert store.image.change_log() == []


@pytest.mark.req("JF-STORE-021")
@pytest.mark.parametrize("failing", ["rename", "fsync_dir"])
def test_checkpoint_failing_at_or_after_the_manifest_rename_breaks_the_store(
    tmp_path: Path, failing: str
) -> None:
    fs = FailingFileSystem()
    store = FileStore.open_sync(tmp_path, fs=fs)
    store.commit_sync(Projection.of({"a": 1}))
    fs.failing, fs.passes = {failing}, 1
    with pytest.raises(StoreUnavailable, match="injected") as failed:
        store.checkpoint_sync()
    assert failed.value.state == "broken" and not fs.failing
    with pytest.raises(StoreUnavailable, match="broken"):
        store.commit_sync(Projection.of({"b": 2}))
    store.close_sync()
    with FileStore.open_sync(tmp_path) as again:
        assert again.image.store_json() == {"a": 1}
