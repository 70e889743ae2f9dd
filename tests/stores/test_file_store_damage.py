"""The durable file store against a hostile environment: its directory damaged, its lock
file deleted, a read-only or refusing file system, and `jfsm inspect` on all of it.

- **The lock** (JF-STORE-020): deleting `lock`, or every file, under a writer lets no second
  writer in.
- **The manifest** (JF-STORE-021 to JF-STORE-023): stray, missing and foreign files are
  refused naming the file, never adopted or deleted; a store without a manifest (written
  before R27) opens by the legacy rules and is given one.
- **The directory-damage corpus** (JF-STORE-026, JF-STORE-024): every file of a store (with
  and without its manifest) removed, truncated, replaced, flipped or swapped, and stray
  files added: `FileStore.open` finds the acknowledged state or refuses naming a file of the
  directory, changing nothing when it refuses; `jfsm inspect` changes no byte, on a writable
  and on a read-only file system.
- **File-system refusals** (JF-STORE-025): `store_unavailable` with the errno name, and one
  line and exit status 2 from `jfsm inspect`.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jfsm.cli import main
from jfsm.errors import InvalidInput, StoreCorrupted, StoreLocked, StoreUnavailable
from jfsm.inspection import NotAStore, examine
from jfsm.projection import Projection
from jfsm.stores import FileStore, MemoryStore
from jfsm.stores.file.fsio import OsFileSystem
from jfsm.stores.file.log import encode_record
from jfsm.stores.file.manifest import MANIFEST_NAME

REPO = Path(__file__).resolve().parents[2]

COMMITS = [
    Projection.of({"a": 1, "𝄞": "first"}),
    Projection.of({"b": [1, 2]}, ["a"]),
    # checkpoint here
    Projection.of({"c": {"é": "third"}}),
    Projection.of({"d": "x" * 300}),
    Projection.of({"e": 5}, ["b"]),
]
CHECKPOINT_AFTER = 2


def states() -> list[dict[str, Any]]:
    """states[k]: the store after the first k commits."""
    memory = MemoryStore()
    out = [memory.image.store_json()]
    for projection in COMMITS:
        memory.image.apply(projection)
        out.append(memory.image.store_json())
    return out


STATES = states()
ACKNOWLEDGED = STATES[-1]


def build(directory: Path, *, manifest: bool = True) -> Path:
    """A closed store holding every commit: generation 1, three records in its log."""
    with FileStore.open_sync(directory) as store:
        for i, projection in enumerate(COMMITS):
            if i == CHECKPOINT_AFTER:
                store.checkpoint_sync()
            store.commit_sync(projection)
    if not manifest:
        (directory / MANIFEST_NAME).unlink()  # what a version before R27 left
    return directory


def digest(directory: Path) -> dict[str, str]:
    """Every entry of `directory` and a hash of its bytes (mode bits included)."""
    out = {}
    for path in sorted(directory.iterdir()):
        data = path.read_bytes() if path.is_file() else b"<dir>"
        out[path.name] = f"{oct(path.stat().st_mode)} {hashlib.sha256(data).hexdigest()}"
    return out


def live(directory: Path) -> dict[str, Path]:
    (snapshot,) = directory.glob("snapshot.*.json")
    (log,) = directory.glob("log.*.jfl")
    return {"manifest": directory / MANIFEST_NAME, "snapshot": snapshot, "log": log}


# -- the lock --------------------------------------------------------------------------------
@pytest.mark.req("JF-STORE-020", "JF-ATOM-007")
def test_deleting_the_lock_file_lets_no_second_writer_in(tmp_path: Path) -> None:
    """Before R28 the second open got in, both committed, and one's commits were lost."""
    with FileStore.open_sync(tmp_path) as writer:
        writer.commit_sync(Projection.of({"a": 1}))
        (tmp_path / "lock").unlink()
        with pytest.raises(StoreLocked):
            FileStore.open_sync(tmp_path)
        for path in tmp_path.iterdir():  # every file, even the live ones
            path.unlink()
        with pytest.raises(StoreLocked):
            FileStore.open_sync(tmp_path)


@pytest.mark.req("JF-STORE-020")
def test_a_writer_before_r28_holding_only_the_lock_file_keeps_a_new_writer_out(
    tmp_path: Path,
) -> None:
    import fcntl

    build(tmp_path)
    fd = os.open(tmp_path / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(StoreLocked):
            FileStore.open_sync(tmp_path)
    finally:
        os.close(fd)
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == ACKNOWLEDGED


# -- the manifest ----------------------------------------------------------------------------
def _stray_snapshot(directory: Path, generation: int, text: bytes = b"{}") -> Path:
    path = directory / f"snapshot.{generation:08d}.{zlib.crc32(text):08x}.json"
    path.write_bytes(text)
    return path


@pytest.mark.req("JF-STORE-021", "JF-STORE-022")
@pytest.mark.parametrize("manifest", [True, False], ids=["manifest", "before R27"])
def test_a_stray_newer_snapshot_is_refused_not_adopted(tmp_path: Path, manifest: bool) -> None:
    """Before R27 it was adopted (0 keys) and the real snapshot and log deleted."""
    build(tmp_path, manifest=manifest)
    stray = _stray_snapshot(tmp_path, 99)
    before = digest(tmp_path)
    with pytest.raises(StoreCorrupted) as refused:
        FileStore.open_sync(tmp_path)
    named = refused.value.details["file"]
    assert named == str(stray if manifest else tmp_path / "log.00000099.jfl")
    assert digest(tmp_path) == before
    stray.unlink()
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == ACKNOWLEDGED


@pytest.mark.req("JF-STORE-021", "JF-STORE-022")
@pytest.mark.parametrize("manifest", [True, False], ids=["manifest", "before R27"])
def test_a_deleted_live_log_is_refused_naming_it(tmp_path: Path, manifest: bool) -> None:
    """Before R27 the store opened without every commit since the checkpoint."""
    build(tmp_path, manifest=manifest)
    log = live(tmp_path)["log"]
    log.unlink()
    before = digest(tmp_path)
    with pytest.raises(StoreCorrupted) as refused:
        FileStore.open_sync(tmp_path)
    assert refused.value.details["file"] == str(log)
    assert "missing" in str(refused.value)
    assert digest(tmp_path) == before


@pytest.mark.req("JF-STORE-022")
def test_a_snapshot_of_the_next_generation_is_an_interrupted_checkpoint(tmp_path: Path) -> None:
    """What a checkpoint interrupted before its manifest leaves: removed, nothing lost."""
    build(tmp_path)
    stray = _stray_snapshot(tmp_path, 2)
    (tmp_path / "log.00000002.jfl").write_bytes(b"")
    (tmp_path / "manifest.tmp").write_bytes(b"half")
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == ACKNOWLEDGED
    assert not stray.exists() and not (tmp_path / "manifest.tmp").exists()
    assert not (tmp_path / "log.00000002.jfl").exists()


@pytest.mark.req("JF-STORE-022")
def test_records_in_a_log_no_manifest_names_are_refused(tmp_path: Path) -> None:
    build(tmp_path)
    newer = tmp_path / "log.00000002.jfl"
    newer.write_bytes(encode_record(Projection.of({"z": 1})))
    with pytest.raises(StoreCorrupted) as refused:
        FileStore.open_sync(tmp_path)
    assert refused.value.details["file"] == str(newer)
    assert newer.exists()


@pytest.mark.req("JF-STORE-021", "JF-STORE-026")
@pytest.mark.parametrize("source", ["another store", "an older generation"])
def test_a_log_put_in_place_of_the_live_one_is_refused(tmp_path: Path, source: str) -> None:
    """Before the log header, valid records of another log were adopted as the store's."""
    directory = build(tmp_path / "store")
    (_foreign_log if source == "another store" else _older_log)(directory)
    before = digest(directory)
    with pytest.raises(StoreCorrupted, match="log header") as refused:
        FileStore.open_sync(directory)
    assert refused.value.details["file"] == str(live(directory)["log"])
    assert digest(directory) == before


@pytest.mark.req("JF-STORE-023")
def test_a_store_without_a_manifest_opens_and_is_given_one(tmp_path: Path) -> None:
    build(tmp_path, manifest=False)
    files = live(tmp_path)
    (tmp_path / "log.00000000.jfl").write_bytes(encode_record(COMMITS[0]))  # a leftover
    with FileStore.open_sync(tmp_path) as store:
        assert store.image.store_json() == ACKNOWLEDGED
    manifest = (tmp_path / MANIFEST_NAME).read_bytes().decode()
    assert files["snapshot"].name in manifest and files["log"].name in manifest
    assert '"store":"' in manifest  # given back by the live log's header record
    assert not (tmp_path / "log.00000000.jfl").exists()
    _stray_snapshot(tmp_path, 5)  # from now on the manifest rules apply
    with pytest.raises(StoreCorrupted, match=r"snapshot\.00000005"):
        FileStore.open_sync(tmp_path)


# -- the directory-damage corpus -------------------------------------------------------------
Damage = Callable[[Path], None]


def _truncate(name: str, at: Callable[[int], int]) -> Damage:
    def damage(directory: Path) -> None:
        path = (
            live(directory)[name] if name in ("manifest", "snapshot", "log") else directory / name
        )
        os.truncate(path, at(path.stat().st_size))

    return damage


def _replace(name: str, data: bytes) -> Damage:
    def damage(directory: Path) -> None:
        live(directory)[name].write_bytes(data)

    return damage


def _flip(name: str, where: Callable[[int], int]) -> Damage:
    def damage(directory: Path) -> None:
        path = live(directory)[name]
        data = bytearray(path.read_bytes())
        data[where(len(data))] ^= 0x20
        path.write_bytes(bytes(data))

    return damage


def _remove(name: str) -> Damage:
    def damage(directory: Path) -> None:
        (live(directory)[name] if name != "lock" else directory / "lock").unlink()

    return damage


def _add(name: str, data: bytes) -> Damage:
    def damage(directory: Path) -> None:
        (directory / name).write_bytes(data)

    return damage


def _swap(a: str, b: str) -> Damage:
    def damage(directory: Path) -> None:
        files = live(directory)
        data_a, data_b = files[a].read_bytes(), files[b].read_bytes()
        files[a].write_bytes(data_b)
        files[b].write_bytes(data_a)

    return damage


def _old_manifest(directory: Path) -> None:
    """The manifest of the store before its checkpoint (generation 0), put back."""
    old = build(directory.parent / (directory.name + "-old"))
    shutil.rmtree(old)
    with FileStore.open_sync(old) as store:
        store.commit_sync(COMMITS[0])
    (directory / MANIFEST_NAME).write_bytes((old / MANIFEST_NAME).read_bytes())
    shutil.rmtree(old)


def _with_manifest(directory: Path) -> None:
    if not (directory / MANIFEST_NAME).exists():
        raise ValueError("without a manifest a log's header is all there is to go by")


def _needs_manifest(damage: Damage) -> Damage:
    def guarded(directory: Path) -> None:
        _with_manifest(directory)
        damage(directory)

    return guarded


def _foreign_log(directory: Path) -> None:
    """The live log's bytes replaced by those of another store's log of the same generation
    and the same commits: valid records, another store."""
    _with_manifest(directory)
    other = build(directory.parent / (directory.name + "-other"))
    live(directory)["log"].write_bytes(live(other)["log"].read_bytes())
    shutil.rmtree(other)


def _older_log(directory: Path) -> None:
    """The live log's bytes replaced by this store's log from before its checkpoint."""
    _with_manifest(directory)
    older = directory.parent / (directory.name + "-older")
    with FileStore.open_sync(older) as store:
        for projection in COMMITS[:CHECKPOINT_AFTER]:
            store.commit_sync(projection)
        (log,) = older.glob("log.*.jfl")
        data = log.read_bytes().rstrip(b"\x00")
    live(directory)["log"].write_bytes(data)
    shutil.rmtree(older)


def corpus() -> list[tuple[str, Damage, bool]]:
    """(name, damage, whether a committed prefix is an acceptable outcome)."""
    cases: list[tuple[str, Damage, bool]] = []
    for name in ("manifest", "snapshot", "log", "lock"):
        cases.append((f"missing {name}", _remove(name), False))
    cuts = {"empty": lambda n: 0, "1 byte": lambda n: 1, "half": lambda n: n // 2}
    cuts["all but 1"] = lambda n: n - 1
    for name in ("manifest", "snapshot", "log"):
        for label, cut in cuts.items():
            # A log cut anywhere reads as a crash: nothing records its committed length.
            cases.append((f"{name} truncated ({label})", _truncate(name, cut), name == "log"))
        for label, data in {
            "garbage": b"garbage\n",
            "empty object": b"{}",
            "zeros": bytes(64),
            "a manifest": b'{"format":"jfsm-file-store/1","generation":0}\n00000000\n',
        }.items():
            # Without a manifest, a log without a header (as before R27) whose first
            # record is damaged reads as torn there: the committed prefix.
            cases.append((f"{name} replaced by {label}", _replace(name, data), name == "log"))
        record = encode_record(Projection.of({"x": 1}))
        replace = _replace(name, record)
        if name == "log":  # only the manifest can say the live log must have a header
            replace = _needs_manifest(replace)
        cases.append((f"{name} replaced by a log record", replace, False))
        for label, where in {"first byte": lambda n: 0, "middle": lambda n: n // 2}.items():
            # A flip in the log's middle record leaves a valid one after it: refused.
            cases.append((f"{name} flipped ({label})", _flip(name, where), name == "log"))
    cases.append(("log flipped (last byte)", _flip("log", lambda n: n - 1), True))
    for a, b in (("snapshot", "log"), ("manifest", "snapshot"), ("manifest", "log")):
        cases.append((f"{a} and {b} swapped", _swap(a, b), False))
    cases.append(("manifest of an older generation", _old_manifest, False))
    cases.append(("log of another store put in place", _foreign_log, False))
    cases.append(("log of an older generation put in place", _older_log, False))
    empty_crc = zlib.crc32(b"{}")
    for label, file, data in [
        ("snapshot of generation 99", f"snapshot.00000099.{empty_crc:08x}.json", b"{}"),
        ("snapshot of the next generation", f"snapshot.00000002.{empty_crc:08x}.json", b"{}"),
        ("snapshot of an old generation", f"snapshot.00000000.{empty_crc:08x}.json", b"{}"),
        ("second snapshot of the live generation", f"snapshot.00000001.{0:08x}.json", b"{}"),
        ("log of the next generation", "log.00000002.jfl", encode_record(COMMITS[0])),
        ("empty log of the next generation", "log.00000002.jfl", b""),
        ("log of generation 7", "log.00000007.jfl", b""),
        ("log of an old generation", "log.00000000.jfl", encode_record(COMMITS[0])),
        ("snapshot temp file", "snapshot.00000002.tmp", b"{"),
        ("manifest temp file", "manifest.tmp", b"half a manif"),
        ("unrelated file", "notes.txt", b"mine"),
    ]:
        cases.append((f"stray {label}", _add(file, data), False))
    return cases


CORPUS = corpus()


def _outcome(directory: Path) -> tuple[str, Any]:
    """Open the store: ("state", the store) or ("refused", the file named)."""
    try:
        with FileStore.open_sync(directory) as store:
            return "state", store.image.store_json()
    except StoreCorrupted as exc:
        return "refused", exc.details["file"]


def _inspect_outcome(directory: Path) -> str:
    try:
        report = examine(str(directory))
    except (NotAStore, StoreCorrupted, StoreUnavailable) as exc:
        return type(exc).__name__
    return f"keys={report['keys']} tail={report['files']['tail']}"


@contextlib.contextmanager
def read_only_file_system(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every write, creation, truncation, rename and removal fails with EROFS, as on a
    read-only mount (the tests may run as root, whom permission bits do not stop)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(args[0]) if args else "")

    real_open, real_builtin_open = os.open, builtins.open
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & writing:
            refuse(path)
        return real_open(path, flags, *args, **kwargs)

    def builtin_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if set(mode) & set("wax+"):
            refuse(file)
        return real_builtin_open(file, mode, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "open", os_open)
        patch.setattr(builtins, "open", builtin_open)
        for name in ("remove", "unlink", "replace", "rename", "ftruncate", "truncate", "mkdir"):
            patch.setattr(os, name, refuse)
        yield


@pytest.mark.req("JF-STORE-026", "JF-STORE-024", "JF-STORE-022", "JF-ATOM-006")
@pytest.mark.parametrize("manifest", [True, False], ids=["manifest", "before R27"])
def test_directory_damage_corpus(
    tmp_path: Path, manifest: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    pristine = build(tmp_path / "pristine", manifest=manifest)
    tally: dict[str, int] = {"state": 0, "refused": 0, "prefix": 0, "skipped": 0}
    for i, (name, damage, prefix_ok) in enumerate(CORPUS):
        directory = Path(shutil.copytree(pristine, tmp_path / f"case-{i}"))
        try:
            damage(directory)
        except (ValueError, FileNotFoundError):
            tally["skipped"] += 1  # not applicable without a manifest
            shutil.rmtree(directory)
            continue
        before = digest(directory)
        seen = _inspect_outcome(directory)
        assert digest(directory) == before, f"{name}: inspect changed the directory"
        with read_only_file_system(monkeypatch):
            assert _inspect_outcome(directory) == seen, f"{name}: read-only inspect differs"
            with pytest.raises((StoreUnavailable, StoreCorrupted)):
                FileStore.open_sync(directory)
        assert digest(directory) == before, f"{name}: a refused open changed the directory"
        kind, found = _outcome(directory)
        if kind == "refused":
            assert found.startswith(str(directory) + os.sep), name
            assert digest(directory) == before, f"{name}: a refusal changed the directory"
            tally["refused"] += 1
        elif found == ACKNOWLEDGED:
            tally["state"] += 1
        else:
            assert prefix_ok and found in STATES[CHECKPOINT_AFTER:], f"{name}: silent loss"
            tally["prefix"] += 1
        shutil.rmtree(directory)
    print(f"\n{len(CORPUS)} damages ({'with' if manifest else 'without'} manifest): {tally}")
    assert tally["refused"] > 25 and tally["state"] >= 5


# -- file-system refusals --------------------------------------------------------------------
class RefusingFileSystem(OsFileSystem):
    """The real disk whose `listdir` is refused (permission denied)."""

    def listdir(self, path: str) -> list[str]:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)


@pytest.mark.req("JF-STORE-025", "JF-ERR-001")
def test_file_system_refusals_at_open_are_store_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_bytes(b"")
    cases = {
        "ENOTDIR": tmp_path / "file" / "store",
        "ENAMETOOLONG": tmp_path / ("n" * 300),
    }
    for name, path in cases.items():
        with pytest.raises(StoreUnavailable) as refused:
            FileStore.open_sync(path)
        assert refused.value.details["errno_name"] == name, name
        assert name in str(refused.value)
    with pytest.raises(StoreUnavailable) as refused:
        FileStore.open_sync(tmp_path / "denied", fs=RefusingFileSystem())
    assert refused.value.details["errno_name"] == "EACCES"
    FileStore.open_sync(tmp_path / "denied").close_sync()  # the lock was released
    build(tmp_path / "store")
    with read_only_file_system(monkeypatch), pytest.raises(StoreUnavailable) as refused:
        FileStore.open_sync(tmp_path / "store")
    assert refused.value.details["errno_name"] == "EROFS"
    assert refused.value.state == "closed"


def _under_a_file(p: Path) -> Path:
    (p / "f").write_bytes(b"")
    return p / "f" / "x"


def _a_file(p: Path) -> Path:
    (p / "f").write_bytes(b"x")
    return p / "f"


def _stray_store(p: Path) -> Path:
    _stray_snapshot(build(p / "d"), 99)
    return p / "d"


@pytest.mark.slow
@pytest.mark.req("JF-STORE-025")
@pytest.mark.parametrize(
    ("make", "code"),
    [
        (_under_a_file, "store_unavailable: store {path} could not be read: ENOTDIR"),
        (
            lambda p: p / ("n" * 300),
            "store_unavailable: store {path} could not be read: ENAMETOOLONG",
        ),
        (_a_file, "not_a_store"),
        (lambda p: p, "not_a_store"),
        (_stray_store, "store_corrupted"),
    ],
    ids=["under a file", "name too long", "a file", "empty directory", "stray snapshot"],
)
def test_inspect_refusals_are_one_line_and_exit_2(
    tmp_path: Path, make: Callable[[Path], Path], code: str
) -> None:
    path = make(tmp_path)
    before = digest(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "jfsm.cli", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    expected = f"jfsm inspect: {code.format(path=path)}"
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(expected), proc.stderr
    assert digest(tmp_path) == before


# -- inspect reports, never repairs ----------------------------------------------------------
@pytest.mark.req("JF-STORE-024")
def test_inspect_creates_nothing_in_a_directory_that_is_not_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["inspect", str(tmp_path)]) == 2
    assert "not_a_store" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.req("JF-STORE-024", "JF-ATOM-006")
def test_inspect_reports_a_torn_tail_and_leftovers_without_repairing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build(tmp_path)
    log = live(tmp_path)["log"]
    with log.open("ab") as file:
        file.write(encode_record(Projection.of({"torn": 1}))[:-3])
    _add("snapshot.00000000.tmp", b"{")(tmp_path)
    before = digest(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"]["tail"] == "torn" and report["keys"] == len(ACKNOWLEDGED)
    assert report["files"]["leftovers"] == ["snapshot.00000000.tmp"]
    assert report["files"]["logBytes"] - report["files"]["committedBytes"] > 0
    assert main(["inspect", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "torn tail" in text and "the next open drops it" in text
    assert digest(tmp_path) == before
    with FileStore.open_sync(tmp_path) as store:  # the repair is open's job
        assert store.image.store_json() == ACKNOWLEDGED
    assert digest(tmp_path) != before


@pytest.mark.req("JF-STORE-024")
def test_inspect_reads_a_read_only_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    writable = capsys.readouterr().out
    with read_only_file_system(monkeypatch):
        assert main(["inspect", str(tmp_path), "--json"]) == 0
    assert capsys.readouterr().out == writable


@pytest.mark.req("JF-STORE-024", "JF-ATOM-007")
def test_inspect_refuses_a_store_a_writer_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FileStore.open_sync(tmp_path) as store:
        store.commit_sync(Projection.of({"a": 1}))
        assert main(["inspect", str(tmp_path)]) == 2
    assert "store_locked" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path)]) == 0


def test_a_path_the_system_cannot_take_is_invalid_input(tmp_path: Path) -> None:
    """`FileStore.open_sync("a\\0b")` raised a raw ValueError."""
    with pytest.raises(InvalidInput, match="not a usable path"):
        FileStore.open_sync(str(tmp_path / "a\0b"))


@pytest.mark.req("JF-ERR-016")
def test_a_store_folder_not_ours_is_refused_unless_trusted(tmp_path: Path) -> None:
    """A store folder writable by others, or a link to a folder: refused with EPERM in one
    line, nothing written there; trusted knowingly, the shared one opens (R74)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(StoreUnavailable, match="writable by group or others") as refused:
        FileStore.open_sync(shared)
    assert refused.value.details["errno_name"] == "EPERM"
    assert "\n" not in str(refused.value) and list(shared.iterdir()) == []
    FileStore.open_sync(shared, fs=OsFileSystem(trusted=True)).close_sync()
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(StoreUnavailable, match="symbolic link"):
        FileStore.open_sync(tmp_path / "link")
    with pytest.raises(StoreUnavailable, match="symbolic link"):
        FileStore.open_sync(tmp_path / "link", fs=OsFileSystem(trusted=True))
    assert list(real.iterdir()) == []


@pytest.mark.req("JF-ERR-016")
def test_an_open_store_writes_into_the_directory_it_locked(tmp_path: Path) -> None:
    """The store's files are reached through the locked directory's descriptor: a folder
    swapped in under its path (here a link to a neighbour's folder) receives nothing, and a
    trailing slash does not make a linked store folder acceptable."""
    outside = tmp_path / "outside"
    outside.mkdir()
    store = FileStore.open_sync(tmp_path / "s")
    try:
        store.commit_sync(Projection.of({"a": 1}))
        os.rename(tmp_path / "s", tmp_path / "moved")
        (tmp_path / "s").symlink_to(outside, target_is_directory=True)
        store.commit_sync(Projection.of({"b": 2}))
        store.checkpoint_sync()
        store.commit_sync(Projection.of({"c": 3}))
    finally:
        store.close_sync()
    assert list(outside.iterdir()) == []
    with FileStore.open_sync(tmp_path / "moved") as again:
        assert again.image.values_bytes() == {"a": b"1", "b": b"2", "c": b"3"}
    with pytest.raises(StoreUnavailable, match="symbolic link"):
        FileStore.open_sync(str(tmp_path / "s") + "/")
    assert list(outside.iterdir()) == []
