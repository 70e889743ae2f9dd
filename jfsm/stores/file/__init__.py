"""The durable file store: one game's workflowStore and change log in one directory.

**What it promises.** A commit is all or nothing: once `commit` returns, the projection is
on disk (its `fdatasync` is the commit point); a crash at any instant, or a failure of any
write, reopens to the state before or after the projection or checkpoint in flight, never
to a mix (JF-ATOM). One writer at a time: a directory lock (`StoreLocked` for a second
process), or, in shared mode, ownership epochs: each write of an owner lands in its own
epoch's log and counts only if no newer owner sealed that log first (`StoreFenced`,
JF-STORE-010..014, 045..049). Damage that no crash can leave is `StoreCorrupted` naming the
file and byte offset; nothing is changed then.

**The modules.** `store` (`FileStore`: the commit protocol, its async and blocking
surfaces, its errors), `log`, `manifest`, `snapshot` and `scan` (the bytes of each file,
read in bounded windows), `directory` (which files are live, leftovers or foreign),
`fsio` (the file-system seam), `crashfs` (a process that dies at a write boundary, for
crash tests); for a directory several processes share: `epochs` (the bytes of an epoch
store), `ownership` (taking, writing and sealing epochs), `lease` (leases: liveness only)
and `tokens` (the directory's fencing tokens).

# Layout

One directory per store (the bytes of each file: `jfsm.stores.file.manifest` for the file names
and the manifest, `jfsm.stores.file.log` for the log's records, `jfsm.stores.file.snapshot` for the
snapshot, `jfsm.stores.file.scan` for the windowed reading, decision R51):

- `manifest`: names the live snapshot and log (decision R27, the way LevelDB's `CURRENT`
  names its live files). Rewritten only by a checkpoint, by replacement.
- `snapshot.<gen>.<crc>.json`: the checkpoint base of generation `gen` (8 digits), the JCS
  object key -> value; `crc` is the CRC-32 of the file's bytes in 8 hex digits, so a
  damaged snapshot is detected. Generation 0 has no snapshot file: its base is `{}`.
- `log.<gen>.jfl`: a header record naming the store's id and the generation (logs from
  before R27 have none), then the projections committed since that checkpoint, one record
  each, possibly followed by zeros (unused preallocation).
- `snapshot.<gen>.tmp`, `manifest.tmp`: being written; never read, removed at open.
- `lock`: locked (as well as the directory itself) by every writer, for writers older than
  R28 that lock only this file.

Other files in the directory are left alone. Which files are live, leftovers or foreign is
decided by `jfsm.stores.file.directory`.

# Shared mode (decisions R95, R173)

Opened with `FileStore.open_shared`, the store holds no lock but its directory's, taken
shared (R120): several processes on one host may hold stores of one game, and the order of
the file system decides which of them writes. Each ownership of the game is an *epoch*:
files of its own named by its fencing token (`epoch.<T>.<g>.jfl`, `base.<T>.<g>.<crc>.json`,
`lease.<T>`; `jfsm.stores.file.epochs`), and the `manifest` says `jfsm-file-store/epochs`.
The owner appends each record with one `O_APPEND` write, syncs it, and checks that it landed
where its previous record ended; a new owner first appends a *seal* to the old epoch's log,
so a record of the old owner lands before the seal (the new owner reads it) or after it
(void: the old owner answers `StoreFenced`). Nothing waits for a stopped owner and nothing
signals it (`jfsm.stores.file.ownership`). The log has no preallocation, and `close` trims
nothing: it ends the lease (while still the owner) and closes the log.

A plain `FileStore.open` of a store in the epoch format converts it back to the layout
above (it holds the store exclusively); the first shared open of a store in the layout
above converts it to epochs (decision R175).
"""

from jfsm.stores.file.store import FileStore

__all__ = ["FileStore"]
