"""Store backends behind one protocol: `MemoryStore` and the durable `FileStore`."""

from jfsm.stores.base import Store
from jfsm.stores.file import FileStore
from jfsm.stores.memory import MemoryStore

__all__ = ["FileStore", "MemoryStore", "Store"]
