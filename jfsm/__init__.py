"""jfsm: Jump Forward agent memory, as a state-machine spec and a reference engine.

The public API is curated in `__all__`: the engine and its blocking facade, the stores, the
compress.v2 executor, the records an embedder passes in, and the error hierarchy; and
`jfsm.testing`, the in-process fake compressor for tests and demos. Everything else is
internal and may change.

`PostgresStore` and `migrate_postgres` need the `postgres` extra (psycopg 3): they are
imported on first use, so `import jfsm` works without it, and naming them without psycopg
raises `ImportError` saying which extra to install.
"""

from typing import TYPE_CHECKING, Any

from jfsm._version import __version__
from jfsm.compressor import Compressor
from jfsm.engine import CompressionReport, GameEngine
from jfsm.errors import (
    CompressionPending,
    InvalidInput,
    InvalidTransition,
    JfsmError,
    QuotaExceeded,
    StoreCorrupted,
    StoreLocked,
    StoreUnavailable,
    TransportError,
)
from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.records import Participant
from jfsm.spec import constants
from jfsm.stores import FileStore, MemoryStore, Store
from jfsm.sync import SyncGameEngine
from jfsm.text import canonical_length, canonical_text, count
from jfsm.transport import HttpCompressor, SyncHttpCompressor

if TYPE_CHECKING:  # for type checkers and the API page; at run time `__getattr__` below
    from jfsm.stores.postgres import PostgresStore
    from jfsm.stores.postgres import migrate as migrate_postgres

__all__ = [
    "CompressionPending",
    "CompressionReport",
    "Compressor",
    "FileStore",
    "GameEngine",
    "HttpCompressor",
    "InvalidInput",
    "InvalidTransition",
    "JfsmError",
    "MemoryStore",
    "Participant",
    "PostgresStore",
    "Projection",
    "QuotaExceeded",
    "Store",
    "StoreCorrupted",
    "StoreImage",
    "StoreLocked",
    "StoreUnavailable",
    "SyncGameEngine",
    "SyncHttpCompressor",
    "TransportError",
    "__version__",
    "canonical_length",
    "canonical_text",
    "constants",
    "count",
    "migrate_postgres",
]


def __getattr__(name: str) -> Any:
    """The PostgreSQL store's names, imported on first use (they need psycopg)."""
    if name == "PostgresStore":
        from jfsm.stores.postgres import PostgresStore

        return PostgresStore
    if name == "migrate_postgres":
        from jfsm.stores.postgres import migrate

        return migrate
    raise AttributeError(f"module 'jfsm' has no attribute {name!r}")
