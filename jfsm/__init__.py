"""jfsm: Jump Forward agent memory, as a state-machine spec and a reference engine.

The public API is curated in `__all__`: the engine and its blocking facade, the stores, the
compress.v2 executor, the records an embedder passes in, and the error hierarchy; and
`jfsm.testing`, the in-process fake compressor for tests and demos. Everything else is
internal and may change. The names are imported lazily, on first use.

`PostgresStore` and `migrate_postgres` need the `postgres` extra (psycopg 3): `import jfsm`
works without it, and naming them without psycopg raises `ImportError` saying which extra
to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jfsm._version import __version__

if TYPE_CHECKING:
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
    from jfsm.stores.postgres.store import PostgresStore
    from jfsm.stores.postgres.store import migrate as migrate_postgres
    from jfsm.sync import SyncGameEngine
    from jfsm.text import canonical_length, canonical_text, count
    from jfsm.transport import HttpCompressor, SyncHttpCompressor

# Each public name and the module it lives in: imported on first use (PEP 562), so that
# `import jfsm` and `jfsm --version` stay cheap (issue 24: under 0.1 s of CPU).
_LAZY = {
    "CompressionPending": "jfsm.errors",
    "CompressionReport": "jfsm.engine",
    "Compressor": "jfsm.compressor",
    "FileStore": "jfsm.stores",
    "GameEngine": "jfsm.engine",
    "HttpCompressor": "jfsm.transport",
    "InvalidInput": "jfsm.errors",
    "InvalidTransition": "jfsm.errors",
    "JfsmError": "jfsm.errors",
    "MemoryStore": "jfsm.stores",
    "Participant": "jfsm.records",
    "PostgresStore": "jfsm.stores.postgres",
    "Projection": "jfsm.projection",
    "QuotaExceeded": "jfsm.errors",
    "Store": "jfsm.stores",
    "StoreCorrupted": "jfsm.errors",
    "StoreImage": "jfsm.image",
    "StoreLocked": "jfsm.errors",
    "StoreUnavailable": "jfsm.errors",
    "SyncGameEngine": "jfsm.sync",
    "SyncHttpCompressor": "jfsm.transport",
    "TransportError": "jfsm.errors",
    "canonical_length": "jfsm.text",
    "canonical_text": "jfsm.text",
    "constants": "jfsm.spec",
    "count": "jfsm.text",
    "migrate_postgres": "jfsm.stores.postgres:migrate",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use; `AttributeError` for any other name."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, _, attribute = module.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


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
