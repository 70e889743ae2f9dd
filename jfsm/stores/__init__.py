"""Store backends behind one protocol: `MemoryStore` and the durable `FileStore`.

`jfsm.stores.postgres.PostgresStore` (many games in one PostgreSQL database, one fenced owner
per game) needs the `jfsm[postgres]` extra and is imported from its module."""

from jfsm.stores.base import Store
from jfsm.stores.file import FileStore
from jfsm.stores.memory import MemoryStore

__all__ = ["FileStore", "MemoryStore", "Store"]
