"""Which files of a store directory are live, which are leftovers, which are foreign.

Reading only: `survey` decides from the names in the directory (and the manifest's bytes),
`read_contents` reads the live snapshot and log into an image. Neither writes, truncates or
deletes anything: `FileStore.open` acts on what they found, `jfsm inspect` only reports it.

# The epoch format (decision R173)

A store that processes of a shared directory own is in the epoch format
(`jfsm.stores.file.epochs`): once an epoch of it is established, the latest established
epoch is the store, and every other file (other epochs, the single-process files it was
converted from) is a leftover. `read_contents` reads it so (`Contents.epoch`), read only:
an epoch still being opened counts as not established. Without an established epoch the
rules below apply (`read_plain_contents`); a manifest that marks the epoch format is then
`StoreCorrupted`.

# With a manifest (decision R27)

The manifest names generation g's snapshot (none for g = 0) and log; they are the store.
Every other file with a store name is classified by its generation:

- a temp file (`snapshot.<n>.tmp`, `manifest.tmp`): never read, a leftover;
- a snapshot or log of a generation below g: superseded by the checkpoint that wrote the
  manifest, a leftover;
- a snapshot of generation g that the manifest does not name, a snapshot of g + 1, or an
  *empty* log of g + 1: what an interrupted checkpoint leaves, a leftover (none of them holds
  a commit: commits go only to the log the manifest names);
- a log of g + 1 holding records, or any file of a later generation: no run of the protocol
  leaves it, so the manifest may be stale: `StoreCorrupted` naming the file, nothing removed.

A live file that is missing, or a live log whose header record does not name the manifest's
store and generation, is `StoreCorrupted` naming it. Files whose names the store never
writes are left alone.

# Without a manifest

- No snapshot and no log: a new store (or one whose creation was interrupted before its
  manifest): generation 0, empty.
- Otherwise a store written before R27 (the legacy rules, tightened): the newest snapshot's
  generation g is live, its log must exist (`StoreCorrupted` naming it otherwise), two
  snapshots of g or a non-empty log newer than g are `StoreCorrupted`, older generations and
  an empty log of g + 1 are leftovers; a header record at the start of the live log (a
  store whose manifest was deleted) gives the store's id back. `FileStore.open` then writes
  the manifest (migration).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from jfsm.image import StoreImage
from jfsm.stores.file.epochs import (
    EpochState,
    epochs_of,
    latest_established,
    parse_epoch_name,
    read_state,
)
from jfsm.stores.file.log import has_commits, header_store, log_header, read_log, tail_is_zeros
from jfsm.stores.file.manifest import (
    MANIFEST_NAME,
    FileName,
    Manifest,
    decode_manifest,
    is_epochs_marker,
    log_name,
    parse_name,
)
from jfsm.stores.file.scan import corrupted
from jfsm.stores.file.snapshot import read_snapshot

__all__ = ["Contents", "Survey", "read_contents", "read_plain_contents", "survey"]


@dataclass(frozen=True, slots=True)
class Survey:
    """What a directory holds: the live files, whether they come from a manifest, whether
    the store is new (no live log yet), and the leftovers an open removes."""

    live: Manifest
    has_manifest: bool
    fresh: bool
    leftovers: tuple[str, ...]


def survey(directory: str, names: Iterable[str], read: Callable[[str], bytes]) -> Survey:
    """Classify the files of `directory` (module docstring). `read(path)` reads a file.

    Raises `StoreCorrupted` naming the file for a damaged manifest, a missing live file or a
    file no run of the store's protocol leaves behind; the file system's `OSError`.
    """
    files: dict[str, FileName] = {}
    for name in sorted(names):
        parsed = parse_name(name)
        if parsed is not None:
            files[name] = parsed
    if MANIFEST_NAME in files:
        path = os.path.join(directory, MANIFEST_NAME)
        data = read(path)
        if is_epochs_marker(data):
            raise corrupted(path, None, "marks the epoch format, but no epoch is established")
        live = decode_manifest(path, data)
        for live_name in (live.snapshot, live.log):
            if live_name is not None and live_name not in files:
                path = os.path.join(directory, live_name)
                raise corrupted(path, None, "missing: the manifest names it as live")
        leftovers = _classify(directory, files, live, read)
        return Survey(live, True, False, tuple(leftovers))
    if not any(f.kind in ("snapshot", "log") for f in files.values()):
        temps = [n for n, f in files.items() if f.kind.endswith("-tmp")]
        return Survey(Manifest(0, None, log_name(0)), False, True, tuple(temps))
    live = _legacy_live(directory, files)
    leftovers = _classify(directory, files, live, read)
    if live.log not in files:
        path = os.path.join(directory, live.log)
        raise corrupted(path, None, "missing: the log of the newest snapshot's generation")
    return Survey(live, False, False, tuple(leftovers))


def _legacy_live(directory: str, files: dict[str, FileName]) -> Manifest:
    """The live files of a directory without a manifest: the newest snapshot and its log."""
    snapshots: dict[int, list[str]] = {}
    for name, parsed in files.items():
        if parsed.kind == "snapshot":
            assert parsed.generation is not None
            snapshots.setdefault(parsed.generation, []).append(name)
    generation = max(snapshots, default=0)
    found = snapshots.get(generation, [])
    if len(found) > 1:
        path = os.path.join(directory, found[1])
        raise corrupted(path, None, f"two snapshots of generation {generation}")
    return Manifest(generation, found[0] if found else None, log_name(generation))


def _classify(
    directory: str, files: dict[str, FileName], live: Manifest, read: Callable[[str], bytes]
) -> list[str]:
    """The leftovers among `files` given the `live` ones; `StoreCorrupted` for a foreign one."""
    g = live.generation
    leftovers = []
    for name, parsed in files.items():
        if parsed.kind in ("manifest", "lock") or name in (live.snapshot, live.log):
            continue
        if parsed.kind.endswith("-tmp"):
            leftovers.append(name)
            continue
        assert parsed.generation is not None
        path = os.path.join(directory, name)
        if parsed.generation <= g or (parsed.generation == g + 1 and parsed.kind == "snapshot"):
            leftovers.append(name)
        elif parsed.generation == g + 1 and not has_commits(read(path)):
            leftovers.append(name)  # the new log of an interrupted checkpoint
        elif parsed.generation == g + 1:
            raise corrupted(
                path, 0, f"log of generation {g + 1} holds records; the live one is {g}"
            )
        else:
            raise corrupted(
                path, None, f"generation {parsed.generation} is newer than the live generation {g}"
            )
    return leftovers


@dataclass(frozen=True, slots=True)
class Contents:
    """A store as read: its survey, its image, the live log's size and the end of its last
    valid record, and what follows that end (`None`, `"zeros"`, `"torn"` or `"sealed"`).
    `epoch`: the latest established epoch of a store in the epoch format (its survey then
    names its last log and base, and every other file as a leftover), else None."""

    survey: Survey
    image: StoreImage
    log_size: int
    end: int
    tail: str | None
    epoch: EpochState | None = None


def read_contents(
    directory: str,
    names: Iterable[str],
    read: Callable[[str], bytes],
    *,
    quota: int,
    verify: bool = False,
) -> Contents:
    """The store in `directory` as its files hold it, in either format (module docstring),
    writing nothing. Raises `StoreCorrupted` naming the file, or the file system's
    `OSError`."""
    names = list(names)
    epochs = epochs_of(names)
    latest = latest_established(directory, epochs, read, below=2**64)
    if latest is None:
        plain = [name for name in names if parse_epoch_name(name) is None]
        return read_plain_contents(directory, plain, read, quota=quota, verify=verify)
    state = read_state(directory, epochs[latest], read, quota=quota)
    last, header = state.last, state.header
    live = {log.name for log in state.chain} | {header.base, f"lease.{latest:020d}"}
    leftovers = tuple(name for name in sorted(names) if name not in live and _store_file(name))
    survey = Survey(
        Manifest(header.generation, header.base, last.name, header.store), True, False, leftovers
    )
    tail = None
    if last.sealed is not None:
        tail = "sealed"
    elif last.torn:
        tail = "torn"
    return Contents(survey, state.image, last.size, last.end, tail, state)


def _store_file(name: str) -> bool:
    parsed = parse_name(name)
    return parse_epoch_name(name) is not None or (
        parsed is not None and parsed.kind not in ("manifest", "lock")
    )


def read_plain_contents(
    directory: str,
    names: Iterable[str],
    read: Callable[[str], bytes],
    *,
    quota: int,
    verify: bool = False,
) -> Contents:
    """Survey `directory` (the single-process format) and read its live snapshot and log,
    writing nothing.

    Raises `StoreCorrupted` (as `survey`, or a damaged snapshot or log) or the file system's
    `OSError`.
    """
    found = survey(directory, names, read)
    live = found.live
    base: dict[str, bytes] = {}
    if live.snapshot is not None:
        path = os.path.join(directory, live.snapshot)
        crc = parse_name(live.snapshot)
        assert crc is not None and crc.crc is not None
        base = read_snapshot(path, read(path), crc.crc, verify)
    image = StoreImage(base, quota=quota)
    log_path = os.path.join(directory, live.log)
    data = b"" if found.fresh else read(log_path)
    if not found.has_manifest and not found.fresh:  # its log may still have a header
        named = header_store(log_path, data)
        if named is not None and named[0] != live.generation:
            raise corrupted(log_path, 0, f"log header names generation {named[0]}")
        if named is not None:
            live = Manifest(live.generation, live.snapshot, live.log, named[1])
            found = replace(found, live=live)
    header = None if live.store is None else log_header(live.generation, live.store)
    projections, end = read_log(log_path, data, verify, None if found.fresh else header)
    for projection in projections:
        image.apply_unchecked(projection)
    tail = None if end == len(data) else "zeros" if tail_is_zeros(data, end) else "torn"
    return Contents(found, image, len(data), end, tail)
