"""jfsm: Jump Forward agent memory, as a state-machine spec and a reference engine.

The public API is curated in `__all__`: the engine and its blocking facade, the stores, the
compress.v2 executor, the records an embedder passes in, and the error hierarchy.
Everything else is internal and may change.
"""

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
]
