"""Store backends behind one protocol: one game's workflowStore and its change log.

One protocol (`base.Store`), one package a durable backend, and what every backend shares
beside them:

- `base`: the `Store` protocol every backend implements (its image for reading, `commit`
  for changing, one projection at a time);
- `memory`: `MemoryStore`, not durable;
- `file/`: `FileStore`, one game in one directory (snapshot, checksummed log, manifest;
  a directory lock, or leases and fencing tokens for processes on one host sharing it);
- `postgres/`: `PostgresStore`, many games in one database, one leased owner a game
  (needs the `jfsm[postgres]` extra; `jfsm.stores.postgres` imports it on first use);
- `location`: a store named by a location string (a directory or a PostgreSQL target);
- `offload`: blocking store I/O run off the event loop.

The two backend packages import nothing of each other.
"""

from jfsm.stores.base import Store
from jfsm.stores.file.store import FileStore
from jfsm.stores.memory import MemoryStore

__all__ = ["FileStore", "MemoryStore", "Store"]
