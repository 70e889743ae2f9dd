"""The durable file store: one game's workflowStore and change log in one directory.

**What it promises.** A commit is all or nothing: once `commit` returns, the projection is
on disk (its `fdatasync` is the commit point); a crash at any instant, or a failure of any
write, reopens to the state before or after the projection or checkpoint in flight, never
to a mix (JF-ATOM). One writer at a time: a directory lock (`StoreLocked` for a second
process), or, in shared mode, a lease and a fencing token checked under a short lock
around every write (`StoreFenced`, JF-STORE-010..014). Damage that no crash can leave is
`StoreCorrupted` naming the file and byte offset; nothing is changed then.

**The modules.** `store` (`FileStore`: the commit protocol, its async and blocking
surfaces, its errors), `log`, `manifest`, `snapshot` and `scan` (the bytes of each file,
read in bounded windows), `directory` (which files are live, leftovers or foreign),
`fsio` (the file-system seam), `crashfs` (a process that dies at a write boundary, for
crash tests), `lease` (leases and fencing tokens of a directory shared by processes).

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

# Shared mode (decision R95)

Opened with a `fence` (`jfsm.stores.file.lease.FileLease`) over an `OsFileSystem(shared=True)`,
the store holds no lock for its life: several processes on one host may hold stores of one
game, and the game's lease decides which of them writes. Every write (the record's
`pwrite`+`fdatasync`, a checkpoint's or seed's files) runs under the game's short lock and
only while the lease file still names this store's token; otherwise it raises `StoreFenced`
and writes nothing, and the store is `fenced` from then on. `close` trims the preallocation
only while still the owner (a fenced store never touches the files again) and ends the lease.
"""

from jfsm.stores.file.store import FileStore

__all__ = ["FileStore"]
